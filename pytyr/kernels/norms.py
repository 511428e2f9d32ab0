"""Layer norm and RMS norm over the last dim, forward and backward, with an optional fused
residual add (`h = x + residual` is returned too: the pre-norm residual stream of a block).

One program normalises one row held whole in registers (statistics in f32). The backward
walks rows in a grid-stride loop, each program summing its rows' weight and bias gradients
into its own slice of a [programs, n] buffer that torch then sums: deterministic, no atomics.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from pytyr.kernels.contract import Case, Contract, Dim, Tolerance
from pytyr.kernels.runtime import INTERPRET, pick

MAX_N = 16384  # a row in registers: 64 KiB of f32


@triton.jit
def _norm_fwd(X, RES, W, B, Y, H, MEAN, RSTD, sx, sr, N, eps, IS_RMS: tl.constexpr,
              HAS_RES: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
              BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RES:
        # normalise the stored (rounded) sum, so that the backward sees the same values
        h = (x + tl.load(RES + row * sr + cols, mask=mask, other=0.0).to(tl.float32))
        h = h.to(H.dtype.element_ty)
        tl.store(H + row * N + cols, h, mask=mask)
        x = h.to(tl.float32)
    if IS_RMS:
        xc = x
    else:
        mean = tl.sum(x, axis=0) / N
        xc = tl.where(mask, x - mean, 0.0)
        tl.store(MEAN + row, mean)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    tl.store(RSTD + row, rstd)
    y = xc * rstd
    if HAS_W:
        y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _norm_bwd(X, W, DY, DH, DX, DW, DB, MEAN, RSTD, sx, sdy, sdh, M, N, IS_RMS: tl.constexpr,
              HAS_DH: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
              BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    if HAS_W:
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_N], dtype=tl.float32)
    for r in range(pid, M, programs):
        row = tl.cast(r, tl.int64)
        x = tl.load(X + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + row * sdy + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + row)
        if IS_RMS:
            xhat = x * rstd
        else:
            xhat = tl.where(mask, (x - tl.load(MEAN + row)) * rstd, 0.0)
        if HAS_W:
            wdy = dy * w
            dw += dy * xhat
        else:
            wdy = dy
        if HAS_B:
            db += dy
        c1 = tl.sum(xhat * wdy, axis=0) / N
        if IS_RMS:
            dx = (wdy - xhat * c1) * rstd
        else:
            dx = (wdy - (xhat * c1 + tl.sum(wdy, axis=0) / N)) * rstd
        if HAS_DH:
            dx += tl.load(DH + row * sdh + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), mask=mask)
    if HAS_W:
        tl.store(DW + pid * N + cols, dw, mask=mask)
    if HAS_B:
        tl.store(DB + pid * N + cols, db, mask=mask)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """`t` as [rows, n] with unit stride along n (a view where possible)."""
    t = t.reshape(-1, t.shape[-1])
    return t if t.stride(-1) == 1 else t.contiguous()


def _warps(block: int) -> int:
    return min(max(block // 256, 1), 16)


class _Norm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, residual, eps, is_rms):
        shape, n = x.shape, x.shape[-1]
        x2 = _rows(x)
        m = x2.shape[0]
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        h = torch.empty_like(y) if residual is not None else y
        r2 = _rows(residual) if residual is not None else x2
        stats = torch.empty((2, m), dtype=torch.float32, device=x.device)
        block = triton.next_power_of_2(n)
        _norm_fwd[(m,)](x2, r2, weight if weight is not None else y,
                        bias if bias is not None else y, y, h, stats[0], stats[1],
                        x2.stride(0), r2.stride(0), n, eps, IS_RMS=is_rms,
                        HAS_RES=residual is not None, HAS_W=weight is not None,
                        HAS_B=bias is not None, BLOCK_N=block, num_warps=_warps(block))
        ctx.save_for_backward(h if residual is not None else x2, weight, stats)
        ctx.has = (residual is not None, weight is not None, bias is not None)
        ctx.is_rms, ctx.shape = is_rms, shape
        if residual is None:
            return y.view(shape)
        return y.view(shape), h.view(shape)

    @staticmethod
    def backward(ctx, dy, dh=None):
        x2, weight, stats = ctx.saved_tensors
        has_res, has_w, has_b = ctx.has
        m, n = x2.shape
        dy2 = _rows(dy)
        dh2 = _rows(dh) if has_res and dh is not None else dy2
        dx = torch.empty((m, n), dtype=x2.dtype, device=x2.device)
        programs = min(m, pick(4, 4 * _sm_count(x2.device)))
        partial = torch.zeros((2, programs, n), dtype=torch.float32, device=x2.device)
        block = triton.next_power_of_2(n)
        _norm_bwd[(programs,)](x2, weight if has_w else dx, dy2, dh2, dx, partial[0],
                               partial[1], stats[0], stats[1], x2.stride(0), dy2.stride(0),
                               dh2.stride(0), m, n, IS_RMS=ctx.is_rms,
                               HAS_DH=has_res and dh is not None, HAS_W=has_w, HAS_B=has_b,
                               BLOCK_N=block, num_warps=_warps(block))
        dw = partial[0].sum(0).to(weight.dtype) if has_w else None
        db = partial[1].sum(0).to(weight.dtype) if has_b else None
        dx = dx.view(ctx.shape)
        return dx, dw, db, (dx if has_res else None), None, None


def _sm_count(device: torch.device) -> int:
    if INTERPRET or device.type != "cuda":
        return 1
    return torch.cuda.get_device_properties(device).multi_processor_count


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5,
               residual: torch.Tensor | None = None):
    """`F.layer_norm(x (+ residual), (n,), weight, bias, eps)` over the last dim n; with a
    residual, returns `(y, x + residual)`. Raises `KernelError` outside `LAYER_NORM`."""
    LAYER_NORM.require({"rows": x.numel() // max(x.shape[-1], 1), "n": x.shape[-1]}, x.dtype)
    return _Norm.apply(x, weight, bias, residual, float(eps), False)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6,
             residual: torch.Tensor | None = None):
    """`F.rms_norm(x (+ residual), (n,), weight, eps)` over the last dim n; with a residual,
    returns `(y, x + residual)`. Raises `KernelError` outside `RMS_NORM`."""
    RMS_NORM.require({"rows": x.numel() // max(x.shape[-1], 1), "n": x.shape[-1]}, x.dtype)
    return _Norm.apply(x, weight, None, residual, float(eps), True)


def layer_norm_reference(x, weight, bias, eps=1e-5, residual=None):
    """The torch path of `layer_norm`."""
    if residual is None:
        return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
    h = x + residual
    return F.layer_norm(h, (h.shape[-1],), weight, bias, eps), h


def rms_norm_reference(x, weight=None, eps=1e-6, residual=None):
    """The torch path of `rms_norm`."""
    if residual is None:
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    h = x + residual
    return F.rms_norm(h, (h.shape[-1],), weight, eps), h


def _randn(case: Case, gen: torch.Generator, device, *shape, scale=1.0, shift=0.0):
    return (torch.randn(shape, generator=gen) * scale + shift).to(device, case.dtype)


def _layer_norm_inputs(case: Case, gen: torch.Generator, device) -> list:
    m, n = case.dims["rows"], case.dims["n"]
    res = _randn(case, gen, device, m, n) if case.options["residual"] else None
    return [_randn(case, gen, device, m, n, shift=0.5), _randn(case, gen, device, n, scale=0.1,
            shift=1.0), _randn(case, gen, device, n, scale=0.1), 1e-5, res]


def _rms_norm_inputs(case: Case, gen: torch.Generator, device) -> list:
    m, n = case.dims["rows"], case.dims["n"]
    w = _randn(case, gen, device, n, scale=0.1, shift=1.0) if case.options["weight"] else None
    res = _randn(case, gen, device, m, n) if case.options["residual"] else None
    return [_randn(case, gen, device, m, n), w, 1e-6, res]


_NORM_DIMS = {"rows": Dim(), "n": Dim(hi=MAX_N, block=pick(16, 1024))}
_NORM_SIZES = {"small": {"rows": 5, "n": 24}, "real": {"rows": 4096, "n": 4096}}
_NORM_TOL = {torch.float32: Tolerance(2.0, 8.0), torch.bfloat16: Tolerance(2.0, 2.0)}

LAYER_NORM = Contract(
    name="layer_norm", kernel=layer_norm, reference=layer_norm_reference, dims=_NORM_DIMS,
    dtypes=(torch.float32, torch.bfloat16), inputs=_layer_norm_inputs, sizes=_NORM_SIZES,
    tolerance=_NORM_TOL, options={"residual": (False, True)}, differentiable=(0, 1, 2, 4),
    doc="x: [..., n] normalised over n, weight and bias: [n] of x's dtype")

RMS_NORM = Contract(
    name="rms_norm", kernel=rms_norm, reference=rms_norm_reference, dims=_NORM_DIMS,
    dtypes=(torch.float32, torch.bfloat16), inputs=_rms_norm_inputs, sizes=_NORM_SIZES,
    tolerance=_NORM_TOL, options={"residual": (False, True), "weight": (False, True)},
    differentiable=(0, 1, 3), doc="x: [..., n] normalised over n, optional weight: [n]")
