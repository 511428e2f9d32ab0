"""What the kernels need to know about Triton in this process.

`INTERPRET` is Triton's own interpreter switch (`TRITON_INTERPRET=1`), read once: Triton
decides at `@triton.jit` time whether a kernel is compiled or interpreted, so the variable
must be set before the first kernel module is imported. Under the interpreter, kernels run
on CPU tensors with small blocks, which is how CI tests them without a GPU.
"""
from __future__ import annotations

import triton

try:
    INTERPRET: bool = bool(triton.knobs.runtime.interpret)
except AttributeError:  # Triton releases before the knobs module
    import os

    INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def pick(small: int, large: int) -> int:
    """A block size: `small` under the interpreter (more blocks, more edges exercised on CPU,
    quick numpy steps), `large` when compiled for a GPU."""
    return small if INTERPRET else large
