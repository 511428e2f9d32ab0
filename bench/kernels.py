"""Tyr's Triton kernels against the torch path, on a CUDA device, and the GPT train step with
kernels against without.

Each kernel is timed forward and forward + backward against what torch does without it:
`F.scaled_dot_product_attention`, `F.layer_norm`, `F.rms_norm`, `F.cross_entropy` (after
`cap · tanh(z / cap)` when capped), the executor's eager rotate-half, `Tensor.clone`. Calls
alternate between the sides (order flipped every pair) after a warm-up; times are CUDA-event
milliseconds. Reported: median ms each side, the ratio torch/kernel (≥ 1: the kernel is as
fast), a goal per kernel and the verdict, TFLOP/s (attention: 4·b·h·t²·d, halved when causal,
backward 2.5× forward) or GB/s for the memory-bound kernels.

Without CUDA (as on this project's machines) nothing is timed: the result says so, and the
numbers are unmeasured. `scripts/gpu/kernels.sh` runs it on a GPU after the parity suite.
"""
from __future__ import annotations

import gc
import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch

from bench import ROOT, Row, judge, summarize
from bench.standalone import standalone

GPT_FILE = ROOT / "examples" / "gpt" / "GPT.lean"


def _time_once(fn: Callable[[], Any]) -> float:
    """CUDA-event seconds of one call of `fn`."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3


def _time_pair(fns: dict[str, Callable[[], Any]], iters: int, warmup: int) -> dict[str, list]:
    """Seconds of each side's call, alternating (order flipped every pair), after `warmup`."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for i in range(warmup + iters):
        for side in (list(fns) if i % 2 == 0 else list(fns)[::-1]):
            dt = _time_once(fns[side])
            if i >= warmup:
                times[side].append(dt)
    return times


def _fwd_bwd(fn: Callable[..., Any], args: list[Any], grad_args: list[int]):
    """Callables for fn's forward alone and forward + backward (a random output gradient)."""
    live = [a.detach().requires_grad_(i in grad_args) if isinstance(a, torch.Tensor) else a
            for i, a in enumerate(args)]
    out = fn(*live)
    out = out[0] if isinstance(out, tuple) else out
    dout = torch.randn_like(out)

    def fwd():
        with torch.no_grad():
            fn(*live)

    def both():
        o = fn(*live)
        o = o[0] if isinstance(o, tuple) else o
        torch.autograd.backward(o, dout)
        for i in grad_args:
            live[i].grad = None

    return fwd, both


