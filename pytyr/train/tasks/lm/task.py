"""What the language-model tasks share: their feeds, the logits they read, text sampling.

A language model is fed `idx` and `targets`, both `IT [batch, seq] vocab` (targets are idx
shifted by one token; a model's `IT #[b, t] c.vocab` gets `c.vocab` from the data), and
returns `(logits : T [batch, seq, vocab], loss : T [])`. Sampling instantiates the
`sample.model` (default: the trained model itself, fed dummy targets) once per context length
`t <= seq` and draws tokens with temperature and top-k; with
`sample.step_model` it prefills and then decodes one token at a time over that model's
key/value caches instead (`pytyr.train.tasks.lm.kvcache`), the same draws from the same logits.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from pytyr.config import setting
from pytyr.errors import ConfigError
from pytyr.train.task import Expect, Feed, ModelFactory, SampleOutput, Task
from pytyr.train.tasks.lm.sample import generate

TOKENS = Feed("i64", ("batch", "seq"), bound="vocab")


@dataclasses.dataclass(frozen=True)
class TextSampleOptions:
    model: str | None = setting(None, doc="the @[model] that gives logits (default: the "
                                "trained model, fed dummy targets)")
    prompt: str = setting("\n", doc="text the sample continues")
    max_new_tokens: int = setting(500, ge=0, le=1_000_000)
    temperature: float = setting(0.8, ge=0, le=100, doc="0 is greedy")
    top_k: int | None = setting(200, gt=0)
    seed: int = setting(1337, ge=0, lt=2**63)
    step_model: str | None = setting(None, doc="a @[model] decoding over key/value caches "
                                     "(idx, pos, caches → logits, caches): cached sampling")


class LanguageModelTask(Task):
    """Base of the LM tasks: subclasses give the data, `encode` and `decode`."""

    SampleOptions = TextSampleOptions
    # ids below the data's vocabulary are below a larger one: a checkpoint's padded table
    # (Qwen3's 151,936 rows for 151,669 tokens) trains on them; sampling reads only the
    # data's rows of the logits
    roles_at_least = ("vocab",)

    def feeds(self) -> dict[str, Feed]:
        return {"idx": TOKENS, "targets": TOKENS}

    def expects(self) -> list[Expect]:
        return [Expect(0, "logits", ("batch", "seq", "vocab"))]

    def sizes(self) -> dict[str, int]:
        return {"batch": self.ctx.micro_batch, "seq": self.options.seq}

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    def text_tokenizer(self) -> tuple[Any, int | None]:
        """The codec of `encode` and `decode` as a `pytyr.data.tokenizer` tokenizer, and the
        id `encode` puts before every text (None: none): what an export writes for others."""
        raise NotImplementedError

    def logits_feeds(self, options: Any) -> dict[str, Feed]:
        """What the model that gives logits (`sample.model`) is fed: the trained model also
        takes (dummy) targets."""
        return {"idx": TOKENS, **({"targets": TOKENS} if options.model is None else {})}

    def _sampling(self, options: Any) -> tuple[list[int], dict[str, Feed]]:
        prompt = self.encode(options.prompt)
        if not prompt:
            raise ConfigError("sample.prompt must not be empty (it encodes to no tokens)")
        return prompt, self.logits_feeds(options)

    def check_sampling(self, instantiate: ModelFactory, options: Any) -> None:
        if options is None or options.max_new_tokens == 0:
            return
        _, feeds = self._sampling(options)  # the prompt encodes, before any step
        if options.step_model is not None:
            from pytyr.train.tasks.lm.kvcache import check_outputs, check_positions, step_feeds

            name = options.step_model
            graph = instantiate(name, step_feeds(instantiate.declaration(name), name),
                                {"batch": 1, "seq": 1})
            types = graph.types()
            check_outputs(graph.inputs, [types[o.ref] for o in graph.outputs], name)
            check_positions(graph.inputs, self.options.seq, name)
        instantiate(options.model, feeds, {"batch": 1, "seq": 1})  # named: checked too

    def sample(self, factory: ModelFactory, options: Any, out_dir: Path) -> SampleOutput | None:
        if options is None or options.max_new_tokens == 0:
            return None
        block = self.options.seq
        prompt, feeds = self._sampling(options)
        if options.step_model is not None:
            from pytyr.train.tasks.lm.kvcache import generate_cached

            return SampleOutput(self.decode(generate_cached(
                factory, options.step_model, prompt, options.max_new_tokens,
                options.temperature, options.top_k, options.seed, block=block,
                vocab=self.data_sizes().get("vocab"))))
        trained, vocab = options.model is None, self.data_sizes().get("vocab")
        cache: dict[int, Any] = {}

        def logits_fn(idx: torch.Tensor) -> torch.Tensor:
            t = idx.shape[1]
            if t not in cache:
                cache[t] = factory(options.model, feeds, {"batch": 1, "seq": t})
            batch = {"idx": idx, "targets": torch.zeros_like(idx)} if trained else {"idx": idx}
            return cache[t](batch)[0][..., :vocab]  # the data's rows of a padded table

        ids = generate(logits_fn, prompt, options.max_new_tokens, options.temperature,
                       options.top_k, options.seed, block_size=block)
        return SampleOutput(self.decode(ids[0].tolist()))
