"""The C kernel for causal attention on CPU (pytyr/kernels/attention_cpu.py): values and
gradients against torch's SDPA in float64 over generated shapes and layouts, its contract,
and its use by the executor."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytyr.exec import build_module
from pytyr.exec import kernels as routing
from pytyr.kernels import attention_cpu, native
from pytyr.pipeline import graph_from_lean

pytestmark = pytest.mark.skipif(native.unavailable() is not None,
                                reason=f"no CPU kernels here: {native.unavailable()}")


def _qkv(b, h, t, d, layout, seed=0, scale=1.0):
    """q, k, v as the model makes them: `packed` views of one [b, t, 3·h·d] projection
    (split, then heads), or separate contiguous [b, h, t, d] tensors."""
    g = torch.Generator().manual_seed(seed)
    if layout == "packed":
        qkv = torch.randn(b, t, 3 * h * d, generator=g) * scale
        return [x.view(b, t, h, d).transpose(1, 2) for x in qkv.split(h * d, -1)]
    return [torch.randn(b, h, t, d, generator=g) * scale for _ in range(3)]


def _grads(fn, q, k, v, dy):
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    y = fn(*leaves)
    y.backward(dy)
    return [y.detach()] + [x.grad for x in leaves]


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _sdpa64(q, k, v):
    return _sdpa(q.double(), k.double(), v.double())


# one thread throughout (the fixture's state is the same for every example)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(b=st.integers(1, 3), h=st.integers(1, 3), t=st.sampled_from([16, 32, 48, 64, 80]),
       d=st.sampled_from([16, 32, 48, 64]), layout=st.sampled_from(["packed", "separate"]),
       scale=st.sampled_from([0.1, 1.0, 4.0]), seed=st.integers(0, 2**16))
def test_values_and_gradients_are_sdpas_within_fp32_rounding(one_thread, b, h, t, d, layout,
                                                              scale, seed):
    q, k, v = _qkv(b, h, t, d, layout, seed, scale)
    dy = torch.randn(b, h, t, d, generator=torch.Generator().manual_seed(seed + 1))
    assert attention_cpu.runs_here(q, k, v)
    mine = _grads(attention_cpu.attention, q, k, v, dy)
    exact = _grads(_sdpa64, q, k, v, dy)
    torch_f32 = _grads(_sdpa, q, k, v, dy)
    for name, m, e, f in zip(("y", "dq", "dk", "dv"), mine, exact, torch_f32):
        assert m.shape == e.shape and m.dtype == torch.float32
        # no further from the exact value than torch's own f32 kernel, give or take rounding
        err, ref_err = (m.double() - e).abs().max(), (f.double() - e).abs().max()
        assert err <= 4 * ref_err + 1e-6 * (1 + e.abs().max()), name


def test_the_gpt_shape_matches_sdpa(one_thread):
    q, k, v = _qkv(12, 4, 64, 32, "packed")
    dy = torch.randn(12, 4, 64, 32)
    for m, e in zip(_grads(attention_cpu.attention, q, k, v, dy), _grads(_sdpa64, q, k, v, dy)):
        assert (m.double() - e).abs().max() < 1e-5
    y = attention_cpu.attention(q, k, v)
    # written in the [b, t, h, d] layout the heads come from: merging them is a view
    merged = y.transpose(1, 2).reshape(12, 64, 128)
    assert merged.data_ptr() == y.data_ptr() and merged._base is not None


def test_a_query_sees_only_earlier_keys(one_thread):
    q, k, v = _qkv(1, 1, 32, 16, "separate")
    y = attention_cpu.attention(q, k, v)
    k2, v2 = k.clone(), v.clone()
    k2[..., 20:, :] += 100.0  # change the future of query 19
    v2[..., 20:, :] -= 50.0
    y2 = attention_cpu.attention(q, k2, v2)
    assert torch.equal(y[..., :20, :], y2[..., :20, :])
    assert not torch.equal(y[..., 20:, :], y2[..., 20:, :])
    # the first query attends to the first key alone
    assert torch.allclose(y[..., 0, :], v[..., 0, :], atol=1e-6)


def test_large_scores_do_not_overflow_and_nan_propagates(one_thread):
    q, k, v = _qkv(1, 2, 16, 16, "separate", scale=30.0)  # scores in the thousands
    y = attention_cpu.attention(q, k, v)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.double(), _sdpa64(q, k, v), rtol=1e-4, atol=1e-4)
    q[0, 1, 5, 3] = float("nan")
    y = attention_cpu.attention(q, k, v)
    assert torch.isnan(y[0, 1, 5]).all() and torch.isfinite(y[0, 0]).all()


@pytest.mark.parametrize("change,why", [
    (lambda q: q.double(), "dtype"), (lambda q: q[..., :15, :], "t not a multiple of 16"),
    (lambda q: q[..., :24], "d not a multiple of 16"),
    (lambda q: q.transpose(-1, -2).contiguous().transpose(-1, -2), "last dim strided")])
def test_outside_the_contract_torch_runs(one_thread, change, why):
    q, k, v = (change(x) for x in _qkv(1, 2, 32, 32, "separate"))
    assert not attention_cpu.runs_here(q, k, v), why
    assert torch.equal(attention_cpu.attention(q, k, v), _sdpa(q, k, v))  # torch's own call


def test_the_static_contract_names_the_dimension():
    assert attention_cpu.static_refusal(64, 32) is None
    assert attention_cpu.static_refusal(65, 32) == "t=65 is not a multiple of 16 in 16..256"
    assert attention_cpu.static_refusal(512, 32) == "t=512 is not a multiple of 16 in 16..256"
    assert attention_cpu.static_refusal(64, 8) == "d=8 is not a multiple of 16 in 16..256"


def test_several_threads_on_a_large_problem_use_the_kernel_only_on_torchs_team(monkeypatch):
    q, k, v = _qkv(8, 4, 64, 32, "separate")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert attention_cpu.runs_here(q, k, v) == (native.threaded()
                                                    and native.unavailable() is None)
        monkeypatch.setattr(native, "threaded", lambda: False)  # another OpenMP runtime
        assert not attention_cpu.runs_here(q, k, v)
        torch.set_num_threads(1)
        assert attention_cpu.runs_here(q, k, v) == (native.unavailable() is None)
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(not native.threaded(), reason="torch does not run on GNU OpenMP here")
def test_every_thread_count_gives_the_same_bits():
    q, k, v = (x.requires_grad_() for x in _qkv(6, 4, 64, 32, "packed"))
    dy = torch.randn(6, 4, 64, 32, generator=torch.Generator().manual_seed(3))
    before, got = torch.get_num_threads(), []
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            assert attention_cpu.runs_here(q, k, v)
            y = attention_cpu.attention(q, k, v)
            got.append((y, *torch.autograd.grad(y, (q, k, v), dy)))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for other in got[1:] for a, b in zip(got[0], other))
    assert torch.allclose(got[0][0], _sdpa(q, k, v), atol=1e-5)


def test_the_library_runs_on_torchs_own_openmp_runtime():
    omp = native.torch_openmp()
    if omp is None:
        pytest.skip("torch does not run on GNU OpenMP here")
    assert native.unavailable() is None
    maps = Path("/proc/self/maps").read_text()
    gomp = {line.split()[-1] for line in maps.splitlines() if "libgomp" in line}
    assert gomp == {str(omp)}  # loading the kernels brought no second runtime


def test_a_compiled_graph_has_no_break_for_the_kernel(one_thread):
    q, k, v = _qkv(2, 2, 32, 32, "separate")
    compiled = torch.compile(attention_cpu.attention, backend="aot_eager", fullgraph=True)
    assert torch.allclose(compiled(q, k, v), attention_cpu.attention(q, k, v), atol=1e-5)


def test_importing_the_kernel_does_not_import_dynamo():
    code = ("import sys, pytyr.kernels.attention_cpu, pytyr.exec; "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"  # 1.6 s at every lowering, when it was imported


def test_the_executor_routes_attention_and_keeps_sdpa_for_dropout(one_thread):
    values = {"c": {"vocab": 11, "block": 16, "n_layer": 2, "n_head": 2, "head_dim": 16,
                    "dropout": 0.0}, "b": 3, "t": 16}
    graph = graph_from_lean("examples/gpt/GPT.lean", "gpt", values)
    choices = [c for c in routing.explain(graph, mode="auto", device="cpu")
               if c.node.op == "causal_attention"]
    assert len(choices) == 2 and all(c.kernel == "attention_cpu" for c in choices)
    assert "while dropout is inactive" in choices[0].line()
    off, auto = (build_module(graph, seed=2, kernels=k) for k in ("off", "auto"))
    assert "causal_attention_cpu" in auto._fx.code and "causal_attention_cpu" not in off._fx.code
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randint(0, 11, (3, 16), generator=g) for _ in range(2))
    losses = [m(x, y)[1] for m in (off, auto)]
    for loss in losses:
        loss.backward()
    assert losses[0].item() == pytest.approx(losses[1].item(), rel=1e-6)
    for (k, a), (_, b) in zip(off.named_parameters(), auto.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=k)
    # with dropout active the dispatch is torch's SDPA, random mask and all
    q, k, v = _qkv(1, 2, 16, 16, "separate")
    torch.manual_seed(5)
    routed = routing.causal_attention_cpu(q, k, v, 0.5, True, False)
    torch.manual_seed(5)
    assert torch.equal(routed, F.scaled_dot_product_attention(q, k, v, dropout_p=0.5,
                                                              is_causal=True))
