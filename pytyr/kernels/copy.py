"""A copy kernel: the parity suite's smoke test (is Triton working here at all?).

x: any shape, contiguous or not -> a contiguous copy, elementwise in blocks; the backward
copies the gradient back the same way. Bit-exact: its tolerance is zero.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from pytyr.kernels.contract import Case, Contract, Dim, Tolerance
from pytyr.kernels.runtime import pick

BLOCK = pick(64, 1024)


@triton.jit
def _copy_kernel(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(Y + offs, tl.load(X + offs, mask=mask), mask=mask)


def _copy(x: torch.Tensor) -> torch.Tensor:
    src = x.contiguous()  # a strided input is gathered by torch first; the kernel is 1-d
    y = torch.empty_like(src)
    n = src.numel()
    if n:
        _copy_kernel[(triton.cdiv(n, BLOCK),)](src, y, n, BLOCK=BLOCK, num_warps=4)
    return y


class _Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _copy(x)

    @staticmethod
    def backward(ctx, dy):
        return _copy(dy)


def copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of x. Raises `KernelError` outside `COPY`."""
    COPY.require({"n": x.numel()}, x.dtype)
    return _Copy.apply(x)


def copy_reference(x: torch.Tensor) -> torch.Tensor:
    """The torch path of `copy`."""
    return x.clone()


def _inputs(case: Case, gen: torch.Generator, device) -> list:
    return [torch.randn(case.dims["n"], generator=gen).to(device, case.dtype)]


COPY = Contract(
    name="copy", kernel=copy, reference=copy_reference, dims={"n": Dim(lo=0, block=BLOCK)},
    dtypes=(torch.float32, torch.bfloat16), inputs=_inputs,
    sizes={"small": {"n": 100}, "real": {"n": 1 << 24}},
    tolerance={torch.float32: Tolerance(0.0, 0.0), torch.bfloat16: Tolerance(0.0, 0.0)},
    differentiable=(0,), doc="x: any shape; exact")
