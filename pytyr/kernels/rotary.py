"""Rotary position embedding ("rotate half"), forward and backward.

x: [b, h, t, 2k] (any strides with a unit last stride: the heads split from a [b, t, h·d]
projection come as such a view), cos and sin: [t, k] tables. The rotation turns the pair
(x[..., i], x[..., k + i]) at position p by -θ[p, i]:

    y1 = x1·cos + x2·sin,  y2 = x2·cos − x1·sin

It is orthogonal, so the backward is the same kernel with sin negated (the inverse rotation
applied to the output gradient). One program covers a block of positions of one (b, h).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from pytyr.kernels.contract import Case, Contract, Dim, Tolerance
from pytyr.kernels.runtime import pick

MAX_HALF = 256  # k: head dims up to 512


@triton.jit
def _rotary_kernel(X, COS, SIN, Y, sxb, sxh, sxt, H, T, K, SIGN: tl.constexpr,
                   BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    b, h = bh // H, bh % H
    pos = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_K)
    mask = (pos[:, None] < T) & (cols[None, :] < K)
    x1p = X + b * sxb + h * sxh + pos[:, None] * sxt + cols[None, :]
    x1 = tl.load(x1p, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x1p + K, mask=mask, other=0.0).to(tl.float32)
    tab = pos[:, None] * K + cols[None, :]
    cos = tl.load(COS + tab, mask=mask, other=0.0).to(tl.float32)
    sin = tl.load(SIN + tab, mask=mask, other=0.0).to(tl.float32) * SIGN
    y1p = Y + bh * T * 2 * K + pos[:, None] * 2 * K + cols[None, :]
    tl.store(y1p, (x1 * cos + x2 * sin).to(Y.dtype.element_ty), mask=mask)
    tl.store(y1p + K, (x2 * cos - x1 * sin).to(Y.dtype.element_ty), mask=mask)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, sign: int) -> torch.Tensor:
    if x.stride(-1) != 1:
        x = x.contiguous()
    b, h, t, d = x.shape
    k = d // 2
    y = torch.empty((b, h, t, d), dtype=x.dtype, device=x.device)
    block_t = pick(8, 16)
    grid = (b * h, triton.cdiv(t, block_t))
    _rotary_kernel[grid](x, cos.contiguous(), sin.contiguous(), y, x.stride(0), x.stride(1),
                         x.stride(2), h, t, k, SIGN=sign, BLOCK_T=block_t,
                         BLOCK_K=triton.next_power_of_2(k), num_warps=4)
    return y


class _Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _rotate(x, cos, sin, 1)

    @staticmethod
    def backward(ctx, dy):
        cos, sin = ctx.saved_tensors
        return _rotate(dy, cos, sin, -1), None, None


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half rotary embedding of x: [b, h, t, 2k] by the [t, k] tables cos, sin
    (constants: no gradient flows to them). Raises `KernelError` outside `ROTARY`."""
    b, h, t, d = x.shape
    ROTARY.require({"b": b, "h": h, "t": t, "half": d // 2}, x.dtype)
    return _Rotary.apply(x, cos, sin)


def rotary_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The torch path of `rotary`, the same arithmetic as the executor's `rotary` lowering."""
    x1, x2 = torch.split(x, x.shape[-1] // 2, -1)
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], -1)


def tables(t: int, k: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos θ, sin θ: [t, k] in f64 with θ[p, i] = p · base^(-i/k) (as the executor's)."""
    freq = base ** (-torch.arange(k, dtype=torch.float64) / k)
    theta = torch.outer(torch.arange(t, dtype=torch.float64), freq)
    return theta.cos(), theta.sin()


def _inputs(case: Case, gen: torch.Generator, device) -> list:
    b, h, t, k = (case.dims[n] for n in ("b", "h", "t", "half"))
    cos, sin = (a.to(device, case.dtype) for a in tables(t, k))
    # a [b, t, h, 2k] tensor seen as [b, h, t, 2k]: the strides split heads have
    x = torch.randn((b, t, h, 2 * k), generator=gen).to(device, case.dtype).transpose(1, 2)
    return [x, cos, sin]


ROTARY = Contract(
    name="rotary", kernel=rotary, reference=rotary_reference,
    dims={"b": Dim(), "h": Dim(), "t": Dim(block=pick(8, 16)),
          "half": Dim(hi=MAX_HALF, block=pick(8, 64))},
    dtypes=(torch.float32, torch.bfloat16), inputs=_inputs,
    sizes={"small": {"b": 2, "h": 2, "t": 12, "half": 8},
           "real": {"b": 4, "h": 8, "t": 1024, "half": 64}},
    tolerance={torch.float32: Tolerance(2.0, 4.0), torch.bfloat16: Tolerance(2.0, 2.0)},
    differentiable=(0,), doc="x: [b, h, t, 2k] with unit last stride; cos, sin: [t, k]")
