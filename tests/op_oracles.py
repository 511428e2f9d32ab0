"""Torch oracles of the ops of Tyr/Shape.lean and Tyr/DiT.lean, in the format of `CASES` in
tests/test_exec.py (which runs them forward and backward): op → (inputs as (shape, dtype),
attrs, output shape, reference written without the op). Each reference is built from
elements, slices and stacks, or from the formula in scalar Python, not from the op's torch
function."""
from __future__ import annotations

import math

import torch


def _cols(x):
    return [x[..., i] for i in range(x.shape[-1])]


def _ln(x, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps)


def _bidirectional(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def _timesteps(t, half, max_period, factor):
    freqs = [math.exp(-math.log(max_period) * i / half) for i in range(half)]
    cos = [torch.cos(factor * t * f) for f in freqs]
    sin = [torch.sin(factor * t * f) for f in freqs]
    return torch.stack(cos + sin, dim=-1)


def _rope_grid(x, txt, gh, gw, pairs, theta):
    # token n: (0, 0, 0) for n < txt, else (0, r, c) with n - txt = r·gw + c; pair p of the
    # head belongs to the axis whose pairs it falls in and is turned by +ω·coordinate
    t = x.shape[-2]
    coords = [(0, 0, 0)] * txt + [(0, r, c) for r in range(gh) for c in range(gw)]
    axis_of = [(j, i) for j, k in enumerate(pairs) for i in range(k)]
    out = []
    for p, (j, i) in enumerate(axis_of):
        omega = 1.0 / theta ** (2 * i / (2 * pairs[j]))
        cos = torch.tensor([math.cos(omega * coords[n][j]) for n in range(t)])
        sin = torch.tensor([math.sin(omega * coords[n][j]) for n in range(t)])
        x0, x1 = x[..., 2 * p], x[..., 2 * p + 1]
        out += [x0 * cos - x1 * sin, x0 * sin + x1 * cos]
    return torch.stack(out, dim=-1)


def _rope_ids(x, ids, pairs, theta):
    # token n at the coordinates ids[n]; pair p of the head belongs to the axis whose pairs it
    # falls in and is turned by +ω·ids[n, axis]
    axis_of = [(j, i) for j, k in enumerate(pairs) for i in range(k)]
    out = []
    for p, (j, i) in enumerate(axis_of):
        angle = ids[:, j] * (1.0 / theta ** (2 * i / (2 * pairs[j])))
        cos, sin = torch.cos(angle), torch.sin(angle)
        x0, x1 = x[..., 2 * p], x[..., 2 * p + 1]
        out += [x0 * cos - x1 * sin, x0 * sin + x1 * cos]
    return torch.stack(out, dim=-1)


def _patchify(x, p):
    b, c, hp, wp = x.shape
    tokens = [x[:, :, r * p:(r + 1) * p, q * p:(q + 1) * p].reshape(b, c * p * p)
              for r in range(hp // p) for q in range(wp // p)]
    return torch.stack(tokens, dim=1)


def _unpatchify(x, c, h, w, p):
    b = x.shape[0]
    rows = [torch.cat([x[:, r * w + q].reshape(b, c, p, p) for q in range(w)], dim=-1)
            for r in range(h)]
    return torch.cat(rows, dim=-2)


ORACLES = {
    "split_last": ([([2, 12], "f32")], {}, [2, 3, 4],
                   lambda x: torch.stack([x[:, 4 * i:4 * i + 4] for i in range(3)], dim=1)),
    "split_last3": ([([2, 3, 6], "f32")], {}, [2, 3, 2, 3],
                    lambda x: torch.stack([x[..., 3 * i:3 * i + 3] for i in range(2)], dim=2)),
    "merge_last3": ([([2, 3, 4], "f32")], {}, [2, 12],
                    lambda x: torch.cat([x[:, i] for i in range(3)], dim=-1)),
    "merge_last4": ([([2, 2, 3, 4], "f32")], {}, [2, 2, 12],
                    lambda x: torch.cat([x[:, :, i] for i in range(3)], dim=-1)),
    "merge_first3": ([([2, 3, 4], "f32")], {}, [6, 4],
                     lambda x: torch.cat([x[i] for i in range(2)], dim=0)),
    "flatten": ([([3, 4], "f32")], {}, [12], lambda x: torch.cat([x[i] for i in range(3)])),
    "flatten3": ([([2, 3, 4], "f32")], {}, [24],
                 lambda x: torch.cat([x[i, j] for i in range(2) for j in range(3)])),
    "sum_last": ([([3, 4], "f32")], {}, [3], lambda x: sum(_cols(x))),
    "mean_last": ([([3, 4], "f32")], {}, [3], lambda x: sum(_cols(x)) / 4),
    "sum_last3": ([([2, 3, 4], "f32")], {}, [2, 3], lambda x: sum(_cols(x))),
    "mean_last3": ([([2, 3, 4], "f32")], {}, [2, 3], lambda x: sum(_cols(x)) / 4),
    "sum_seq3": ([([2, 3, 4], "f32")], {}, [2, 4], lambda x: x[:, 0] + x[:, 1] + x[:, 2]),
    "mean_seq3": ([([2, 3, 4], "f32")], {}, [2, 4],
                  lambda x: (x[:, 0] + x[:, 1] + x[:, 2]) / 3),
    "cat_last": ([([2, 3], "f32"), ([2, 4], "f32")], {}, [2, 7],
                 lambda x, y: torch.stack(_cols(x) + _cols(y), dim=-1)),
    "cat_first": ([([2, 3], "f32"), ([4, 3], "f32")], {}, [6, 3],
                  lambda x, y: torch.stack([x[0], x[1]] + [y[i] for i in range(4)])),
    "cat_last3": ([([2, 3, 2], "f32"), ([2, 3, 1], "f32")], {}, [2, 3, 3],
                  lambda x, y: torch.stack(_cols(x) + _cols(y), dim=-1)),
    "cat_seq3": ([([2, 3, 4], "f32"), ([2, 2, 4], "f32")], {}, [2, 5, 4],
                 lambda x, y: torch.stack([x[:, i] for i in range(3)]
                                          + [y[:, i] for i in range(2)], dim=1)),
    "cat_seq4": ([([2, 2, 3, 4], "f32"), ([2, 2, 1, 4], "f32")], {}, [2, 2, 4, 4],
                 lambda x, y: torch.stack([x[:, :, i] for i in range(3)] + [y[:, :, 0]], dim=2)),
    "front_last": ([([2, 7], "f32")], {}, [2, 3], lambda x: torch.stack(_cols(x)[:3], dim=-1)),
    "back_last": ([([2, 7], "f32")], {}, [2, 4], lambda x: torch.stack(_cols(x)[3:], dim=-1)),
    "front_last3": ([([2, 3, 7], "f32")], {}, [2, 3, 5],
                    lambda x: torch.stack(_cols(x)[:5], dim=-1)),
    "back_last3": ([([2, 3, 7], "f32")], {}, [2, 3, 2],
                   lambda x: torch.stack(_cols(x)[5:], dim=-1)),
    "front_seq3": ([([2, 5, 4], "f32")], {}, [2, 1, 4], lambda x: x[:, 0:1]),
    "back_seq3": ([([2, 5, 4], "f32")], {}, [2, 4, 4],
                  lambda x: torch.stack([x[:, i] for i in range(1, 5)], dim=1)),
    "front_seq4": ([([2, 2, 5, 4], "f32")], {}, [2, 2, 2, 4],
                   lambda x: torch.stack([x[:, :, 0], x[:, :, 1]], dim=2)),
    "back_seq4": ([([2, 2, 5, 4], "f32")], {}, [2, 2, 3, 4],
                  lambda x: torch.stack([x[:, :, i] for i in range(2, 5)], dim=2)),
    "chunk": ([([2, 6], "f32")], {"i": 1}, [2, 2], lambda x: torch.stack([x[:, 2], x[:, 3]], -1)),
    "chunk3": ([([2, 3, 6], "f32")], {"i": 2}, [2, 3, 2],
               lambda x: torch.stack([x[..., 4], x[..., 5]], -1)),
    "bmm4": ([([2, 2, 3, 4], "f32"), ([2, 2, 4, 5], "f32")], {}, [2, 2, 3, 5],
             lambda x, y: (x[..., :, :, None] * y[..., None, :, :]).sum(-2)),
    "silu": ([([3, 4], "f32")], {}, [3, 4], lambda x: x / (1 + torch.exp(-x))),
    "gelu_tanh": ([([3, 4], "f32")], {}, [3, 4],
                  lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi)
                                                      * (x + 0.044715 * x ** 3)))),
    "layer_norm_no_affine3": ([([2, 3, 6], "f32")], {"eps": 1e-6}, [2, 3, 6],
                              lambda x: _ln(x, 1e-6)),
    "rms_norm_scale4": ([([2, 2, 3, 4], "f32"), ([4], "f32")], {"eps": 1e-2}, [2, 2, 3, 4],
                        lambda x, s: x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-2) * s),
    "modulate": ([([2, 3, 4], "f32"), ([2, 4], "f32"), ([2, 4], "f32")], {}, [2, 3, 4],
                 lambda x, sh, sc: torch.stack([x[:, i] * (1 + sc) + sh for i in range(3)], 1)),
    "gate": ([([2, 3, 4], "f32"), ([2, 4], "f32")], {}, [2, 3, 4],
             lambda x, g: torch.stack([x[:, i] * g for i in range(3)], 1)),
    "timestep_embedding": ([([5], "f32")], {"half": 3, "maxPeriod": 100.0, "timeFactor": 2.0},
                           [5, 6], lambda t: _timesteps(t, 3, 100.0, 2.0)),
    "rope_grid": ([([1, 2, 8, 8], "f32")],
                  {"txt": 2, "gh": 2, "gw": 3, "k0": 1, "k1": 1, "k2": 2, "theta": 100.0},
                  [1, 2, 8, 8], lambda x: _rope_grid(x, 2, 2, 3, (1, 1, 2), 100.0)),
    # the ids drawn as any floats: the rotation's gradient reaches them too
    "rope_ids": ([([2, 2, 3, 10], "f32"), ([3, 4], "f32")],
                 {"k0": 1, "k1": 2, "k2": 1, "k3": 1, "theta": 100.0}, [2, 2, 3, 10],
                 lambda x, ids: _rope_ids(x, ids, (1, 2, 1, 1), 100.0)),
    "bidirectional_attention": ([([1, 2, 4, 3], "f32")] * 3, {"p": 0.0}, [1, 2, 4, 3],
                                _bidirectional),
    "patchify": ([([2, 3, 4, 6], "f32")], {}, [2, 6, 12], lambda x: _patchify(x, 2)),
    "unpatchify": ([([2, 6, 12], "f32")], {}, [2, 3, 4, 6],
                   lambda x: _unpatchify(x, 3, 2, 3, 2)),
    "mse_loss": ([([2, 3], "f32"), ([2, 3], "f32")], {}, [],
                 lambda x, y: sum(((x - y) ** 2).flatten()) / 6),
}
# Implicit arguments the validator cannot invert from closed shapes (`n * d`, `h * p`).
ORACLE_IMPLICIT = {
    "split_last": {"a": 2, "m": 3, "n": 4}, "split_last3": {"a": 2, "b": 3, "m": 2, "n": 3},
    "chunk": {"a": 2, "n": 3, "d": 2}, "chunk3": {"a": 2, "b": 3, "n": 3, "d": 2},
    "front_last": {"a": 2, "m": 3, "n": 4}, "back_last": {"a": 2, "m": 3, "n": 4},
    "front_last3": {"a": 2, "b": 3, "m": 5, "n": 2}, "back_last3": {"a": 2, "b": 3, "m": 5, "n": 2},
    "front_seq3": {"b": 2, "m": 1, "n": 4, "d": 4}, "back_seq3": {"b": 2, "m": 1, "n": 4, "d": 4},
    "front_seq4": {"b": 2, "h": 2, "m": 2, "n": 3, "d": 4},
    "back_seq4": {"b": 2, "h": 2, "m": 2, "n": 3, "d": 4},
    "patchify": {"b": 2, "c": 3, "h": 2, "w": 3, "p": 2},
    "unpatchify": {"b": 2, "c": 3, "h": 2, "w": 3, "p": 2},
}


