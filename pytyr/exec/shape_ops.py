"""Lowerings of the structural ops of `Tyr/Shape.lean`: reshapes, reductions, concatenation,
slices and chunks along one axis, and the 4-D batched matrix product.

Every size a lowering needs is read from the node's input and output types (the graph was
validated, so they agree with the Lean signature): a slice's length is its output's size
along the axis, a split's factors are the output's last two dims.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Callable

import torch
from torch import fx

if TYPE_CHECKING:
    from pytyr.exec.ops import Lower, Lowering


def _reshape_to_out(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x -> x.reshape(out.shape): a view when the strides allow, a copy otherwise
    return cx.g.call_function(torch.reshape, (args[0], tuple(out.shape)))


def _reduce(fn: Callable, dim: int) -> Lowering:
    def lower(cx: Lower, args, attrs, types, out) -> fx.Node:
        return cx.g.call_function(fn, (args[0], dim))
    return lower


def _cat(dim: int) -> Lowering:
    def lower(cx: Lower, args, attrs, types, out) -> fx.Node:
        return cx.g.call_function(torch.cat, (list(args), dim))
    return lower


def _front(dim: int) -> Lowering:
    # x: [..., m + n, ...] -> x.narrow(dim, 0, m): the first m along `dim` (a view)
    def lower(cx: Lower, args, attrs, types, out) -> fx.Node:
        return cx.g.call_function(torch.narrow, (args[0], dim, 0, out.shape[dim]))
    return lower


def _back(dim: int) -> Lowering:
    # x: [..., m + n, ...] -> x.narrow(dim, m, n): the last n along `dim` (a view)
    def lower(cx: Lower, args, attrs, types, out) -> fx.Node:
        n = out.shape[dim]
        return cx.g.call_function(torch.narrow, (args[0], dim, types[0].shape[dim] - n, n))
    return lower


def _chunk(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [..., n * d] -> x[..., i*d:(i+1)*d]: [..., d] (a view). The chunks of one tensor
    # share one `split` (as `third` does), so the backward joins them with one cat.
    d = out.shape[-1]
    key = (args[0], d)
    if key not in cx.splits:
        cx.splits[key] = cx.g.call_function(torch.split, (args[0], d, -1))
    return cx.g.call_function(operator.getitem, (cx.splits[key], int(attrs["i"])))


def _call(fn: Callable) -> Lowering:
    def lower(cx: Lower, args, attrs, types, out) -> fx.Node:
        return cx.g.call_function(fn, tuple(args))
    return lower


SHAPE_OPS: dict[str, Lowering] = {
    # [a, m*n] -> [a, m, n];  [a, b, m*n] -> [a, b, m, n];  and back; flattening
    "split_last": _reshape_to_out,
    "split_last3": _reshape_to_out,
    "merge_last3": _reshape_to_out,
    "merge_last4": _reshape_to_out,
    "merge_first3": _reshape_to_out,
    "flatten": _reshape_to_out,
    "flatten3": _reshape_to_out,
    # [a, n] -> [a];  [a, b, n] -> [a, b];  [b, t, d] -> [b, d]
    "sum_last": _reduce(torch.sum, -1),
    "mean_last": _reduce(torch.mean, -1),
    "sum_last3": _reduce(torch.sum, -1),
    "mean_last3": _reduce(torch.mean, -1),
    "sum_seq3": _reduce(torch.sum, 1),
    "mean_seq3": _reduce(torch.mean, 1),
    # x ++ y along the last axis, the rows [m, d], the tokens [b, t, d], or the positions
    # [b, h, t, d]
    "cat_last": _cat(-1),
    "cat_first": _cat(0),
    "cat_last3": _cat(-1),
    "cat_seq3": _cat(1),
    "cat_seq4": _cat(2),
    # the first m / the last n of m + n along the same axes
    "front_last": _front(-1),
    "back_last": _back(-1),
    "front_last3": _front(-1),
    "back_last3": _back(-1),
    "front_seq3": _front(1),
    "back_seq3": _back(1),
    "front_seq4": _front(2),
    "back_seq4": _back(2),
    # [a, n*d] -> [a, d];  [a, b, n*d] -> [a, b, d]
    "chunk": _chunk,
    "chunk3": _chunk,
    # [b, h, m, k] x [b, h, k, n] -> [b, h, m, n]
    "bmm4": _call(torch.matmul),
}
