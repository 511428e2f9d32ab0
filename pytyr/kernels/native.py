"""CPU kernels written in C (`csrc/`), compiled on first use and called through ctypes.

Torch's CPU ops are generic; a whole-op pass does less work when written for the one case
the graph has (docs/kernels.md, "CPU kernels"). The C source is compiled by the system's
compiler (`$CC`, else `cc`) for x86-64 with AVX2 and FMA into a cache directory
(`$TYR_CACHE_DIR`, else `$XDG_CACHE_HOME/tyr`, else `~/.cache/tyr`), under a name keyed by
the source, the flags, the compiler and the OpenMP runtime: processes share one build, a
changed source is rebuilt, and a build is written to a temporary name and renamed, so a
reader never sees half a library. Nothing is built or loaded when a model is lowered
(`static_refusal` is all the lowering asks): the first call of a kernel does it, once per
process, and a kept build opens in about a millisecond (ctypes: no declarations to parse).
`unavailable()` says why the kernels cannot run here (another architecture, a CPU without
AVX2, no compiler, a failed build); the callers then run torch's ops.

Threads: where torch runs on GNU OpenMP (its wheels for Linux bring their own `libgomp`, in
this process once torch is imported) the library is compiled with `-fopenmp` and linked
against that very file, so a kernel's parallel loop runs on torch's own thread team, sized by
`torch.set_num_threads` — never a second pool competing for the cores. Elsewhere it is
compiled without, and the kernels run at one thread only (`threaded()`).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from pytyr.errors import KernelError

CSRC = Path(__file__).parent / "csrc"
SOURCES = (CSRC / "attention.c",)  # one library
HEADERS = (CSRC / "vec.h",)
# The exported functions' C signatures (csrc/attention.c), as ctypes argument types: the
# (threads, nb, nh, t, d) ints, the float scale, then a float pointer and a `long[3]` of
# strides for each tensor (the forward's `stats` and the backward's `stats` have no strides).
_PTR, _STRIDES = ctypes.c_void_p, ctypes.POINTER(ctypes.c_long)
_HEAD = [ctypes.c_int] * 5 + [ctypes.c_float]
SIGNATURES: dict[str, list[Any]] = {
    "tyr_attention_causal_fwd_f32": _HEAD + [_PTR, _STRIDES] * 4 + [_PTR],
    "tyr_attention_causal_bwd_f32": _HEAD + [_PTR, _STRIDES] * 3 + [_PTR] +
                                    [_PTR, _STRIDES] * 4,
}
FLAGS = ("-O3", "-mavx2", "-mfma", "-std=c11", "-shared", "-fPIC")
BUILD_TIMEOUT_S = 120

_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None  # once built and opened
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


@functools.cache
def torch_openmp() -> Path | None:
    """The GNU OpenMP runtime torch runs its threads on, as loaded in this process (None:
    another runtime, or no /proc to read it from)."""
    import torch

    if "OpenMP" not in torch.__config__.parallel_info():
        return None
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.split(maxsplit=5)[-1].strip() for line in maps if "libgomp" in line}
    except OSError:
        return None
    found = sorted(p for p in paths if Path(p).name.startswith("libgomp") and Path(p).is_file())
    return Path(found[0]) if len(found) == 1 else None


def threaded() -> bool:
    """Whether the kernels run on torch's threads here (else at one thread only)."""
    return torch_openmp() is not None


def library_path() -> Path:
    """The path the library for this source, flags, compiler and OpenMP runtime is built to."""
    texts = [f.read_text(encoding="utf-8") for f in (*SOURCES, *HEADERS)]
    omp = torch_openmp()
    key = hashlib.sha256("\0".join([*texts, *FLAGS, *_compiler(), str(omp)]).encode()
                         ).hexdigest()[:16]
    return cache_dir() / f"tyr-native-{key}.so"


def _commands(out: str) -> list[list[str]]:
    """The compiler runs that build the library to `out`: with torch's OpenMP, compiled with
    -fopenmp and linked against torch's runtime file itself (not `-lgomp`, which could name
    another copy)."""
    cc, omp = _compiler(), torch_openmp()
    if omp is None:
        return [[*cc, *FLAGS, "-o", out, *map(str, SOURCES)]]
    obj = out + ".o"
    compile_ = [*cc, *FLAGS, "-fopenmp", "-c", "-o", obj, *map(str, SOURCES)]
    return [compile_, [*cc, "-shared", "-o", out, obj, str(omp), f"-Wl,-rpath,{omp.parent}"]]


def _cpu_refusal() -> str | None:
    import torch

    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        return f"the CPU kernels are for x86-64, not {machine or 'an unknown machine'}"
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        return f"the CPU kernels need AVX2 and FMA; torch runs this CPU at {capability}"
    return None


def static_refusal() -> str | None:
    """Why the kernels could not run here, as far as is known without building or loading
    them (the machine, the CPU, a missing compiler where no build is kept), or None. A
    failed build is only known at the first call, which then runs torch's op."""
    refusal = _cpu_refusal()
    if refusal or _reason is not None:
        return refusal or _reason
    if _loaded is None and not library_path().is_file():
        cc = _compiler()
        if not cc or shutil.which(cc[0]) is None:
            return f"no C compiler: {cc[0] if cc else '$CC'!r} is not on PATH (set $CC)"
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
        for command in _commands(tmp):
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S)
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
        for leftover in (tmp, tmp + ".o"):
            if os.path.exists(leftover):
                os.unlink(leftover)


def _names() -> str:
    return ", ".join(f.name for f in SOURCES)


def _open(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    for name, args in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    return lib


def _load() -> ctypes.CDLL | str:
    refusal = _cpu_refusal()
    if refusal:
        return refusal
    path = library_path()
    if path.is_file():
        try:
            return _open(path)
        except (OSError, AttributeError):
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


def library() -> ctypes.CDLL:
    """The CPU kernels' library; call only after `unavailable()` returned None."""
    if unavailable() is not None or _loaded is None:
        raise KernelError(f"the CPU kernels are unavailable: {_reason}")
    return _loaded


def forget() -> None:
    """Drop what this process knows (for tests that change $CC or the cache directory)."""
    global _loaded, _reason
    with _lock:
        _loaded, _reason = None, None
