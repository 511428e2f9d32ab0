"""The GPT of `examples/gpt/GPT.lean` through Tyr's executor vs the same GPT hand-written
in nanoGPT's structure (`bench/nanogpt.py`).

Config: nanoGPT's CPU recipe for Shakespeare-char (vocab 65, block 64, 4 layers, 4 heads of
32 = width 128, dropout 0, batch 12, t = block). The plain model gets copies of the Tyr
module's weights (`load_from_tyr`), so both do the same arithmetic: losses are compared step
by step and the parameters at the end, as evidence. A training step is forward + `zero_grad`
+ backward + AdamW step with nanoGPT's optimizer set-up (lr 1e-3, betas (0.9, 0.99), weight
decay 0.1 on rank >= 2). The Tyr side steps with the optimizer `tyr train` builds
(`pytyr.train.optim.make_optimizers`: AdamW, fused where torch has it); the plain side twice:
with torch's default AdamW (what nanoGPT does) and with `AdamW(fused=True)` (the best a plain
user can do). All sides see the same sequence of random token batches. Steps ALTERNATE between
the sides, the order rotated every round, after a warm-up, so drift in machine speed hits all.

Reported: median ms per step each, `plain/tyr` against default AdamW (goal >= 0.97) and
against fused AdamW (goal >= 1.0), the median of the per-round ratios, and the forward alone /
`_check_inputs` breakdown. `--compile` (via
`python -m bench.gpt --compile`) also times both sides under `torch.compile`, or says why not.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from typing import Any

import torch
from torch import nn

from bench import ROOT, pair_result, pair_rows, summarize
from bench.nanogpt import GPT, GPTConfig, load_from_tyr, tyr_to_plain_key

GOAL_RATIO = 0.97  # plain nanoGPT (default AdamW) / tyr
GOAL_FUSED = 1.0  # plain with AdamW(fused=True) / tyr
GPT_FILE = ROOT / "examples" / "gpt" / "GPT.lean"
LR, BETAS, WEIGHT_DECAY = 1e-3, (0.9, 0.99), 0.1
N_BATCHES = 8  # distinct batches, cycled: enough variety, no data-loading cost in the timing


def gpt_values(**over: Any) -> dict[str, Any]:
    """Values of GPT.lean's `gpt` for nanoGPT's CPU recipe; `over` replaces `c` fields or b/t."""
    c = {"vocab": 65, "block": 64, "n_layer": 4, "n_head": 4, "head_dim": 32, "dropout": 0.0}
    v: dict[str, Any] = {"c": c, "b": 12, "t": 64}
    for k, x in over.items():
        (v if k in ("b", "t") else c)[k] = x
    return v


def build_pair(values: dict[str, Any], seed: int = 0) -> tuple[nn.Module, GPT]:
    """The Tyr module of GPT.lean's `gpt` for `values` and a plain GPT holding its weights."""
    from pytyr.pipeline import graph_from_lean, module_from_graph

    tyr = module_from_graph(graph_from_lean(GPT_FILE, "gpt", values), seed=seed)
    plain = GPT(GPTConfig.from_tyr(values["c"]))
    load_from_tyr(plain, tyr)
    return tyr, plain


