"""A small synthetic classification task: interleaved 2-D spirals.

Points of class c lie on the arm at angle offset 2*pi*c/classes, r in (0, 1], turning by
`turns` revolutions from centre to rim, with Gaussian noise on the angle. Deterministic
given a seed; the default settings are separable enough that a 2-layer MLP (hidden 64,
relu) reaches >= 95 % accuracy in a few hundred steps.
"""
from __future__ import annotations

import math

import torch


def make_dataset(
    n: int, seed: int, *, classes: int = 3, turns: float = 0.75, noise: float = 0.15
) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` points of the spirals task: x f32[n, 2], y i64[n] (labels in [0, classes))."""
    if n < 1 or classes < 2:
        raise ValueError(f"make_dataset needs n >= 1 and classes >= 2, got n={n}, classes={classes}")
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % classes  # balanced classes
    r = torch.rand(n, generator=gen) * 0.95 + 0.05  # keep away from the centre, where arms meet
    angle = (
        2 * math.pi * y / classes
        + 2 * math.pi * turns * r
        + noise * torch.randn(n, generator=gen)
    )
    x = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], dim=1)
    perm = torch.randperm(n, generator=gen)
    return x[perm].float().contiguous(), y[perm].long().contiguous()
