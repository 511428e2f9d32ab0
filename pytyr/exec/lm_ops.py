"""Lowerings of `Tyr/LM.lean`: the gained RMS norm, Hugging Face's rotary, GPT-2's Conv1D,
cross-attention and causal attention over padded sequences.

The rotary frequencies are computed as transformers computes them (`_compute_default_rope_
parameters`, `_compute_llama3_parameters`, then `inv_freq @ positions`): in float32, whatever
the model's dtype, so that a checkpoint's logits match transformers' to float rounding; the
tables are constants, cached per (positions, sizes, scaling, dtype, device).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import fx

if TYPE_CHECKING:
    from pytyr.exec.ops import Lower, Lowering

_Scaling = tuple[float, float, float, float, int]  # theta, factor, low_freq, high_freq, original
_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
_TABLES_LIMIT = 4096  # entries; decoding asks for one position at a time, many times


def rope_frequencies(k: int, scaling: _Scaling) -> torch.Tensor:
    """float32 [k]: `theta^(-i/k)`, Llama 3-scaled unless `factor == 1` (the formula of
    transformers' `_compute_llama3_parameters`)."""
    theta, factor, low, high, original = scaling
    inv = 1.0 / (theta ** (torch.arange(0, 2 * k, 2, dtype=torch.int64).float() / (2 * k)))
    if factor == 1.0:
        return inv
    low_wavelen, high_wavelen = original / low, original / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope_tables(x: torch.Tensor, pos: torch.Tensor | None, scaling: _Scaling
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """cos θ and sin θ, [t, k] each in the dtype and on the device of `x`: [b, h, t, 2k], at the
    positions `pos` (i64 [t]) or 0 … t-1; float32 arithmetic, as transformers'."""
    t, k = x.shape[-2], x.shape[-1] // 2
    where = tuple(pos.tolist()) if pos is not None else t
    key = (where, k, scaling, x.dtype, x.device)
    tables = _TABLES.get(key)
    if tables is None:
        p = pos.cpu().float() if pos is not None else torch.arange(t, dtype=torch.float32)
        angles = p[:, None] @ rope_frequencies(k, scaling)[None, :]
        tables = (angles.cos().to(x.device, x.dtype), angles.sin().to(x.device, x.dtype))
        if len(_TABLES) >= _TABLES_LIMIT:
            _TABLES.clear()
        _TABLES[key] = tables
    return tables


def _rotate(x: torch.Tensor, tables: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    # cat(x1 cos - x2 sin, x2 cos + x1 sin) with x1 = x[..., :k], x2 = x[..., k:]
    cos, sin = tables
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def _scaling(attrs: dict) -> _Scaling:
    return (float(attrs["theta"]), float(attrs["factor"]), float(attrs["low_freq"]),
            float(attrs["high_freq"]), int(attrs["original"]))


def _rope(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, h, t, 2k] -> turned by +θ at the positions 0 … t-1: [b, h, t, 2k]
    tables = cx.g.call_function(rope_tables, (args[0], None, _scaling(attrs)))
    return cx.g.call_function(_rotate, (args[0], tables))


def _rope_at(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, h, t, 2k], pos: i64[t] -> turned by +θ at the positions pos: [b, h, t, 2k]
    x, pos = args
    tables = cx.g.call_function(rope_tables, (x, pos, _scaling(attrs)))
    return cx.g.call_function(_rotate, (x, tables))


def _conv1d(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # x: [b, t, m], w: [m, n], bias: [n] -> bias + x w: [b, t, n], GPT-2's `addmm`
    b, t, m = x.shape
    return torch.addmm(bias, x.reshape(b * t, m), w).view(b, t, w.shape[1])


def _rms_norm_gain(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, t, n], weight: [n] -> x / sqrt(mean(x², -1) + eps) * weight: [b, t, n]
    x, w = args
    n = types[1].shape[0]
    return cx.g.call_function(F.rms_norm, (x, (n,), w), {"eps": float(attrs["eps"])})


def _cross_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # q: [b, h, s, d], k, v: [b, h, t, d] -> softmax(q kᵀ / √d) v: [b, h, s, d], no mask
    return cx.g.call_function(F.scaled_dot_product_attention, tuple(args))


def padded_causal_mask(keep: torch.Tensor) -> torch.Tensor:
    """bool [b, 1, t, t]: query i sees key j iff j <= i and keep[:, j], transformers' mask (a
    row that sees nothing gives zeros: torch's attention softmaxes no key to nothing)."""
    i = torch.arange(keep.shape[1], device=keep.device)
    causal = i[None, :] <= i[:, None]
    return (causal & (keep != 0)[:, None, :])[:, None]


def _padded_causal_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # q: [b, h, t, d], k, v: [b, g, t, d], keep: i64[b, t] -> [b, h, t, d]
    q, k, v, keep = args
    mask = cx.once(padded_causal_mask, keep)
    return cx.g.call_function(F.scaled_dot_product_attention, (q, k, v),
                              {"attn_mask": mask, "enable_gqa": True})


def padded_window_mask(keep: torch.Tensor, w: int) -> torch.Tensor:
    """bool [b, 1, t, t]: the padded causal mask, and key j within the window i - w <= j."""
    i = torch.arange(keep.shape[1], device=keep.device)
    return padded_causal_mask(keep) & (i[:, None] - i[None, :] <= w)


def _padded_window_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # as padded_causal_attention, query i seeing keys i - w … i
    q, k, v, keep = args
    mask = cx.once(padded_window_mask, keep, int(attrs["w"]))
    return cx.g.call_function(F.scaled_dot_product_attention, (q, k, v),
                              {"attn_mask": mask, "enable_gqa": True})


LM_OPS: dict[str, Lowering] = {
    "rms_norm_gain3": _rms_norm_gain,
    "rope": _rope,
    "rope_at": _rope_at,
    "conv1d3": lambda cx, args, attrs, types, out: cx.g.call_function(_conv1d, tuple(args)),
    "cross_attention": _cross_attention,
    "padded_causal_attention": _padded_causal_attention,
    "padded_window_attention": _padded_window_attention,
}
