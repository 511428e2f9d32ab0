"""Lowerings of `Tyr/MoE.lean`: the router's top-k ids and weights, an expert's contribution
at the positions routed to it, the ids' renumbering, and the load-balancing statistics and loss.

As transformers computes them (`MixtralTopKRouter`, `Qwen3MoeTopKRouter`, `MixtralExperts`,
`load_balancing_loss_func`): the softmax in float32 and `torch.topk` on it; an expert runs on
the positions that chose it only (found with one comparison of the ids, gathered, weighted and
`index_add`ed back into a copy of the stream), so a layer's work is its positions' `k`
experts, and the number of experts adds one comparison and one copy per expert.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import fx

if TYPE_CHECKING:
    from pytyr.exec.ops import Lower, Lowering


def router_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """i64 [b, t, k]: the ids of the k largest of softmax(logits) in float32, largest first."""
    return torch.topk(F.softmax(logits.float(), dim=-1), k, dim=-1).indices


def router_weights(logits: torch.Tensor, ids: torch.Tensor, renorm: int) -> torch.Tensor:
    """[b, t, k]: softmax(logits) (float32) at the ids, over their sum where `renorm`."""
    w = F.softmax(logits.float(), dim=-1).gather(-1, ids)
    if renorm:
        w = w / w.sum(-1, keepdim=True)
    return w.to(logits.dtype)


def expert_add(acc: torch.Tensor, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor,
               gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """acc + Σ over (position, slot) with ids == 0 of weight · down(silu(gate x) · up x) at
    that position: [b, t, d]. The expert runs on its positions alone."""
    d, k = x.shape[-1], ids.shape[-1]
    pos, slot = (ids.reshape(-1, k) == 0).nonzero(as_tuple=True)
    xs = x.reshape(-1, d).index_select(0, pos)
    y = F.linear(F.silu(F.linear(xs, gate)) * F.linear(xs, up), down)
    y = y * weights.reshape(-1, k)[pos, slot].unsqueeze(-1)
    return acc.reshape(-1, d).index_add(0, pos, y.to(acc.dtype)).view(acc.shape)


def router_load(load: torch.Tensor, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """load + [the fraction of positions choosing each expert; the mean of softmax(logits)]:
    [2, e]. The counts carry no gradient, the probabilities do."""
    e = logits.shape[-1]
    probs = F.softmax(logits.float(), dim=-1).reshape(-1, e)
    counts = torch.bincount(ids.reshape(-1), minlength=e).to(probs.dtype)
    return load + torch.stack([counts / probs.shape[0], probs.mean(0)]).to(load.dtype)


def balance_loss(load: torch.Tensor, layers: int) -> torch.Tensor:
    """e · Σⱼ (load[0, j] / layers) · (load[1, j] / layers): []."""
    return (load[0] / layers * (load[1] / layers)).sum() * load.shape[-1]


def _router_top_k(cx: Lower, args, attrs, types, out) -> fx.Node:
    # logits: [b, t, e] -> i64 [b, t, k], every id below e
    return cx.g.call_function(router_top_k, (args[0], int(attrs["k"])))


def _router_weights(cx: Lower, args, attrs, types, out) -> fx.Node:
    # logits: [b, t, e], ids: i64 [b, t, k] -> [b, t, k]
    return cx.g.call_function(router_weights, (*args, int(attrs["renorm"])))


def _rotate_ids(cx: Lower, args, attrs, types, out) -> fx.Node:
    # ids: i64 [*s] below e -> (ids - 1) mod e: i64 [*s]
    minus = cx.g.call_function(torch.sub, (args[0], 1))
    return cx.g.call_function(torch.remainder, (minus, int(types[0].bound)))


def _no_load(cx: Lower, args, attrs, types, out) -> fx.Node:
    # x: [b, t, d] -> zeros [2, e] of x's dtype, on x's device
    return cx.g.call_method("new_zeros", (args[0], (2, int(attrs["e"]))))


MOE_OPS: dict[str, Lowering] = {
    "router_top_k": _router_top_k,
    "router_weights": _router_weights,
    # acc, x: [b, t, d], ids: i64 [b, t, k], weights: [b, t, k], gate, up: [f, d], down: [d, f]
    # -> [b, t, d]
    "expert_add": lambda cx, args, attrs, types, out: cx.g.call_function(expert_add, tuple(args)),
    "rotate_ids": _rotate_ids,
    "no_load": _no_load,
    # load: [2, e], logits: [b, t, e], ids: i64 [b, t, k] -> [2, e]
    "router_load": lambda cx, args, attrs, types, out: cx.g.call_function(router_load,
                                                                          tuple(args)),
    # load: [2, e] -> []
    "balance_loss": lambda cx, args, attrs, types, out: cx.g.call_function(
        balance_loss, (args[0], int(attrs["layers"]))),
}
