"""Deliberately broken kernels, each a bug real kernels have had, for the generated parity
tests to catch (tests/test_kernel_parity.py). Not used anywhere else."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from pytyr.kernels.attention import _FlashAttention
from pytyr.kernels.copy import BLOCK
from pytyr.kernels.rotary import _rotate


@triton.jit
def _copy_full_blocks(X, Y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs))  # no mask: the grid below covers full blocks only


def _copy_full(x: torch.Tensor) -> torch.Tensor:
    y = torch.zeros_like(x)
    if x.numel() >= BLOCK:
        _copy_full_blocks[(x.numel() // BLOCK,)](x.contiguous(), y, BLOCK=BLOCK)
    return y


class _CopyWithoutTail(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _copy_full(x)

    @staticmethod
    def backward(ctx, dy):
        return _copy_full(dy)


def copy_without_tail(x: torch.Tensor) -> torch.Tensor:
    """Copies whole blocks only: wrong exactly when the size is not a multiple of the block."""
    return _CopyWithoutTail.apply(x)


class _RotaryForwardTwice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _rotate(x, cos, sin, 1)

    @staticmethod
    def backward(ctx, dy):
        cos, sin = ctx.saved_tensors
        return _rotate(dy, cos, sin, 1), None, None  # should rotate back: sign -1


def rotary_unrotated_backward(x, cos, sin):
    """The right forward, with a backward that rotates the gradient the wrong way."""
    return _RotaryForwardTwice.apply(x, cos, sin)


def attention_scale_off_by_a_thousandth(q, k, v, causal=True):
    """Flash attention with its softmax scale 0.1 % too large."""
    return _FlashAttention.apply(q, k, v, bool(causal), 1.001 / math.sqrt(q.shape[-1]))
