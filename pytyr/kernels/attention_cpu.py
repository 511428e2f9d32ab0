"""Causal attention on CPU for short sequences: `csrc/attention.c` forward and backward.

torch's CPU flash kernel works in query blocks of 32 through general small-GEMM calls; at a
short sequence (GPT's t = 64, heads of 32) that runs at about a fifth of the machine's
matmul rate. The C kernel works head by head with the whole t x t score matrix in cache
(the forward keeps only each row's max and normaliser; the backward recomputes the
probabilities from them, bit for bit, as flash attention recomputes them), computes only the causal half, and runs every product
through one register tile. The output and the gradients are written straight into the
[b, t, h, d] layout the heads came from and go back to (merging heads is then a view).

The contract (`runs_here`): q, k, v float32 CPU tensors of one shape [b, h, t, d], last
dimension contiguous; t and d multiples of 16, t <= 256, d <= 256; no dropout. The heads are
shared among torch's threads where the library runs on torch's OpenMP team
(`native.threaded()`, torch's Linux wheels); elsewhere the kernel takes one torch thread or
a small problem only. Outside the contract `F.scaled_dot_product_attention` runs. Values
agree with torch's within float rounding, and are the same at every thread count
(tests/test_attention_cpu.py).
"""
from __future__ import annotations

import ctypes
import math

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from pytyr.errors import KernelError
from pytyr.kernels import native

MAX_T = 256  # a head's t x t scores stay in cache
MAX_D = 256
SMALL = 1 << 15  # b·h·t·d below which torch would not use a second thread either


def static_refusal(t: int, d: int) -> str | None:
    """Why shapes with sequence `t` and head size `d` are outside the contract, or None."""
    if t % 16 or not 16 <= t <= MAX_T:
        return f"t={t} is not a multiple of 16 in 16..{MAX_T}"
    if d % 16 or not 16 <= d <= MAX_D:
        return f"d={d} is not a multiple of 16 in 16..{MAX_D}"
    return None


def runs_here(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether `attention` runs the kernel on these tensors (else torch's SDPA)."""
    if not all(x.dtype is torch.float32 and x.device.type == "cpu" and x.dim() == 4
               and x.stride(-1) == 1 for x in (q, k, v)):
        return False
    if not q.shape == k.shape == v.shape or static_refusal(q.shape[2], q.shape[3]):
        return False
    return ((q.numel() < SMALL or torch.get_num_threads() == 1 or native.threaded())
            and native.unavailable() is None)


def _threads(q: torch.Tensor) -> int:
    """The threads a call shares its heads among: torch's count, one on a small problem."""
    return 1 if q.numel() < SMALL or not native.threaded() else torch.get_num_threads()


def _at(x: torch.Tensor) -> tuple[int, ctypes.Array]:
    """A tensor as the kernel takes it: its base pointer and its three outer strides."""
    return x.data_ptr(), (ctypes.c_long * 3)(*x.stride()[:3])


def _heads_like(q: torch.Tensor) -> torch.Tensor:
    """An empty [b, h, t, d] tensor laid out as [b, t, h, d] (a transposed view)."""
    b, h, t, d = q.shape
    return torch.empty(b, t, h, d, dtype=q.dtype).transpose(1, 2)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise KernelError(f"attention_cpu: the {what} could not allocate its scratch memory")


class _CausalAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):  # type: ignore[override]
        lib = native.library()
        b, h, t, d = q.shape
        y = _heads_like(q)
        stats = torch.empty(b, h, t, 2, dtype=q.dtype)  # per row: max score, 1 / sum
        _check(lib.tyr_attention_causal_fwd_f32(
            _threads(q), b, h, t, d, 1.0 / math.sqrt(d), *_at(q), *_at(k), *_at(v), *_at(y),
            stats.data_ptr()), "forward")
        ctx.save_for_backward(q, k, v, stats)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):  # type: ignore[override]
        q, k, v, stats = ctx.saved_tensors
        lib = native.library()
        b, h, t, d = q.shape
        if dy.stride(-1) != 1:
            dy = dy.contiguous()
        dq, dk, dv = _heads_like(q), _heads_like(q), _heads_like(q)
        _check(lib.tyr_attention_causal_bwd_f32(
            _threads(q), b, h, t, d, 1.0 / math.sqrt(d), *_at(q), *_at(k), *_at(v),
            stats.data_ptr(), *_at(dy), *_at(dq), *_at(dk), *_at(dv)), "backward")
        return dq, dk, dv


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal `softmax(q kᵀ / √d) v` over [b, h, t, d], by the kernel where `runs_here`."""
    # torch.compile cannot trace a ctypes call: a compiled graph gets SDPA, which it fuses.
    # (`torch.compiler.disable` instead would import dynamo, 1.6 s, at every lowering.)
    if not torch.compiler.is_compiling() and runs_here(q, k, v):
        return _CausalAttention.apply(q, k, v)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
