"""A PNG grid of generated images: one row per class, written atomically with Pillow."""
from __future__ import annotations

import io
import os
from pathlib import Path

import torch
from torch import Tensor

from pytyr.atomic import atomic_write_bytes
from pytyr.data.digits import to_gray
from pytyr.errors import ConfigError


def class_grid_labels(num_classes: int, per_class: int) -> Tensor:
    """Labels `0, …, 0, 1, …, 1, …` (`per_class` of each): the row-major order of a grid
    with one row per class."""
    for name, v in (("num_classes", num_classes), ("per_class", per_class)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    return torch.arange(num_classes).repeat_interleave(per_class)


def grid_array(images: Tensor, rows: int, *, scale: int = 4, pad: int = 1) -> Tensor:
    """`images` `[n, c, h, w]` (c = 1 or 3, values about `[-1, 1]`) as one uint8 image
    `[rows·(h·scale + pad) + pad, cols·(w·scale + pad) + pad, c]`, row-major, each pixel a
    `scale × scale` block, separated by `pad` lines of mid gray (apart from both black
    background and white strokes)."""
    if images.dim() != 4 or images.shape[1] not in (1, 3):
        raise ConfigError(f"a grid needs images [n, 1 or 3, h, w], got {list(images.shape)}")
    n, c, h, w = images.shape
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1 or n % rows:
        raise ConfigError(f"{n} images do not fill {rows!r} rows evenly")
    if scale < 1 or pad < 0:
        raise ConfigError(f"scale must be ≥ 1 and pad ≥ 0, got {scale}, {pad}")
    cols = n // rows
    tiles = to_gray(images.detach().float().cpu())
    tiles = tiles.repeat_interleave(scale, -2).repeat_interleave(scale, -1)
    th, tw = h * scale, w * scale
    out = torch.full((c, rows * (th + pad) + pad, cols * (tw + pad) + pad), 0.5)
    for k in range(n):
        r, q = divmod(k, cols)
        top, left = pad + r * (th + pad), pad + q * (tw + pad)
        out[:, top:top + th, left:left + tw] = tiles[k]
    return (out * 255).round().to(torch.uint8).permute(1, 2, 0)


def write_grid(images: Tensor, path: str | os.PathLike[str], rows: int, *, scale: int = 4,
               pad: int = 1) -> Path:
    """Write `grid_array(images, rows, …)` as a PNG at `path` (atomically); returns it."""
    from PIL import Image

    arr = grid_array(images, rows, scale=scale, pad=pad).numpy()
    img = Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return atomic_write_bytes(path, buf.getvalue())
