"""CPU kernels written in C (`csrc/`), compiled on first use and called through cffi.

Torch's CPU ops are generic; a few whole-op passes do less work when written for the one
case the graph has (docs/kernels.md, "CPU kernels"). The C source is compiled by the
system's compiler (`$CC`, else `cc`) for x86-64 with AVX2 and FMA into a cache directory
(`$TYR_CACHE_DIR`, else `$XDG_CACHE_HOME/tyr`, else `~/.cache/tyr`), under a name keyed by
the source, the flags and the compiler: processes share one build, a changed source is
rebuilt, and a build is written to a temporary name and renamed, so a reader never sees half
a library. `unavailable()` says why the kernels cannot run here (another architecture, a CPU
without AVX2, no compiler, a failed build); the executor then keeps torch's ops.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from pytyr.errors import KernelError

CSRC = Path(__file__).parent / "csrc"
SOURCES = (CSRC / "gelu.c", CSRC / "attention.c")  # one library; vec.h is included by both
HEADERS = (CSRC / "vec.h",)
CDEF = """
void tyr_gelu_erf_f32(const float *x, float *y, float *dy, size_t n);
int tyr_attention_causal_fwd_f32(int nb, int nh, int t, int d, float scale,
    const float *q, const long *sq, const float *k, const long *sk,
    const float *v, const long *sv, float *y, const long *sy, float *stats);
int tyr_attention_causal_bwd_f32(int nb, int nh, int t, int d, float scale,
    const float *q, const long *sq, const float *k, const long *sk,
    const float *v, const long *sv, const float *stats, const float *dy, const long *sdy,
    float *dq, const long *sdq, float *dk, const long *sdk, float *dv, const long *sdv);
"""
FLAGS = ("-O3", "-mavx2", "-mfma", "-std=c11", "-shared", "-fPIC")
BUILD_TIMEOUT_S = 120

_lock = threading.Lock()
_loaded: tuple[Any, Any] | None = None  # (ffi, lib) once built and opened
_reason: str | None = None  # why not, once known


def cache_dir() -> Path:
    """Where compiled kernels are kept."""
    explicit = os.environ.get("TYR_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tyr"


def _compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or "cc")


def library_path() -> Path:
    """The path the library for this source, flags and compiler is built to."""
    texts = [f.read_text(encoding="utf-8") for f in (*SOURCES, *HEADERS)]
    key = hashlib.sha256("\0".join([*texts, *FLAGS, *_compiler()]).encode()).hexdigest()[:16]
    return cache_dir() / f"tyr-native-{key}.so"


def _cpu_refusal() -> str | None:
    import torch

    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        return f"the CPU kernels are for x86-64, not {machine or 'an unknown machine'}"
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        return f"the CPU kernels need AVX2 and FMA; torch runs this CPU at {capability}"
    return None


def _build(target: Path) -> str | None:
    """Compile the source to `target` atomically; the reason it failed, or None."""
    cc = _compiler()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as e:
        return f"cannot write the kernel cache {target.parent}: {e.strerror or e}"
    try:
        done = subprocess.run([*cc, *FLAGS, "-o", tmp, *map(str, SOURCES)], capture_output=True,
                              text=True, timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            first = next((ln for ln in done.stderr.splitlines() if ln.strip()), "no message")
            return f"the C compiler {cc[0]!r} failed on {_names()}: {first[:200]}"
        os.replace(tmp, target)
        return None
    except FileNotFoundError:
        return f"no C compiler: {cc[0]!r} is not on PATH (set $CC)"
    except subprocess.TimeoutExpired:
        return f"the C compiler {cc[0]!r} ran past {BUILD_TIMEOUT_S} s on {_names()}"
    except OSError as e:
        return f"the C compiler {cc[0]!r} could not run: {e.strerror or e}"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _names() -> str:
    return ", ".join(f.name for f in SOURCES)


def _open(path: Path) -> tuple[Any, Any]:
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    return ffi, ffi.dlopen(str(path))


def _load() -> tuple[Any, Any] | str:
    refusal = _cpu_refusal()
    if refusal:
        return refusal
    path = library_path()
    if path.is_file():
        try:
            return _open(path)
        except OSError:
            pass  # a damaged file (a disk error, a foreign write): build it again
    failed = _build(path)
    if failed:
        return failed
    try:
        return _open(path)
    except OSError as e:
        return f"the compiled kernels at {path} cannot be loaded: {e}"


def unavailable() -> str | None:
    """Why the CPU kernels cannot run in this process, or None (building them if needed)."""
    global _loaded, _reason
    with _lock:
        if _loaded is None and _reason is None:
            got = _load()
            _reason, _loaded = (got, None) if isinstance(got, str) else (None, got)
        return _reason


def library() -> tuple[Any, Any]:
    """The (ffi, lib) of the CPU kernels; call only after `unavailable()` returned None."""
    if unavailable() is not None or _loaded is None:
        raise KernelError(f"the CPU kernels are unavailable: {_reason}")
    return _loaded


def forget() -> None:
    """Drop what this process knows (for tests that change $CC or the cache directory)."""
    global _loaded, _reason
    with _lock:
        _loaded, _reason = None, None
