"""The GPT of `examples/gpt/GPT.lean` through Tyr's executor vs the same GPT hand-written
in nanoGPT's structure (`bench/nanogpt.py`).

Config: `make train`'s (examples/gpt/config.json: nanoGPT's CPU recipe for Shakespeare-char,
vocab 75 here, block 64, 4 layers, 4 heads of 32 = width 128, dropout 0, batch 12, t = block).
The plain model gets copies of the Tyr module's weights (`load_from_tyr`), so both do the same
arithmetic: losses are compared step by step and the parameters at the end, as evidence. A
training step is forward + `zero_grad` + backward + AdamW step with nanoGPT's optimizer set-up
(lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on rank >= 2). The Tyr side steps with the
optimizer `tyr train` builds (`pytyr.train.optim.make_optimizers`: `FusedAdamW`, torch's fused
kernel with a lean step); the plain side twice: with torch's default AdamW (what nanoGPT does
on CPU) and with `AdamW(fused=True)` (the best a plain user can do). A fourth side is Tyr with
torch's own `AdamW(fused=True)`: what the lean step adds, measured on its own; a fifth is Tyr
lowered with kernels off: what the C kernels (GELU, causal attention: pytyr/kernels/*_cpu.py)
add, on their own. All sides see the same batches of Shakespeare, made as `tyr train` makes
them (the `char_lm` task's `training_batch`). Steps ALTERNATE between the sides, the order
rotated every round, after a warm-up, so drift in machine speed hits all; each step is timed by
the wall clock and by the thread's CPU time (which other processes on the machine do not
inflate).

Reported: median ms per step each, `plain/tyr` as the median of the per-round ratios against
default AdamW (goal >= 1.10) and against fused AdamW (goal >= 1.0), the lean step's share, the
forward alone / `_check_inputs` breakdown, and the fraction of this CPU's 512x512 f32 matmul
rate the Tyr step reaches (goal >= 0.60): the step's FLOPs (the matmuls as counted by
`torch.utils.flop_counter`, attention as PaLM's 12·b·h·t²·d per layer) per second over
the GFLOP/s of a 512x512 @ 512x512 matmul timed in the same rounds. `--compile` (via
`python -m bench.gpt --compile`) also times the sides under `torch.compile`, or says why not.
"""
from __future__ import annotations

import gc
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from bench import (
    ROOT,
    Row,
    config_values,
    forward_breakdown,
    judge,
    max_param_diff,
    pair_result,
    pair_rows,
    task_batches,
    train_step,
)
from bench.nanogpt import GPT, GPTConfig, load_from_tyr, tyr_to_plain_key
from bench.standalone import standalone

GOAL_RATIO = 1.10  # plain nanoGPT (default AdamW) / tyr
GOAL_FUSED = 1.0  # plain with AdamW(fused=True) / tyr
GOAL_FRACTION = 0.60  # the Tyr step's GFLOP/s over a 512x512 matmul's
PROBE = 512  # the matmul whose rate is this CPU's reference
GPT_FILE = ROOT / "examples" / "gpt" / "GPT.lean"
CONFIG = ROOT / "examples" / "gpt" / "config.json"
LR, BETAS, WEIGHT_DECAY = 1e-3, (0.9, 0.99), 0.1
N_BATCHES = 8  # distinct batches, cycled: enough variety, no data-loading cost in the timing


def gpt_values(**over: Any) -> dict[str, Any]:
    """Values of GPT.lean's `gpt` for `make train`'s recipe (examples/gpt/config.json);
    `over` replaces `c` fields or b/t."""
    return config_values(CONFIG, **over)


def build_pair(values: dict[str, Any], seed: int = 0, kernels: str | None = None
               ) -> tuple[nn.Module, GPT]:
    """The Tyr module of GPT.lean's `gpt` for `values` (lowered in kernel mode `kernels`,
    default as `tyr train` does) and a plain GPT holding its weights."""
    from pytyr.pipeline import graph_from_lean, module_from_graph

    tyr = module_from_graph(graph_from_lean(GPT_FILE, "gpt", values), seed=seed, kernels=kernels)
    plain = GPT(GPTConfig.from_tyr(values["c"]))
    load_from_tyr(plain, tyr)
    return tyr, plain


