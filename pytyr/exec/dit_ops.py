"""Lowerings of the diffusion-transformer ops of `Tyr/DiT.lean` (DiT, Flux).

The constant tables (timestep frequencies, rotary cos/sin over the image grid) are computed
once per (sizes, dtype, device) by functions the graph calls, and cached, as `rotary_tables`
in `ops.py`: they are not part of the autograd graph. The arithmetic follows Flux's
reference code (`timestep_embedding`, `rope`/`apply_rope`), operation for operation. FLUX.2's
rotary takes its positions as an input (`rope_ids`): its tables are computed in the graph
from the ids, as diffusers' `Flux2PosEmbed` computes them, at every call.
"""
from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import fx

if TYPE_CHECKING:
    from pytyr.exec.ops import Lower, Lowering

_FREQS: dict[tuple, torch.Tensor] = {}
_ROPE: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def timestep_freqs(t: torch.Tensor, half: int, max_period: float) -> torch.Tensor:
    """`exp(-log(max_period) · i / half)` for `i < half`, [half], computed in float32 as
    Flux does, in the dtype and on the device of `t`."""
    key = (half, max_period, t.dtype, t.device)
    freqs = _FREQS.get(key)
    if freqs is None:
        i = torch.arange(0, half, dtype=torch.float32)
        freqs = torch.exp(-math.log(max_period) * i / half).to(t.device, t.dtype)
        _FREQS[key] = freqs
    return freqs


def grid_positions(txt: int, gh: int, gw: int) -> torch.Tensor:
    """Flux's ids of `txt` conditioning tokens then a `gh × gw` image grid: [txt + gh·gw, 3]
    float64 rows `(0, 0, 0)` then `(0, r, c)` in row-major order."""
    rows = torch.arange(gh, dtype=torch.float64).repeat_interleave(gw)
    cols = torch.arange(gw, dtype=torch.float64).repeat(gh)
    img = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1)
    return torch.cat([torch.zeros(txt, 3, dtype=torch.float64), img])


