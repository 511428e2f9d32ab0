"""The Task protocol: what the one training engine needs to know about a kind of data.

A task owns the data and what the model's inputs mean; the engine (`engine.py`) owns the
loop, the optimizer, checkpoints and the ranks. A task

- names the graph inputs it feeds, their dtype and their dims *by role* (`Feed`), and for an
  integer input the role of its bound: the char-LM task feeds `idx` and `targets` as
  `IT [batch, seq] vocab`. The engine fills a model's dim binders and config fields from these
  roles (`b`, `t`, `c.vocab` of `idx : IT #[b, t] c.vocab`) and checks the instantiated graph
  against them (`match.py`), so a model fits a task by its types, before any work; a task
  checks that the ids it loads lie below their bound (the data's vocabulary);
- names the outputs it reads (`Expect`): the last output is always the scalar loss;
- gives batches: `batch(k)` is micro-batch `k` of this rank as a dict keyed by input name, a
  pure function of `k` (so a checkpoint needs only the step to resume exactly). Optimizer
  step `s` reads one *global batch* of `train.batch` rows, rows `s·B … s·B + B - 1` of the
  task's stream whatever the world size: micro-batch `k` of rank r is rows
  `k·micro·world + r·micro …` of it (`TaskContext.first_row`), and what is drawn at random is
  drawn once per global batch and sliced (`StepRNG`, `RandomBatches`), so W ranks see what
  one process would, epoch wraps included;
- may draw per-step random inputs (noise levels, timesteps, masks) in `step_inputs(batch,
  rng)`, the hook that makes diffusion and flow matching new tasks rather than new loops:
  `rng` (`StepRNG`) is seeded by (run seed, k) and slices each global draw by rank;
- evaluates: `eval_batches(split, iters)` are this rank's micro-batches of the first `iters`
  global batches of a fixed stream (`TaskContext.eval_micro_batches`), the same rows for any
  world size; `eval_metrics` turns one micro-batch's outputs into numbers (the engine
  averages them over micro-batches and ranks: equal sizes, so the global mean), and
  `summarize_metrics` may derive ratios of those means (bits per byte);
- may sample (`sample`) from the trained weights, through a factory that instantiates any
  `@[model]` of the file for given role sizes.

Built-in tasks are registered by name in `tasks/__init__.py`.
"""
from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import torch

from pytyr.errors import ConfigError

Batch = dict[str, torch.Tensor]


@dataclasses.dataclass(frozen=True)
class Feed:
    """A graph input a task feeds: dtype (`f32`/`i64`), dims by role name and, for an `i64`
    input, the role whose size bounds its values (`vocab`: the input is `IT s vocab`)."""

    dtype: str
    dims: tuple[str, ...]
    bound: str | None = None

    def show(self, sizes: dict[str, int]) -> str:
        family = "IT" if self.dtype == "i64" else "T"
        text = f"{family} [{', '.join(_role(r, sizes) for r in self.dims)}]"
        return text + (f" {_role(self.bound, sizes)}" if self.bound else "")


def _role(role: str, sizes: dict[str, int]) -> str:
    return f"{role}={sizes[role]}" if role in sizes else role


@dataclasses.dataclass(frozen=True)
class Expect:
    """An output a task reads: its index in the model's result, what it is, dims by role."""

    index: int
    what: str
    dims: tuple[str, ...]


class StepRNG:
    """Randomness for the extra inputs of micro-step `k`: a generator seeded by (seed, the
    global batch `k // accum`).

    Every draw is made for the whole global batch (`rows * world * accum` along dim 0) and
    this micro-step of this rank keeps its slice, so a run on W processes, with any split into
    micro-batches, draws exactly what a single process would. Tasks must draw through these
    methods (or `global_draw`), never from the global torch RNG.
    """

    def __init__(self, seed: int, k: int, rank: int = 0, world: int = 1, accum: int = 1):
        step, self.at = divmod(k, accum)  # the global batch, and the micro-step within it
        self.generator = torch.Generator().manual_seed(_mix(seed, step))
        self.rank, self.world, self.accum = rank, world, accum

    def global_draw(self, draw: Callable[[int, torch.Generator], torch.Tensor],
                    rows: int) -> torch.Tensor:
        """`draw(rows * world * accum, generator)` (the global batch), sliced to this rank's
        `rows` rows of this micro-step."""
        out = draw(rows * self.world * self.accum, self.generator)
        start = (self.at * self.world + self.rank) * rows
        return out[start:start + rows]

    def rand(self, rows: int, *shape: int) -> torch.Tensor:
        return self.global_draw(lambda n, g: torch.rand((n, *shape), generator=g), rows)

    def randn(self, rows: int, *shape: int) -> torch.Tensor:
        return self.global_draw(lambda n, g: torch.randn((n, *shape), generator=g), rows)

    def randint(self, high: int, rows: int, *shape: int) -> torch.Tensor:
        return self.global_draw(lambda n, g: torch.randint(high, (n, *shape), generator=g), rows)


