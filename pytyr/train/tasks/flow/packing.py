"""FLUX.2's latent packing and position ids, as `Flux2KleinPipeline` makes them.

The pipeline cuts latents `[n, c, h, w]` into 2 × 2 patches (`_patchify_latents`: a patch's
features ordered channel, patch row, patch column) and lays the patches out as tokens in
row-major order (`_pack_latents`): `[n, (h/2)·(w/2), 4c]`. Every token has four coordinates
`(t, h, w, l)`: image token `(0, row, column, 0)` (`_prepare_latent_ids`), text token
`(0, 0, 0, l)` at its index `l` (`_prepare_text_ids`). The `image_flow` task packs the digits
so (`condition = "prompt"`), and `tyr generate` both the pipeline's latents and a run's images.
"""
from __future__ import annotations

import torch
from torch import Tensor

from pytyr.errors import ConfigError

PATCH = 2  # FLUX.2 packs 2 × 2 patches of latents into a token


def packed_sizes(channels: int, height: int, width: int) -> tuple[int, int]:
    """(tokens, features a token) of images `[channels, height, width]` once packed."""
    if height % PATCH or width % PATCH:
        raise ConfigError(f"images of {height}×{width} do not cut into FLUX.2's {PATCH}×{PATCH} "
                          f"patches")
    return (height // PATCH) * (width // PATCH), channels * PATCH * PATCH


def pack(x: Tensor) -> Tensor:
    """`[n, c, h, w]` → `[n, (h/2)·(w/2), 4c]` (module doc)."""
    n, c, h, w = x.shape
    packed_sizes(c, h, w)
    patches = x.reshape(n, c, h // PATCH, PATCH, w // PATCH, PATCH).permute(0, 1, 3, 5, 2, 4)
    packed = patches.reshape(n, c * PATCH * PATCH, (h // PATCH) * (w // PATCH))
    return packed.permute(0, 2, 1).contiguous()


def unpack(tokens: Tensor, channels: int, height: int, width: int) -> Tensor:
    """The inverse of `pack`: tokens `[n, (h/2)·(w/2), 4c]` → images `[n, c, h, w]`."""
    n = tokens.shape[0]
    gh, gw = height // PATCH, width // PATCH
    patches = tokens.permute(0, 2, 1).reshape(n, channels, PATCH, PATCH, gh, gw)
    return patches.permute(0, 1, 4, 2, 5, 3).reshape(n, channels, height, width)


def image_ids(rows: int, cols: int) -> Tensor:
    """`[rows·cols, 4]` float32: the tokens of a `rows × cols` grid at `(0, row, column, 0)`."""
    return torch.cartesian_prod(torch.arange(1), torch.arange(rows), torch.arange(cols),
                                torch.arange(1)).to(torch.float32)


def text_ids(length: int) -> Tensor:
    """`[length, 4]` float32: text tokens at `(0, 0, 0, l)`."""
    return torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1),
                                torch.arange(length)).to(torch.float32)
