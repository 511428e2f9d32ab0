"""Exact (erf) GELU on CPU: the value and its derivative in one pass of `csrc/gelu.c`.

torch evaluates erf twice for a GELU in training (once in the forward, once more in
`gelu_backward`) and walks the tensor twice; this kernel evaluates it once, keeping the
derivative for the backward, which is then a product: on this project's CPU 1.0 ms for
forward + derivative + 0.2 for the product against torch's 1.0 + 1.5 (768 x 512 f32). Its
erf is the same Abramowitz & Stegun formula torch's vectorised erf uses; values agree with
torch's to a few 1e-7 (tests/test_gelu_cpu.py).

The contract (`runs_here`): a float32 CPU tensor, and either one torch thread or fewer
elements than torch would split across threads (its grain, 32,768): the kernel is one
thread, and with more threads torch's own op is as fast in wall time.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from pytyr.kernels import native

GRAIN = 32768  # at::internal::GRAIN_SIZE: below it torch runs an elementwise op on one thread


def runs_here(x: torch.Tensor) -> bool:
    """Whether `gelu` runs the kernel on `x` (else torch's `F.gelu`)."""
    return (x.dtype is torch.float32 and x.device.type == "cpu"
            and (x.numel() < GRAIN or torch.get_num_threads() == 1)
            and native.unavailable() is None)


def _run(x: torch.Tensor, derivative: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    ffi, lib = native.library()
    x = x.contiguous()
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    dy = torch.empty_like(y) if derivative else None
    if x.numel():
        lib.tyr_gelu_erf_f32(ffi.cast("const float *", x.data_ptr()),
                             ffi.cast("float *", y.data_ptr()),
                             ffi.cast("float *", dy.data_ptr()) if dy is not None else ffi.NULL,
                             x.numel())
    return y, dy


class _ExactGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        y, dy = _run(x, derivative=ctx.needs_input_grad[0])
        ctx.save_for_backward(dy)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (dy,) = ctx.saved_tensors
        return grad * dy


# torch.compile cannot trace a cffi call: the kernel runs eagerly there, a clean graph break
@torch.compiler.disable
def gelu(x: torch.Tensor) -> torch.Tensor:
    """`F.gelu(x)` (exact form), by the kernel where `runs_here(x)`."""
    return _ExactGelu.apply(x) if runs_here(x) else F.gelu(x)