def batches(values: dict[str, Any], n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`n` random (idx, targets) batches, targets the next tokens as in a language model."""
    gen = torch.Generator().manual_seed(seed)
    b, t, vocab = values["b"], values["t"], values["c"]["vocab"]
    out = []
    for _ in range(n):
        seq = torch.randint(0, vocab, (b, t + 1), generator=gen)
        out.append((seq[:, :-1].contiguous(), seq[:, 1:].contiguous()))
    return out


def _optimizer(module: nn.Module, side: str) -> torch.optim.Optimizer:
    """`tyr`: what `tyr train` builds for this recipe; `plain`: torch's default AdamW;
    `plain_fused`: AdamW(fused=True). All with nanoGPT's groups (decay on rank >= 2)."""
    from pytyr.config import load_dataclass
    from pytyr.train.optim import make_optimizers, param_groups
    from pytyr.train.settings import TrainConfig

    if side == "tyr":
        cfg = load_dataclass(TrainConfig, {"lr": LR, "beta1": BETAS[0], "beta2": BETAS[1],
                                           "weight_decay": WEIGHT_DECAY}, "bench")
        (opt,) = make_optimizers(module, cfg, torch.device("cpu"))
        return opt
    return torch.optim.AdamW(param_groups(module, WEIGHT_DECAY), lr=LR, betas=BETAS,
                             fused=side == "plain_fused")


def _step(fwd: Any, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = fwd(x, y)[1]
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def _timed(fn: Any, *args: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def _max_param_diff(tyr: nn.Module, plain: GPT) -> float:
    psd = plain.state_dict()
    return max(float((v - psd[tyr_to_plain_key(k)]).abs().max()) for k, v in tyr.state_dict().items())


def bench_pair(values: dict[str, Any], *, steps: int, warmup: int, seed: int = 0,
               breakdown_iters: int = 0, compile: bool = False) -> dict[str, Any]:
    """Alternating training steps of the three sides (tyr, plain, plain_fused); returns the
    tyr/plain record with the tyr/plain_fused one under `fused`. `compile` wraps every
    forward in torch.compile."""
    tyr, plain = build_pair(values, seed)
    _, plain_fused = build_pair(values, seed)
    mods = {"tyr": tyr, "plain": plain, "plain_fused": plain_fused}
    opts = {side: _optimizer(m, side) for side, m in mods.items()}
    fwds: dict[str, Any] = dict(mods)
    if compile:
        fwds = {side: torch.compile(m) for side, m in mods.items()}
    data = batches(values, N_BATCHES, seed + 1)

    sides = list(mods)
    times: dict[str, list[float]] = {side: [] for side in sides}
    diff = {"plain": 0.0, "plain_fused": 0.0}
    gc.collect()
    for i in range(warmup + steps):
        x, y = data[i % len(data)]
        order = sides[i % 3:] + sides[:i % 3]
        losses = {}
        for side in order:
            dt, loss = _timed(_step, fwds[side], opts[side], x, y)
            losses[side] = float(loss.detach())
            if i >= warmup:
                times[side].append(dt)
        for side in diff:
            diff[side] = max(diff[side], abs(losses["tyr"] - losses[side]))

    n = sum(q.numel() for q in tyr.parameters())
    result = pair_result(values, n, steps, warmup, {"tyr": times["tyr"], "plain": times["plain"]},
                         diff["plain"], _max_param_diff(tyr, plain))
    result["fused"] = pair_result(values, n, steps, warmup,
                                  {"tyr": times["tyr"], "plain": times["plain_fused"]},
                                  diff["plain_fused"], _max_param_diff(tyr, plain_fused))
    if breakdown_iters > 0:
        result["breakdown"] = _breakdown(fwds, tyr, data[0], breakdown_iters)
    return result


def _breakdown(fwds: dict[str, Any], tyr: nn.Module, batch: tuple[torch.Tensor, torch.Tensor],
               iters: int) -> dict[str, Any]:
    """Forward alone (recording autograd, as in training; alternating) and the input check."""
    fwd: dict[str, list[float]] = {"tyr": [], "plain": []}
    for i in range(iters):
        order = ("tyr", "plain") if i % 2 == 0 else ("plain", "tyr")
        for side in order:
            dt, _ = _timed(fwds[side], *batch)
            fwd[side].append(dt)
    out: dict[str, Any] = {"forward_tyr_ms": summarize(fwd["tyr"])["median_ms"],
                           "forward_plain_ms": summarize(fwd["plain"])["median_ms"]}
    check = getattr(tyr, "_check_inputs", None)
    if check is not None:
        out["check_inputs_us"] = summarize([_timed(check, batch)[0] for _ in range(iters)])["median_ms"] * 1e3
    return out


def run(*, quick: bool = False, steps: int | None = None, warmup: int | None = None,
        breakdown_iters: int | None = None, compile: bool = False,
        values: dict[str, Any] | None = None) -> dict[str, Any]:
    """Time the eager pair (and, with `compile`, the compiled pair); keywords override counts."""
    n, w = (30, 5) if quick else (120, 15)
    n = steps if steps is not None else n
    w = warmup if warmup is not None else w
    bd = breakdown_iters if breakdown_iters is not None else n // 2
    values = values or gpt_values()
    result: dict[str, Any] = {
        "benchmark": "gpt",
        "goal_ratio": GOAL_RATIO,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "goal_fused": GOAL_FUSED,
        "optimizer": f"AdamW(lr={LR}, betas={BETAS}, weight_decay {WEIGHT_DECAY} on rank>=2); "
                     f"tyr: as `tyr train` builds it (fused where available); plain: default "
                     f"(foreach) and fused=True",
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


def rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(what, median ms, p90 ms, note) lines for the printed table."""
    out = []
    for mode, r in result["modes"].items():
        v, c = r["values"], r["values"]["c"]
        label = f"{mode}: {c['n_layer']}L {c['n_head']}x{c['head_dim']}, b {v['b']} t {v['t']}"
        out += pair_rows(label, r, result["goal_ratio"], 2, prefix="gpt ")
        if "fused" in r:
            out += pair_rows(f"{mode} vs fused AdamW", r["fused"],
                             result.get("goal_fused", GOAL_FUSED), 2, prefix="gpt ")[1:2]
    if "compile_error" in result:
        out.append(("  gpt torch.compile", "", "", f"skipped: {result['compile_error']}"))
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.gpt [--quick] [--compile]`: this benchmark alone, results as JSON on stdout."""
    p = argparse.ArgumentParser(prog="python -m bench.gpt", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--compile", action="store_true", help="also time both sides under torch.compile")
    args = p.parse_args(argv)
    r = run(quick=args.quick, compile=args.compile)
    for row in rows(r):
        print("  ".join(x for x in row if x))
    json.dump(r, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