def _mix(seed: int, k: int) -> int:
    """A 63-bit seed from (seed, k) that differs for every pair (splitmix-style)."""
    x = (seed * 0x9E3779B97F4A7C15 + k * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) % (1 << 64)
    x ^= x >> 31
    x = (x * 0xD6E8FEB86659FD93) % (1 << 64)
    return (x ^ (x >> 32)) >> 1


@dataclasses.dataclass
class TaskContext:
    """What the engine tells a task when it makes one."""

    micro_batch: int  # this rank's rows per forward pass
    seed: int
    rank: int = 0
    world: int = 1
    source: str = "config"  # where the config came from, for messages
    accum: int = 1  # micro-batches per process and optimizer step

    @property
    def global_batch(self) -> int:
        """Rows per optimizer step over every process (`train.batch`)."""
        return self.micro_batch * self.world * self.accum

    def first_row(self, k: int) -> int:
        """The stream row that micro-batch `k` of this rank starts at: global batch `k //
        accum` holds rows `(k // accum) * global_batch …`, its micro-step `k % accum` the
        `micro_batch * world` after `(k % accum) * micro_batch * world` of them, and this
        rank the `micro_batch` after `rank * micro_batch` of those."""
        return (k * self.world + self.rank) * self.micro_batch

    def eval_micro_batches(self, iters: int) -> range:
        """The micro-batch numbers `k` of the first `iters` global batches (evaluation)."""
        return range(iters * self.accum)

    def step_rng(self, seed: int, k: int) -> StepRNG:
        """The `StepRNG` of micro-batch `k` of this rank, seeded by `seed`."""
        return StepRNG(seed, k, self.rank, self.world, self.accum)


@dataclasses.dataclass
class SampleOutput:
    text: str | None = None
    files: list[Path] = dataclasses.field(default_factory=list)


ModelFactory = Callable[[str | None, dict[str, Feed], dict[str, int]], Any]
"""`factory(model, feeds, sizes)`: that `@[model]` of the trained file (None: the trained one)
with its dims filled from the feeds' role sizes, holding the trained weights, in eval mode,
called with a dict of named inputs; returns the outputs (its `inputs` and `outputs` say
their types). `factory.declaration(model)` is the model's `pipeline.ModelDecl` (None for a
compiled library's), for tasks that learn what to feed from a model's types. The engine
passes a `pytyr.train.model.RunModel` (without weights to `check_sampling`: graphs only)."""


class Task(abc.ABC):
    """Base class of the engine's tasks (see the module doc)."""

    name: ClassVar[str]
    Options: ClassVar[type]  # dataclass of the `task` table (without its `name`)
    SampleOptions: ClassVar[type | None] = None  # dataclass of the `sample` table, if it samples
    splits: ClassVar[tuple[str, ...]] = ("train", "val")
    # roles a model's dims may exceed (`check_graph`): a language model's table may have more
    # rows than the data has tokens (a checkpoint's vocabulary padded past its tokenizer)
    roles_at_least: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: Any, ctx: TaskContext):
        self.options = options
        self.ctx = ctx

    # -- before any data ------------------------------------------------------------------
    @abc.abstractmethod
    def feeds(self) -> dict[str, Feed]:
        """The model inputs this task feeds, by argument name."""

    def expects(self) -> list[Expect]:
        """The outputs this task reads besides the loss (the last output, a scalar)."""
        return []

    def sizes(self) -> dict[str, int]:
        """Role sizes known from the config alone (`batch`, `seq`, ...)."""
        return {"batch": self.ctx.micro_batch}

    # -- data -------------------------------------------------------------------------------
    def prepare(self) -> str:
        """Load (and on first use build) the data; return a one-line description. Runs on
        rank 0 first, then on the others (a cache is built once)."""
        return ""

    def data_sizes(self) -> dict[str, int]:
        """Role sizes known once the data is loaded (`vocab`, `classes`, ...)."""
        return {}

    def peek_sizes(self) -> dict[str, int] | None:
        """The sizes of `data_sizes` read from the data's metadata alone, without preparing
        it (the editor asks for every model it shows, and must not read a corpus); None when
        only `prepare` can tell."""
        return None

    @abc.abstractmethod
    def batch(self, k: int) -> Batch:
        """Micro-batch `k` of this rank, a pure function of `k`."""

    def step_inputs(self, batch: Batch, rng: StepRNG) -> Batch:
        """The hook for per-step random inputs; the default feeds `batch` as it is."""
        return batch

    def training_batch(self, k: int) -> Batch:
        """Micro-batch `k` as the engine trains on it: `batch(k)` through `step_inputs` with
        the `StepRNG` of (the run's seed, `k`) of this rank. The only way a training batch is
        made: the engine, the benchmarks and the tests all call this."""
        return self.step_inputs(self.batch(k), self.ctx.step_rng(self.ctx.seed, k))

    @abc.abstractmethod
    def eval_batches(self, split: str, iters: int) -> Iterator[Batch]:
        """The fixed evaluation batches of `split` (this rank's slices)."""

    def eval_metrics(self, batch: Batch, outputs: tuple[torch.Tensor, ...]) -> dict[str, float]:
        """Metrics of one evaluation batch; `loss` is the model's loss (the last output)."""
        return {"loss": float(outputs[-1])}

    def eval_batch_limit(self, split: str) -> int | None:
        """The most global evaluation batches `split` holds (`train.eval_iters` may not ask
        for more: it would repeat the data, or run for ever); None where the evaluation does
        not read `eval_iters` batches."""
        return None

    def summarize_metrics(self, record: dict[str, float]) -> dict[str, float]:
        """The evaluation record once averaged over batches and ranks (`val`, `val_<metric>`,
        ...): a task may derive metrics that are ratios of means here; default: as it is."""
        return record

    # -- after training -------------------------------------------------------------------
    def check_sampling(self, instantiate: ModelFactory, options: Any) -> None:
        """Before training: fail now on what `sample` would fail on later (the sampling
        model's types, a prompt outside the vocabulary). `instantiate` builds a graph only."""

    def sample(self, factory: ModelFactory, options: Any, out_dir: Path) -> SampleOutput | None:
        """Generate from the trained model: text to show (and save as `sample.txt`), and any
        files written into `out_dir` (an image grid). None when the task does not sample."""
        return None

    def describe_for_run(self) -> dict[str, Any]:
        """What `tyr sample` needs to rebuild this task: its table, as given. A task may add
        `fitted`: what it computed from its training data once (a table's feature scaling),
        for whatever feeds the trained model later; it is not an option."""
        return {"name": self.name, **dataclasses.asdict(self.options)}


