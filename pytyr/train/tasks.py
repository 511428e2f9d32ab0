"""A small synthetic classification task: interleaved 2-D spirals.

Points of class c lie on the arm at angle offset 2*pi*c/classes, r in (0, 1], turning by
`turns` revolutions from centre to rim, with Gaussian noise on the angle. Deterministic
given a seed; the default settings are separable enough that a 2-layer MLP (hidden 64,
relu) reaches >= 95 % accuracy in a few hundred steps.
"""
from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch import nn


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


def batches(
    x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches (x[b, ...], y[b]) of exactly `batch_size` rows.

    Graph shapes are static, so every batch has the same size: each epoch is reshuffled
    and its last partial batch dropped.
    """
    n = x.shape[0]
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in 1..{n} (the dataset size), got {batch_size}")
    gen = torch.Generator().manual_seed(seed)
    while True:
        perm = torch.randperm(n, generator=gen)
        for start in range(0, n - batch_size + 1, batch_size):
            idx = perm[start : start + batch_size]
            yield x[idx], y[idx]


@torch.no_grad()
def accuracy(
    module: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int, *, logits_output: int = 0
) -> float:
    """Fraction of rows whose argmax logit is the label.

    `module(x_batch, y_batch)` must return a tuple whose `logits_output`-th element is
    f32[batch_size, classes]; a last partial batch is padded with the first rows and its
    padding ignored, because the graph's batch size is fixed.
    """
    n = x.shape[0]
    correct = 0
    for start in range(0, n, batch_size):
        xb, yb = x[start : start + batch_size], y[start : start + batch_size]
        k = xb.shape[0]
        if k < batch_size:
            xb = torch.cat([xb, x[: batch_size - k]])
            yb = torch.cat([yb, y[: batch_size - k]])
        logits = module(xb, yb)[logits_output]
        correct += int((logits[:k].argmax(dim=-1) == yb[:k]).sum())
    return correct / n