def _windowed(q, k, v, visible):
    # softmax over the visible keys written out (visible[i][j]: query i sees key j), the
    # key/value heads repeated for their query heads
    h, g = q.shape[1], k.shape[1]
    k = torch.stack([k[:, j // (h // g)] for j in range(h)], dim=1)
    v = torch.stack([v[:, j // (h // g)] for j in range(h)], dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.tensor(visible)
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _smear(x, gate, prev=None):
    rows = [x[:, 0] if prev is None else x[:, 0] + gate[:, 0] * prev[:, 0]]
    rows += [x[:, i] + gate[:, i] * x[:, i - 1] for i in range(1, x.shape[1])]
    return torch.stack(rows, dim=1)


MIX_ORACLES = {
    "sigmoid": ([([3, 4], "f32")], {}, [3, 4], lambda x: 1 / (1 + torch.exp(-x))),
    "scale_by": ([([3, 4], "f32"), ([], "f32")], {}, [3, 4],
                 lambda x, a: torch.stack([x[i] * a for i in range(3)])),
    "narrow_last3": ([([2, 3, 6], "f32")], {"k": 4}, [2, 3, 4],
                     lambda x: torch.stack(_cols(x)[:4], dim=-1)),
    "last_seq3": ([([2, 3, 4], "f32")], {}, [2, 1, 4], lambda x: torch.stack([x[:, 2]], 1)),
    "smear": ([([2, 4, 3], "f32"), ([2, 4, 1], "f32")], {}, [2, 4, 3], _smear),
    "smear_after": ([([2, 4, 3], "f32"), ([2, 4, 1], "f32"), ([2, 1, 3], "f32")], {}, [2, 4, 3],
                    _smear),
    "gate_heads": ([([2, 3, 4, 5], "f32"), ([2, 4, 3], "f32")], {}, [2, 3, 4, 5],
                   lambda v, g: torch.stack([torch.stack([v[:, j, p] * g[:, p, j, None]
                                                          for p in range(4)], 1)
                                             for j in range(3)], 1)),
    # 6 positions, a window of 2: query i sees i-2, i-1, i
    "window_attention": ([([1, 4, 6, 3], "f32"), ([1, 2, 6, 3], "f32"), ([1, 2, 6, 3], "f32")],
                         {"w": 2}, [1, 4, 6, 3],
                         lambda q, k, v: _windowed(q, k, v, [[i - 2 <= j <= i for j in range(6)]
                                                             for i in range(6)])),
    # queries at positions 3 and 6 of a cache of 8, a window of 2
    "cached_window_attention": ([([1, 4, 2, 3], "f32"), ([1, 2, 8, 3], "f32"),
                                 ([1, 2, 8, 3], "f32"), ([2], "i64", 8)], {"w": 2}, [1, 4, 2, 3],
                                lambda q, k, v, pos: _windowed(
                                    q, k, v, [[p - 2 <= j <= p for j in range(8)]
                                              for p in (3, 6)])),
    "stack_head1": ([([3], "f32")], {}, [], lambda s: s[0]),
    "stack_push1": ([([3], "f32"), ([], "f32")], {}, [3],
                    lambda s, x: torch.stack([s[1], s[2], x])),
    "basis": ([([1], "f32")], {"i": 2}, [4],
              lambda a: torch.stack([a[0] * 0, a[0] * 0, a[0], a[0] * 0])),
}
ORACLES.update(MIX_ORACLES)
ORACLE_IMPLICIT.update({"window_attention": {"b": 1, "h": 4, "g": 2, "t": 6, "d": 3, "n": 8},
                        "cached_window_attention": {"b": 1, "h": 4, "g": 2, "t": 2, "n": 8,
                                                    "d": 3},
                        "basis": {"l": 4}})


def _llama3(omega, factor, low, high, original):
    # one frequency as Llama 3 scales it, in scalar Python
    wavelen = 2 * math.pi / omega
    if wavelen < original / high:
        return omega
    if wavelen > original / low:
        return omega / factor
    s = (original / wavelen - low) / (high - low)
    return (1 - s) * omega / factor + s * omega


def _rope(x, positions, theta, factor=1.0, low=1.0, high=4.0, original=8192):
    # pair (x[i], x[k + i]) at position p turned by +ω_i·p, ω_i = theta^(-i/k), each written out
    k = x.shape[-1] // 2
    firsts, seconds = [], []
    for i in range(k):
        omega = _llama3(theta ** (-i / k), factor, low, high, original)
        cos = torch.tensor([math.cos(omega * p) for p in positions])
        sin = torch.tensor([math.sin(omega * p) for p in positions])
        firsts.append(x[..., i] * cos - x[..., k + i] * sin)
        seconds.append(x[..., k + i] * cos + x[..., i] * sin)
    return torch.stack(firsts + seconds, dim=-1)


_LLAMA3 = {"theta": 10000.0, "factor": 8.0, "low_freq": 1.0, "high_freq": 4.0, "original": 64}
_DEFAULT = {"theta": 500.0, "factor": 1.0, "low_freq": 1.0, "high_freq": 4.0, "original": 8192}

# Tyr/LM.lean
LM_ORACLES = {
    "rms_norm_gain3": ([([2, 3, 4], "f32"), ([4], "f32")], {"eps": 1e-2}, [2, 3, 4],
                       lambda x, w: torch.stack([x[..., i] * w[i] for i in range(4)], -1)
                       / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-2)),
    # frequencies 1, 0.1, 0.01, 0.001 against the original context 64: one kept, one
    # blended, two divided by the factor
    "rope": ([([1, 2, 5, 8], "f32")], _LLAMA3, [1, 2, 5, 8],
             lambda x: _rope(x, range(5), 10000.0, 8.0, 1.0, 4.0, 64)),
    "rope_at": ([([1, 2, 2, 6], "f32"), ([2], "i64", 16)], _DEFAULT, [1, 2, 2, 6],
                lambda x, pos: _rope(x, pos.tolist(), 500.0)),
    "conv1d3": ([([2, 3, 4], "f32"), ([4, 5], "f32"), ([5], "f32")], {}, [2, 3, 5],
                lambda x, w, b: (x[..., :, None] * w).sum(-2) + b),
    # 2 queries over 5 keys of another sequence
    "cross_attention": ([([1, 2, 2, 3], "f32"), ([1, 2, 5, 3], "f32"), ([1, 2, 5, 3], "f32")],
                        {}, [1, 2, 2, 3], _bidirectional),
}


def _padded_causal(q, k, v, keep, w=None):
    # query i of sequence s sees j <= i (and i - j <= w) where keep[s, j]; kv head j // r; a
    # query that sees nothing is zeros
    t = q.shape[2]
    w = t if w is None else w
    visible = torch.tensor([[[i - w <= j <= i and bool(keep[s, j])
                              for j in range(t)] for i in range(t)] for s in range(q.shape[0])])
    r = q.shape[1] // k.shape[1]
    k = torch.stack([k[:, j // r] for j in range(q.shape[1])], dim=1)
    v = torch.stack([v[:, j // r] for j in range(q.shape[1])], dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~visible[:, None], float("-inf")), dim=-1)
    return torch.where(visible[:, None].any(-1, keepdim=True), weights, 0.0) @ v


LM_ORACLES["padded_causal_attention"] = (
    [([2, 4, 5, 3], "f32"), ([2, 2, 5, 3], "f32"), ([2, 2, 5, 3], "f32"), ([2, 5], "i64", 2)],
    {}, [2, 4, 5, 3], _padded_causal)
# 5 positions, a window of 2
LM_ORACLES["padded_window_attention"] = (
    [([2, 4, 5, 3], "f32"), ([2, 2, 5, 3], "f32"), ([2, 2, 5, 3], "f32"), ([2, 5], "i64", 2)],
    {"w": 2}, [2, 4, 5, 3], lambda q, k, v, keep: _padded_causal(q, k, v, keep, 2))
ORACLES.update(LM_ORACLES)
ORACLE_IMPLICIT.update({"padded_window_attention": {"b": 2, "h": 4, "g": 2, "t": 5, "d": 3,
                                                    "n": 8},
                        "rope": {"b": 1, "h": 2, "t": 5, "k": 4, "n": 8},
                        "rope_at": {"b": 1, "h": 2, "t": 2, "k": 3, "n": 16}})


def _probs(z):
    # softmax over the experts, written out
    e = torch.exp(z - z.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def _top_k(z, k):
    # per position, the experts sorted by probability, the first k
    p = _probs(z.detach())
    return torch.tensor([[sorted(range(z.shape[-1]), key=lambda j: -float(p[i, s, j]))[:k]
                          for s in range(z.shape[1])] for i in range(z.shape[0])])


def _picked(z, ids, renorm):
    p = _probs(z)
    w = torch.stack([torch.stack([torch.stack([p[i, s, int(j)] for j in ids[i, s]])
                                  for s in range(z.shape[1])]) for i in range(z.shape[0])])
    return w / w.sum(-1, keepdim=True) if renorm else w


def _expert_add(acc, x, ids, w, gate, up, down):
    # position by position, slot by slot: the expert where the id is 0
    rows = []
    for i in range(x.shape[0]):
        for s in range(x.shape[1]):
            y = acc[i, s]
            for j in range(ids.shape[-1]):
                if int(ids[i, s, j]) == 0:
                    g, u = gate @ x[i, s], up @ x[i, s]
                    y = y + w[i, s, j] * (down @ (g / (1 + torch.exp(-g)) * u))
            rows.append(y)
    return torch.stack(rows).reshape(acc.shape)


def _router_load(load, z, ids):
    n, e = z.shape[0] * z.shape[1], z.shape[-1]
    counts = torch.tensor([sum(float(int(i) == j) for i in ids.reshape(-1)) for j in range(e)])
    return load + torch.stack([counts / n, _probs(z).reshape(n, e).sum(0) / n])


def _balance(load, layers):
    e = load.shape[-1]
    return e * sum(load[0, j] / layers * (load[1, j] / layers) for j in range(e))


_IDS = [[[0, 2], [1, 0], [2, 1]], [[1, 2], [0, 1], [2, 0]]]  # distinct per position, as top-k

# Tyr/MoE.lean; an output (shape, "i64", bound) is an index tensor, compared exactly
MOE_ORACLES = {
    "router_top_k": ([([2, 3, 5], "f32")], {"k": 2}, ([2, 3, 2], "i64", 5), lambda z: _top_k(z, 2)),
    "router_weights": ([([2, 3, 4], "f32"), ([2, 3, 2], "i64", 4)], {"renorm": 1}, [2, 3, 2],
                       lambda z, ids: _picked(z, ids, True)),
    "expert_add": ([([2, 3, 4], "f32"), ([2, 3, 4], "f32"), ([2, 3, 2], "i64", 3),
                    ([2, 3, 2], "f32"), ([5, 4], "f32"), ([5, 4], "f32"), ([4, 5], "f32")], {},
                   [2, 3, 4], _expert_add),
    "rotate_ids": ([([2, 3, 2], "i64", 3)], {}, ([2, 3, 2], "i64", 3),
                   lambda ids: torch.tensor([[[(int(j) + 2) % 3 for j in s] for s in r]
                                             for r in ids])),
    "no_load": ([([2, 3, 4], "f32")], {"e": 5}, [2, 5], lambda x: torch.zeros(2, 5)),
    "router_load": ([([2, 4], "f32"), ([2, 3, 4], "f32"), ([2, 3, 2], "i64", 4)], {}, [2, 4],
                    _router_load),
    "balance_loss": ([([2, 4], "f32")], {"layers": 3}, [], lambda load: _balance(load, 3)),
}
# the ids of each op's index input: distinct at every position, as a router's
MOE_INTS = {op: _IDS for op in ("router_weights", "expert_add", "rotate_ids", "router_load")}
ORACLES.update(MOE_ORACLES)

# Tyr/Conv.lean (tests/conv_oracles.py)
from conv_oracles import CONV_IMPLICIT, CONV_ORACLES  # noqa: E402

ORACLES.update(CONV_ORACLES)
ORACLE_IMPLICIT.update(CONV_IMPLICIT)