EVAL_SEED_OFFSET = {"train": 1_000_003, "val": 2_000_003}  # eval streams apart from training


def character_corpus(corpus: str, cache_dir: str | None, seq: int, ctx: TaskContext
                     ) -> tuple[Any, Any, dict[str, Any]]:
    """The character corpus `corpus` (`shakespeare`, or a UTF-8 text file) prepared
    (`pytyr.data.shakespeare.prepare`), and random windows of `seq + 1` tokens over it: the
    training stream (seeded by the run) and one fixed evaluation stream per split, seeded
    apart from it (`pytyr.data.batches.RandomBatches`; every token checked to be below the
    vocabulary). Returns (the prepared corpus, the training stream, the evaluation streams)."""
    from pytyr.data import shakespeare
    from pytyr.data.batches import RandomBatches

    data = shakespeare.prepare(cache_dir, text_file=None if corpus == "shakespeare" else corpus)
    train, val, vocab = data.train, data.val, data.vocab_size

    def stream(tokens: Any, seed: int) -> RandomBatches:
        return RandomBatches(tokens, ctx.micro_batch, seq, seed=seed, rank=ctx.rank,
                             world=ctx.world, accum=ctx.accum, vocab_size=vocab)

    return data, stream(train, ctx.seed), {
        name: stream(tokens, ctx.seed + EVAL_SEED_OFFSET[name])
        for name, tokens in (("train", train), ("val", val))}


def epoch_rows(n: int, k: int, ctx: TaskContext, seed: int) -> torch.Tensor:
    """Row indices of micro-batch `k` of this rank, drawn from `n` rows in shuffled epochs:
    every epoch is a fresh permutation (seeded by `seed` and the epoch), cut into global
    batches of `ctx.global_batch` rows (the rest of an epoch dropped: the same rows for any
    world size), of which this micro-batch takes its rows (`TaskContext.first_row`). A pure
    function of `k`, as `Task.batch` must be."""
    per_epoch = n // ctx.global_batch * ctx.global_batch
    epoch, start = divmod(ctx.first_row(k), per_epoch)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
    return perm[start:start + ctx.micro_batch]


def check_ids(ids: torch.Tensor, bound: int, what: str) -> None:
    """A DataError naming the first id of `ids` outside `[0, bound)`: data checked against the
    bound of the index type it will be fed as, when it is loaded."""
    from pytyr.errors import DataError

    bad = ((ids < 0) | (ids >= bound)).nonzero()
    if len(bad):
        at = bad[0].tolist()
        raise DataError(f"{what}: id {int(ids[tuple(at)])} at {at} is outside [0, {bound})")


def check_rows(task: str, batch: int, rows: int, what: str, source: str) -> None:
    """A ConfigError when a data set has fewer rows than one batch needs."""
    if rows < batch:
        raise ConfigError(f"{source}: task '{task}': the batch needs {batch} rows but {what} has "
                          f"only {rows}; lower train.batch or give more data")
