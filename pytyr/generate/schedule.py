"""FLUX.2's denoising schedule: the sigmas of a `FlowMatchEulerDiscreteScheduler` as the
`Flux2KleinPipeline` sets them, and its Euler step.

The pipeline asks for `linspace(1, 1/n, n)` and shifts it by `mu`, which FLUX.2 computes from
both the latent sequence length and the number of steps (`empirical_mu`: two lines fitted at
10 and 200 steps, interpolated in the steps; one line past 4300 tokens). The scheduler's
config says how the shift is applied (`time_shift_type`: exponential or linear; without
`use_dynamic_shifting`, its fixed `shift`). A sigma of 1 is pure noise, 0 the image; the
timestep the transformer sees is the sigma itself (the pipeline passes `t / 1000` for
`t = 1000 σ`). Arithmetic follows the scheduler's own: float32 sigmas, float32 Euler update.
Settings the FLUX.2 pipeline does not use (Karras, exponential or beta sigmas, a terminal
stretch, inverted or stochastic sampling) are refused by name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pytyr.errors import ConfigError

# Fitted by Black Forest Labs: mu at 10 and at 200 steps, each linear in the sequence length.
_MU_10 = (8.73809524e-05, 1.89833333)
_MU_200 = (0.00016927, 0.45666666)
_LONG = 4300  # tokens past which mu is the 200-step line alone
# Scheduler settings the pipeline leaves off, each with the value that keeps them off.
_OFF = {"use_karras_sigmas": False, "use_exponential_sigmas": False, "use_beta_sigmas": False,
        "shift_terminal": None, "invert_sigmas": False, "stochastic_sampling": False,
        "use_flow_sigmas": False}


def empirical_mu(image_seq_len: int, steps: int) -> float:
    """FLUX.2's shift for `steps` steps over `image_seq_len` latent tokens."""
    a2, b2 = _MU_200
    if image_seq_len > _LONG:
        return float(a2 * image_seq_len + b2)
    a1, b1 = _MU_10
    m200, m10 = a2 * image_seq_len + b2, a1 * image_seq_len + b1
    a = (m200 - m10) / 190.0
    b = m200 - 200.0 * a  # the same sums in the same order: mu to the last bit
    return float(a * steps + b)


@dataclass(frozen=True)
class FlowSchedule:
    """A scheduler's settings (its `scheduler_config.json`), checked."""

    num_train_timesteps: int = 1000
    shift: float = 1.0
    use_dynamic_shifting: bool = False
    time_shift_type: str = "exponential"

    @classmethod
    def from_config(cls, config: dict[str, Any], where: str) -> FlowSchedule:
        name = config.get("_class_name")
        if name != "FlowMatchEulerDiscreteScheduler":
            raise ConfigError(f"{where}: scheduler {name!r} is not FLUX.2's "
                              f"FlowMatchEulerDiscreteScheduler")
        for key, off in _OFF.items():
            if config.get(key, off) not in (off, None if off is False else off):
                raise ConfigError(f"{where}: '{key}': {config[key]!r} is not what the FLUX.2 "
                                  f"pipeline samples with (it needs {off!r})")
        shift_type = config.get("time_shift_type", "exponential")
        if shift_type not in ("exponential", "linear"):
            raise ConfigError(f"{where}: 'time_shift_type' {shift_type!r} is neither "
                              f"'exponential' nor 'linear'")
        steps, shift = config.get("num_train_timesteps", 1000), config.get("shift", 1.0)
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise ConfigError(f"{where}: 'num_train_timesteps' must be a positive integer, "
                              f"got {steps!r}")
        if not isinstance(shift, (int, float)) or isinstance(shift, bool) or not shift > 0:
            raise ConfigError(f"{where}: 'shift' must be a positive number, got {shift!r}")
        return cls(steps, float(shift), bool(config.get("use_dynamic_shifting", False)),
                   shift_type)

    def sigmas(self, steps: int, image_seq_len: int) -> torch.Tensor:
        """The `steps + 1` sigmas from noise to 0 (float32), as the pipeline sets them."""
        s = np.linspace(1.0, 1 / steps, steps).astype(np.float32)
        if self.use_dynamic_shifting:
            mu = empirical_mu(image_seq_len, steps)
            ratio = (1 / s - 1) ** 1.0
            s = (math.exp(mu) / (math.exp(mu) + ratio) if self.time_shift_type == "exponential"
                 else mu / (mu + ratio))
        else:
            s = self.shift * s / (1 + (self.shift - 1) * s)
        return torch.cat([torch.from_numpy(s).to(torch.float32), torch.zeros(1)])


def euler_step(latents: torch.Tensor, velocity: torch.Tensor, sigma: torch.Tensor,
               sigma_next: torch.Tensor) -> torch.Tensor:
    """One step from `sigma` to `sigma_next` along the predicted velocity (in float32)."""
    out = latents.to(torch.float32) + (sigma_next - sigma) * velocity
    return out.to(velocity.dtype)
