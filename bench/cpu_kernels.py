"""Tyr's C kernel for the CPU (`pytyr/kernels/attention_cpu.py`) against torch's op, on its own.

`attention_cpu` against `F.scaled_dot_product_attention(is_causal=True)`, forward + backward
(a fixed output gradient), at the GPT recipe's shapes and one larger, on q, k, v as the model
makes them (views of one packed projection). (The C GELU kernel was removed: on AVX-512
torch's op was as fast in the step, docs/performance.md.)
Calls alternate between the sides (order flipped every pair) after a warm-up and are timed by
the thread's CPU time. Reported: median ms each side, the ratio torch/kernel (median of the
per-pair ratios; goal >= 1.0: the kernel is as fast) and the largest difference of the
outputs and gradients from torch's.

Without the kernels here (not x86-64 with AVX2, no C compiler) nothing is timed and the
result says why. Standalone: `python -m bench.cpu_kernels [--quick]`.
"""
from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from bench import Row, judge, summarize
from bench.standalone import standalone

GOAL = 1.0


def _attention_case(b: int, h: int, t: int, d: int
                    ) -> tuple[str, list[torch.Tensor], Callable, Callable]:
    from pytyr.kernels.attention_cpu import attention

    qkv = torch.randn(b, t, 3 * h * d, generator=torch.Generator().manual_seed(0))
    qkv_heads = [x.view(b, t, h, d).transpose(1, 2) for x in qkv.split(h * d, -1)]

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return f"causal attention b {b} h {h} t {t} d {d}", qkv_heads, attention, sdpa


def _step(fn: Callable, inputs: list[torch.Tensor], grad: torch.Tensor
          ) -> list[torch.Tensor]:
    """Forward and backward of `fn`; returns the output and the inputs' gradients."""
    leaves = [x.detach().requires_grad_() for x in inputs]
    out = fn(*leaves)
    out.backward(grad)
    return [out.detach()] + [x.grad for x in leaves]


def bench_case(name: str, inputs: list[torch.Tensor], kernel: Callable, ref: Callable,
               iters: int, warmup: int) -> dict[str, Any]:
    grad = torch.randn_like(ref(*inputs), memory_format=torch.contiguous_format)
    sides = {"kernel": kernel, "torch": ref}
    diff = max(float((a - b).abs().max()) for a, b in
               zip(_step(kernel, inputs, grad), _step(ref, inputs, grad)))
    times: dict[str, list[float]] = {k: [] for k in sides}
    for i in range(warmup + iters):
        for side in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
            t0 = time.thread_time()
            _step(sides[side], inputs, grad)
            if i >= warmup:
                times[side].append(time.thread_time() - t0)
    pairs = [r / k for k, r in zip(times["kernel"], times["torch"])]
    return {"case": name, "kernel": summarize(times["kernel"]), "torch": summarize(times["torch"]),
            "pair_ratio_median": statistics.median(pairs), "max_abs_diff": diff}


def _cases(quick: bool) -> list[tuple[str, list[torch.Tensor], Callable, Callable]]:
    out = [_attention_case(12, 4, 64, 32)]  # the GPT recipe's
    if not quick:
        out += [_attention_case(4, 8, 256, 64)]
    return out


def run(*, quick: bool = False, iters: int | None = None, warmup: int | None = None
        ) -> dict[str, Any]:
    from pytyr.kernels import native

    result: dict[str, Any] = {"benchmark": "cpu_kernels", "goal_ratio": GOAL,
                              "threads": torch.get_num_threads()}
    missing = native.unavailable()
    if missing:
        result["skipped"] = missing
        return result
    n = iters if iters is not None else (10 if quick else 40)
    w = warmup if warmup is not None else (2 if quick else 5)
    result["cases"] = [bench_case(*case, iters=n, warmup=w) for case in _cases(quick)]
    return result


def rows(result: dict[str, Any]) -> list[Row]:
    if "skipped" in result:
        return [Row("cpu kernels", note=f"skipped: {result['skipped']}")]
    out = []
    for c in result["cases"]:
        out.append(Row(f"C kernel fwd+bwd: {c['case']}", f"{c['kernel']['median_ms']:.3f}",
                       f"{c['kernel']['p90_ms']:.3f}",
                       **judge(c["pair_ratio_median"], result["goal_ratio"]),
                       note=f"torch {c['torch']['median_ms']:.3f} ms; max |diff| "
                            f"{c['max_abs_diff']:.1e}"))
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.cpu_kernels [--quick]`: this benchmark alone, rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
