"""The C kernel for exact GELU on CPU (pytyr/kernels/gelu_cpu.py, native.py): its values and
gradients against torch in float64, its contract, its build, and its use by the executor."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.exec import build_module
from pytyr.exec import kernels as routing
from pytyr.kernels import gelu_cpu, native
from pytyr.pipeline import graph_from_lean

needs_kernel = pytest.mark.skipif(native.unavailable() is not None,
                                  reason=f"no CPU kernels here: {native.unavailable()}")


@pytest.fixture
def fresh_native(monkeypatch, tmp_path):
    """A process that has not built or loaded the kernels yet, with its own cache."""
    monkeypatch.setenv("TYR_CACHE_DIR", str(tmp_path / "cache"))
    native.forget()
    yield tmp_path / "cache"
    monkeypatch.undo()
    native.forget()


def _exact(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GELU and its derivative in float64 by torch's autograd."""
    x64 = x.detach().double().requires_grad_()
    y = F.gelu(x64)
    (d,) = torch.autograd.grad(y.sum(), x64)
    return y.detach(), d


def _kernel(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.detach().clone().requires_grad_()
    y = gelu_cpu.gelu(x)
    y.sum().backward()
    return y.detach(), x.grad


floats = st.floats(-1e4, 1e4, width=32, allow_nan=False)


@needs_kernel
@settings(max_examples=60, deadline=None)
@given(st.lists(floats, min_size=0, max_size=70), st.floats(0.01, 30))
def test_values_and_gradients_are_torchs_within_fp32_rounding(xs, scale):
    # any length (8-lane blocks and every tail), any magnitude; under the grain: any threads
    x = torch.tensor(xs, dtype=torch.float32) * scale
    assert gelu_cpu.runs_here(x)
    y, d = _kernel(x)
    ref_y, ref_d = _exact(x)
    torch.testing.assert_close(y.double(), ref_y, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(d.double(), ref_d, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(y, F.gelu(x), rtol=1e-6, atol=1e-6)  # and torch's f32 op


@needs_kernel
def test_a_large_activation_matches_torch(one_thread):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 64, 512, generator=g) * 3
    y, d = _kernel(x)
    ref_y, ref_d = _exact(x)
    assert (y.double() - ref_y).abs().max() < 1e-6
    assert (d.double() - ref_d).abs().max() < 1e-6
    # the tail goes through the same code as the blocks: a value does not depend on position
    assert torch.equal(gelu_cpu.gelu(x.flatten()[5:]), y.flatten()[5:])


@needs_kernel
def test_special_values_come_out_as_torchs(one_thread):
    # torch in float64: its float32 vector code differs with the CPU (on AVX-512 it gives
    # gelu(inf) = NaN and gelu(3e38) = inf; its scalar code and AVX2 give inf and 3e38).
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([nan, inf, -inf, 0.0, -0.0, 1e-38, 1e-45, 40.0, -40.0, 3e38, -3e38])
    y, d = _kernel(x)
    x_ref = x.double().requires_grad_()
    y_ref = F.gelu(x_ref)
    y_ref.sum().backward()
    torch.testing.assert_close(y, y_ref.detach().float(), equal_nan=True, rtol=1e-6, atol=1e-30)
    torch.testing.assert_close(d, x_ref.grad.float(), equal_nan=True, rtol=1e-6, atol=1e-30)


@needs_kernel
def test_strided_input_and_no_grad_give_the_same_values(one_thread):
    x = torch.randn(40, 24).t()  # not contiguous
    assert not x.is_contiguous()
    y, _ = _kernel(x)
    assert torch.equal(y, gelu_cpu.gelu(x.contiguous()))
    with torch.no_grad():
        assert torch.equal(gelu_cpu.gelu(x), y)
    assert torch.equal(_kernel(torch.empty(0, 3))[0], torch.empty(0, 3))


@needs_kernel
def test_the_contract_sends_everything_else_to_torch(one_thread):
    x = torch.randn(300)
    assert gelu_cpu.runs_here(x)
    for other in (x.double(), x.bfloat16(), x.half()):
        assert not gelu_cpu.runs_here(other)
        assert torch.equal(gelu_cpu.gelu(other), F.gelu(other))  # bit for bit: torch's op
    torch.set_num_threads(2)  # torch splits a large tensor across threads: its op is used
    big = torch.randn(gelu_cpu.GRAIN)
    assert not gelu_cpu.runs_here(big) and torch.equal(gelu_cpu.gelu(big), F.gelu(big))
    assert gelu_cpu.runs_here(x)  # a small one stays on one thread either way


def test_a_missing_compiler_is_one_reason_and_torch_runs(fresh_native, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    reason = native.unavailable()
    if native._cpu_refusal():
        assert reason == native._cpu_refusal()
        return
    assert reason == "no C compiler: '/nonexistent/cc' is not on PATH (set $CC)"
    assert not gelu_cpu.runs_here(torch.randn(4))
    x = torch.randn(9)
    assert torch.equal(gelu_cpu.gelu(x), F.gelu(x))


@pytest.mark.skipif(native._cpu_refusal() is not None, reason="not an AVX2 x86-64 CPU")
def test_a_failing_compiler_is_named_with_its_first_line(fresh_native, monkeypatch, tmp_path):
    cc = tmp_path / "badcc"
    cc.write_text("#!/bin/sh\necho 'gelu.c:1: error: no AVX here' >&2\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    assert native.unavailable() == (f"the C compiler {str(cc)!r} failed on gelu.c, "
                                    f"attention.c: gelu.c:1: error: no AVX here")
    assert not list(fresh_native.glob("*"))  # nothing half-written is left


@pytest.mark.skipif(native._cpu_refusal() is not None, reason="not an AVX2 x86-64 CPU")
def test_a_cache_that_is_a_file_is_named(fresh_native, monkeypatch, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    monkeypatch.setenv("TYR_CACHE_DIR", str(blocker))
    assert native.unavailable().startswith(f"cannot write the kernel cache {blocker}")


@needs_kernel
def test_one_build_is_kept_and_a_damaged_one_is_rebuilt(fresh_native):
    assert native.unavailable() is None
    (lib,) = fresh_native.glob("tyr-native-*.so")
    assert lib == native.library_path()
    stamp = lib.stat().st_mtime_ns
    native.forget()  # another process: loads the kept build
    assert native.unavailable() is None and lib.stat().st_mtime_ns == stamp
    lib.unlink()  # (a new inode: this process keeps its mapping of the old one)
    lib.write_bytes(b"not a shared library")
    # a new process (glibc would hand this one its loaded copy by path) rebuilds it
    code = ("from pytyr.kernels import native, gelu_cpu; import torch; "
            "print(native.unavailable(), gelu_cpu.gelu(torch.zeros(3)).tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TYR_CACHE_DIR": str(fresh_native)}, check=True)
    assert out.stdout.strip() == "None [0.0, 0.0, 0.0]"
    assert lib.stat().st_size > 1000


@needs_kernel
def test_a_changed_source_gets_its_own_build(fresh_native, monkeypatch, tmp_path):
    before = native.library_path()
    copy = tmp_path / "vec.h"
    copy.write_text(native.HEADERS[0].read_text() + "\n/* changed */\n")
    monkeypatch.setattr(native, "HEADERS", (copy,))
    assert native.library_path() != before


@needs_kernel
def test_the_executor_routes_gelu_on_cpu_and_trains_like_torch(one_thread):
    values = {"c": {"vocab": 11, "block": 8, "n_layer": 2, "n_head": 2, "head_dim": 16,
                    "dropout": 0.0}, "b": 3, "t": 8}
    graph = graph_from_lean("examples/gpt/GPT.lean", "gpt", values)
    off, auto = (build_module(graph, seed=1, kernels=k) for k in ("off", "auto"))
    assert "kernels_gelu" in auto._fx.code and "kernels_gelu" not in off._fx.code
    choice = next(c for c in routing.explain(graph, mode="auto", device="cpu")
                  if c.node.op == "gelu")
    assert "kernel gelu_cpu (on float32 CPU tensors" in choice.line()
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randint(0, 11, (3, 8), generator=g) for _ in range(2))
    losses = [m(x, y)[1] for m in (off, auto)]
    for loss in losses:
        loss.backward()
    assert losses[0].item() == pytest.approx(losses[1].item(), rel=1e-6)
    for (k, a), (_, b) in zip(off.named_parameters(), auto.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=k)


def test_a_module_built_without_the_kernel_says_why(fresh_native, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    values = {"c": {"vocab": 11, "block": 8, "n_layer": 1, "n_head": 2, "head_dim": 16,
                    "dropout": 0.0}, "b": 2, "t": 8}
    graph = graph_from_lean("examples/gpt/GPT.lean", "gpt", values)
    (choice,) = [c for c in routing.explain(graph, mode="auto", device="cpu")
                 if c.node.op == "gelu"]
    assert choice.kernel is None and ("C compiler" in choice.reason or "CPU" in choice.reason)
    module = build_module(graph, kernels="auto")
    assert "kernels_gelu" not in module._fx.code
    assert torch.isfinite(module(torch.zeros(2, 8, dtype=torch.long),
                                 torch.zeros(2, 8, dtype=torch.long))[1])


def test_the_source_is_in_the_package():
    for f in (*native.SOURCES, *native.HEADERS):
        assert f.is_file() and f.parent == Path(native.__file__).parent / "csrc"
    text = "".join(f.read_text() for f in native.SOURCES)
    for fn in ("tyr_gelu_erf_f32", "tyr_attention_causal_fwd_f32", "tyr_attention_causal_bwd_f32"):
        assert fn in text and fn in native.CDEF
    assert os.path.basename(native.library_path()).startswith("tyr-native-")
