"""Lowerings of `Tyr/Mix.lean`: gates, learned scalars, smear and sliding-window attention.

The window masks are built per call from the positions (`window_mask`, `cached_window_mask`):
small boolean tensors, not part of the autograd graph. A window that covers the whole context
lowers to the causal fast path (`is_causal`), as nanochat's SDPA fallback does.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import fx

from pytyr.exec.stacks import stack_first, stack_pushed

if TYPE_CHECKING:
    from pytyr.exec.ops import Lower, Lowering


def window_mask(t: int, w: int, device: torch.device) -> torch.Tensor:
    """bool [t, t]: query i may see key j iff i - w <= j <= i."""
    i = torch.arange(t, device=device)[:, None]
    j = torch.arange(t, device=device)[None, :]
    return (j <= i) & (i - j <= w)


def cached_window_mask(pos: torch.Tensor, n: int, w: int) -> torch.Tensor:
    """bool [t, n]: query i (at position pos[i]) may see cache position j iff
    pos[i] - w <= j <= pos[i]."""
    j = torch.arange(n, device=pos.device)[None, :]
    p = pos[:, None]
    return (j <= p) & (p - j <= w)


def _smear(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    # x: [b, t, d], gate: [b, t, 1] -> cat(x[:, :1], x[:, 1:] + gate[:, 1:] * x[:, :-1])
    return torch.cat([x[:, :1], x[:, 1:] + gate[:, 1:] * x[:, :-1]], dim=1)


def _smear_after(x: torch.Tensor, gate: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    # as _smear, with `prev` [b, 1, d] before position 0
    before = torch.cat([prev, x[:, :-1]], dim=1)
    return x + gate * before


def _gate_heads(v: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    # v: [b, g, t, d], gate: [b, t, g] -> v * gate[b, g, t, 1]
    return v * gate.transpose(1, 2).unsqueeze(-1)


def _basis(a: torch.Tensor, n: int, i: int) -> torch.Tensor:
    # a: [1] -> [n], zeros but a at i (a differentiable scatter)
    zeros = a.new_zeros(n)
    return torch.cat([zeros[:i], a, zeros[i + 1:]])


def _window_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # q: [b, h, t, d], k, v: [b, g, t, d] -> [b, h, t, d], query i sees keys i - w … i
    q, k, v = args
    t, w = types[0].shape[2], int(attrs["w"])
    if w >= t - 1:  # the window holds the whole context: plain causal attention
        return cx.g.call_function(F.scaled_dot_product_attention, (q, k, v),
                                  {"is_causal": True, "enable_gqa": True})
    device = cx.g.call_function(getattr, (q, "device"))
    mask = cx.once(window_mask, t, w, device)
    return cx.g.call_function(F.scaled_dot_product_attention, (q, k, v),
                              {"attn_mask": mask, "enable_gqa": True})


def _cached_window_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # q: [b, h, t, d], k, v: [b, g, n, d], pos: i64[t] -> [b, h, t, d], masked to
    # pos[i] - w <= j <= pos[i]
    q, k, v, pos = args
    mask = cx.once(cached_window_mask, pos, types[1].shape[2], int(attrs["w"]))
    return cx.g.call_function(F.scaled_dot_product_attention, (q, k, v),
                              {"attn_mask": mask, "enable_gqa": True})


def _scale_by(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [*s], a: [] -> x * a: [*s]
    return cx.g.call_function(operator.mul, tuple(args))


def _narrow_last3(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, t, d] -> x[..., :k]: [b, t, k] (a view)
    return cx.g.call_function(torch.narrow, (args[0], -1, 0, int(attrs["k"])))


def _last_seq3(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, t, d] -> x[:, -1:]: [b, 1, d] (a view)
    return cx.g.call_function(torch.narrow, (args[0], 1, types[0].shape[1] - 1, 1))


def _basis_lowering(cx: Lower, args, attrs, types, out) -> fx.Node:
    # a: [1] -> [l], zeros but a at i
    return cx.g.call_function(_basis, (args[0], out.shape[0], int(attrs["i"])))


def _call(fn):
    def lower(cx: Lower, args, attrs, types, out) -> fx.Node:
        return cx.g.call_function(fn, tuple(args))
    return lower


MIX_OPS: dict[str, Lowering] = {
    # elementwise: [*s] -> [*s];  x: [*s], a: [] -> x * a
    "sigmoid": _call(torch.sigmoid),
    "scale_by": _scale_by,
    # [b, t, d] -> [b, t, k] (the first k channels);  [b, t, d] -> [b, 1, d] (the last position)
    "narrow_last3": _narrow_last3,
    "last_seq3": _last_seq3,
    # x: [b, t, d], gate: [b, t, 1] (, prev: [b, 1, d]) -> [b, t, d]
    "smear": _call(_smear),
    "smear_after": _call(_smear_after),
    # v: [b, g, t, d], gate: [b, t, g] -> [b, g, t, d]
    "gate_heads": _call(_gate_heads),
    "window_attention": _window_attention,
    "cached_window_attention": _cached_window_attention,
    # s: [l] -> s[0]: [];  stack_push1: cat(s[1:], x[None]);  basis: a at i of l zeros
    "stack_head1": lambda cx, args, attrs, types, out: cx.g.call_function(
        stack_first, (args[0],)),
    "stack_push1": lambda cx, args, attrs, types, out: cx.g.call_function(
        stack_pushed, tuple(args)),
    "basis": _basis_lowering,
}
