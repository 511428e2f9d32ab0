"""Where a CPU run's large tensors come from: glibc's heap, kept between steps.

glibc's malloc serves a block at or above its mmap threshold with a fresh `mmap` and gives it
back to the system when freed; the threshold starts at 128 KiB and rises as such blocks are
freed, while free memory at the heap's top above the trim threshold is given back too. A
training step frees and allocates the same large activations every step, so the memory of a
16 MB tensor (nanochat's logits) is faulted in again, page by page, each time: on the
nanochat example at one thread that is a fifth of the step (207.8 → 170.7 ms, load 0.7;
the GPT's tensors, 1.5 MB at most, lose under 1%). So a CPU run fixes the mmap threshold at
glibc's largest (32 MiB) and the trim threshold at 1 GiB: freed blocks stay in the heap and
the next step's tensors reuse them. The peak RSS does not grow with it: what is allocated
at the peak is the same.

Nothing is changed where the choice is someone else's: another allocator preloaded
(jemalloc, tcmalloc, mimalloc), a `MALLOC_MMAP_THRESHOLD_`/`MALLOC_TRIM_THRESHOLD_` (or
glibc tunables) in the environment, or a C library that is not glibc.
"""
from __future__ import annotations

import ctypes
import functools
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # glibc's upper bound on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_THRESHOLD = 1 << 30
ENV_VARS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")


def _refusal() -> str | None:
    """Why the heap is left as it is here, or None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "not glibc"
    env = next((v for v in ENV_VARS if os.environ.get(v)), None)
    if env is not None:
        return f"{env} is set"
    preload = os.environ.get("LD_PRELOAD", "")
    other = next((a for a in ALLOCATORS if a in preload), None)
    if other is not None:
        return f"{other} is preloaded"
    return None


@functools.cache  # once a process
def keep_freed_heap() -> str:
    """Fix glibc's thresholds for this process; a few words on what was done."""
    refusal = _refusal()
    if refusal is None:
        libc = ctypes.CDLL(None)
        ok = (libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
              and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
        refusal = None if ok else "mallopt refused the thresholds"
    if refusal is not None:
        return f"as it is ({refusal})"
    return (f"kept: glibc's mmap threshold {MMAP_THRESHOLD >> 20} MiB, "
            f"trim {TRIM_THRESHOLD >> 30} GiB")