def rope_grid_tables(x: torch.Tensor, txt: int, gh: int, gw: int, pairs: tuple[int, int, int],
                     theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos θ and sin θ, [txt + gh·gw, k0 + k1 + k2] each, in the dtype and on the device of
    `x`: axis j's pairs have `ω = 1 / theta^(2i / 2kⱼ)` and `θ = ω · coordinate j` (Flux's
    `rope`), computed in float64 and cached."""
    key = (txt, gh, gw, pairs, theta, x.dtype, x.device)
    tables = _ROPE.get(key)
    if tables is None:
        pos = grid_positions(txt, gh, gw)
        angles = []
        for j, k in enumerate(pairs):
            scale = torch.arange(0, 2 * k, 2, dtype=torch.float64) / (2 * k)
            omega = 1.0 / (theta ** scale)
            angles.append(pos[:, j, None] * omega[None, :])
        angle = torch.cat(angles, dim=-1)
        tables = (angle.cos().to(x.device, x.dtype), angle.sin().to(x.device, x.dtype))
        _ROPE[key] = tables
    return tables


def rope_ids(x: torch.Tensor, ids: torch.Tensor, pairs: tuple[int, ...],
             theta: float) -> torch.Tensor:
    """x: [b, h, t, 2·Σk] turned pair by pair at the positions ids: [t, len(pairs)], as
    diffusers' `Flux2PosEmbed` and `apply_rotary_emb` do: axis j's pairs have
    `ω = 1 / theta^(2i / 2kⱼ)`, the angles `ids[:, j] · ω` in float64, their cos and sin in
    float32, the rotation in float32 and the result in the dtype of `x`."""
    pos = ids.to(torch.float64)
    angles = []
    for j, k in enumerate(pairs):
        scale = torch.arange(0, 2 * k, 2, dtype=torch.float64, device=ids.device) / (2 * k)
        angles.append(pos[:, j, None] * (1.0 / theta ** scale)[None, :])
    angle = torch.cat(angles, dim=-1)
    cos, sin = angle.cos().float(), angle.sin().float()
    b, h, t, d = x.shape
    xp = x.float().reshape(b, h, t, d // 2, 2)
    x0, x1 = xp[..., 0], xp[..., 1]
    y = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)
    return y.reshape(b, h, t, d).to(x.dtype)


def _silu(cx: Lower, args, attrs, types, out) -> fx.Node:
    return cx.g.call_function(F.silu, (args[0],))


def _gelu_tanh(cx: Lower, args, attrs, types, out) -> fx.Node:
    return cx.g.call_function(F.gelu, (args[0],), {"approximate": "tanh"})


def _layer_norm_no_affine(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, t, n] -> (x - mean) / sqrt(var + eps): [b, t, n], no gain, no bias
    n = types[0].shape[-1]
    return cx.g.call_function(F.layer_norm, (args[0], (n,), None, None, float(attrs["eps"])))


def _rms_norm_scale(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, h, t, d], scale: [d] -> x / sqrt(mean(x²) + eps) * scale: [b, h, t, d]
    d = types[0].shape[-1]
    return cx.g.call_function(F.rms_norm, (args[0], (d,)),
                              {"weight": args[1], "eps": float(attrs["eps"])})


def _modulate(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, t, d], shift, scale: [b, d] -> (1 + scale[:, None]) * x + shift[:, None]
    x, shift, scale = args
    g = cx.g
    one_plus = g.call_function(operator.add, (1, g.call_method("unsqueeze", (scale, 1))))
    return g.call_function(operator.add, (g.call_function(operator.mul, (one_plus, x)),
                                          g.call_method("unsqueeze", (shift, 1))))


def _gate(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, t, d], g: [b, d] -> g[:, None] * x: [b, t, d]
    x, gate = args
    return cx.g.call_function(operator.mul, (cx.g.call_method("unsqueeze", (gate, 1)), x))


def _timestep_embedding(cx: Lower, args, attrs, types, out) -> fx.Node:
    # t: [b] -> cat(cos(t' ω), sin(t' ω)): [b, 2·half], t' = timeFactor · t
    g = cx.g
    freqs = g.call_function(timestep_freqs,
                            (args[0], int(attrs["half"]), float(attrs["maxPeriod"])))
    t = g.call_function(operator.mul, (float(attrs["timeFactor"]), args[0]))
    angle = g.call_function(operator.mul, (g.call_method("unsqueeze", (t, 1)),
                                           g.call_method("unsqueeze", (freqs, 0))))
    return g.call_function(torch.cat, ([g.call_function(torch.cos, (angle,)),
                                        g.call_function(torch.sin, (angle,))], -1))


def _rope_grid(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, h, t, 2k] -> pairs (x[2p], x[2p+1]) turned by +θ[t, p]: [b, h, t, 2k]
    g, x = cx.g, args[0]
    b, h, t, d = out.shape
    pairs = (int(attrs["k0"]), int(attrs["k1"]), int(attrs["k2"]))
    tables = g.call_function(rope_grid_tables, (x, int(attrs["txt"]), int(attrs["gh"]),
                                                int(attrs["gw"]), pairs, float(attrs["theta"])))
    cos = g.call_function(operator.getitem, (tables, 0))
    sin = g.call_function(operator.getitem, (tables, 1))
    xp = g.call_method("reshape", (x, b, h, t, d // 2, 2))
    x0 = g.call_function(operator.getitem, (xp, (Ellipsis, 0)))
    x1 = g.call_function(operator.getitem, (xp, (Ellipsis, 1)))
    mul, add, sub = operator.mul, operator.add, operator.sub
    y0 = g.call_function(sub, (g.call_function(mul, (cos, x0)), g.call_function(mul, (sin, x1))))
    y1 = g.call_function(add, (g.call_function(mul, (sin, x0)), g.call_function(mul, (cos, x1))))
    return g.call_method("reshape", (g.call_function(torch.stack, ([y0, y1], -1)), b, h, t, d))


def _rope_ids(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, h, t, 2·(k0+k1+k2+k3)], ids: [t, 4] -> x turned by +θ[t, p]: [b, h, t, 2·Σk]
    pairs = tuple(int(attrs[f"k{j}"]) for j in range(4))
    return cx.g.call_function(rope_ids, (args[0], args[1], pairs, float(attrs["theta"])))


def _patch_sizes(image: tuple[int, ...], tokens: tuple[int, ...]) -> tuple[int, ...]:
    # image [b, c, h·p, w·p], tokens [b, h·w, c·p·p] -> (b, c, h, w, p)
    b, c, height, width = image
    p = math.isqrt(tokens[2] // c)
    return b, c, height // p, width // p, p


def _patchify(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, c, h·p, w·p] -> [b, c, h, p, w, p] -> [b, h, w, c, p, p] -> [b, h·w, c·p·p]
    b, c, h, w, p = _patch_sizes(types[0].shape, out.shape)
    v = cx.g.call_method("reshape", (args[0], b, c, h, p, w, p))
    v = cx.g.call_method("permute", (v, 0, 2, 4, 1, 3, 5))
    return cx.g.call_method("reshape", (v, *out.shape))


def _unpatchify(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, h·w, c·p·p] -> [b, h, w, c, p, p] -> [b, c, h, p, w, p] -> [b, c, h·p, w·p]
    b, c, h, w, p = _patch_sizes(out.shape, types[0].shape)
    v = cx.g.call_method("reshape", (args[0], b, h, w, c, p, p))
    v = cx.g.call_method("permute", (v, 0, 3, 1, 4, 2, 5))
    return cx.g.call_method("reshape", (v, *out.shape))


def _mse_loss(cx: Lower, args, attrs, types, out) -> fx.Node:
    return cx.g.call_function(F.mse_loss, tuple(args))


DIT_OPS: dict[str, Lowering] = {
    # elementwise: [*s] -> [*s]
    "silu": _silu,
    "gelu_tanh": _gelu_tanh,
    # x: [b, t, n] -> [b, t, n];  x: [b, h, t, d], scale: [d] -> [b, h, t, d]
    "layer_norm_no_affine3": _layer_norm_no_affine,
    "rms_norm_scale4": _rms_norm_scale,
    # x: [b, t, d] with per-sequence [b, d] broadcast over t
    "modulate": _modulate,
    "gate": _gate,
    "timestep_embedding": _timestep_embedding,
    "rope_grid": _rope_grid,
    "rope_ids": _rope_ids,
    "patchify": _patchify,
    "unpatchify": _unpatchify,
    "mse_loss": _mse_loss,
}
