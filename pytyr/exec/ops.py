"""The op table: how each graph IR op becomes a call of a PyTorch function in an fx graph.

Typing rules live in the Lean library, not here: by the time a graph reaches this table it
has been validated, so a lowering only emits the call. Each lowering receives the lowering
context (the fx graph and its `training` flag input), the fx values of its inputs, the node's
attrs, its input types and its output type, and returns the fx value of the result. The
emitted targets are the torch functions themselves, so the generated `forward` is
straight-line torch code with nothing interpreted per step (`rotary` also calls
`rotary_tables`, which returns its cos/sin constants from a cache; `rotary_at` and
`cached_attention` compute theirs from the positions input with `rotary_tables_at` and
`cache_mask`).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import fx

from pytyr.exec.conv_ops import CONV_OPS
from pytyr.exec.dit_ops import DIT_OPS
from pytyr.exec.lm_ops import LM_OPS
from pytyr.exec.mix_ops import MIX_OPS
from pytyr.exec.moe_ops import MOE_OPS
from pytyr.exec.shape_ops import SHAPE_OPS
from pytyr.exec.stacks import stack_first, stack_pushed
from pytyr.ir.graph import TensorType

TORCH_DTYPES: dict[str, torch.dtype] = {"f32": torch.float32, "i64": torch.int64}


@dataclass
class Lower:
    g: fx.Graph
    training: fx.Node  # a bool input: dropout is active only while training
    splits: dict[tuple[fx.Node, int], fx.Node] = field(default_factory=dict)
    shared: dict[tuple[Any, ...], fx.Node] = field(default_factory=dict)

    def once(self, fn: Callable[..., Any], *args: Any) -> fx.Node:
        """`fn(*args)` as one node however many lowerings ask for it: the attention mask of
        a step's positions is every layer's."""
        key = (fn, *args)
        if key not in self.shared:
            self.shared[key] = self.g.call_function(fn, args)
        return self.shared[key]


Lowering = Callable[[Lower, list[fx.Node], dict[str, Any], list[TensorType], TensorType], fx.Node]


def _call(fn: Callable[..., Any], *extra: Any, **kwargs: Any) -> Lowering:
    """A lowering that calls `fn(*inputs, *extra, **kwargs)`."""

    def lower(cx: Lower, args: list[fx.Node], attrs: dict, types: list[TensorType],
              out: TensorType) -> fx.Node:
        return cx.g.call_function(fn, (*args, *extra), kwargs)

    return lower


def _scale(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [*s] -> x * alpha: [*s]
    return cx.g.call_function(operator.mul, (args[0], float(attrs["alpha"])))


def _reshape(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [*s] -> [*target], same number of elements
    return cx.g.call_function(torch.reshape, (args[0], tuple(int(d) for d in attrs["target"])))


def _layer_norm(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [..., n], w: [n], bias: [n] -> [..., n]; normalised over the shape of the gain
    x, w, bias = args
    return cx.g.call_function(F.layer_norm, (x, tuple(types[1].shape), w, bias, float(attrs["eps"])))


def _rows(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [n, d] -> x[:t]: [t, d] (a view)
    return cx.g.call_function(torch.narrow, (args[0], 0, 0, int(attrs["t"])))


def _third(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, t, 3d] -> x[..., i*d:(i+1)*d]: [b, t, d] (a view). The three thirds of one tensor
    # share one `split`, so the backward joins their gradients with one cat instead of
    # three zero-filled full-size buffers (as nanoGPT's `qkv.split`).
    d = out.shape[-1]
    key = (args[0], d)
    if key not in cx.splits:
        cx.splits[key] = cx.g.call_function(torch.split, (args[0], d, -1))
    return cx.g.call_function(operator.getitem, (cx.splits[key], int(attrs["i"])))


def _dropout(cx: Lower, args, attrs, types, out) -> fx.Node:
    if float(attrs["p"]) == 0.0:  # the identity, in training too: no call at all
        return args[0]
    return cx.g.call_function(F.dropout, (args[0],), {"p": float(attrs["p"]), "training": cx.training})


def _dropout_p(cx: Lower, attrs) -> fx.Node | float:
    # an attention's dropout probability: p while training, 0 in eval; 0 stays a constant
    p = float(attrs["p"])
    return 0.0 if p == 0.0 else cx.g.call_function(operator.mul, (p, cx.training))


def _rms_norm(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [..., n] -> x / sqrt(mean(x², -1) + eps): [..., n], without a gain
    n = types[0].shape[-1]
    return cx.g.call_function(F.rms_norm, (args[0], (n,)), {"eps": float(attrs["eps"])})


def _relu2(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [*s] -> relu(x)²: [*s]
    return cx.g.call_function(torch.square, (cx.g.call_function(F.relu, (args[0],)),))


def _softcap(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [*s] -> cap * tanh(x / cap): [*s]
    cap = float(attrs["cap"])
    scaled = cx.g.call_function(operator.truediv, (args[0], cap))
    return cx.g.call_function(operator.mul, (cx.g.call_function(torch.tanh, (scaled,)), cap))


_ROTARY_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def rotary_tables(x: torch.Tensor, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos θ and sin θ, [t, k] each in the dtype and on the device of `x`: [b, h, t, 2k],
    with θ[p, i] = p · base^(-i/k). Computed in float64 on the CPU, then cached per
    (t, k, base, dtype, device): constants, not part of the autograd graph."""
    t, k = x.shape[-2], x.shape[-1] // 2
    key = (t, k, base, x.dtype, x.device)
    tables = _ROTARY_TABLES.get(key)
    if tables is None:
        freq = base ** (-torch.arange(k, dtype=torch.float64) / k)
        theta = torch.outer(torch.arange(t, dtype=torch.float64), freq)
        tables = (theta.cos().to(x.device, x.dtype), theta.sin().to(x.device, x.dtype))
        _ROTARY_TABLES[key] = tables
    return tables


