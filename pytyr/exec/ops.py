"""The op table: how each graph IR op becomes a call of a PyTorch function in an fx graph.

Typing rules live in the Lean library, not here: by the time a graph reaches this table it
has been validated, so a lowering only emits the call. Each lowering receives the fx graph,
the fx values of its inputs, the node's attrs and its input types, and returns the fx value
of the result. The emitted targets are the torch functions themselves, so the generated
`forward` is straight-line torch code with nothing interpreted per step.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import fx

from pytyr.ir.graph import TensorType

Lowering = Callable[[fx.Graph, list[fx.Node], dict[str, Any], list[TensorType]], fx.Node]

TORCH_DTYPES: dict[str, torch.dtype] = {"f32": torch.float32, "i64": torch.int64}


def _call(fn: Callable[..., Any], *extra: Any, **kwargs: Any) -> Lowering:
    """A lowering that calls `fn(*inputs, *extra, **kwargs)`."""

    def lower(g: fx.Graph, args: list[fx.Node], attrs: dict, types: list[TensorType]) -> fx.Node:
        return g.call_function(fn, (*args, *extra), kwargs)

    return lower


def _scale(g: fx.Graph, args: list[fx.Node], attrs: dict, types: list[TensorType]) -> fx.Node:
    # x: [*s] -> x * alpha: [*s]
    return g.call_function(operator.mul, (args[0], float(attrs["alpha"])))


def _reshape(g: fx.Graph, args: list[fx.Node], attrs: dict, types: list[TensorType]) -> fx.Node:
    # x: [*s] -> [*target], same number of elements
    return g.call_function(torch.reshape, (args[0], tuple(int(d) for d in attrs["target"])))


def _layer_norm(g: fx.Graph, args: list[fx.Node], attrs: dict, types: list[TensorType]) -> fx.Node:
    # x: [b, n], w: [n], bias: [n] -> [b, n]; normalised over the shape of the gain
    x, w, bias = args
    return g.call_function(
        F.layer_norm, (x, tuple(types[1].shape), w, bias, float(attrs["eps"]))
    )


OPS: dict[str, Lowering] = {
    # x: [b, m], w: [n, m] (, bias: [n]) -> [b, n]
    "linear": _call(F.linear),
    "linear_bias": _call(F.linear),
    # x: [a, b], y: [b, c] -> [a, c];  x: [n, a, b], y: [n, b, c] -> [n, a, c]
    "matmul": _call(torch.matmul),
    "bmm": _call(torch.bmm),
    # two equal shapes -> the same shape
    "add": _call(torch.add),
    "sub": _call(torch.sub),
    "mul": _call(torch.mul),
    "scale": _scale,
    # elementwise: [*s] -> [*s]; gelu is the exact (erf) form
    "relu": _call(F.relu),
    "gelu": _call(F.gelu),
    "tanh": _call(torch.tanh),
    # [*s, n] -> [*s, n], normalised over the last dimension
    "softmax": _call(F.softmax, dim=-1),
    # full reductions: [*s] -> []
    "sum": _call(torch.sum),
    "mean": _call(torch.mean),
    "reshape": _reshape,
    # [a, b] -> [b, a];  [n, a, b] -> [n, b, a]
    "transpose": _call(torch.transpose, -2, -1),
    "transpose3": _call(torch.transpose, -2, -1),
    # idx: i64[b], table: [v, d] -> [b, d]
    "embedding": _call(F.embedding),
    "layer_norm": _layer_norm,
    # logits: [b, c], target: i64[b] -> [] (mean over the batch)
    "cross_entropy": _call(F.cross_entropy),
}
