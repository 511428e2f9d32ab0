"""Lowering graphs to PyTorch: every op against a hand-written computation, forward and
backward; parameter naming and initialisation; errors at the call boundary and at run time."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conv_oracles import CONV_POSITIVE
from graphs import GraphBuilder, mlp
from op_oracles import MOE_INTS, ORACLE_IMPLICIT, ORACLES
from pytyr.errors import ExecError
from pytyr.exec.lower import TyrModule, build_module
from pytyr.exec.ops import OPS
from pytyr.ir.validate import load_graph

TOL = dict(rtol=1e-6, atol=1e-6)


def _ln(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def _causal(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    t = q.shape[-2]
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _ce(logits, t):
    picked = logits[torch.arange(logits.shape[0]), t]
    return (torch.logsumexp(logits, dim=-1) - picked).mean()


def _rms(x, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def _rotary(x, base, positions=None):
    # hand-written rotate-half: pair (x[..., i], x[..., k + i]) at position p is turned by
    # -p·base^(-i/k): y_i = x_i cos + x_{k+i} sin, y_{k+i} = x_{k+i} cos - x_i sin
    t, k = x.shape[-2], x.shape[-1] // 2
    positions = range(t) if positions is None else [int(p) for p in positions]
    angle = [[p * base ** (-i / k) for i in range(k)] for p in positions]
    cos = torch.tensor([[math.cos(a) for a in row] for row in angle])
    sin = torch.tensor([[math.sin(a) for a in row] for row in angle])
    first = [x[..., i] * cos[:, i] + x[..., k + i] * sin[:, i] for i in range(k)]
    second = [x[..., k + i] * cos[:, i] - x[..., i] * sin[:, i] for i in range(k)]
    return torch.stack(first + second, dim=-1)


def _attend(q, k, v, keep=None):
    # softmax over the keys written out; padding keys (keep == 0) get no weight and a query
    # with no real key gets zeros
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    real = torch.ones_like(scores) if keep is None else (keep != 0)[:, None, None, :].to(q.dtype)
    e = torch.exp(scores - scores.max(-1, keepdim=True).values) * real
    return e / e.sum(-1, keepdim=True).clamp_min(1e-30) @ v


def _weighted_ce(z, t, w):
    flat, tf = z.reshape(-1, z.shape[-1]), t.reshape(-1)
    picked = flat[torch.arange(flat.shape[0]), tf]
    return ((torch.logsumexp(flat, dim=-1) - picked) * w.reshape(-1)).sum() / flat.shape[0]


def _attend_gqa(q, k, v, visible):
    # softmax(q kᵀ / √d) v over the keys `visible[i, j]`; kv head j // r serves query head j
    r = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1) @ v


def _cache_write(cache, x, pos):
    rows = [x[:, :, list(pos).index(j)] if j in pos.tolist() else cache[:, :, j]
            for j in range(cache.shape[2])]
    return torch.stack(rows, dim=2)


# op: (inputs as (shape, dtype[, bound of an i64 input]), attrs, output shape, reference written
# without the op)
CASES = {
    "linear": ([([4, 3], "f32"), ([5, 3], "f32")], {}, [4, 5], lambda x, w: x @ w.t()),
    "linear_bias": ([([4, 3], "f32"), ([5, 3], "f32"), ([5], "f32")], {}, [4, 5],
                    lambda x, w, b: x @ w.t() + b),
    "matmul": ([([4, 3], "f32"), ([3, 2], "f32")], {}, [4, 2],
               lambda x, y: (x[:, :, None] * y[None, :, :]).sum(1)),
    "bmm": ([([2, 4, 3], "f32"), ([2, 3, 5], "f32")], {}, [2, 4, 5],
            lambda x, y: torch.stack([x[i] @ y[i] for i in range(2)])),
    "add": ([([3, 4], "f32"), ([3, 4], "f32")], {}, [3, 4], lambda x, y: x + y),
    "sub": ([([3, 4], "f32"), ([3, 4], "f32")], {}, [3, 4], lambda x, y: x - y),
    "mul": ([([3, 4], "f32"), ([3, 4], "f32")], {}, [3, 4], lambda x, y: x * y),
    "scale": ([([3, 4], "f32")], {"alpha": 2.5}, [3, 4], lambda x: 2.5 * x),
    "relu": ([([3, 4], "f32")], {}, [3, 4], lambda x: torch.where(x > 0, x, torch.zeros_like(x))),
    "gelu": ([([3, 4], "f32")], {}, [3, 4],
             lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))),
    "tanh": ([([3, 4], "f32")], {}, [3, 4],
             lambda x: (torch.exp(2 * x) - 1) / (torch.exp(2 * x) + 1)),
    "softmax": ([([3, 4], "f32")], {}, [3, 4],
                lambda x: torch.exp(x - x.max(-1, keepdim=True).values)
                / torch.exp(x - x.max(-1, keepdim=True).values).sum(-1, keepdim=True)),
    "sum": ([([3, 4], "f32")], {}, [], lambda x: x.flatten().sum()),
    "mean": ([([3, 4], "f32")], {}, [], lambda x: x.flatten().sum() / 12),
    "reshape": ([([3, 4], "f32")], {"target": [2, 6]}, [2, 6], lambda x: x.flatten().view(2, 6)),
    "transpose": ([([3, 4], "f32")], {}, [4, 3], lambda x: x.t()),
    "transpose3": ([([2, 3, 4], "f32")], {}, [2, 4, 3], lambda x: x.permute(0, 2, 1)),
    "embedding": ([([5], "i64", 7), ([7, 3], "f32")], {}, [5, 3], lambda i, t: t[i]),
    "layer_norm": ([([4, 6], "f32"), ([6], "f32"), ([6], "f32")], {"eps": 1e-5}, [4, 6],
                   lambda x, w, b: _ln(x, w, b, 1e-5)),
    "cross_entropy": ([([4, 5], "f32"), ([4], "i64", 5)], {}, [], _ce),
    "linear3": ([([2, 4, 3], "f32"), ([5, 3], "f32")], {}, [2, 4, 5], lambda x, w: x @ w.t()),
    "linear_bias3": ([([2, 4, 3], "f32"), ([5, 3], "f32"), ([5], "f32")], {}, [2, 4, 5],
                     lambda x, w, b: x @ w.t() + b),
    "add_rows": ([([2, 3, 4], "f32"), ([3, 4], "f32")], {}, [2, 3, 4],
                 lambda x, y: x + y.expand(2, 3, 4)),
    "rows": ([([5, 3], "f32")], {"t": 2}, [2, 3], lambda x: x[:2]),
    "third": ([([2, 3, 6], "f32")], {"i": 1}, [2, 3, 2], lambda x: x[..., 2:4]),
    "dropout": ([([3, 4], "f32")], {"p": 0.5}, [3, 4], lambda x: x * 1.0),  # identity in eval
    "embedding2": ([([2, 3], "i64", 7), ([7, 4], "f32")], {}, [2, 3, 4], lambda i, t: t[i]),
    "layer_norm3": ([([2, 3, 6], "f32"), ([6], "f32"), ([6], "f32")], {"eps": 1e-5}, [2, 3, 6],
                    lambda x, w, b: _ln(x, w, b, 1e-5)),
    "split_heads": ([([2, 3, 6], "f32")], {}, [2, 2, 3, 3],
                    lambda x: torch.stack([x[..., :3], x[..., 3:]], dim=1)),
    "merge_heads": ([([2, 2, 3, 3], "f32")], {}, [2, 3, 6],
                    lambda x: torch.cat([x[:, 0], x[:, 1]], dim=-1)),
    "causal_attention": ([([1, 2, 4, 3], "f32")] * 3, {"p": 0.0}, [1, 2, 4, 3], _causal),
    "bidirectional_attention": ([([2, 2, 4, 3], "f32")] * 3, {"p": 0.0}, [2, 2, 4, 3], _attend),
    "masked_mean_seq3": ([([2, 4, 3], "f32"), ([2, 4], "i64", 2)], {}, [2, 3],
                         lambda x, k: torch.stack([
                             sum(x[i, j] for j in range(4) if k[i, j]) / max(int(k[i].sum()), 1)
                             if k[i].any() else torch.zeros(3) for i in range(2)])),
    "padded_attention": ([([2, 2, 4, 3], "f32")] * 3 + [([2, 4], "i64", 2)], {"p": 0.0},
                         [2, 2, 4, 3], _attend),
    "weighted_cross_entropy2": ([([2, 3, 5], "f32"), ([2, 3], "i64", 5), ([2, 3], "f32")], {}, [],
                                _weighted_ce),
    "cross_entropy2": ([([2, 3, 5], "f32"), ([2, 3], "i64", 5)], {}, [],
                       lambda z, t: _ce(z.reshape(6, 5), t.reshape(6))),
    "relu2": ([([3, 4], "f32")], {}, [3, 4], lambda x: torch.where(x > 0, x * x, torch.zeros_like(x))),
    "softcap": ([([3, 4], "f32")], {"cap": 0.5}, [3, 4],
                lambda x: 0.5 * (torch.exp(4 * x) - 1) / (torch.exp(4 * x) + 1)),
    "rms_norm3": ([([2, 3, 6], "f32")], {"eps": 1e-6}, [2, 3, 6], lambda x: _rms(x, 1e-6)),
    "rms_norm4": ([([2, 2, 3, 4], "f32")], {"eps": 1e-2}, [2, 2, 3, 4], lambda x: _rms(x, 1e-2)),
    "rotary": ([([2, 2, 5, 6], "f32")], {"base": 100.0}, [2, 2, 5, 6], lambda x: _rotary(x, 100.0)),
    "gqa_attention": ([([1, 4, 3, 2], "f32")] + [([1, 2, 3, 2], "f32")] * 2, {}, [1, 4, 3, 2],
                      lambda q, k, v: _attend_gqa(q, k, v, torch.ones(3, 3, dtype=torch.bool).tril())),
    "rotary_at": ([([2, 2, 3, 6], "f32"), ([3], "i64", 8)], {"base": 100.0}, [2, 2, 3, 6],
                  lambda x, pos: _rotary(x, 100.0, pos)),
    "cache_write": ([([1, 2, 4, 3], "f32"), ([1, 2, 2, 3], "f32"), ([2], "i64", 4)], {},
                    [1, 2, 4, 3], _cache_write),
    "cached_attention": ([([1, 4, 2, 3], "f32")] + [([1, 2, 5, 3], "f32")] * 2 + [([2], "i64", 5)],
                         {}, [1, 4, 2, 3], lambda q, k, v, pos: _attend_gqa(
                             q, k, v, torch.arange(5)[None, :] <= pos[:, None])),
    "stack_head": ([([3, 1, 2, 4, 2], "f32")], {}, [1, 2, 4, 2], lambda s: s[0]),
    "stack_push": ([([3, 1, 2, 2, 2], "f32"), ([1, 2, 2, 2], "f32")], {}, [3, 1, 2, 2, 2],
                   lambda s, x: torch.stack([s[1], s[2], x])),
}
# Implicit arguments the validator cannot invert from closed shapes (`h * d`, `3 * d`).
IMPLICIT = {"split_heads": {"b": 2, "t": 3, "h": 2, "d": 3}, "merge_heads": {"b": 2, "h": 2, "t": 3, "d": 3},
            "third": {"b": 2, "t": 3, "d": 2}, "rotary": {"b": 2, "h": 2, "t": 5, "k": 3, "n": 8},
            "rotary_at": {"b": 2, "h": 2, "t": 3, "k": 3}}
CASES.update(ORACLES)  # Tyr/Shape.lean, Tyr/DiT.lean
IMPLICIT.update(ORACLE_IMPLICIT)
# Integer inputs with a meaning beyond their range: cache positions must be distinct.
INTS = {"cache_write": [3, 1], "cached_attention": [1, 4], "cached_window_attention": [3, 6],
        "rope_at": [11, 4], "padded_causal_attention": [[0, 0, 1, 1, 1], [1, 1, 1, 0, 1]],
        "padded_window_attention": [[0, 0, 1, 1, 1], [1, 1, 1, 0, 1]]}
INTS.update(MOE_INTS)  # a router's ids: distinct at every position


def test_cases_cover_the_op_table():
    assert set(CASES) == set(OPS)


@pytest.mark.parametrize("op", sorted(CASES))
def test_op_forward_and_backward(op, signatures):
    specs, attrs, out_spec, reference = CASES[op]
    # the output's shape, or (shape, "i64", bound) for an index tensor (an op of `primI`)
    out_shape, out_dtype, *out_bound = out_spec if isinstance(out_spec, tuple) else (out_spec,
                                                                                    "f32")
    g = GraphBuilder(op)
    names = [g.input(f"a{k}", *spec) for k, spec in enumerate(specs)]
    g.output("out", g.node(op, names, out_shape, out_dtype, implicit=IMPLICIT.get(op),
                           bound=out_bound[0] if out_bound else None, **attrs))
    module = build_module(load_graph(g.build(), signatures)).eval()

    gen = torch.Generator().manual_seed(0)
    args = []
    for shape, dtype, *bound in specs:
        if dtype == "i64":
            fixed, high = INTS.get(op), min(4, *bound)
            args.append(torch.tensor(fixed) if fixed
                        else torch.randint(0, high, shape, generator=gen))
        else:
            x = torch.randn(shape, generator=gen) * 0.7
            if len(args) in CONV_POSITIVE.get(op, ()):  # a variance
                x = x.abs() + 0.1
            args.append(x.requires_grad_())
    (out,) = module(*args)
    expected = reference(*args)
    assert out.shape == torch.Size(out_shape)
    assert out.dtype == (torch.float32 if out_dtype == "f32" else torch.int64)
    torch.testing.assert_close(out, expected, **TOL)
    if not out.requires_grad:  # ids, or a constant: no gradient to compare
        assert not expected.requires_grad
        return

    float_args = [a for a in args if a.is_floating_point()]
    cotangent = torch.randn(out_shape, generator=gen)
    got = torch.autograd.grad((out * cotangent).sum(), float_args)
    want = torch.autograd.grad((expected * cotangent).sum(), float_args)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOL)


def test_rotary_is_relative_and_norm_preserving(signatures):
    # q·k after rotary depends only on the distance of the positions; position 0 is untouched
    g = GraphBuilder("rope")
    x = g.input("x", [1, 1, 6, 8])
    g.output("y", g.node("rotary", [x], [1, 1, 6, 8], implicit={"b": 1, "h": 1, "t": 6, "k": 4, "n": 6},
                         base=10000.0))
    module = build_module(load_graph(g.build(), signatures))
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(8, generator=gen), torch.randn(8, generator=gen)
    (rq,) = module(q.expand(1, 1, 6, 8).contiguous())
    (rk,) = module(k.expand(1, 1, 6, 8).contiguous())
    rq, rk = rq[0, 0], rk[0, 0]
    torch.testing.assert_close(rq[0], q, rtol=0, atol=0)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm().expand(6), rtol=1e-5, atol=1e-5)
    for d in range(3):
        scores = torch.stack([rq[p + d] @ rk[p] for p in range(6 - d)])
        torch.testing.assert_close(scores, scores[0].expand_as(scores), rtol=1e-5, atol=1e-5)


def _param_graph(signatures, paths, init=None):
    g = GraphBuilder()
    x = g.input("x", [2, 3])
    for p in paths:
        g.param(p, [3, 3], init)
    h = x
    for p in paths:
        h = g.node("linear", [h, p], [2, 3])
    g.output("h", h)
    return load_graph(g.build(), signatures)


def test_state_dict_keys_are_the_paths(signatures):
    paths = ["blocks.0.attn.w_q", "blocks.0.attn.w_k", "blocks.1.attn.w_q",
             "blocks.1.attn.w_k", "head.to", "head.forward", "eval", "forward", "_slots", "_fx", "ir"]
    module = build_module(_param_graph(signatures, paths))
    assert isinstance(module, TyrModule)
    # torch lists a module's own parameters before its children's: compare as sets
    assert sorted(module.state_dict()) == sorted(paths)
    assert sorted(n for n, _ in module.named_parameters()) == sorted(paths)
    # the method names used as segments didn't replace the methods
    assert callable(module.eval) and module.train() is module


def test_gradients_reach_parameters_and_load_state_dict(signatures):
    graph = load_graph(mlp(6), signatures)
    module = build_module(graph, seed=1)
    x, y = torch.randn(6, 2), torch.tensor([0, 1, 2, 0, 1, 2])
    _, loss = module(x, y)
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for n, p in module.named_parameters()
               if n.endswith(".w"))
    other = build_module(graph, seed=2)
    assert not torch.equal(other(x, y)[1], loss)
    other.load_state_dict(module.state_dict())
    torch.testing.assert_close(other(x, y)[1], loss, rtol=0, atol=0)
    # assign=True swaps the Parameter objects; forward must follow them
    fresh = {k: torch.nn.Parameter(torch.zeros_like(v)) for k, v in module.state_dict().items()}
    other.load_state_dict(fresh, assign=True)
    torch.testing.assert_close(other(x, y)[1], torch.tensor(math.log(3)))


def test_reserved_segment_rejected(signatures):
    graph = _param_graph(signatures, ["block.training"])
    with pytest.raises(ExecError, match="'block.training'.*segment 'training' is reserved"):
        build_module(graph)


def test_init_is_seeded_and_deterministic(signatures):
    graph = _param_graph(signatures, ["a", "b"])
    s1 = build_module(graph, seed=3).state_dict()
    s2 = build_module(graph, seed=3).state_dict()
    s3 = build_module(graph, seed=4).state_dict()
    for k in s1:
        assert torch.equal(s1[k], s2[k])
        assert not torch.equal(s1[k], s3[k])
    assert not torch.equal(s1["a"], s1["b"])
    # a parameter's value depends only on (seed, path), not on the other parameters
    alone = build_module(_param_graph(signatures, ["b"]), seed=3).state_dict()
    assert torch.equal(alone["b"], s1["b"])


@pytest.mark.parametrize("init", [{"kind": "zeros"}, {"kind": "ones"}])
def test_constant_inits_exact(signatures, init):
    value = 0.0 if init["kind"] == "zeros" else 1.0
    module = build_module(_param_graph(signatures, ["w"], init))
    assert torch.equal(module.state_dict()["w"], torch.full((3, 3), value))


def test_random_inits_match_their_spec(signatures):
    g = GraphBuilder()
    g.param("n", [200, 500], {"kind": "normal", "std": 0.3})
    g.param("u", [200, 500], {"kind": "uniform", "bound": 0.5})
    g.output("n", "n")
    g.output("u", "u")
    state = build_module(load_graph(g.build(), signatures), seed=0).state_dict()
    n, u = state["n"], state["u"]
    assert abs(n.mean().item()) < 0.005 and abs(n.std().item() - 0.3) < 0.005
    assert u.min() >= -0.5 and u.max() <= 0.5
    assert abs(u.mean().item()) < 0.005 and abs(u.std().item() - 0.5 / math.sqrt(3)) < 0.005


def test_interval_fill_and_ramp_inits(signatures):
    g = GraphBuilder()
    g.param("i", [200, 500], {"kind": "interval", "lo": 0.0, "hi": 0.02})
    g.param("f", [2, 3], {"kind": "fill", "value": -0.25})
    g.param("r", [6], {"kind": "ramp", "first": 1.15, "last": 1.05})
    g.param("one", [1], {"kind": "ramp", "first": 0.2, "last": 0.05})
    for name in ("i", "f", "r", "one"):
        g.output(name, name)
    state = build_module(load_graph(g.build(), signatures), seed=0).state_dict()
    i = state["i"]
    assert i.min() >= 0.0 and i.max() <= 0.02 and abs(i.mean().item() - 0.01) < 1e-4
    assert torch.equal(state["f"], torch.full((2, 3), -0.25))
    # nanochat's resid_lambdas: 1.15 - 0.10 · i / (n - 1); a single layer gets the first
    want = torch.tensor([1.15 - 0.10 * k / 5 for k in range(6)], dtype=torch.float64)
    torch.testing.assert_close(state["r"], want.float(), rtol=0, atol=1e-7)
    assert torch.equal(state["one"], torch.tensor([0.2]))


def test_outputs_may_be_inputs_or_params(signatures):
    g = GraphBuilder()
    x = g.input("x", [2])
    g.param("p", [2], {"kind": "ones"})
    g.output("x", x)
    g.output("p", "p")
    out = build_module(load_graph(g.build(), signatures))(torch.tensor([3.0, 4.0]))
    assert isinstance(out, tuple) and len(out) == 2
    assert torch.equal(out[0], torch.tensor([3.0, 4.0])) and torch.equal(out[1], torch.ones(2))


def _embedding_graph(signatures, bound=4):
    g = GraphBuilder("Emb")
    idx = g.input("idx", [3], "i64", bound=bound)
    g.param("table", [bound, 2])
    e = g.node("embedding", [idx, "table"], [3, 2], loc="Emb.lean:7:11")
    g.output("s", g.node("sum", [e], []))
    return load_graph(g.build(), signatures)


def test_runtime_failure_names_node_and_loc(signatures):
    # a graph built in Python without bounds (the validator requires them): the id out of
    # range fails inside the embedding, and the failure is located at its node
    graph = _embedding_graph(signatures)
    graph.inputs[0].bound = None
    module = build_module(graph)
    assert module(torch.tensor([0, 1, 3]))[0].shape == ()
    with pytest.raises(ExecError) as info:
        module(torch.tensor([0, 9, 1]))
    assert str(info.value).startswith("node %0 (embedding at Emb.lean:7:11) failed:")
    assert isinstance(info.value.__cause__, (IndexError, RuntimeError))


@pytest.mark.parametrize("ids,value,at", [([0, 9, 1], 9, [1]), ([-1, 0, 0], -1, [0]),
                                          ([3, 4, 5], 4, [1])])
def test_an_id_outside_its_bound_is_an_input_error(signatures, ids, value, at):
    module = build_module(_embedding_graph(signatures))
    with pytest.raises(ExecError) as info:
        module(torch.tensor(ids))
    assert str(info.value) == (f"input 'idx' : IT #[3] 4 holds {value} at {at}, outside [0, 4), "
                               f"the values its type allows")
    assert info.value.__cause__ is None  # caught at the boundary, before any node ran


@settings(max_examples=60, deadline=None)
@given(bound=st.integers(1, 50), data=st.data())
def test_bound_check_accepts_exactly_the_values_below_the_bound(signatures, bound, data):
    module = _BOUND_MODULES.get(bound) or _BOUND_MODULES.setdefault(
        bound, build_module(_embedding_graph(signatures, bound)))
    ids = data.draw(st.lists(st.integers(-3, bound + 3), min_size=3, max_size=3))
    if all(0 <= i < bound for i in ids):
        module(torch.tensor(ids))
    else:
        with pytest.raises(ExecError, match=r"^input 'idx' : IT #\[3\] \d+ holds -?\d+ at"):
            module(torch.tensor(ids))


_BOUND_MODULES: dict[int, TyrModule] = {}


def test_wrong_inputs_rejected(signatures):
    module = build_module(load_graph(mlp(6), signatures))
    y = torch.zeros(6, dtype=torch.int64)
    with pytest.raises(ExecError, match=r"input 'x' has shape \[5, 2\] but the graph expects \[6, 2\]"):
        module(torch.randn(5, 2), y)
    with pytest.raises(ExecError, match=r"input 'y' has dtype torch.float32 but the graph expects i64"):
        module(torch.randn(6, 2), y.float())
    with pytest.raises(ExecError, match=r"'MLP' takes 2 inputs \(x, y\) but was given 1"):
        module(torch.randn(6, 2))
    with pytest.raises(ExecError, match=r"input 'x' is a list, not a tensor"):
        module([[0.0, 0.0]] * 6, y)


def test_op_without_lowering_rejected(signatures):
    graph = load_graph(mlp(2), signatures)
    graph.nodes[1].op = "swish"  # e.g. an op the Lean library has and this table lacks
    with pytest.raises(ExecError, match=r"node %1 \(swish at MLP.lean:13:5\): op 'swish' has no"):
        build_module(graph)


def test_forward_is_generated_code(signatures):
    module = build_module(load_graph(mlp(2), signatures))
    code = module._fx.code
    assert "relu" in code and "cross_entropy" in code and "linear" in code


@pytest.mark.parametrize("p", [0.0, 0.5])
def test_dropout_of_zero_is_no_call_and_an_output_still(signatures, p):
    # p = 0 is the identity while training too: no dropout call (nor a `p * training` for
    # attention); p > 0 keeps both. The dropped value may still be an output.
    g = GraphBuilder()
    x = g.input("x", [2, 1, 4, 2])
    d = g.node("dropout", [x], [2, 1, 4, 2], p=p)
    a = g.node("causal_attention", [d, d, d], [2, 1, 4, 2], p=p)
    g.output("d", d)
    g.output("a", a)
    module = build_module(load_graph(g.build(), signatures))
    code = module._fx.code
    assert ("dropout(" in code, f"{p} * training" in code) == (p > 0, p > 0)
    xs = torch.randn(2, 1, 4, 2)
    module.train()
    torch.manual_seed(0)
    out_d, out_a = module(xs)
    if p == 0:
        assert torch.equal(out_d, xs)
        torch.testing.assert_close(out_a, _causal(xs, xs, xs), **TOL)
    else:
        assert not torch.equal(out_d, xs)
    module.eval()
    assert torch.equal(module(xs)[0], xs)