def _cases(quick: bool) -> list[dict[str, Any]]:
    from pytyr.kernels import attention, copy, cross_entropy, norms, rotary

    s = 4 if quick else 1
    bf, f32 = torch.bfloat16, torch.float32
    out = []
    for dt, d, causal in [(bf, 64, True), (bf, 128, True), (bf, 128, False), (f32, 64, True)]:
        b, h, t = 8 // s, 16, 2048
        flops = 4 * b * h * t * t * d * (0.5 if causal else 1.0)
        out.append(dict(name=f"flash_attention {b}x{h}x{t}x{d} {'causal ' if causal else ''}"
                        f"{dt}".replace("torch.", ""),
                        kernel=attention.flash_attention, torch=attention.attention_reference,
                        make=lambda g, b=b, h=h, t=t, d=d, dt=dt, c=causal: [
                            torch.randn(b, h, t, d, generator=g, device="cuda", dtype=dt)
                            for _ in range(3)] + [c],
                        grads=[0, 1, 2], flops=flops, bwd_flops=2.5 * flops, goal=0.7))
    rows, n = 16384 // s, 4096
    for dt in (bf, f32):
        tag = str(dt).replace("torch.", "")
        mk = (lambda g, dt=dt: [torch.randn(rows, n, generator=g, device="cuda", dtype=dt),
                                torch.ones(n, device="cuda", dtype=dt),
                                torch.zeros(n, device="cuda", dtype=dt), 1e-5])
        out.append(dict(name=f"layer_norm {rows}x{n} {tag}", kernel=norms.layer_norm,
                        torch=norms.layer_norm_reference, make=mk, grads=[0, 1, 2],
                        bytes=2 * rows * n * dt.itemsize, goal=0.9))
        out.append(dict(name=f"rms_norm {rows}x{n} {tag}", kernel=norms.rms_norm,
                        torch=norms.rms_norm_reference,
                        make=lambda g, dt=dt: [torch.randn(rows, n, generator=g, device="cuda",
                                                           dtype=dt), None, 1e-6],
                        grads=[0], bytes=2 * rows * n * dt.itemsize, goal=0.9))
    vocab = 50304
    for dt, cap in ((bf, None), (f32, None), (bf, 15.0)):
        tag = str(dt).replace("torch.", "") + (f" softcap {cap}" if cap else "")
        out.append(dict(name=f"cross_entropy {rows}x{vocab} {tag}",
                        kernel=cross_entropy.cross_entropy,
                        torch=cross_entropy.cross_entropy_reference,
                        make=lambda g, dt=dt, cap=cap: [
                            torch.randn(rows, vocab, generator=g, device="cuda", dtype=dt),
                            torch.randint(0, vocab, (rows,), generator=g, device="cuda"), cap],
                        grads=[0], bytes=rows * vocab * dt.itemsize, goal=1.0))
    b, h, t, d = 8 // s, 16, 2048, 128
    tab = rotary.tables(t, d // 2)
    out.append(dict(name=f"rotary {b}x{h}x{t}x{d} bf16", kernel=rotary.rotary,
                    torch=rotary.rotary_reference,
                    make=lambda g: [torch.randn(b, t, h, d, generator=g, device="cuda",
                                                dtype=bf).transpose(1, 2)]
                    + [x.to("cuda", bf) for x in tab],
                    grads=[0], bytes=2 * b * h * t * d * 2, goal=1.5))
    numel = (1 << 28) // s
    out.append(dict(name=f"copy {numel} f32", kernel=copy.copy, torch=copy.copy_reference,
                    make=lambda g: [torch.randn(numel, generator=g, device="cuda")],
                    grads=[0], bytes=2 * numel * 4, goal=0.9))
    return out


def bench_kernel(case: dict[str, Any], iters: int, warmup: int) -> dict[str, Any]:
    g = torch.Generator(device="cuda").manual_seed(0)
    args = case["make"](g)
    res: dict[str, Any] = {"name": case["name"], "goal": case["goal"]}
    k_fwd, k_both = _fwd_bwd(case["kernel"], args, case["grads"])
    t_fwd, t_both = _fwd_bwd(case["torch"], args, case["grads"])
    for phase, fns in (("fwd", {"kernel": k_fwd, "torch": t_fwd}),
                       ("fwd+bwd", {"kernel": k_both, "torch": t_both})):
        times = _time_pair(fns, iters, warmup)
        k, t = summarize(times["kernel"]), summarize(times["torch"])
        pairs = [b / a for a, b in zip(times["kernel"], times["torch"])]
        work = case.get("flops", 0) + (case.get("bwd_flops", 0) if phase != "fwd" else 0)
        moved = case.get("bytes", 0) * (1 if phase == "fwd" else 2)
        res[phase] = {"kernel": k, "torch": t, "ratio": t["median_ms"] / k["median_ms"],
                      "pair_ratio_median": statistics.median(pairs),
                      "kernel_tflops": work / k["median_ms"] / 1e9 if work else None,
                      "torch_tflops": work / t["median_ms"] / 1e9 if work else None,
                      "kernel_gbs": moved / k["median_ms"] / 1e6 if moved else None,
                      "torch_gbs": moved / t["median_ms"] / 1e6 if moved else None}
    del args
    gc.collect()
    torch.cuda.empty_cache()
    return res


def bench_gpt(quick: bool, steps: int, warmup: int) -> dict[str, Any]:
    """The GPT of examples/gpt on nanoGPT's GPU recipe shape (6 layers, 6 heads of 64,
    block 256, batch 64), f32 as the IR is: train steps with kernels (auto) and without."""
    from bench.gpt import batches, gpt_values
    from pytyr.exec import build_module
    from pytyr.pipeline import LeanModels

    values = gpt_values(n_layer=6, n_head=6, head_dim=64, block=256, t=256,
                        b=16 if quick else 64)
    graph = LeanModels(GPT_FILE).graph("gpt", values)
    mods = {mode: build_module(graph, seed=0, kernels=mode).cuda() for mode in ("auto", "off")}
    opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-3) for k, m in mods.items()}
    data = [(x.cuda(), y.cuda()) for x, y in batches(values, 8, 1)]
    losses: dict[str, list[float]] = {k: [] for k in mods}

    def step(mode: str, i: int) -> Callable[[], None]:
        def run() -> None:
            x, y = data[i % len(data)]
            loss = mods[mode](x, y)[1]
            opts[mode].zero_grad(set_to_none=True)
            loss.backward()
            opts[mode].step()
            losses[mode].append(float(loss))
        return run

    times: dict[str, list[float]] = {"auto": [], "off": []}
    for i in range(warmup + steps):
        for mode in (("auto", "off") if i % 2 == 0 else ("off", "auto")):
            dt = _time_once(step(mode, i))
            if i >= warmup:
                times[mode].append(dt)
    k, t = summarize(times["auto"]), summarize(times["off"])
    diffs = [abs(a - b) for a, b in zip(losses["auto"], losses["off"])]
    return {"name": f"gpt train step 6L 6x64 b{values['b']} t256 f32", "kernel": k, "torch": t,
            "ratio": t["median_ms"] / k["median_ms"], "goal": 1.0,
            "max_loss_diff": max(diffs), "final_losses": [losses["auto"][-1], losses["off"][-1]]}


