"""Compile every Triton kernel launch of the parity suite for a GPU target, without a GPU.

`python scripts/gpu/compile_check.py [--scale real] [--arch 90] [--only NAME]`

Each contract's cases are run through the kernel's forward and backward with Triton's
launches captured instead of made; each distinct launch (kernel, argument types, constexprs,
warps, stages) is then compiled ahead of time for `cuda:<arch>` (90: H100/H200) down to a
cubin with the ptxas Triton ships, and its shared memory is checked against the
multiprocessor's limit; registers and spills are reported (cuobjdump). This catches what
the interpreter cannot: Triton's type rules for compiled code, tile shapes the hardware's
dot does not take, tiles that do not fit. It runs nothing, so numbers still need a GPU
(scripts/gpu/kernels.sh).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    sys.exit("compile_check.py: unset TRITON_INTERPRET (kernels must be compiled, not interpreted)")

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

SHARED_LIMIT = {90: 232448, 80: 166912, 100: 232448}  # bytes a block may use, per arch
_TYPES = {torch.float32: "*fp32", torch.bfloat16: "*bf16", torch.float16: "*fp16",
          torch.int64: "*i64", torch.int32: "*i32", torch.float64: "*fp64"}
_OPTIONS = ("num_warps", "num_stages")


def _launches() -> list[tuple[JITFunction, tuple, dict]]:
    """Replace kernel launches by a record of them; returns the list they are added to."""
    seen: list[tuple[JITFunction, tuple, dict]] = []

    def getitem(self, grid):
        return lambda *args, **kwargs: seen.append((self, args, kwargs))

    JITFunction.__getitem__ = getitem
    return seen


def _signature(fn: JITFunction, args: tuple, kwargs: dict) -> tuple[dict, dict, dict]:
    sig, consts = {}, {}
    names = [p.name for p in fn.params]
    bound = dict(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k not in _OPTIONS})
    for p in fn.params:
        v = bound[p.name]
        if p.is_constexpr:
            sig[p.name], consts[p.name] = "constexpr", v
        elif isinstance(v, torch.Tensor):
            sig[p.name] = _TYPES[v.dtype]
        elif isinstance(v, bool):
            sig[p.name] = "i1"
        elif isinstance(v, int):
            sig[p.name] = "i32" if -(2**31) <= v < 2**31 else "i64"
        elif isinstance(v, float):
            sig[p.name] = "fp32"
        else:
            raise TypeError(f"{fn.__name__}: argument {p.name}={v!r} of unknown type")
    return sig, consts, {k: kwargs[k] for k in _OPTIONS if k in kwargs}


def _resources(cubin: bytes) -> tuple[int, int]:
    """(registers per thread, stack bytes: > 0 means spills) read by the cuobjdump that
    Triton ships; (-1, 0) when it is missing."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        return -1, 0
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([str(tool), "--dump-resource-usage", f.name], capture_output=True,
                             text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (-1, 0)


def _exercise(contract, case) -> None:
    """The kernel's forward and backward on the case's inputs (launches are captured)."""
    gen = torch.Generator().manual_seed(case.seed)
    args = contract.inputs(case, gen, torch.device("cpu"))
    for i in contract.differentiable:
        if isinstance(args[i], torch.Tensor):
            args[i].requires_grad_(True)
    out = contract.kernel(*args)
    outs = out if isinstance(out, tuple) else (out,)
    torch.autograd.backward(outs, [torch.zeros_like(o) for o in outs])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", choices=("small", "real"), default="real")
    p.add_argument("--arch", type=int, default=90, help="CUDA compute capability, e.g. 90")
    p.add_argument("--only", action="append", help="a contract's name (repeatable)")
    args = p.parse_args(argv)

    from pytyr.kernels import contracts

    seen = _launches()
    for name, contract in contracts().items():
        if args.only and name not in args.only:
            continue
        for case in contract.fixtures(args.scale):
            _exercise(contract, case)
    target = GPUTarget("cuda", args.arch, 32)
    done: set[str] = set()
    failed = spills = 0
    for fn, a, kw in seen:
        sig, consts, opts = _signature(fn, a, kw)
        key = repr((fn.__name__, sorted(sig.items()), sorted(consts.items()), sorted(opts.items())))
        if key in done:
            continue
        done.add(key)
        dtypes = sorted({t[1:] for t in sig.values() if t.startswith("*")})
        label = f"{fn.__name__} [{','.join(dtypes)}] {consts} {opts}"
        start = time.perf_counter()
        try:
            k = triton.compile(ASTSource(fn, sig, consts), target=target, options=opts)
        except Exception as e:  # a compile error: report it with the configuration
            failed += 1
            print(f"FAIL {label}: {type(e).__name__}: {str(e).splitlines()[-1][:300]}")
            continue
        shared = k.metadata.shared
        limit = SHARED_LIMIT.get(args.arch, 232448)
        ok = shared <= limit
        failed += not ok
        regs, stack = _resources(k.asm["cubin"])
        spills += stack > 0
        print(f"{'ok  ' if ok else 'FAIL'} {label}: shared {shared} B"
              f"{'' if ok else f' > {limit}'}, {regs} registers"
              f"{f', SPILLS {stack} B of stack' if stack else ''}, "
              f"{time.perf_counter() - start:.1f} s")
    print(f"{len(done) - failed} compiled for cuda:{args.arch}, {failed} failed, "
          f"{spills} spill registers")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
