"""Rectified flow (flow matching on straight paths) as pure, deterministic functions.

Convention (Flux's, SD3's): time 0 is data and time 1 is noise. A data point `x0` and Gaussian
noise `ε` are joined by the straight path `x_t = (1 - t) x0 + t ε`, whose velocity
`d x_t / d t = ε - x0` is the regression target of the model `v(x_t, t, cond)`. Sampling
integrates `dx/dt = v` from `t = 1` (noise) down to `t = 0` with Euler steps.

Training times are drawn per example: `uniform` on `(0, 1)`, or `logit_normal`, `t = σ(m + s·z)`
with `z ~ N(0, 1)` (SD3's "rf/lognorm(0, 1)", which weights the middle of the path where the
velocity is hardest to predict; the default). Classifier-free guidance trains one model
conditional and unconditional by replacing a label with the null label `-1` with probability
`p`; the null label's conditioning is all zeros. At sampling time the guided velocity is
`v_null + w · (v_cond - v_null)` (`w = 1` is plain conditional sampling).

Every random draw takes an explicit `torch.Generator`; the `image_flow` task's `step_inputs`
(`task.py`) makes a training batch from these pieces with the step's RNG (noise, times, label
dropout, in that order).
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from pytyr.errors import ConfigError

NULL_LABEL = -1
TIMESTEP_KINDS = ("logit_normal", "uniform")

# velocity_fn(x_t [n, …], t [n], labels [n] int64 with -1 for none) -> velocity like x_t
VelocityFn = Callable[[Tensor, Tensor, Tensor], Tensor]


def sample_timesteps(n: int, generator: torch.Generator, *, kind: str = "logit_normal",
                     mean: float = 0.0, std: float = 1.0) -> Tensor:
    """`n` training times in `(0, 1)`, float32 (module doc)."""
    if kind == "uniform":
        return torch.rand(n, generator=generator)
    if kind == "logit_normal":
        if not (math.isfinite(mean) and math.isfinite(std) and std > 0):
            raise ConfigError(f"logit-normal times need a finite mean and a positive std, "
                              f"got mean={mean!r}, std={std!r}")
        return torch.sigmoid(mean + std * torch.randn(n, generator=generator))
    raise ConfigError(f"unknown timestep sampling {kind!r} (known: {', '.join(TIMESTEP_KINDS)})")


def _per_example(t: Tensor, like: Tensor) -> Tensor:
    return t.reshape(-1, *([1] * (like.dim() - 1)))


def interpolate(x0: Tensor, noise: Tensor, t: Tensor) -> Tensor:
    """`x_t = (1 - t) · x0 + t · noise`, one `t` per example (broadcast over the rest)."""
    tt = _per_example(t, x0)
    return (1 - tt) * x0 + tt * noise


def velocity_target(x0: Tensor, noise: Tensor) -> Tensor:
    """The velocity of the straight path, `noise - x0` (constant along it)."""
    return noise - x0


def class_conditioning(labels: Tensor, num_classes: int, txt_len: int = 1) -> tuple[Tensor, Tensor]:
    """Flux's two conditionings from class labels: `txt` `[n, txt_len, num_classes]` (each
    token the label's one-hot) and the pooled `y` `[n, num_classes]`; the null label `-1`
    gives zeros."""
    if labels.dtype != torch.int64 or labels.dim() != 1:
        raise ConfigError(f"labels must be a 1-D int64 tensor, got {labels.dtype} "
                          f"{list(labels.shape)}")
    bad = (labels < NULL_LABEL) | (labels >= num_classes)
    if bool(bad.any()):
        raise ConfigError(f"label {int(labels[bad][0])} is outside 0 … {num_classes - 1} "
                          f"(or {NULL_LABEL} for none)")
    y = torch.zeros(labels.shape[0], num_classes)
    keep = labels != NULL_LABEL
    y[keep, labels[keep]] = 1.0
    return y.unsqueeze(1).expand(-1, txt_len, -1).contiguous(), y


def timestep_schedule(steps: int, shift: float = 1.0) -> Tensor:
    """`steps + 1` times from 1 down to 0, evenly spaced, then shifted towards the noise end by
    `t ↦ s·t / (1 + (s - 1)·t)` (Flux's and SD3's time shift with `s = e^μ`; 1 = none)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"the sampler needs a positive whole number of steps, got {steps!r}")
    if not (isinstance(shift, (int, float)) and math.isfinite(shift) and shift > 0):
        raise ConfigError(f"the time shift must be a positive number, got {shift!r}")
    t = torch.linspace(1, 0, steps + 1, dtype=torch.float64)
    return (shift * t / (1 + (shift - 1) * t)).to(torch.float32)


@torch.no_grad()
def euler_sample(velocity_fn: VelocityFn, noise: Tensor, labels: Tensor, *, steps: int,
                 cfg_scale: float = 1.0, shift: float = 1.0) -> Tensor:
    """Integrate `dx/dt = v` from `noise` at `t = 1` to `t = 0` in `steps` Euler steps, with
    classifier-free guidance of scale `cfg_scale` (two calls of `velocity_fn` per step, one
    with `labels` and one with the null label, unless the scale is 1)."""
    if not (isinstance(cfg_scale, (int, float)) and not isinstance(cfg_scale, bool)
            and math.isfinite(cfg_scale)):
        raise ConfigError(f"the guidance scale must be a finite number, got {cfg_scale!r}")
    times = timestep_schedule(steps, shift)
    null = torch.full_like(labels, NULL_LABEL)
    x = noise
    for t_cur, t_next in zip(times[:-1].tolist(), times[1:].tolist()):
        t = torch.full((x.shape[0],), t_cur, dtype=x.dtype)
        v = velocity_fn(x, t, labels)
        if cfg_scale != 1.0:
            v_null = velocity_fn(x, t, null)
            v = v_null + cfg_scale * (v - v_null)
        x = x + (t_next - t_cur) * v
    return x
