"""A small reusable training loop: AdamW, warmup + cosine schedule, global-norm clipping.

Weight decay applies only to parameters of rank >= 2 (matrices, embeddings); biases and
norm gains are not decayed, as is usual. Deterministic given `seed` and the batches: the
loop's own randomness (none today; dropout later) draws from torch's global generator,
which is seeded inside a fork so the caller's RNG state is left as it was.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from pytyr.errors import ConfigError, TyrError


def lr_factor(step: int, *, steps: int, warmup: int) -> float:
    """Multiplier of the base lr at 0-based `step`: linear warmup over `warmup` steps to 1,
    then cosine decay to 0 at `steps`."""
    if step < warmup:
        return (step + 1) / warmup
    span = max(1, steps - warmup)
    progress = min(1.0, (step - warmup) / span)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def param_groups(module: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: weight decay on parameters of rank >= 2 only."""
    decay, no_decay = [], []
    for p in module.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups


def _check_config(steps: int, lr: float, weight_decay: float, warmup: int, grad_clip: float | None,
                  eval_every: int | None) -> None:
    if not (isinstance(steps, int) and steps >= 1):
        raise ConfigError(f"train: steps must be a positive integer, got {steps!r}")
    if not (math.isfinite(lr) and lr > 0):
        raise ConfigError(f"train: lr must be a positive number, got {lr!r}")
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise ConfigError(f"train: weight_decay must be >= 0, got {weight_decay!r}")
    if not (isinstance(warmup, int) and 0 <= warmup <= steps):
        raise ConfigError(f"train: warmup must be an integer in 0..steps ({steps}), got {warmup!r}")
    if grad_clip is not None and not (math.isfinite(grad_clip) and grad_clip > 0):
        raise ConfigError(f"train: grad_clip must be a positive number or None, got {grad_clip!r}")
    if eval_every is not None and not (isinstance(eval_every, int) and eval_every >= 1):
        raise ConfigError(f"train: eval_every must be a positive integer or None, got {eval_every!r}")


def train(
    module: nn.Module,
    batches: Iterable[tuple[torch.Tensor, ...]],
    *,
    steps: int,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    warmup: int = 0,
    grad_clip: float | None = 1.0,
    loss_output: int = -1,
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_every: int | None = None,
    progress: bool = True,
    seed: int = 0,
) -> list[dict[str, float]]:
    """Train `module` for `steps` steps on `batches`; return the history.

    Each batch is the tuple of the module's inputs; `module(*batch)[loss_output]` is the
    scalar loss. `eval_fn(module)` (run in eval mode without gradients every `eval_every`
    steps and after the last one) returns metrics that are merged into that step's record.
    History: one dict per step with `step` (1-based), `loss`, `lr` (the rate used for that
    step) and `grad_norm` (before clipping), plus any eval metrics.
    """
    _check_config(steps, lr, weight_decay, warmup, grad_clip, eval_every)
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ConfigError("train: the module has no trainable parameters")
    history: list[dict[str, float]] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        opt = torch.optim.AdamW(param_groups(module, weight_decay), lr=lr)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: lr_factor(s, steps=steps, warmup=warmup)
        )
        it = iter(batches)
        module.train()
        bar = tqdm(range(1, steps + 1), disable=not progress, desc="train", unit="step")
        for step in bar:
            try:
                batch = next(it)
            except StopIteration:
                raise ConfigError(
                    f"train: the batches ran out after {step - 1} steps; steps={steps}"
                ) from None
            out = module(*batch)
            loss = out[loss_output] if isinstance(out, (tuple, list)) else out
            if loss.ndim != 0:
                raise ConfigError(
                    f"train: output {loss_output} has shape {list(loss.shape)}; the loss must be a scalar"
                )
            rate = opt.param_groups[0]["lr"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            # clip_grad_norm_ with an infinite bound only measures the global norm.
            norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip else math.inf)
            value = float(loss.detach())
            if not math.isfinite(value):
                raise TyrError(f"train: the loss is {value} at step {step}; try a lower lr or grad_clip")
            opt.step()
            sched.step()
            record: dict[str, float] = {
                "step": step, "loss": value, "lr": rate, "grad_norm": float(norm)
            }
            if eval_fn is not None and (step == steps or (eval_every and step % eval_every == 0)):
                module.eval()
                with torch.no_grad():
                    record.update(eval_fn(module))
                module.train()
            history.append(record)
            if progress and (step % 10 == 0 or step == steps):
                bar.set_postfix(loss=f"{value:.4f}", lr=f"{rate:.2e}", refresh=False)
        bar.close()
    return history
