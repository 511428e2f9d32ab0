"""The run config every command reads: tables `model`, `task`, `train`, `sample`, `out`.

    {"model":  {...},   argument values of the @[model] (configs, dims the task does not set)
     "task":   {"name": "char_lm", ...},   the data: a registered Task and its options
     "train":  {...},   TrainConfig below: optimizer, schedule, batch, eval, checkpoints, device
     "sample": {...},   the task's sampling options (after training, and `tyr sample`)
     "out":    "runs/gpt"}

`load_run_config` checks all of it, the task's and sampler's tables included, before any work.
`docs/configuration.md` lists every key (generated from these dataclasses by `describe`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

from pytyr.config import INT64, load_dataclass, setting, show
from pytyr.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class AdamWGroup:
    """One AdamW group of `train.muon.groups`: the parameters with a path segment in `names`."""

    name: str = setting(doc="the group's name (for messages)")
    names: tuple[str, ...] = setting(doc="path segments of its parameters")
    lr: float = setting(gt=0)
    beta1: float | None = setting(None, ge=0, lt=1, doc="default train.beta1")
    beta2: float | None = setting(None, ge=0, lt=1, doc="default train.beta2")
    weight_decay: float = setting(0.0, ge=0)


@dataclasses.dataclass(frozen=True)
class MuonSettings:
    """Muon for hidden matrices, AdamW for embeddings, head and scalars (train.optimizer=muon).

    The defaults are the classic Muon (Newton-Schulz, heavy-ball momentum); today's nanochat
    sets `orthogonalizer=polar_express`, `momentum_form=ema`, `normuon_beta2=0.9`,
    `equilibrate`, `renormalize`, `cautious_weight_decay`, the momentum schedule 0.85 → 0.97
    over 400 steps → 0.90 over the lr warmdown, a cosine weight decay, and its AdamW `groups`
    (`examples/nanochat/config.json`)."""

    lr: float = setting(0.02, gt=0, doc="Muon's rate for hidden matrices")
    momentum: float = setting(0.95, ge=0, lt=1)
    nesterov: bool = True
    ns_steps: int = setting(5, ge=1, le=100, doc="orthogonalisation iterations")
    weight_decay: float = setting(0.0, ge=0)
    embedding_names: tuple[str, ...] = setting(("wte", "wpe"), doc="path segments of embeddings "
                                                "(each must match a parameter)")
    head_names: tuple[str, ...] = setting(("lm_head",), doc="path segments of the output head "
                                           "(each must match a parameter; [] if tied)")
    embedding_lr: float = setting(0.2, gt=0)
    head_lr: float = setting(0.004, gt=0)
    scalar_lr: float = setting(0.02, gt=0)
    orthogonalizer: Literal["newton_schulz", "polar_express"] = setting(
        "newton_schulz", doc="polar_express: Polar Express (at most 5 ns_steps)")
    momentum_form: Literal["heavy_ball", "ema"] = setting(
        "heavy_ball", doc="ema: buf ← lerp(buf, g, 1-μ), as nanochat")
    normuon_beta2: float | None = setting(None, ge=0, lt=1, doc="NorMuon's per-neuron second "
                                          "moment decay (nanochat 0.9); null: off")
    equilibrate: bool = setting(False, doc="MuonEq: rows scaled to the mean row norm first")
    renormalize: bool = setting(False, doc="Muon+: the update's norm set to √min(rows, cols)")
    cautious_weight_decay: bool = setting(False, doc="decay only where update and weight "
                                          "agree in sign")
    weight_decay_schedule: Literal["constant", "cosine"] = setting(
        "constant", doc="cosine: weight_decay · ½(1 + cos(π step / lr_decay_iters)), as "
        "nanochat")
    momentum_start: float | None = setting(None, ge=0, lt=1, doc="the momentum rises from this "
                                           "to `momentum` over momentum_warmup_iters")
    momentum_warmup_iters: int = setting(0, ge=0)
    momentum_end: float | None = setting(None, ge=0, lt=1, doc="the momentum falls to this "
                                         "over train.warmdown_iters")
    groups: tuple[AdamWGroup, ...] = setting((), doc="AdamW groups tried before the names "
                                             "above: each {name, names, lr, beta1, beta2, "
                                             "weight_decay}")

    def check(self, where: str) -> None:
        if self.orthogonalizer == "polar_express" and self.ns_steps > 5:
            raise ConfigError(f"{where}: 'train.muon.ns_steps' {self.ns_steps}: Polar Express "
                              f"has coefficients for at most 5 steps")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimizer, schedule and bookkeeping of a run."""

    max_iters: int = setting(2000, gt=0, doc="optimizer steps")
    batch: int = setting(12, gt=0, doc="rows per optimizer step, over all processes")
    micro_batch: int | None = setting(None, gt=0, doc="rows per forward pass and process "
                                      "(default batch / processes); accumulates gradients")
    optimizer: Literal["adamw", "muon"] = "adamw"
    lr: float = setting(1e-3, gt=0, doc="peak learning rate (AdamW)")
    min_lr: float = setting(0.0, ge=0, doc="the rate the decay ends at")
    warmup_iters: int = setting(0, ge=0, doc="steps of linear warmup")
    warmup_form: Literal["nanogpt", "nanochat"] = setting(
        "nanogpt", doc="the warmup's rate at 0-based step s: nanogpt (s+1)/(warmup_iters+1), "
        "nanochat (s+1)/warmup_iters (the peak on the warmup's last step)")
    lr_decay_iters: int | None = setting(None, gt=0, doc="end of the decay (default max_iters)")
    schedule: Literal["cosine", "linear", "constant"] = setting(
        "cosine", doc="decay from lr to min_lr after the warmup")
    warmdown_iters: int | None = setting(None, gt=0, doc="decay over only the last N steps "
                                         "before the decay's end, at lr until then "
                                         "(warmup-stable-decay, nanochat's warmdown)")
    weight_decay: float = setting(0.1, ge=0, doc="AdamW, on parameters of rank >= 2 only")
    beta1: float = setting(0.9, ge=0, lt=1)
    beta2: float = setting(0.99, ge=0, lt=1)
    eps: float = setting(1e-8, gt=0)
    fused: bool | None = setting(None, doc="fused AdamW (default: where torch has it)")
    grad_clip: float = setting(1.0, ge=0, doc="global norm bound; 0 disables clipping")
    muon: MuonSettings = setting(factory=MuonSettings)
    eval_interval: int = setting(250, gt=0)
    eval_iters: int = setting(20, gt=0, doc="batches per split and evaluation")
    log_interval: int = setting(10, gt=0)
    checkpoint_interval: int = setting(500, gt=0)
    seed: int = setting(1337, ge=0, lt=2**63)
    device: Literal["cpu", "cuda", "auto"] = setting("auto", doc="auto: cuda where available")
    data_parallel: Literal["ddp", "fsdp"] = setting(
        "ddp", doc="under torchrun: ddp replicates the model; fsdp (FSDP2) shards parameters, "
        "gradients and optimizer state over the processes")
    precision: Literal["float32", "bfloat16", "float16"] = setting(
        "float32", doc="autocast dtype of the forward pass")
    kernels: Literal["auto", "off"] = setting(
        "auto", doc="Triton kernels on CUDA inside their contracts (docs/kernels.md)")
    checkpoint_blocks: bool = setting(
        False, doc="activation checkpointing: each block of the model's block stack (a foldl "
        "over a Vector of blocks) recomputed in the backward instead of keeping its "
        "activations; the same losses, less memory, about a third more compute a step")
    threads: int | Literal["auto"] = setting(
        "auto", gt=0, le=1024, doc="torch threads on a CPU; auto: the faster of 1 and every "
        "usable core, timed on the run's own step at the start (unless OMP_NUM_THREADS is "
        "set), then kept for the run and its resumes")

    def check(self, where: str) -> None:
        if self.min_lr > self.lr:
            raise ConfigError(f"{where}: 'train.min_lr' {self.min_lr} exceeds 'train.lr' "
                              f"{self.lr}")
        decay = self.decay_iters
        if self.warmup_iters > decay:
            raise ConfigError(f"{where}: 'train.warmup_iters' {self.warmup_iters} exceeds the "
                              f"decay's end {decay} (train.lr_decay_iters)")
        if self.warmdown_iters is not None and self.warmup_iters + self.warmdown_iters > decay:
            raise ConfigError(f"{where}: 'train.warmup_iters' {self.warmup_iters} + "
                              f"'train.warmdown_iters' {self.warmdown_iters} exceed the "
                              f"decay's end {decay} (train.lr_decay_iters)")
        if self.micro_batch is not None and self.batch % self.micro_batch:
            raise ConfigError(f"{where}: 'train.batch' {self.batch} is not a multiple of "
                              f"'train.micro_batch' {self.micro_batch}")

    @property
    def decay_iters(self) -> int:
        return self.lr_decay_iters if self.lr_decay_iters is not None else self.max_iters

    def accumulation(self, world: int, where: str) -> tuple[int, int]:
        """(micro batch per process, micro-steps per optimizer step) for `world` processes."""
        if self.batch % world:
            raise ConfigError(f"{where}: 'train.batch' {self.batch} does not divide among "
                              f"{world} processes; make it a multiple of {world}")
        micro = self.micro_batch or self.batch // world
        if self.batch % (micro * world):
            raise ConfigError(f"{where}: 'train.batch' {self.batch} is not a multiple of "
                              f"micro_batch {micro} × {world} processes")
        return micro, self.batch // (micro * world)

    # Fields that decide the trajectory: a resumed run must have the same values.
    TRAJECTORY = ("batch", "micro_batch", "optimizer", "lr", "min_lr", "warmup_iters",
                  "warmup_form", "lr_decay_iters", "schedule", "warmdown_iters", "weight_decay",
                  "beta1", "beta2", "eps", "grad_clip", "muon", "eval_iters", "seed", "precision")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    model: dict[str, Any] = setting(factory=dict, doc="argument values of the @[model]")
    task: dict[str, Any] = setting(factory=dict, doc="the task: its name and options")
    train: TrainConfig = setting(factory=TrainConfig)
    sample: dict[str, Any] = setting(factory=dict, doc="the task's sampling options")
    out: str | None = setting(None, doc="run directory (default runs/<model>)")


