"""MDLM's ancestral sampler for a masked diffusion model (Sahoo et al. 2024, "ddpm_cache").

The reverse process runs on MDLM's time grid: `steps + 1` times `t` evenly from 1 down to
`SAMPLE_EPS` (`torch.linspace`), a step going from `t` to `s = t - dt`, `dt = (1 - eps) / steps`.
With `m(t)` the fraction of positions masked at time `t` (`linear`: `m(t) = t`, MDLM's
log-linear schedule as its sampler uses it; `cosine`: `m(t) = sin(πt/2)`), the posterior of a
masked position given the model's clean-data distribution `p(x₀ | z_t)` (SUBS: `[MASK]` is
never predicted, unmasked tokens are kept) is

    q(z_s = v | z_t = [MASK]) ∝ p(x₀ = v | z_t) · (m(t) - m(s))    for every token v,
    q(z_s = [MASK] | z_t = [MASK]) ∝ m(s),

so at each step every masked position is revealed with probability `(m(t) - m(s)) / m(t)`,
as a draw from the model's distribution, independently of the others; positions already
revealed (and the prompt) never change. A draw is the exponential race `argmax q / E`,
`E = -log u`, `u` uniform: one `u` for every position and every token of the step
(`[l, width]`, in that order, from the sampler's own generator). The model's distribution
is `softmax(logits / temperature)` (temperature 0: the argmax, one-hot; MDLM samples at 1).
The model is not conditioned on time, so while the sequence does not change its
distribution is reused (MDLM's cache): a model call per step that revealed something. After
the last step (`t = eps`), positions still masked take the argmax of the model's logits for
the sequence as it then is (MDLM's noise removal; reported as part of the last step).

`on_step(UnmaskStep)` is called after every step, as for the confidence sampler
(`unmask.py`); the same seed gives the same sequence; the global RNG is untouched.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from pytyr.errors import ConfigError
from pytyr.train.tasks.mdlm.unmask import (
    LogitsFn,
    OnStep,
    UnmaskStep,
    as_template,
    check_temperature,
    model_logits,
    positive_int,
)

SAMPLE_EPS = 1e-5  # the last time of the grid, as MDLM's `_sample(eps=1e-5)`
# the fraction of positions masked at time t ∈ [eps, 1]
MASKED_FRACTION: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "linear": lambda t: t,
    "cosine": lambda t: torch.sin(math.pi / 2 * t),
}


def clean_distribution(logits_fn: LogitsFn, ids: torch.Tensor, mask_id: int,
                       temperature: float) -> torch.Tensor:
    """f32 [l, width] with `width = max(vocab, mask_id + 1)`: the model's distribution of the
    clean token at every position, zero at `[MASK]` (SUBS) and beyond the model's vocabulary."""
    z = model_logits(logits_fn, ids)
    if mask_id < z.shape[1]:
        z[:, mask_id] = -math.inf  # a logits_fn over the mask too: never predict it
    if temperature == 0:
        p = torch.nn.functional.one_hot(z.argmax(dim=-1), z.shape[1]).to(torch.float32)
    else:
        p = torch.softmax(z / temperature, dim=-1)
    width = max(z.shape[1], mask_id + 1)
    return torch.nn.functional.pad(p, (0, width - z.shape[1]))


@torch.no_grad()
def ancestral(logits_fn: LogitsFn, template: torch.Tensor | Sequence[int], mask_id: int,
              steps: int, *, temperature: float = 1.0, schedule: str = "linear", seed: int = 0,
              on_step: OnStep | None = None) -> torch.Tensor:
    """Fill the `mask_id` positions of `template` by MDLM's ancestral sampler in `steps`
    steps (module doc); return i64 [l] with no `mask_id` left."""
    positive_int("mask_id", mask_id, 0)
    positive_int("steps", steps)
    check_temperature(temperature)
    if schedule not in MASKED_FRACTION:
        raise ConfigError(f"unmask: unknown schedule {schedule!r} "
                          f"(known: {', '.join(MASKED_FRACTION)})")
    masked_fraction = MASKED_FRACTION[schedule]
    ids = as_template(template, mask_id)
    gen = torch.Generator().manual_seed(seed)
    times = torch.linspace(1, SAMPLE_EPS, steps + 1)
    dt = (1 - SAMPLE_EPS) / steps
    p = None  # the model's distribution for the current ids (the cache)
    for step in range(1, steps + 1):
        before = ids.clone()
        holes = ids == mask_id
        if bool(holes.any()):
            if p is None:
                p = clean_distribution(logits_fn, ids, mask_id, temperature)
            t = times[step - 1]
            m_t, m_s = masked_fraction(t), masked_fraction(t - dt)
            q = p * (m_t - m_s)
            q[:, mask_id] = m_s
            u = torch.rand(q.shape, generator=gen)
            drawn = (q / -torch.log(u)).argmax(dim=-1)
            ids = torch.where(holes, drawn, ids)
            if not torch.equal(ids, before):
                p = None
        if step == steps and bool((ids == mask_id).any()):
            # noise removal: the most probable token where still masked, given the rest
            if p is None:
                p = clean_distribution(logits_fn, ids, mask_id, temperature)
            holes = ids == mask_id
            ids[holes] = p[holes].argmax(dim=-1)
        if on_step is not None:
            revealed = (ids != before).nonzero().squeeze(1)
            on_step(UnmaskStep(step, steps, ids.clone(), revealed, mask_id))
    return ids
