"""The C kernels' library (pytyr/kernels/native.py): built on first use into a cache kept
between processes, never built or loaded when a model is lowered, and every failure one
reason after which torch's op runs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pytyr.exec import build_module
from pytyr.exec import kernels as routing
from pytyr.kernels import attention_cpu, native
from pytyr.pipeline import graph_from_lean

needs_kernel = pytest.mark.skipif(native.unavailable() is not None,
                                  reason=f"no CPU kernels here: {native.unavailable()}")
avx2 = pytest.mark.skipif(native._cpu_refusal() is not None, reason="not an AVX2 x86-64 CPU")


@pytest.fixture
def fresh_native(monkeypatch, tmp_path):
    """A process that has not built or loaded the kernels yet, with its own cache."""
    monkeypatch.setenv("TYR_CACHE_DIR", str(tmp_path / "cache"))
    native.forget()
    yield tmp_path / "cache"
    monkeypatch.undo()
    native.forget()


def _qkv(b=1, h=2, t=16, d=16):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(b, h, t, d, generator=g) for _ in range(3)]


def _gpt(t=16):
    values = {"c": {"vocab": 11, "block": t, "n_layer": 1, "n_head": 2, "head_dim": 16,
                    "dropout": 0.0}, "b": 2, "t": t}
    return graph_from_lean("examples/gpt/GPT.lean", "gpt", values)


def test_a_missing_compiler_is_one_reason_and_torch_runs(fresh_native, monkeypatch, one_thread):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    reason = native.unavailable()
    if native._cpu_refusal():
        assert reason == native._cpu_refusal()
        return
    assert reason == "no C compiler: '/nonexistent/cc' is not on PATH (set $CC)"
    q, k, v = _qkv()
    assert not attention_cpu.runs_here(q, k, v)
    assert torch.equal(attention_cpu.attention(q, k, v),
                       F.scaled_dot_product_attention(q, k, v, is_causal=True))


@avx2
def test_a_failing_compiler_is_named_with_its_first_line(fresh_native, monkeypatch, tmp_path):
    cc = tmp_path / "badcc"
    cc.write_text("#!/bin/sh\necho 'attention.c:1: error: no AVX here' >&2\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    assert native.static_refusal() is None  # a compiler is there: only a build can tell
    assert native.unavailable() == (f"the C compiler {str(cc)!r} failed on attention.c: "
                                    "attention.c:1: error: no AVX here")
    assert native.static_refusal() == native.unavailable()  # known from now on
    assert not list(fresh_native.glob("*"))  # nothing half-written is left


@avx2
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
    code = ("from pytyr.kernels import native, attention_cpu; import torch; "
            "torch.set_num_threads(1); q = torch.ones(1, 1, 16, 16); "
            "print(native.unavailable(), attention_cpu.attention(q, q, q).sum().item())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TYR_CACHE_DIR": str(fresh_native)}, check=True)
    assert out.stdout.strip() == "None 256.0"
    assert lib.stat().st_size > 1000


@needs_kernel
def test_a_changed_source_gets_its_own_build(fresh_native, monkeypatch, tmp_path):
    before = native.library_path()
    copy = tmp_path / "vec.h"
    copy.write_text(native.HEADERS[0].read_text() + "\n/* changed */\n")
    monkeypatch.setattr(native, "HEADERS", (copy,))
    assert native.library_path() != before


@avx2
def test_lowering_builds_and_loads_nothing_the_first_call_does(fresh_native, one_thread):
    graph = _gpt()
    module = build_module(graph, kernels="auto")
    assert "causal_attention_cpu" in module._fx.code
    assert not fresh_native.exists() and native._loaded is None and native._reason is None
    x = torch.zeros(2, 16, dtype=torch.long)
    with_kernel = module(x, x)[1]
    assert native.unavailable() is None and len(list(fresh_native.glob("*.so"))) == 1
    off = build_module(graph, kernels="off")
    assert with_kernel.item() == pytest.approx(off(x, x)[1].item(), rel=1e-6)


@needs_kernel
def test_a_kept_build_opens_in_milliseconds():
    # a new process, the build kept: what a second run pays, lowering and first call
    code = ("import time, torch; from pytyr.kernels import native; t0 = time.perf_counter(); "
            "assert native.unavailable() is None; print(time.perf_counter() - t0)")
    took = min(float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, check=True).stdout) for _ in range(2))
    assert took < 0.1  # cffi's declarations alone took ~120 ms to parse (250 ms when busy)


def test_a_module_built_without_the_kernel_says_why(fresh_native, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    graph = _gpt()
    (choice,) = [c for c in routing.explain(graph, mode="auto", device="cpu")
                 if c.node.op == "causal_attention"]
    assert choice.kernel is None and ("C compiler" in choice.reason or "CPU" in choice.reason)
    module = build_module(graph, kernels="auto")
    assert "causal_attention_cpu" not in module._fx.code
    x = torch.zeros(2, 16, dtype=torch.long)
    assert torch.isfinite(module(x, x)[1])


def test_a_build_failing_at_the_first_call_runs_torchs_op(fresh_native, monkeypatch, tmp_path,
                                                          one_thread):
    if native._cpu_refusal():
        pytest.skip("not an AVX2 x86-64 CPU")
    cc = tmp_path / "badcc"
    cc.write_text("#!/bin/sh\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    module = build_module(_gpt(), kernels="auto")  # routed: the compiler exists
    assert "causal_attention_cpu" in module._fx.code
    x = torch.zeros(2, 16, dtype=torch.long)
    loss = module(x, x)[1]
    assert torch.isfinite(loss) and "failed on attention.c" in native.unavailable()


def test_the_source_is_in_the_package():
    for f in (*native.SOURCES, *native.HEADERS):
        assert f.is_file() and f.parent == Path(native.__file__).parent / "csrc"
    text = "".join(f.read_text() for f in native.SOURCES)
    for fn in native.SIGNATURES:
        assert f"int {fn}(" in text
    assert os.path.basename(native.library_path()).startswith("tyr-native-")
