"""scikit-learn's handwritten digits as images for pixel-space rectified flow.

`sklearn.datasets.load_digits` ships with scikit-learn (no download): 1797 grayscale images of
8 × 8 pixels with 17 gray levels (0 … 16), of the digits 0 … 9, about 180 of each (the test
part of UCI's "Optical Recognition of Handwritten Digits", 43 writers).

Pixels are scaled to `[-1, 1]` (`v / 8 - 1`), the range of the unit Gaussian noise a
rectified flow starts from. The train/validation split is stratified and deterministic: each
class's images are permuted by a generator seeded with `seed`, and the first
`round(val_fraction · count)` go to validation, so both parts keep the class balance and the
same seed gives the same split on every machine. Training batches are the `image_flow`
task's (`pytyr.train.tasks.flow`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pytyr.errors import DataError

CLASSES = 10
SIDE = 8
LEVELS = 16  # the largest pixel value


@dataclass(frozen=True)
class Digits:
    """Images `[n, 1, 8, 8]` float32 in `[-1, 1]` and their labels `[n]` int64 (0 … 9)."""

    images: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def to_unit_range(values: torch.Tensor) -> torch.Tensor:
    """Pixel values 0 … 16 → `[-1, 1]`."""
    return values.to(torch.float32) / (LEVELS / 2) - 1


def to_gray(images: torch.Tensor) -> torch.Tensor:
    """Model-space images (about `[-1, 1]`) → gray levels in `[0, 1]`, clamped."""
    return ((images + 1) / 2).clamp(0, 1)


def load_digits() -> Digits:
    """All 1797 digits, in scikit-learn's order."""
    from sklearn.datasets import load_digits as sk_load_digits

    data = sk_load_digits()
    images = torch.as_tensor(data.images).reshape(-1, 1, SIDE, SIDE)
    return Digits(to_unit_range(images), torch.as_tensor(data.target, dtype=torch.int64))


def split_digits(digits: Digits, val_fraction: float = 0.1, seed: int = 0) -> tuple[Digits, Digits]:
    """(train, validation), stratified by class and deterministic in `seed` (module doc)."""
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) \
            or not 0 <= val_fraction < 1:
        raise DataError(f"val_fraction must be a number in [0, 1), got {val_fraction!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise DataError(f"the split seed must be an integer, got {seed!r}")
    gen = torch.Generator().manual_seed(seed)
    train, val = [], []
    for c in range(CLASSES):
        idx = torch.nonzero(digits.labels == c).flatten()
        idx = idx[torch.randperm(len(idx), generator=gen)]
        n_val = round(val_fraction * len(idx))
        val.append(idx[:n_val])
        train.append(idx[n_val:])
    return _subset(digits, torch.cat(train)), _subset(digits, torch.cat(val))


def load_digits_split(val_fraction: float = 0.1, seed: int = 0) -> tuple[Digits, Digits]:
    """`split_digits(load_digits(), val_fraction, seed)`."""
    return split_digits(load_digits(), val_fraction, seed)


def _subset(digits: Digits, idx: torch.Tensor) -> Digits:
    return Digits(digits.images[idx], digits.labels[idx])
