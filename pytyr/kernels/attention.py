"""Flash attention (the FlashAttention-2 algorithm), forward and backward, causal or not.

q, k, v: [b, h, t, d] (any strides with a unit last stride), d a power of two from 16 to
128 -> softmax(q kᵀ / √d (+ causal mask)) v: [b, h, t, d]. The forward keeps one f32
log-sum-exp per query row (base 2, the scale folded into log2 e) instead of the [t, t]
probabilities; the backward recomputes them tile by tile: one kernel accumulates dk and dv
per key block over the query blocks, another dq per query block over the key blocks, so no
atomics are needed and the result is deterministic.

Scores outside the mask are set to -inf *before* exponentiating, so nothing overflows.
Triton's interpreter multiplies bf16 tiles as raw integers (tl.dot on bf16 is wrong there),
so under it the operands are widened to f32 first; bf16 products are exact in f32, so this
is the arithmetic of a bf16 tensor-core dot with f32 accumulation.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from pytyr.kernels.contract import Case, Contract, Dim, Tolerance
from pytyr.kernels.runtime import INTERPRET, pick

HEAD_DIMS = (16, 32, 64, 128)
LOG2E = 1.4426950408889634


@triton.jit
def _mm(a, b, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _attn_fwd(Q, K, V, O, LSE, scale2, sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, H, T,
              CAUSAL: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    b, h = bh // H, bh % H
    start_m = tl.program_id(1) * BLOCK_M
    rows = start_m + tl.arange(0, BLOCK_M)
    dd = tl.arange(0, D)
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqt + dd[None, :],
                mask=rows[:, None] < T, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    hi = T
    if CAUSAL:  # key blocks past the diagonal are all masked
        hi = tl.minimum(start_m + BLOCK_M, T)
    kbase = K + b * skb + h * skh
    vbase = V + b * svb + h * svh
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        kt = tl.load(kbase + cols[None, :] * skt + dd[:, None], mask=cols[None, :] < T,
                     other=0.0)
        keep = (rows[:, None] < T) & (cols[None, :] < T)
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        s = tl.where(keep, _mm(q, kt, UPCAST, PRECISION) * scale2, float("-inf"))
        # key block 0 is unmasked for every real row, so m_new is finite from the first
        # block on; padding rows (>= T) are fully masked and kept finite by the max with 0
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_new = tl.where(rows < T, m_new, 0.0)
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(vbase + cols[:, None] * svt + dd[None, :], mask=cols[:, None] < T,
                    other=0.0)
        acc = acc * alpha[:, None] + _mm(p.to(v.dtype), v, UPCAST, PRECISION)
        m_i = m_new
    l_i = tl.where(rows < T, l_i, 1.0)
    out = acc / l_i[:, None]
    tl.store(O + bh * T * D + rows[:, None] * D + dd[None, :], out.to(O.dtype.element_ty),
             mask=rows[:, None] < T)
    tl.store(LSE + bh * T + rows, m_i + tl.log2(l_i), mask=rows < T)


@triton.jit
def _attn_bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, scale2, sm_scale, sqb, sqh, sqt, skb, skh,
                   skt, svb, svh, svt, sdb, sdh, sdt, H, T, CAUSAL: tl.constexpr,
                   D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    b, h = bh // H, bh % H
    start_n = tl.program_id(1) * BLOCK_N
    cols = start_n + tl.arange(0, BLOCK_N)
    dd = tl.arange(0, D)
    k = tl.load(K + b * skb + h * skh + cols[:, None] * skt + dd[None, :],
                mask=cols[:, None] < T, other=0.0)
    v = tl.load(V + b * svb + h * svh + cols[:, None] * svt + dd[None, :],
                mask=cols[:, None] < T, other=0.0)
    dk = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    qbase = Q + b * sqb + h * sqh
    dobase = DO + b * sdb + h * sdh
    lo = 0
    if CAUSAL:  # query blocks before the diagonal see none of these keys
        lo = (start_n // BLOCK_M) * BLOCK_M
    for start_m in range(lo, T, BLOCK_M):
        rows = start_m + tl.arange(0, BLOCK_M)
        qt = tl.load(qbase + rows[None, :] * sqt + dd[:, None], mask=rows[None, :] < T,
                     other=0.0)
        lse = tl.load(LSE + bh * T + rows, mask=rows < T, other=0.0)
        keep = (rows[None, :] < T) & (cols[:, None] < T)
        if CAUSAL:
            keep = keep & (cols[:, None] <= rows[None, :])
        # pᵀ: [BLOCK_N, BLOCK_M], the probabilities of this tile, transposed
        pt = tl.exp2(tl.where(keep, _mm(k, qt, UPCAST, PRECISION) * scale2 - lse[None, :],
                              float("-inf")))
        do = tl.load(dobase + rows[:, None] * sdt + dd[None, :], mask=rows[:, None] < T,
                     other=0.0)
        dv += _mm(pt.to(do.dtype), do, UPCAST, PRECISION)
        delta = tl.load(DELTA + bh * T + rows, mask=rows < T, other=0.0)
        dst = pt * (_mm(v, tl.trans(do), UPCAST, PRECISION) - delta[None, :])
        dk += _mm(dst.to(qt.dtype), tl.trans(qt), UPCAST, PRECISION)
    out = bh * T * D + cols[:, None] * D + dd[None, :]
    tl.store(DK + out, (dk * sm_scale).to(DK.dtype.element_ty), mask=cols[:, None] < T)
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=cols[:, None] < T)


@triton.jit
def _attn_bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, scale2, sm_scale, sqb, sqh, sqt, skb, skh, skt,
                 svb, svh, svt, sdb, sdh, sdt, H, T, CAUSAL: tl.constexpr, D: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr,
                 PRECISION: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    b, h = bh // H, bh % H
    start_m = tl.program_id(1) * BLOCK_M
    rows = start_m + tl.arange(0, BLOCK_M)
    dd = tl.arange(0, D)
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqt + dd[None, :],
                mask=rows[:, None] < T, other=0.0)
    do = tl.load(DO + b * sdb + h * sdh + rows[:, None] * sdt + dd[None, :],
                 mask=rows[:, None] < T, other=0.0)
    lse = tl.load(LSE + bh * T + rows, mask=rows < T, other=0.0)
    delta = tl.load(DELTA + bh * T + rows, mask=rows < T, other=0.0)
    dq = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    kbase = K + b * skb + h * skh
    vbase = V + b * svb + h * svh
    hi = T
    if CAUSAL:  # key blocks past the diagonal are all masked
        hi = tl.minimum(start_m + BLOCK_M, T)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        kt = tl.load(kbase + cols[None, :] * skt + dd[:, None], mask=cols[None, :] < T,
                     other=0.0)
        keep = (rows[:, None] < T) & (cols[None, :] < T)
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        p = tl.exp2(tl.where(keep, _mm(q, kt, UPCAST, PRECISION) * scale2 - lse[:, None],
                             float("-inf")))
        vt = tl.load(vbase + cols[None, :] * svt + dd[:, None], mask=cols[None, :] < T,
                     other=0.0)
        ds = p * (_mm(do, vt, UPCAST, PRECISION) - delta[:, None])
        dq += _mm(ds.to(kt.dtype), tl.trans(kt), UPCAST, PRECISION)
    tl.store(DQ + bh * T * D + rows[:, None] * D + dd[None, :],
             (dq * sm_scale).to(DQ.dtype.element_ty), mask=rows[:, None] < T)


# (BLOCK_M, BLOCK_N, num_warps) per pass, chosen so that no configuration spills registers
# when compiled for sm_90 by Triton 3.6 or 3.7 (scripts/gpu/compile_check.py); their speed
# on a GPU is unmeasured.
_TILES = {
    ("bf16", "small"): {"fwd": (128, 64, 8), "dkdv": (64, 64, 4), "dq": (64, 64, 4)},
    ("bf16", "large"): {"fwd": (128, 64, 8), "dkdv": (64, 32, 8), "dq": (64, 32, 8)},
    ("f32", "small"): {"fwd": (32, 32, 8), "dkdv": (32, 32, 8), "dq": (32, 32, 8)},
    ("f32", "large"): {"fwd": (16, 32, 8), "dkdv": (32, 16, 8), "dq": (32, 32, 8)},
}


def _config(dtype: torch.dtype, d: int, kernel: str) -> dict:
    """Tile sizes and launch options of one pass ("fwd", "dkdv", "dq")."""
    if INTERPRET:
        return dict(BLOCK_M=16, BLOCK_N=16, num_warps=1)
    key = ("f32" if dtype == torch.float32 else "bf16", "small" if d <= 64 else "large")
    m, n, warps = _TILES[key][kernel]
    return dict(BLOCK_M=m, BLOCK_N=n, num_warps=warps, num_stages=2)


def _strides(t: torch.Tensor) -> tuple[int, int, int]:
    return t.stride(0), t.stride(1), t.stride(2)


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _common(q: torch.Tensor, causal: bool, kernel: str) -> dict:
    # f32 must be exact f32 ("ieee"), not TF32: the reference it is judged against is
    return dict(CAUSAL=causal, D=q.shape[-1], UPCAST=INTERPRET,
                PRECISION="ieee" if q.dtype == torch.float32 or INTERPRET else "tf32",
                **_config(q.dtype, q.shape[-1], kernel))


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale):
        q, k, v = _unit_last(q), _unit_last(k), _unit_last(v)
        b, h, t, d = q.shape
        o = torch.empty((b, h, t, d), dtype=q.dtype, device=q.device)
        lse = torch.empty((b, h, t), dtype=torch.float32, device=q.device)
        opts = _common(q, causal, "fwd")
        grid = (b * h, triton.cdiv(t, opts["BLOCK_M"]))
        _attn_fwd[grid](q, k, v, o, lse, sm_scale * LOG2E, *_strides(q), *_strides(k),
                        *_strides(v), h, t, **opts)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        do = _unit_last(do)
        b, h, t, d = q.shape
        delta = (do.float() * o.float()).sum(-1)  # rowsum(dO ∘ O): [b, h, t], f32
        dq, dk, dv = (torch.empty((b, h, t, d), dtype=q.dtype, device=q.device)
                      for _ in range(3))
        args = (q, k, v, do, lse, delta)
        scales = (ctx.sm_scale * LOG2E, ctx.sm_scale)
        strides = (*_strides(q), *_strides(k), *_strides(v), *_strides(do), h, t)
        opts = _common(q, ctx.causal, "dkdv")
        _attn_bwd_dkdv[(b * h, triton.cdiv(t, opts["BLOCK_N"]))](*args, dk, dv, *scales,
                                                                 *strides, **opts)
        opts = _common(q, ctx.causal, "dq")
        _attn_bwd_dq[(b * h, triton.cdiv(t, opts["BLOCK_M"]))](*args, dq, *scales, *strides,
                                                               **opts)
        return dq, dk, dv, None, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    causal: bool = True) -> torch.Tensor:
    """softmax(q kᵀ / √d, causally masked when `causal`) v for q, k, v: [b, h, t, d].
    Raises `KernelError` outside `FLASH_ATTENTION`."""
    b, h, t, d = q.shape
    FLASH_ATTENTION.require({"b": b, "h": h, "t": t, "d": d}, q.dtype)
    return _FlashAttention.apply(q, k, v, bool(causal), 1.0 / math.sqrt(d))


def attention_reference(q, k, v, causal=True):
    """The torch path of `flash_attention`: scaled dot-product attention."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _inputs(case: Case, gen: torch.Generator, device) -> list:
    b, h, t, d = (case.dims[n] for n in ("b", "h", "t", "d"))
    # [b, t, h, d] seen as [b, h, t, d]: the strides of heads split from a projection
    q, k, v = (torch.randn((b, t, h, d), generator=gen).to(device, case.dtype).transpose(1, 2)
               for _ in range(3))
    return [q, k, v, case.options["causal"]]


FLASH_ATTENTION = Contract(
    name="flash_attention", kernel=flash_attention, reference=attention_reference,
    dims={"b": Dim(), "h": Dim(), "t": Dim(hi=1 << 16, block=pick(16, 64)),
          "d": Dim(values=HEAD_DIMS)},
    dtypes=(torch.float32, torch.bfloat16), inputs=_inputs,
    sizes={"small": {"b": 1, "h": 2, "t": 24, "d": 32},
           "real": {"b": 2, "h": 8, "t": 1024, "d": 128}},
    tolerance={torch.float32: Tolerance(2.0, 16.0), torch.bfloat16: Tolerance(2.0, 2.0)},
    options={"causal": (False, True)}, differentiable=(0, 1, 2),
    doc="q, k, v: [b, h, t, d] with unit last stride, one t for queries and keys")
