"""Cross-entropy over a large vocabulary with an optional logit softcap, forward and backward,
without materialising the softmax.

logits: [n, v], target: i64[n] -> the mean over rows whose target is not `ignore_index` of
`logsumexp(z) − z[target]`, with `z = cap · tanh(logits / cap)` when capped (nanochat's
softcap fused into the loss). The forward streams each row in vocabulary chunks with an
online max and sum (one f32 log-sum-exp per row is all it keeps); the backward writes
`(softmax(z) − onehot) · dz/dlogits · grad / count` chunk by chunk from that log-sum-exp.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from pytyr.kernels.contract import Case, Contract, Dim, Tolerance
from pytyr.kernels.runtime import pick

MAX_VOCAB = 1 << 20


@triton.jit
def _capped(x, CAP: tl.constexpr):
    if CAP > 0:
        # cap · tanh(x / cap) from e = exp(-2|u|) in (0, 1]: no overflow for any x
        u = x / CAP
        e = tl.exp(-2.0 * tl.abs(u))
        t = (1.0 - e) / (1.0 + e)
        x = CAP * tl.where(u < 0, -t, t)
    return x


@triton.jit
def _ce_fwd(LOGITS, TARGET, LOSS, LSE, stride, V, ignore_index, CAP: tl.constexpr,
            BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = LOGITS + row * stride
    cols = tl.arange(0, BLOCK_V)
    # a running max and sum per row; every chunk has a valid entry (start < V), so the max
    # is finite after the first and no -inf - -inf is ever formed
    m = float("-inf")
    s = 0.0
    for start in range(0, V, BLOCK_V):
        mask = start + cols < V
        z = _capped(tl.load(base + start + cols, mask=mask, other=0.0).to(tl.float32), CAP)
        z = tl.where(mask, z, float("-inf"))
        m_new = tl.maximum(m, tl.max(z, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new), axis=0)
        m = m_new
    lse = m + tl.log(s)
    tl.store(LSE + row, lse)
    t = tl.load(TARGET + row)
    valid = t != ignore_index
    # clamped: a target outside [0, v) is the caller's bug, not a read out of bounds
    zt = _capped(tl.load(base + tl.minimum(tl.maximum(t, 0), V - 1)).to(tl.float32), CAP)
    tl.store(LOSS + row, tl.where(valid, lse - zt, 0.0))


@triton.jit
def _ce_bwd(LOGITS, TARGET, LSE, SCALE, DLOGITS, stride, dstride, V, ignore_index,
            CAP: tl.constexpr, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    mask = cols < V
    t = tl.load(TARGET + row)
    g = tl.where(t != ignore_index, tl.load(SCALE), 0.0)
    x = tl.load(LOGITS + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    z = _capped(x, CAP)
    dz = tl.exp(z - tl.load(LSE + row)) - tl.where(cols == t, 1.0, 0.0)
    if CAP > 0:
        dz = dz * (1.0 - (z / CAP) * (z / CAP))
    tl.store(DLOGITS + row * dstride + cols, (dz * g).to(DLOGITS.dtype.element_ty), mask=mask)


def _block(v: int) -> int:
    return min(triton.next_power_of_2(v), pick(32, 4096))


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, softcap, ignore_index):
        n, v = logits.shape
        if logits.stride(-1) != 1:
            logits = logits.contiguous()
        target = target.contiguous()
        loss = torch.empty(n, dtype=torch.float32, device=logits.device)
        lse = torch.empty(n, dtype=torch.float32, device=logits.device)
        cap = float(softcap or 0.0)
        block = _block(v)
        _ce_fwd[(n,)](logits, target, loss, lse, logits.stride(0), v, ignore_index, CAP=cap,
                      BLOCK_V=block, num_warps=pick(1, 8))
        count = (target != ignore_index).sum()
        ctx.save_for_backward(logits, target, lse, count)
        ctx.cap, ctx.ignore_index = cap, ignore_index
        return (loss.sum() / count).to(logits.dtype)

    @staticmethod
    def backward(ctx, grad):
        logits, target, lse, count = ctx.saved_tensors
        n, v = logits.shape
        scale = (grad.float() / count).reshape(1)
        dlogits = torch.empty_like(logits)
        block = _block(v)
        _ce_bwd[(n, triton.cdiv(v, block))](logits, target, lse, scale, dlogits,
                                            logits.stride(0), dlogits.stride(0), v,
                                            ctx.ignore_index, CAP=ctx.cap, BLOCK_V=block,
                                            num_warps=pick(1, 8))
        return dlogits, None, None, None


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, softcap: float | None = None,
                  ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy of logits: [n, v] (softcapped first when `softcap`) against
    target: i64[n]. Raises `KernelError` outside `CROSS_ENTROPY`."""
    n, v = logits.shape
    CROSS_ENTROPY.require({"rows": n, "vocab": v}, logits.dtype)
    return _CrossEntropy.apply(logits, target, softcap, int(ignore_index))


def cross_entropy_reference(logits, target, softcap=None, ignore_index=-100):
    """The torch path of `cross_entropy`."""
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    return F.cross_entropy(logits, target, ignore_index=ignore_index)


def _inputs(case: Case, gen: torch.Generator, device) -> list:
    n, v = case.dims["rows"], case.dims["vocab"]
    logits = (torch.randn((n, v), generator=gen) * 4).to(device, case.dtype)
    target = torch.randint(0, v, (n,), generator=gen)
    target[2::3] = -100  # some rows ignored, as padding is
    if n > 1:
        target[1] = v - 1  # the last column: the tail block's edge
    return [logits, target.to(device), case.options["softcap"], -100]


CROSS_ENTROPY = Contract(
    name="cross_entropy", kernel=cross_entropy, reference=cross_entropy_reference,
    dims={"rows": Dim(), "vocab": Dim(lo=2, hi=MAX_VOCAB, block=pick(32, 4096))},
    dtypes=(torch.float32, torch.bfloat16), inputs=_inputs,
    sizes={"small": {"rows": 7, "vocab": 80}, "real": {"rows": 1024, "vocab": 50304}},
    tolerance={torch.float32: Tolerance(2.0, 8.0), torch.bfloat16: Tolerance(2.0, 2.0)},
    options={"softcap": (None, 15.0)}, differentiable=(0,),
    doc="logits: [n, v], target: i64[n] (ignore_index -100), optional softcap")