def load_run_config(data: dict[str, Any], where: str) -> RunConfig:
    """The run config from a merged JSON object (file and `--set`s), checked (not the task
    and sample tables, which need the task: see `tasks.make_task`; the model table's values
    only for what no model accepts: integers beyond 64 bits)."""
    cfg = load_dataclass(RunConfig, data, where)
    _check_model_numbers(cfg.model, "model", where)
    return cfg


def _check_model_numbers(value: Any, key: str, where: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _check_model_numbers(v, f"{key}.{k}", where)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_model_numbers(v, f"{key}.{i}", where)
    elif isinstance(value, int) and not isinstance(value, bool) and \
            not INT64[0] <= value <= INT64[1]:
        raise ConfigError(f"{where}: '{key}' is {show(value)}, beyond the 64-bit range")


def lr_multiplier(step: int, cfg: TrainConfig) -> float:
    """The rate of 0-based `step` over the peak rate: linear warmup over `warmup_iters`, then
    the `schedule` down to `min_lr` at the decay's end, then `min_lr` (nanoGPT's `get_lr`).
    With `warmdown_iters` the decay takes only the last that many steps before its end and
    the rate stays at the peak until then (nanochat: linear, 0.05 × lr at the end).
    `warmup_form` picks whose warmup: nanoGPT's never reaches the peak inside the warmup,
    nanochat's (`base_train.py`'s get_lr_multiplier) does on its last step."""
    if step < cfg.warmup_iters:
        extra = 1 if cfg.warmup_form == "nanogpt" else 0
        return (step + 1) / (cfg.warmup_iters + extra)
    end = cfg.decay_iters
    if step > end or cfg.schedule == "constant":
        return 1.0 if cfg.schedule == "constant" else cfg.min_lr / cfg.lr
    start = cfg.warmup_iters if cfg.warmdown_iters is None else end - cfg.warmdown_iters
    if step < start:
        return 1.0
    ratio = (step - start) / max(1, end - start)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio)) if cfg.schedule == "cosine" else 1 - ratio
    return (cfg.min_lr + coeff * (cfg.lr - cfg.min_lr)) / cfg.lr