def batches(values: dict[str, Any], n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`n` (idx, targets) batches of Shakespeare as `tyr train` makes them: the `char_lm`
    task's `training_batch(k)` (characters: ids below 75, so `c.vocab` must be at least 75)."""
    return task_batches({"name": "char_lm", "seq": values["t"]}, values["b"], n, seed)


SIDES = ("tyr", "plain", "plain_fused", "tyr_torch_adamw", "tyr_no_kernels")


def _optimizer(module: nn.Module, side: str) -> torch.optim.Optimizer:
    """`tyr`: what `tyr train` builds for this recipe; `plain`: torch's default AdamW;
    `plain_fused` and `tyr_torch_adamw`: AdamW(fused=True). All with nanoGPT's groups (decay
    on rank >= 2)."""
    from pytyr.config import load_dataclass
    from pytyr.train.optim import make_optimizers, param_groups
    from pytyr.train.settings import TrainConfig

    if side == "tyr":
        cfg = load_dataclass(TrainConfig, {"lr": LR, "beta1": BETAS[0], "beta2": BETAS[1],
                                           "weight_decay": WEIGHT_DECAY}, "bench")
        (opt,) = make_optimizers(module, cfg, torch.device("cpu"))
        return opt
    return torch.optim.AdamW(param_groups(module, WEIGHT_DECAY), lr=LR, betas=BETAS,
                             fused=side != "plain")


def _timed(fn: Any, *args: Any) -> tuple[float, float, Any]:
    """(wall seconds, this thread's CPU seconds, result) of one call."""
    w0, c0 = time.perf_counter(), time.thread_time()
    out = fn(*args)
    return time.perf_counter() - w0, time.thread_time() - c0, out


def step_flops(tyr: nn.Module, values: dict[str, Any], batch: tuple[torch.Tensor, ...]) -> int:
    """FLOPs of one training step: the matmuls of forward + backward as torch's flop counter
    counts them, and attention (which it does not count on CPU) as PaLM does: 12·b·h·t²·d per
    causal_attention node (q kᵀ and p v, forward and the backward's twice that)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        tyr(*batch)[1].backward()
    tyr.zero_grad(set_to_none=True)
    attention = 0
    for node in tyr.ir.nodes:
        if node.op == "causal_attention":
            b, h, t, d = node.shape
            attention += 12 * b * h * t * t * d
    return counter.get_total_flops() + attention


def _probe() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(PROBE, PROBE, generator=gen), torch.randn(PROBE, PROBE, generator=gen))


def bench_pair(values: dict[str, Any], *, steps: int, warmup: int, seed: int = 0,
               breakdown_iters: int = 0, compile: bool = False) -> dict[str, Any]:
    """Alternating training steps of the sides (SIDES; without the ablation when compiled)
    and a 512² matmul per round; returns the tyr/plain record with the tyr/plain_fused one
    under `fused`, the ablation under `lean_adamw` and the matmul fraction under `fraction`.
    `compile` wraps every forward in torch.compile."""
    sides = SIDES[:3] if compile else SIDES
    tyr, plain = build_pair(values, seed)
    mods: dict[str, nn.Module] = {"tyr": tyr, "plain": plain}
    for side in sides[2:]:
        t2, p2 = build_pair(values, seed, kernels="off" if side == "tyr_no_kernels" else None)
        mods[side] = t2 if side.startswith("tyr") else p2
    opts = {side: [_optimizer(m, side)] for side, m in mods.items()}
    fwds: dict[str, Any] = dict(mods)
    if compile:
        fwds = {side: torch.compile(m) for side, m in mods.items()}
    data = batches(values, N_BATCHES, seed + 1)
    flops = step_flops(mods[sides[-1]], values, data[0])  # before its optimizer's first step
    a, b = _probe()

    wall: dict[str, list[float]] = {side: [] for side in (*sides, "matmul")}
    cpu: dict[str, list[float]] = {side: [] for side in wall}
    loss_diff = {side: 0.0 for side in sides[1:]}
    gc.collect()
    for i in range(warmup + steps):
        x, y = data[i % len(data)]
        k = i % len(sides)
        losses = {}
        for side in (*sides[k:], *sides[:k], "matmul"):
            if side == "matmul":
                dw, dc, _ = _timed(torch.mm, a, b)
            else:
                dw, dc, loss = _timed(train_step, fwds[side], opts[side], (x, y))
                losses[side] = float(loss.detach())
            if i >= warmup:
                wall[side].append(dw)
                cpu[side].append(dc)
        for side in loss_diff:
            loss_diff[side] = max(loss_diff[side], abs(losses["tyr"] - losses[side]))

    n = sum(q.numel() for q in tyr.parameters())

    def pair(other: str) -> dict[str, Any]:
        # two Tyr modules have the same keys
        pdiff = max_param_diff(tyr, mods[other],
                               None if other.startswith("tyr") else tyr_to_plain_key)
        r = pair_result(values, n, steps, warmup, {"tyr": wall["tyr"], "plain": wall[other]},
                        loss_diff[other], pdiff)
        r["cpu"] = pair_result(values, n, steps, warmup, {"tyr": cpu["tyr"], "plain": cpu[other]},
                               loss_diff[other], r["max_param_diff"])
        return r

    result = pair("plain")
    result["fused"] = pair("plain_fused")
    if "tyr_torch_adamw" in mods:
        result["lean_adamw"] = pair("tyr_torch_adamw")
        result["cpu_kernels"] = pair("tyr_no_kernels")
    result["fraction"] = _fraction(flops, wall, cpu)
    if breakdown_iters > 0:
        result["breakdown"] = forward_breakdown(fwds, tyr, data[0], breakdown_iters)
    return result


def _fraction(flops: int, wall: dict[str, list[float]], cpu: dict[str, list[float]]
              ) -> dict[str, Any]:
    """The Tyr step's FLOP rate over the matmul's, by wall clock and by CPU time."""
    mm = 2 * PROBE ** 3
    out: dict[str, Any] = {"step_gflop": flops / 1e9, "probe": f"{PROBE}x{PROBE} @ {PROBE}x{PROBE}"}
    for clock, t in (("wall", wall), ("cpu", cpu)):
        step_rate = flops / statistics.median(t["tyr"]) / 1e9
        mm_rate = mm / statistics.median(t["matmul"]) / 1e9
        out[clock] = {"step_gflops": step_rate, "matmul_gflops": mm_rate,
                      "fraction": step_rate / mm_rate}
    return out


def run(*, quick: bool = False, steps: int | None = None, warmup: int | None = None,
        breakdown_iters: int | None = None, compile: bool = False,
        values: dict[str, Any] | None = None) -> dict[str, Any]:
    """Time the eager sides (and, with `compile`, the compiled ones); keywords override counts."""
    n, w = (30, 5) if quick else (100, 10)
    n = steps if steps is not None else n
    w = warmup if warmup is not None else w
    bd = breakdown_iters if breakdown_iters is not None else n // 2
    values = values or gpt_values()
    result: dict[str, Any] = {
        "benchmark": "gpt",
        "goal_ratio": GOAL_RATIO,
        "goal_fused": GOAL_FUSED,
        "goal_fraction": GOAL_FRACTION,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "optimizer": f"AdamW(lr={LR}, betas={BETAS}, weight_decay {WEIGHT_DECAY} on rank>=2); "
                     f"tyr: as `tyr train` builds it (FusedAdamW); plain: default "
                     f"(for-loop on CPU) and fused=True",
        "modes": {"eager": bench_pair(values, steps=n, warmup=w, breakdown_iters=bd)},
    }
    if compile:
        try:
            # compiled graphs need a longer warm-up: the first calls trace and compile, and the
            # first few compiled backward steps are still slow on a 2-core box
            result["modes"]["compile"] = bench_pair(values, steps=n, warmup=max(w, 10), compile=True)
        except Exception as e:  # a CPU box without a working inductor toolchain, etc.
            result["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(f"gpt: torch.compile skipped: {result['compile_error']}", file=sys.stderr)
    return result


def _ablation(what: str, rec: dict[str, Any], part: str, extra: str = "") -> Row:
    """A row for Tyr without one of its parts (`rec`'s plain side): that side's times and
    what the part is worth, x(without / with)."""
    return Row(what, f"{rec['plain']['median_ms']:.2f}", f"{rec['plain']['p90_ms']:.2f}",
               ratio=f"{rec['pair_ratio_median']:.3f}",
               note=f"{part}: x{rec['pair_ratio_median']:.3f} "
                    f"(cpu time x{rec['cpu']['pair_ratio_median']:.3f}){extra}")


def rows(result: dict[str, Any]) -> list[Row]:
    """The lines of the printed table: ratios are medians of the per-round ratios."""
    out = []
    for mode, r in result["modes"].items():
        v, c = r["values"], r["values"]["c"]
        label = f"{mode}: {c['n_layer']}L {c['n_head']}x{c['head_dim']}, b {v['b']} t {v['t']}"
        lines = pair_rows(label, r, result["goal_ratio"], 2, prefix="gpt ")
        cpu_ms = r["cpu"]["tyr"]["median_ms"]
        lines[0] = replace(lines[0], note=lines[0].note + f"; cpu {cpu_ms:.1f} ms")
        lines[1] = replace(lines[1], what=f"gpt train step plain, default AdamW [{mode}]",
                           note=f"plain/tyr; cpu time {r['cpu']['pair_ratio_median']:.3f}")
        out += lines[:2]
        f = r["fused"]
        out.append(Row(f"gpt train step plain, fused AdamW [{mode}]",
                       f"{f['plain']['median_ms']:.2f}", f"{f['plain']['p90_ms']:.2f}",
                       **judge(f["pair_ratio_median"], result.get("goal_fused", GOAL_FUSED),
                               digits=3),
                       note=f"plain/tyr; cpu time {f['cpu']['pair_ratio_median']:.3f}"))
        if "lean_adamw" in r:
            a = r["lean_adamw"]
            out.append(_ablation(f"  gpt tyr with torch's fused AdamW [{mode}]", a,
                                 "FusedAdamW's lean step"))
        if "cpu_kernels" in r:
            k = r["cpu_kernels"]
            out.append(_ablation(f"  gpt tyr with kernels off [{mode}]", k, "the C kernels",
                                 f"; max |loss diff| {k['max_loss_diff']:.1e}"))
        fr = r.get("fraction")
        if fr:
            wall, cpu = fr["wall"], fr["cpu"]
            out.append(Row(f"  gpt step GFLOP/s / {fr['probe']} matmul's [{mode}]",
                           **judge(wall["fraction"], result.get("goal_fraction", GOAL_FRACTION)),
                           note=f"{fr['step_gflop']:.2f} GFLOP a step: {wall['step_gflops']:.1f} "
                                f"vs {wall['matmul_gflops']:.1f} GFLOP/s (cpu time "
                                f"{cpu['step_gflops']:.1f} vs {cpu['matmul_gflops']:.1f}, "
                                f"{cpu['fraction']:.2f})"))
        same = lines[-1]
        lines[-1] = replace(same, note=f"vs default AdamW: {same.note}; vs fused AdamW: max "
                                       f"|loss diff| {f['max_loss_diff']:.1e}, max |param diff| "
                                       f"{f['max_param_diff']:.1e}")
        out += lines[2:]
    if "compile_error" in result:
        out.append(Row("  gpt torch.compile", note=f"skipped: {result['compile_error']}"))
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.gpt [--quick] [--compile]`: this benchmark alone, rows then JSON."""
    return standalone(sys.modules[__name__], argv, options=lambda p: p.add_argument(
        "--compile", action="store_true", help="also time the sides under torch.compile"))


if __name__ == "__main__":
    sys.exit(main())
