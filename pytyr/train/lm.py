"""A language-model training driver: nanoGPT's recipe, resumable bit for bit.

`train_lm(module, data, cfg, out_dir)` trains `module(idx, targets) -> (logits, loss)` on
random windows of `data.train` (idx, targets: int64 [batch, block]; loss: f32 []) with AdamW
(weight decay on parameters of rank >= 2 only), linear warmup then cosine decay to `min_lr`,
and global-norm gradient clipping. Every `eval_interval` steps (and at step 0 and at the end)
it measures the mean loss over `eval_iters` batches of train and of val; these batches are
fixed (the same windows at every eval, from streams separate from the training one), so the
curve is comparable across evals and an eval never moves the training data or RNG.

Outputs in `out_dir`: `ckpt/` (see `checkpoint.py`; every `checkpoint_interval` steps and at
the end), `loss.png` (train and val), `metrics.json`. `resume=True` restores the model,
optimizer, step, RNG states, data cursor and history from `out_dir/ckpt`, so the resumed
run's per-step losses equal those of an uninterrupted run exactly (on CPU).

Data parallel (`distributed.py`): when this process is one of W > 1 ranks of an initialised
process group (torchrun), `cfg.batch` is each rank's batch; rank r trains and evaluates on the
r-th slice of one global draw of W * batch windows, DDP averages the gradients, and the logged
step and eval losses are means over the ranks, so the run follows the trajectory of a single
process with batch W * batch (up to float rounding). The ranks' dropout seeds differ
(seed + rank). Only rank 0 writes the checkpoint (with every rank's RNG state, so that each
rank resumes its own), `loss.png` and `metrics.json`, and shows the progress bar. A process
alone (no group) runs exactly as before.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from pytyr.data.batches import RandomBatches
from pytyr.errors import ConfigError, TyrError
from pytyr.train import distributed
from pytyr.train.checkpoint import (capture_rng, load_checkpoint, read_state, resolve,
                                    restore_rng, save_checkpoint)
from pytyr.train.loop import param_groups
from pytyr.atomic import atomic_write_text

# Fields that decide the trajectory: a resumed run must have the same values.
TRAJECTORY = ("batch", "block", "lr", "min_lr", "warmup_iters", "lr_decay_iters",
              "weight_decay", "beta1", "beta2", "grad_clip", "eval_iters", "seed")
EVAL_SEED_OFFSET = {"train": 1_000_003, "val": 2_000_003}  # eval streams apart from training


@dataclasses.dataclass(frozen=True)
class LMConfig:
    """Hyperparameters (defaults: nanoGPT's shakespeare_char CPU recipe)."""

    batch: int = 12
    block: int = 64
    max_iters: int = 2000
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_iters: int = 100
    lr_decay_iters: int = 2000
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # 0 disables clipping (the norm is still measured)
    eval_interval: int = 250
    eval_iters: int = 20
    log_interval: int = 10
    seed: int = 1337
    checkpoint_interval: int = 500

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "config") -> LMConfig:
        """Build from a mapping; unknown keys and wrongly typed values are ConfigErrors."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ConfigError(f"{source}: unknown key{'s' if len(unknown) > 1 else ''} "
                              f"{', '.join(unknown)} (known: {', '.join(fields)})")
        cfg = cls(**values)
        cfg.check(source)
        return cfg

    def check(self, source: str = "config") -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            want = int if f.type in ("int", int) else (int, float)
            if isinstance(v, bool) or not isinstance(v, want):
                raise ConfigError(f"{source}: '{f.name}' must be a number"
                                  f"{' (integer)' if want is int else ''}, got {v!r}")
        positive = ("batch", "block", "max_iters", "lr", "eval_interval", "eval_iters",
                    "log_interval", "checkpoint_interval", "lr_decay_iters")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ConfigError(f"{source}: '{name}' must be > 0, got {getattr(self, name)!r}")
        for name in ("min_lr", "warmup_iters", "weight_decay", "grad_clip", "seed"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{source}: '{name}' must be >= 0, got {getattr(self, name)!r}")
        if self.min_lr > self.lr:
            raise ConfigError(f"{source}: min_lr {self.min_lr} exceeds lr {self.lr}")
        if self.warmup_iters > self.lr_decay_iters:
            raise ConfigError(f"{source}: warmup_iters {self.warmup_iters} exceeds "
                              f"lr_decay_iters {self.lr_decay_iters}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(f"{source}: '{name}' must be in [0, 1), "
                                  f"got {getattr(self, name)!r}")


def lr_at(step: int, cfg: LMConfig) -> float:
    """Learning rate of 0-based `step`: linear warmup over `warmup_iters`, cosine decay to
    `min_lr` at `lr_decay_iters`, then `min_lr` (nanoGPT's `get_lr`)."""
    if step < cfg.warmup_iters:
        return cfg.lr * (step + 1) / (cfg.warmup_iters + 1)
    if step > cfg.lr_decay_iters:
        return cfg.min_lr
    ratio = (step - cfg.warmup_iters) / max(1, cfg.lr_decay_iters - cfg.warmup_iters)
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (cfg.lr - cfg.min_lr)


def _splits(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """(train, val) token arrays from an object with `.train`/`.val` or a mapping."""
    if isinstance(data, Mapping):
        train, val = data.get("train"), data.get("val")
    else:
        train, val = getattr(data, "train", None), getattr(data, "val", None)
    if train is None or val is None:
        raise ConfigError("train_lm: data must have 'train' and 'val' token arrays "
                          f"(got {type(data).__name__})")
    return train, val


def _loss(module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = module(x, y)
    loss = out[1] if isinstance(out, (tuple, list)) else out
    if loss.ndim != 0:
        raise ConfigError(f"train_lm: the module's loss output has shape {list(loss.shape)}; "
                          "expected a scalar (forward(idx, targets) -> (logits, loss))")
    return loss


@torch.no_grad()
def evaluate(module: nn.Module, streams: dict[str, RandomBatches], iters: int) -> dict[str, float]:
    """Mean loss over the first `iters` batches of each stream, in eval mode."""
    was_training = module.training
    module.eval()
    out = {name: float(np.mean([float(_loss(module, *s.batch_at(k))) for k in range(iters)]))
           for name, s in streams.items()}
    module.train(was_training)
    return out


def _check_resume(state: dict[str, Any], cfg: LMConfig, where: Path, world: int) -> None:
    # The process count first: it also changes the per-rank batch, a confusing diff alone.
    saved_world = state.get("extra", {}).get("data", {}).get("world", 1)
    if saved_world != world:
        raise ConfigError(f"{where}: the checkpoint was written by a run of {saved_world} "
                          f"process(es) and this run has {world}; resume with "
                          f"{saved_world} (torchrun --nproc_per_node={saved_world})")
    saved = state["config"]
    diff = [f"{k}: checkpoint {saved.get(k)!r}, now {getattr(cfg, k)!r}"
            for k in TRAJECTORY if saved.get(k) != getattr(cfg, k)]
    if diff:
        raise ConfigError(f"{where}: cannot resume with a different configuration ("
                          + "; ".join(diff) + "); use a new out_dir to start over")


def train_lm(module: nn.Module, data: Any, cfg: LMConfig | Mapping[str, Any],
             out_dir: str | Path, *, resume: bool = False,
             progress: bool = True) -> dict[str, list[dict[str, float]]]:
    """Train `module` on `data` (`.train`/`.val` 1-D token arrays); return the history
    `{"steps": [{"step", "loss", "lr", "grad_norm"}, ...], "evals": [{"step", "train", "val"}]}`
    with `step` the number of optimizer steps done (evals include step 0)."""
    cfg = cfg if isinstance(cfg, LMConfig) else LMConfig.from_dict(cfg)
    cfg.check()
    out_dir = Path(out_dir)
    ckpt = out_dir / "ckpt"
    train_tokens, val_tokens = _splits(data)
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ConfigError("train_lm: the module has no trainable parameters")
    opt = torch.optim.AdamW(param_groups(module, cfg.weight_decay), lr=cfg.lr,
                            betas=(cfg.beta1, cfg.beta2))
    device = params[0].device  # batches go where the parameters are
    rank, world = distributed.rank(), distributed.world()  # 0, 1 for a process alone
    batches = RandomBatches(train_tokens, cfg.batch, cfg.block, seed=cfg.seed, device=device,
                            rank=rank, world=world)
    eval_streams = {name: RandomBatches(tokens, cfg.batch, cfg.block, device=device,
                                        seed=cfg.seed + EVAL_SEED_OFFSET[name],
                                        rank=rank, world=world)
                    for name, tokens in (("train", train_tokens), ("val", val_tokens))}
    history: dict[str, list[dict[str, float]]] = {"steps": [], "evals": []}
    # The run's randomness (dropout, if any) draws from the global generators; the fork
    # leaves the caller's torch state as it was.
    with torch.random.fork_rng(devices=[]):
        if resume:
            if not (resolve(ckpt) / "state.json").is_file():
                raise ConfigError(f"{ckpt}: no checkpoint to resume from; run without resume "
                                  "to start a new run")
            _check_resume(read_state(ckpt), cfg, ckpt, world)  # before touching the module
            state = load_checkpoint(ckpt, module, opt)
            # Rank 0 saved its cursor; the step is every rank's, the slice is this rank's.
            batches.load_state_dict({**state["extra"]["data"], "rank": rank})
            if "rank_rng" in state["extra"]:
                restore_rng(state["extra"]["rank_rng"][rank])
            history = state["extra"]["history"]
            start = int(state["step"])
        else:
            torch.manual_seed(cfg.seed + rank)
            start = 0
        module.train()
        if start == 0:
            history["evals"].append({"step": 0, **_evaluate(module, eval_streams, cfg)})
        speed = _run(module, opt, params, batches, eval_streams, cfg, start, history, ckpt,
                     progress and distributed.is_main())
    if distributed.is_main():
        _write_outputs(out_dir, cfg, history, speed)
    distributed.barrier()  # the outputs exist when any rank returns
    return history


def _evaluate(module: nn.Module, streams: dict[str, RandomBatches],
              cfg: LMConfig) -> dict[str, float]:
    """`evaluate` on this rank's slices, averaged over the ranks (equal-sized slices, so
    the mean of the means is the mean over the global eval batch)."""
    return distributed.mean_over_ranks(evaluate(module, streams, cfg.eval_iters))


def _run(module: nn.Module, opt: torch.optim.Optimizer, params: list[nn.Parameter],
         batches: RandomBatches, eval_streams: dict[str, RandomBatches], cfg: LMConfig,
         start: int, history: dict[str, list[dict[str, float]]], ckpt: Path,
         progress: bool) -> float | None:
    """Steps start..max_iters-1; returns this session's training speed in tokens/s (all
    ranks together). `module` is trained through its DDP wrapper when there are ranks."""
    tokens_per_step = cfg.batch * cfg.block * distributed.world()
    model = distributed.wrap(module)
    bar = tqdm(total=cfg.max_iters, initial=start, disable=not progress, desc="train",
               unit="step", dynamic_ncols=True)
    t0, done_since = time.perf_counter(), 0
    for it in range(start, cfg.max_iters):
        rate = lr_at(it, cfg)
        for group in opt.param_groups:
            group["lr"] = rate
        x, y = next(batches)
        loss = _loss(model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        # An infinite bound makes clip_grad_norm_ only measure the global norm.
        norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip or math.inf)
        value = distributed.mean_over_ranks({"loss": float(loss.detach())})["loss"]
        if not math.isfinite(value):
            raise TyrError(f"train_lm: the loss is {value} at step {it + 1}; "
                           "try a lower lr or grad_clip")
        opt.step()
        step = it + 1
        history["steps"].append({"step": step, "loss": value, "lr": rate, "grad_norm": float(norm)})
        bar.update(1)
        done_since += 1
        if step % cfg.log_interval == 0 or step == cfg.max_iters:
            speed = done_since * tokens_per_step / max(time.perf_counter() - t0, 1e-9)
            bar.set_postfix(loss=f"{value:.4f}", lr=f"{rate:.2e}", tok_s=f"{speed:,.0f}",
                            refresh=False)
        if step % cfg.eval_interval == 0 or step == cfg.max_iters:
            losses = _evaluate(module, eval_streams, cfg)
            history["evals"].append({"step": step, **losses})
            if progress:
                bar.write(f"step {step}: train loss {losses['train']:.4f}, "
                          f"val loss {losses['val']:.4f}")
        if step % cfg.checkpoint_interval == 0 or step == cfg.max_iters:
            rngs = distributed.gather(capture_rng())  # None for a process alone
            if distributed.is_main():
                extra = {"data": batches.state_dict(), "history": history}
                save_checkpoint(ckpt, module=module, optimizer=opt, step=step,
                                config=dataclasses.asdict(cfg),
                                extra=extra if rngs is None else {**extra, "rank_rng": rngs})
    bar.close()
    elapsed = time.perf_counter() - t0
    return done_since * tokens_per_step / elapsed if done_since else None


def plot_lm_losses(history: dict[str, list[dict[str, float]]], path: Path, title: str) -> None:
    """Per-step training loss (thin) and the eval losses on train and val (markers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=120)
    steps = history["steps"]
    ax.plot([s["step"] for s in steps], [s["loss"] for s in steps], lw=0.6, alpha=0.5,
            color="tab:blue", label="train (batch)")
    evals = history["evals"]
    for key, color in (("train", "tab:blue"), ("val", "tab:orange")):
        ax.plot([e["step"] for e in evals], [e[key] for e in evals], "o-", ms=3,
                color=color, label=f"{key} (eval)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)


def _write_outputs(out_dir: Path, cfg: LMConfig, history: dict[str, list[dict[str, float]]],
                   tokens_per_s: float | None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_lm_losses(history, out_dir / "loss.png", f"training loss ({len(history['steps'])} steps)")
    last = history["evals"][-1] if history["evals"] else {}
    metrics = {
        "config": dataclasses.asdict(cfg),
        "steps": len(history["steps"]),
        "final_train_loss": last.get("train"),
        "final_val_loss": last.get("val"),
        "best_val_loss": min((e["val"] for e in history["evals"]), default=None),
        "tokens_per_s": tokens_per_s,
        "history": history,
    }
    atomic_write_text(out_dir / "metrics.json", json.dumps(metrics, indent=1))
