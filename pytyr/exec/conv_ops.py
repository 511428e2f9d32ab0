"""Lowerings of `Tyr/Conv.lean`: convolutions, group and batch norm, resampling, channels
first (`[b, c, h, w]`). Every op is torch's own kernel; the types were checked before."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from torch import fx

    from pytyr.exec.ops import Lower, Lowering


def _conv2d(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, i, h, w], weight: [o, i, kh, kw], bias: [o] -> [b, o, h', w']
    return cx.g.call_function(F.conv2d, tuple(args), {
        "stride": int(attrs["stride"]), "padding": int(attrs["padding"]),
        "dilation": int(attrs["dilation"]), "groups": int(attrs.get("groups", 1))})


def _conv1d(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, i, n], weight: [o, i, k], bias: [o] -> [b, o, n']
    return cx.g.call_function(F.conv1d, tuple(args), {
        "stride": int(attrs["stride"]), "padding": int(attrs["padding"]),
        "dilation": int(attrs["dilation"])})


def _conv2d_same(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, i, h, w], weight: [o, i, 2p+1, 2p+1] -> [b, o, h, w]
    return cx.g.call_function(F.conv2d, tuple(args), {"padding": int(attrs["pad"])})


def conv2d_down(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """diffusers' `Downsample2D`: zeros after the last row and column, then 3 × 3 at stride 2."""
    return F.conv2d(F.pad(x, (0, 1, 0, 1)), weight, bias, stride=2)


def _group_norm(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, c, h, w], weight, bias: [c] -> [b, c, h, w]
    x, weight, bias = args
    return cx.g.call_function(F.group_norm, (x, int(attrs["groups"]), weight, bias,
                                             float(attrs["eps"])))


def batch_norm_eval(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
                    eps: float) -> torch.Tensor:
    """(x - mean) / √(var + eps) per channel (axis 1), as `F.batch_norm` at inference
    (written out: torch's kernel takes no gradient for the statistics, which are inputs
    here)."""
    return (x - mean[:, None, None]) / torch.sqrt(var + eps)[:, None, None]


def batch_norm_inverse(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
                       eps: float) -> torch.Tensor:
    """x √(var + eps) + mean per channel: the latents of FLUX.2 back to the VAE's scale."""
    return x * torch.sqrt(var + eps)[:, None, None] + mean[:, None, None]


def _with_eps(fn):
    def lower(cx: Lower, args, attrs, types, out) -> fx.Node:
        return cx.g.call_function(fn, (*args, float(attrs["eps"])))
    return lower


def _upsample(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, c, h, w] -> [b, c, s h, s w], each pixel repeated
    return cx.g.call_function(F.interpolate, (args[0],), {"scale_factor": float(attrs["s"]),
                                                         "mode": "nearest"})


def _shuffle(fn):
    def lower(cx: Lower, args, attrs, types, out) -> fx.Node:
        return cx.g.call_function(fn, (args[0], int(attrs["r"])))
    return lower


def linear_channels(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """A `Linear` over axis 1 at every position: as diffusers' VAE attention computes it, on
    the positions as rows."""
    b, _, h, w = x.shape
    rows = F.linear(x.flatten(2).transpose(1, 2), weight, bias)  # [b, h w, o]
    return rows.transpose(1, 2).reshape(b, -1, h, w)


def image_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """One head over the positions: [b, c, h, w] as [b, 1, h w, c] through SDPA."""
    b, c, h, w = q.shape
    q, k, v = (t.flatten(2).transpose(1, 2)[:, None] for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v)[:, 0]  # [b, h w, c]
    return y.transpose(1, 2).reshape(b, c, h, w)


CONV_OPS: dict[str, Lowering] = {
    "conv2d": _conv2d,
    "conv2d_groups": _conv2d,
    "conv2d_same": _conv2d_same,
    "conv2d_down": lambda cx, args, attrs, types, out: cx.g.call_function(conv2d_down,
                                                                           tuple(args)),
    "conv1d": _conv1d,
    "group_norm": _group_norm,
    "batch_norm_eval": _with_eps(batch_norm_eval),
    "batch_norm_inverse": _with_eps(batch_norm_inverse),
    "upsample_nearest": _upsample,
    "pixel_unshuffle": _shuffle(F.pixel_unshuffle),
    "pixel_shuffle": _shuffle(F.pixel_shuffle),
    "linear_channels": lambda cx, args, attrs, types, out: cx.g.call_function(
        linear_channels, tuple(args)),
    "image_attention": lambda cx, args, attrs, types, out: cx.g.call_function(
        image_attention, tuple(args)),
}
