"""Sampling from a masked diffusion model: confidence-ordered unmasking of one sequence.

This is the MaskGIT-style sampler (`sample.sampler = "confidence"`); MDLM's own ancestral
sampler, the default, is `pytyr.train.tasks.mdlm.ancestral`, which shares the template, the logits
check and the per-step record (`UnmaskStep`) defined here.

The caller gives `logits_fn(ids: i64[1, l]) -> f32[1, l, vocab]` (a tuple or list whose first
element is the logits is accepted, as a TyrModule returns) and a template: a sequence of `l`
ids in which `mask_id` marks the positions to generate and every other id is kept (a prompt:
a prefix, or a prefix and a suffix to infill between, see `prompt_template`).

In `steps` steps the masked positions are revealed: `reveal_counts` says how many per step
(after step `s` of `n`, `round(m · f(s/n))` of the `m` holes stay masked; `f(r) = 1 - r` is
MDLM's linear schedule at evenly spaced times, `cos(πr/2)` MaskGIT's cosine). At each step
the model sees the current sequence; at every masked position a token is drawn from
`softmax(logits / temperature)` (temperature 0: the argmax), never `[MASK]` itself, and the
positions whose drawn token is the most probable (MaskGIT's confidence) are revealed; the
others stay masked and are drawn again at the next step. Revealed tokens never change.

`on_step(UnmaskStep)` is called after every step (`unmask_view.UnmaskView` shows them live).
The same seed gives the same sequence; the global RNG is not touched.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pytyr.errors import ConfigError

LogitsFn = Callable[[torch.Tensor], Any]
SCHEDULES: dict[str, Callable[[float], float]] = {
    "linear": lambda r: 1.0 - r,
    "cosine": lambda r: math.cos(math.pi / 2 * r),
}


@dataclass(frozen=True)
class UnmaskStep:
    """The state after one step: `ids` i64 [l] (a copy; `mask_id` where still masked) and
    the positions revealed by this step, `revealed` i64 [k] ascending (empty when k = 0)."""

    step: int  # 1 .. steps
    steps: int
    ids: torch.Tensor
    revealed: torch.Tensor
    mask_id: int


OnStep = Callable[[UnmaskStep], None]


def positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"unmask: {name} must be an integer >= {minimum}, got {value!r}")
    return value


def reveal_counts(n_masked: int, steps: int, schedule: str = "linear") -> list[int]:
    """How many of `n_masked` holes each of `steps` steps reveals: `steps` non-negative
    counts summing to `n_masked`, from the schedule's fraction still masked after each step."""
    positive_int("n_masked", n_masked, 0)
    positive_int("steps", steps)
    if schedule not in SCHEDULES:
        raise ConfigError(f"unmask: unknown schedule {schedule!r} (known: {', '.join(SCHEDULES)})")
    f = SCHEDULES[schedule]
    left = [math.floor(n_masked * f(s / steps) + 0.5) for s in range(steps)] + [0]
    left[0] = n_masked  # f(0) = 1 exactly, whatever the rounding of cos
    return [left[s] - left[s + 1] for s in range(steps)]


def prompt_template(length: int, mask_id: int, prefix: Sequence[int] = (),
                    suffix: Sequence[int] = ()) -> torch.Tensor:
    """i64 [length]: `prefix` at the start, `suffix` at the end and `mask_id` in between (a
    prefix prompt, or infilling when both are given)."""
    positive_int("length", length)
    if len(prefix) + len(suffix) > length:
        raise ConfigError(f"unmask: the prompt ({len(prefix)} + {len(suffix)} tokens) does not "
                          f"fit in a sequence of {length}")
    ids = torch.full((length,), mask_id, dtype=torch.int64)
    ids[:len(prefix)] = torch.as_tensor(list(prefix), dtype=torch.int64)
    ids[length - len(suffix):] = torch.as_tensor(list(suffix), dtype=torch.int64)
    return ids


def check_temperature(temperature: Any) -> None:
    """A finite temperature >= 0 (0 is the argmax), else a ConfigError."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not 0 <= temperature < math.inf:
        raise ConfigError(f"unmask: temperature must be a finite number >= 0, got {temperature!r}")


def as_template(template: torch.Tensor | Sequence[int], mask_id: int) -> torch.Tensor:
    """The template as a fresh i64 [l], checked: non-empty, every id in 0..mask_id."""
    ids = torch.as_tensor(template, dtype=torch.int64).clone()
    if ids.ndim == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.ndim != 1 or ids.numel() == 0:
        raise ConfigError(f"unmask: the template must be a non-empty sequence [l] or [1, l], "
                          f"got shape {list(ids.shape)}")
    if int(ids.min()) < 0 or int(ids.max()) > mask_id:
        raise ConfigError(f"unmask: template ids must be in 0..{mask_id} ({mask_id} = [MASK]), "
                          f"got {int(ids.min())}..{int(ids.max())}")
    return ids


def model_logits(logits_fn: LogitsFn, ids: torch.Tensor) -> torch.Tensor:
    """f32 [l, vocab] on the CPU: the logits `logits_fn` gives for `ids` [l], checked."""
    out = logits_fn(ids[None])
    z = out[0] if isinstance(out, (tuple, list)) else out
    if not isinstance(z, torch.Tensor) or z.ndim != 3 or z.shape[:2] != (1, ids.numel()) \
            or z.shape[2] == 0:
        got = list(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
        raise ConfigError(f"unmask: logits_fn returned {got} for an input of [1, {ids.numel()}]; "
                          f"expected [1, {ids.numel()}, vocab]")
    return z[0].detach().float().cpu()


@torch.no_grad()
def unmask(logits_fn: LogitsFn, template: torch.Tensor | Sequence[int], mask_id: int,
           steps: int, *, temperature: float = 1.0, schedule: str = "linear", seed: int = 0,
           on_step: OnStep | None = None) -> torch.Tensor:
    """Fill the `mask_id` positions of `template` in `steps` steps (see the module doc);
    return i64 [l] with no `mask_id` left. Steps that reveal nothing do not call the model."""
    positive_int("mask_id", mask_id, 0)
    check_temperature(temperature)
    ids = as_template(template, mask_id)
    counts = reveal_counts(int((ids == mask_id).sum()), steps, schedule)
    gen = torch.Generator().manual_seed(seed)
    for step, k in enumerate(counts, 1):
        revealed = torch.empty(0, dtype=torch.int64)
        if k > 0:
            holes = (ids == mask_id).nonzero().squeeze(1)  # ascending positions
            z = model_logits(logits_fn, ids)[holes]  # [m, vocab]
            if mask_id < z.shape[1]:
                z[:, mask_id] = -math.inf  # a logits_fn over the mask too: never draw it
            if temperature == 0:
                probs = torch.softmax(z, dim=-1)
                drawn = probs.argmax(dim=-1)
            else:
                probs = torch.softmax(z / temperature, dim=-1)
                drawn = torch.multinomial(probs, 1, generator=gen).squeeze(1)
            confidence = probs.gather(1, drawn[:, None]).squeeze(1)
            best = torch.sort(confidence, descending=True, stable=True).indices[:k]
            ids[holes[best]] = drawn[best]
            revealed = holes[best].sort().values
        if on_step is not None:
            on_step(UnmaskStep(step, steps, ids.clone(), revealed, mask_id))
    return ids