def _rotary(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, h, t, 2k] -> rotate-half with cos, sin: [t, k] of positions 0 … t-1 broadcast
    x = args[0]
    tables = cx.g.call_function(rotary_tables, (x, float(attrs["base"])))
    return _rotate_half(cx, x, types[0].shape[-1] // 2, tables)


_ROTARY_AT_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
_ROTARY_AT_LIMIT = 4096  # entries; decoding asks for one position at a time, many times


def rotary_tables_at(x: torch.Tensor, pos: torch.Tensor, base: float
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """cos θ and sin θ, [t, k] each, for the positions `pos` (i64 [t]) of `x`: [b, h, t, 2k];
    computed as `rotary_tables` does (float64, then `x`'s dtype), so equal positions give
    equal tables. Cached per positions (every layer of a decoding step asks for the same)."""
    k = x.shape[-1] // 2
    key = (tuple(pos.tolist()), k, base, x.dtype, x.device)
    tables = _ROTARY_AT_TABLES.get(key)
    if tables is None:
        freq = base ** (-torch.arange(k, dtype=torch.float64) / k)
        theta = pos.cpu().to(torch.float64)[:, None] * freq[None, :]
        tables = (theta.cos().to(x.device, x.dtype), theta.sin().to(x.device, x.dtype))
        if len(_ROTARY_AT_TABLES) >= _ROTARY_AT_LIMIT:
            _ROTARY_AT_TABLES.clear()
        _ROTARY_AT_TABLES[key] = tables
    return tables


def _rotate_half(cx: Lower, x: fx.Node, k: int, tables: fx.Node) -> fx.Node:
    # cat(x1 cos + x2 sin, x2 cos - x1 sin) with x1 = x[..., :k], x2 = x[..., k:]
    cos = cx.g.call_function(operator.getitem, (tables, 0))
    sin = cx.g.call_function(operator.getitem, (tables, 1))
    halves = cx.g.call_function(torch.split, (x, k, -1))
    x1 = cx.g.call_function(operator.getitem, (halves, 0))
    x2 = cx.g.call_function(operator.getitem, (halves, 1))
    mul, add, sub = operator.mul, operator.add, operator.sub
    y1 = cx.g.call_function(add, (cx.g.call_function(mul, (x1, cos)), cx.g.call_function(mul, (x2, sin))))
    y2 = cx.g.call_function(sub, (cx.g.call_function(mul, (x2, cos)), cx.g.call_function(mul, (x1, sin))))
    return cx.g.call_function(torch.cat, ([y1, y2], -1))


def _rotary_at(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, h, t, 2k], pos: i64[t] -> rotate-half with the angles of positions pos: [b, h, t, 2k]
    x, pos = args
    tables = cx.g.call_function(rotary_tables_at, (x, pos, float(attrs["base"])))
    return _rotate_half(cx, x, types[0].shape[-1] // 2, tables)


def _gqa_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # q: [b, h, t, d], k, v: [b, g, t, d] -> causal attention, head i reads kv head i // (h/g)
    return cx.g.call_function(F.scaled_dot_product_attention, tuple(args),
                              {"is_causal": True, "enable_gqa": True})


def cache_mask(pos: torch.Tensor, n: int) -> torch.Tensor:
    """bool [t, n]: query i (at position pos[i]) may see cache position j iff j <= pos[i]."""
    return torch.arange(n, device=pos.device)[None, :] <= pos[:, None]


def _cached_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # q: [b, h, t, d], k, v: [b, g, n, d], pos: i64[t] -> [b, h, t, d], masked to j <= pos[i]
    q, k, v, pos = args
    mask = cx.once(cache_mask, pos, types[1].shape[2])
    return cx.g.call_function(F.scaled_dot_product_attention, (q, k, v),
                              {"attn_mask": mask, "enable_gqa": True})


def _cache_write(cx: Lower, args, attrs, types, out) -> fx.Node:
    # cache: [b, g, n, d], x: [b, g, t, d], pos: i64[t] -> cache with rows pos := x (a copy)
    cache, x, pos = args
    return cx.g.call_function(torch.index_copy, (cache, 2, pos, x))




def _split_heads(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, t, h*d] -> [b, t, h, d] -> [b, h, t, d]
    b, h, t, d = out.shape
    v = cx.g.call_method("view", (args[0], b, t, h, d))
    return cx.g.call_method("transpose", (v, 1, 2))


def _merge_heads(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, h, t, d] -> [b, t, h, d] -> [b, t, h*d]
    b, t, hd = out.shape
    v = cx.g.call_method("transpose", (args[0], 1, 2))
    return cx.g.call_method("reshape", (v, b, t, hd))


def _causal_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # q, k, v: [b, h, t, d] -> softmax(q kᵀ / √d + causal mask) v: [b, h, t, d]
    return cx.g.call_function(F.scaled_dot_product_attention, tuple(args),
                              {"dropout_p": _dropout_p(cx, attrs), "is_causal": True})


def _bidirectional_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # q, k, v: [b, h, t, d] -> softmax(q kᵀ / √d) v: [b, h, t, d], no mask
    return cx.g.call_function(F.scaled_dot_product_attention, tuple(args),
                              {"dropout_p": _dropout_p(cx, attrs)})


def _padded_attention(cx: Lower, args, attrs, types, out) -> fx.Node:
    # q, k, v: [b, h, t, d], keep: i64[b, t] -> [b, h, t, d]; the keys where keep == 0 are
    # masked out by a boolean mask [b, 1, 1, t] broadcast over heads and queries (SDPA gives
    # zeros for a query with no key left)
    q, k, v, keep = args
    b, t = types[3].shape
    real = cx.g.call_function(torch.ne, (keep, 0))
    mask = cx.g.call_method("view", (real, b, 1, 1, t))
    return cx.g.call_function(F.scaled_dot_product_attention, (q, k, v),
                              {"attn_mask": mask, "dropout_p": _dropout_p(cx, attrs)})


def _masked_mean(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    # x: [b, t, d], keep: i64[b, t] -> [b, d]; a row with no real token divides 0 by 1
    w = keep.to(x.dtype).unsqueeze(-1)
    return (x * w).sum(1) / w.sum(1).clamp_min(1.0)


def _cross_entropy2(cx: Lower, args, attrs, types, out) -> fx.Node:
    # logits: [b, t, v], target: i64[b, t] -> [] (mean over every position)
    logits, target = args
    v = types[0].shape[-1]
    flat = cx.g.call_method("reshape", (logits, -1, v))
    tflat = cx.g.call_method("reshape", (target, -1))
    return cx.g.call_function(F.cross_entropy, (flat, tflat))


def _weighted_cross_entropy2(cx: Lower, args, attrs, types, out) -> fx.Node:
    # logits: [b, t, v], target: i64[b, t], weight: [b, t] -> Σ weight·CE / (b·t): []
    logits, target, weight = args
    v = types[0].shape[-1]
    flat = cx.g.call_method("reshape", (logits, -1, v))
    tflat = cx.g.call_method("reshape", (target, -1))
    per_position = cx.g.call_function(F.cross_entropy, (flat, tflat), {"reduction": "none"})
    wflat = cx.g.call_method("reshape", (weight, -1))
    return cx.g.call_function(torch.mean, (cx.g.call_function(torch.mul, (per_position, wflat)),))


OPS: dict[str, Lowering] = {
    # x: [b, m], w: [n, m] (, bias: [n]) -> [b, n]; the same for [b, t, m] -> [b, t, n]
    "linear": _call(F.linear),
    "linear_bias": _call(F.linear),
    "linear3": _call(F.linear),
    "linear_bias3": _call(F.linear),
    # x: [a, b], y: [b, c] -> [a, c];  x: [n, a, b], y: [n, b, c] -> [n, a, c]
    "matmul": _call(torch.matmul),
    "bmm": _call(torch.bmm),
    # two equal shapes -> the same shape; add_rows broadcasts [t, d] over [b, t, d]
    "add": _call(torch.add),
    "add_rows": _call(torch.add),
    "sub": _call(torch.sub),
    "mul": _call(torch.mul),
    "scale": _scale,
    # elementwise: [*s] -> [*s]; gelu is the exact (erf) form
    "relu": _call(F.relu),
    "gelu": _call(F.gelu),
    "tanh": _call(torch.tanh),
    # relu2: relu(x)²;  softcap: cap * tanh(x / cap)
    "relu2": _relu2,
    "softcap": _softcap,
    "dropout": _dropout,
    # [*s, n] -> [*s, n], normalised over the last dimension
    "softmax": _call(F.softmax, dim=-1),
    # full reductions: [*s] -> []
    "sum": _call(torch.sum),
    "mean": _call(torch.mean),
    "reshape": _reshape,
    "rows": _rows,
    "third": _third,
    # [a, b] -> [b, a];  [n, a, b] -> [n, b, a]
    "transpose": _call(torch.transpose, -2, -1),
    "transpose3": _call(torch.transpose, -2, -1),
    # idx: i64[b] or i64[b, t], table: [v, d] -> [b, d] or [b, t, d]
    "embedding": _call(F.embedding),
    "embedding2": _call(F.embedding),
    "layer_norm": _layer_norm,
    "layer_norm3": _layer_norm,
    # x: [b, t, n] or [b, h, t, d] -> the same, RMS-normalised over the last dim, no gain
    "rms_norm3": _rms_norm,
    "rms_norm4": _rms_norm,
    "split_heads": _split_heads,
    "merge_heads": _merge_heads,
    "rotary": _rotary,
    "causal_attention": _causal_attention,
    # q, k, v: [b, h, t, d] (, keep: i64[b, t]) -> [b, h, t, d], every key visible (but padding)
    "bidirectional_attention": _bidirectional_attention,
    "padded_attention": _padded_attention,
    "masked_mean_seq3": _call(_masked_mean),
    # logits: [b, c], target: i64[b] -> [] (mean over the batch)
    "cross_entropy": _call(F.cross_entropy),
    "cross_entropy2": _cross_entropy2,
    # logits: [b, t, v], target: i64[b, t], weight: [b, t] -> [] (weighted, over b·t positions)
    "weighted_cross_entropy2": _weighted_cross_entropy2,
    # Tyr/Shape.lean, Tyr/DiT.lean, Tyr/Mix.lean, Tyr/LM.lean and Tyr/MoE.lean (shape_ops.py,
    # dit_ops.py, mix_ops.py, lm_ops.py, moe_ops.py)
    **SHAPE_OPS,
    **DIT_OPS,
    **MIX_OPS,
    **LM_OPS,
    **MOE_OPS,
    **CONV_OPS,
    # grouped-query attention; KV-cache decoding (Tyr/Decode.lean)
    "gqa_attention": _gqa_attention,
    "rotary_at": _rotary_at,
    "cache_write": _cache_write,
    "cached_attention": _cached_attention,
    # s: [l, *r] -> s[0]: [*r] (a view);  stack_push: s[1:] then x, as a list (stack_pushed)
    "stack_head": _call(stack_first),
    "stack_push": _call(stack_pushed),
}
