"""Triton kernels, each with its contract (docs/kernels.md).

Modules: `copy` (the suite's smoke test), `rotary`, `norms` (layer norm, RMS norm),
`cross_entropy` (softcapped, chunked over the vocabulary), `attention` (flash attention);
`contract` (the one form of a contract), `parity` (a case judged against the reference),
`suite` (the GPU parity suite's fixtures). Importing this package loads neither Triton nor
the kernels: `contracts()` does, and `unavailable()` says why it cannot.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytyr.kernels.contract import Contract

# module -> the contracts it declares, in the suite's order (the smoke test first)
KERNEL_MODULES: dict[str, tuple[str, ...]] = {
    "copy": ("COPY",),
    "rotary": ("ROTARY",),
    "norms": ("LAYER_NORM", "RMS_NORM"),
    "cross_entropy": ("CROSS_ENTROPY",),
    "attention": ("FLASH_ATTENTION",),
}


def unavailable() -> str | None:
    """Why the kernels cannot be loaded here (Triton missing or broken), or None."""
    try:
        importlib.import_module("triton.language")
    except Exception as e:  # an ImportError, or a broken install failing any other way
        return f"Triton cannot be imported ({type(e).__name__}: {e})"
    return None


def contracts() -> dict[str, Contract]:
    """Every kernel's contract by name, importing the kernel modules (and Triton)."""
    out = {}
    for module, names in KERNEL_MODULES.items():
        mod = importlib.import_module(f"pytyr.kernels.{module}")
        for name in names:
            contract = getattr(mod, name)
            out[contract.name] = contract
    return out
