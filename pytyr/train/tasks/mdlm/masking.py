"""Masked diffusion (MDLM, Sahoo et al. 2024) as pure functions of a batch and a generator.

The forward process masks each token of a clean sequence `x` independently: at time
`t ∈ (0, 1]` a token is still itself with probability `α_t` and `[MASK]` otherwise. We use the
linear schedule `α_t = 1 - t`, so `t` *is* the masking rate. The continuous-time negative
ELBO of absorbing-state diffusion with the SUBS parameterisation (the model never predicts
`[MASK]` and keeps unmasked tokens) is

    NELBO(x) = E_{t ~ U(0, 1)} E_{z_t} [ Σ_{l masked} (-α'_t / (1 - α_t)) · -log p(x_l | z_t) ]

and `-α'_t / (1 - α_t) = 1/t` for the linear schedule: the loss is cross entropy at the masked
positions, weighted by `1/t`. (MDLM's default "log-linear" schedule `α_t = 1 - (1 - ε) t` gives
the same weight `1/t` with the masking rate `(1 - ε) t`; we truncate `t` to `[ε, 1)` instead.)

One training or evaluation batch (the `mdlm` task's `step_inputs`, `task.py`):
  1. one rate `t` per sequence in `[eps, 1)` (`mask_rates`): stratified by default (MDLM's
     "antithetic"/low-discrepancy sampler: `t_i = eps + (1 - eps)(u + i)/b` with one
     `u ~ U(0, 1)`), which lowers the variance of the batch's loss; or i.i.d.;
  2. each position masked with probability `t` of its row;
  3. weights `1/t` at the masked positions, `0` elsewhere (`elbo_weights`).
The model's `weightedCrossEntropy2` divides the weighted sum by the number of positions, so
the loss is an unbiased estimate of the NELBO per character in nats (the part of the integral
over `t < eps` is left out: about `eps` times the loss, 0.1 % for `eps = 1e-3`).
The task reports it in bits too (`bpc`): the NELBO bounds the diffusion model's negative
log-likelihood from above, so its bits per character compare conservatively with an
autoregressive model's validation loss on the same text.

Randomness comes only from the `torch.Generator` passed in, so the rates are a pure function
of the generator's state.
"""
from __future__ import annotations

import torch

from pytyr.errors import ConfigError

EPS = 1e-3  # smallest masking rate, as MDLM's sampling_eps


def _check_eps(eps: float) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise ConfigError(f"mdlm: eps must be a number in (0, 1), got {eps!r}")
    return float(eps)


def mask_rates(batch: int, generator: torch.Generator, *, eps: float = EPS,
               stratified: bool = True) -> torch.Tensor:
    """Masking rates `t`, f32 [batch], each in `[eps, 1)`: uniform over the interval.

    Stratified: `t_i = eps + (1 - eps) (u + i) / batch` with a single `u ~ U(0, 1)`, one rate
    in each of `batch` equal strata (draws one number). Otherwise i.i.d. (draws `batch`).
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"mdlm: batch must be a positive integer, got {batch!r}")
    eps = _check_eps(eps)
    f64 = dict(dtype=torch.float64, device=generator.device)
    if stratified:
        u = torch.rand(1, generator=generator, **f64)
        s = (u + torch.arange(batch, **f64)) / batch
    else:
        s = torch.rand(batch, generator=generator, **f64)
    # in float64, then rounded: a rate just under 1 must not round up past 1 in float32
    return (eps + (1 - eps) * s).clamp(max=1.0).to(torch.float32)


def _check_rates(rates: torch.Tensor, batch: int) -> None:
    if not isinstance(rates, torch.Tensor) or rates.shape != (batch,):
        shape = list(rates.shape) if isinstance(rates, torch.Tensor) else type(rates).__name__
        raise ConfigError(f"mdlm: rates must be a tensor [{batch}] (one per sequence), "
                          f"got {shape}")
    if not bool(((rates > 0) & (rates <= 1)).all()):
        raise ConfigError(f"mdlm: rates must lie in (0, 1], got min {float(rates.min())} "
                          f"max {float(rates.max())}")


def elbo_weights(masked: torch.Tensor, rates: torch.Tensor) -> torch.Tensor:
    """Loss weights f32 [b, l] of the linear schedule: `1 / rates[row]` where `masked`
    (bool [b, l]), 0 elsewhere."""
    if masked.dtype != torch.bool or masked.ndim != 2:
        raise ConfigError(f"mdlm: masked must be a bool tensor [batch, length], got "
                          f"{masked.dtype} {list(masked.shape)}")
    _check_rates(rates, masked.shape[0])
    return masked.to(torch.float32) / rates.to(masked.device)[:, None]