def run(*, quick: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"benchmark": "kernels", "torch": torch.__version__}
    if not torch.cuda.is_available():
        result["skipped"] = "no CUDA device here: kernel timings are unmeasured"
        return result
    result["device"] = torch.cuda.get_device_name()
    iters, warmup = (10, 3) if quick else (40, 10)
    result["kernels"] = [bench_kernel(c, iters, warmup) for c in _cases(quick)]
    result["gpt"] = bench_gpt(quick, *((5, 3) if quick else (30, 10)))
    return result


def rows(result: dict[str, Any]) -> list[Row]:
    if "skipped" in result:
        return [Row("kernels", note=f"skipped: {result['skipped']}")]
    out = []
    for r in result["kernels"]:
        for phase in ("fwd", "fwd+bwd"):
            p = r[phase]
            rate = (f"{p['kernel_tflops']:.1f} / {p['torch_tflops']:.1f} TFLOP/s"
                    if p["kernel_tflops"] else
                    f"{p['kernel_gbs']:.0f} / {p['torch_gbs']:.0f} GB/s")
            out.append(Row(f"{r['name']} {phase} kernel", f"{p['kernel']['median_ms']:.3f}",
                           f"{p['kernel']['p90_ms']:.3f}", note=rate))
            out.append(Row(f"{r['name']} {phase} torch", f"{p['torch']['median_ms']:.3f}",
                           f"{p['torch']['p90_ms']:.3f}", **judge(p["ratio"], r["goal"]),
                           note=f"torch/kernel (pairs {p['pair_ratio_median']:.2f})"))
    g = result["gpt"]
    out.append(Row(f"{g['name']} kernels", f"{g['kernel']['median_ms']:.2f}",
                   f"{g['kernel']['p90_ms']:.2f}",
                   note=f"max |loss diff| {g['max_loss_diff']:.1e}"))
    out.append(Row(f"{g['name']} torch", f"{g['torch']['median_ms']:.2f}",
                   f"{g['torch']['p90_ms']:.2f}", **judge(g["ratio"], g["goal"]),
                   note="torch/kernels"))
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.kernels [--quick]`: this benchmark alone, rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