def muon_momentum(step: int, cfg: TrainConfig) -> float:
    """Muon's momentum at 0-based `step`: nanochat's schedule when `momentum_start` or
    `momentum_end` is set (from `momentum_start` up to `momentum` over the first
    `momentum_warmup_iters` steps, then down to `momentum_end` over the lr warmdown)."""
    m = cfg.muon
    if m.momentum_start is not None and step < m.momentum_warmup_iters:
        frac = step / m.momentum_warmup_iters
        return (1 - frac) * m.momentum_start + frac * m.momentum
    if m.momentum_end is not None and cfg.warmdown_iters:
        start = cfg.decay_iters - cfg.warmdown_iters
        if step >= start:
            frac = min(1.0, (step - start) / cfg.warmdown_iters)
            return m.momentum * (1 - frac) + m.momentum_end * frac
    return m.momentum


def muon_weight_decay(step: int, cfg: TrainConfig) -> float:
    """Muon's weight decay at 0-based `step` (`weight_decay_schedule`; the cosine's horizon is
    the lr decay's end, `lr_decay_iters`, by default `max_iters`: nanochat's num_iterations)."""
    m = cfg.muon
    if m.weight_decay_schedule == "cosine":
        ratio = min(1.0, step / cfg.decay_iters)
        return m.weight_decay * 0.5 * (1 + math.cos(math.pi * ratio))
    return m.weight_decay
