"""Benchmarks of Tyr against the plain-PyTorch way (checker, executor, GPT, data, ...).

Run them all with `python -m bench` (see `bench/__main__.py`). Each benchmark module exposes
`run(...) -> dict` (JSON-serialisable results) and `rows(result) -> list[Row]` (the lines of
the printed table: a figure, and where the issue set one, its goal and the verdict). The
helpers here are the shared timing statistics, rows and verdicts.
"""
from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Row:
    """One line of the table: what, median and p90 (ms unless said), a ratio, its goal and the
    verdict (empty where there is no goal), and a note."""

    what: str
    median: str = ""
    p90: str = ""
    ratio: str = ""
    goal: str = ""
    verdict: str = ""
    note: str = ""


def judge(value: float, goal: float, *, at_most: bool = False, digits: int = 2
          ) -> dict[str, str]:
    """The ratio, goal and verdict fields of a Row: `value` against `goal` (>= unless
    `at_most`); a miss is in capitals so that it shows in a table at a glance."""
    ok = value <= goal if at_most else value >= goal
    return {"ratio": f"{value:.{digits}f}", "goal": f"{'<=' if at_most else '>='} {goal:g}",
            "verdict": "ok" if ok else "MISSED"}


def load_average() -> float | None:
    """The machine's 1-minute load average (other work slows every figure), if known."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def percentile(xs: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0..100) of `xs`, linearly interpolated between order statistics."""
    if not xs:
        raise ValueError("percentile of an empty sequence")
    s = sorted(xs)
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def pair_result(values: Any, params: int, steps: int, warmup: int,
                times: dict[str, list[float]], max_loss_diff: float,
                max_param_diff: float) -> dict[str, Any]:
    """The record of one alternating tyr/plain comparison: both timing summaries, the ratio
    of medians and the median of per-pair ratios (robust to load that hits both alike)."""
    t, p = summarize(times["tyr"]), summarize(times["plain"])
    pair = [pt / tt for pt, tt in zip(times["plain"], times["tyr"])]
    return {"values": values, "params": params, "steps": steps, "warmup": warmup,
            "tyr": t, "plain": p, "ratio": p["median_ms"] / t["median_ms"],
            "pair_ratio_median": statistics.median(pair),
            "max_loss_diff": max_loss_diff, "max_param_diff": max_param_diff}


def pair_rows(label: str, r: dict[str, Any], goal: float, digits: int, *,
              prefix: str = "") -> list[Row]:
    """Table lines of one alternating tyr/plain training-step comparison `r` (the dict made by
    `bench.executor.bench_size` and `bench.gpt.bench_pair`): both step times, the ratio
    plain/tyr (median of the per-pair ratios: the least exposed to load drift) against the
    goal, the forward-only breakdown and the same-math check."""
    f = f"{{:.{digits}f}}"
    out = [Row(f"{prefix}train step tyr   [{label}]", f.format(r["tyr"]["median_ms"]),
               f.format(r["tyr"]["p90_ms"]), note=f"{r['params']} params, {r['steps']} steps"),
           Row(f"{prefix}train step plain [{label}]", f.format(r["plain"]["median_ms"]),
               f.format(r["plain"]["p90_ms"]), **judge(r["pair_ratio_median"], goal, digits=3),
               note=f"plain/tyr; ratio of medians {r['ratio']:.3f}")]
    name = label.split(":")[0]
    bd = r.get("breakdown")
    if bd:
        note = f"plain {f.format(bd['forward_plain_ms'])} ms"
        if "check_inputs_us" in bd:
            note += f"; _check_inputs {bd['check_inputs_us']:.1f} us"
        out.append(Row(f"  {prefix}forward only tyr [{name}]", f.format(bd["forward_tyr_ms"]),
                       note=note))
    out.append(Row(f"  {prefix}same math [{name}]",
                   note=f"max |loss diff| {r['max_loss_diff']:.1e}, "
                        f"max |param diff| {r['max_param_diff']:.1e}"))
    return out


def summarize(samples_s: Sequence[float]) -> dict[str, float]:
    """Median, p90, min and mean of timings given in seconds, reported in milliseconds."""
    ms = [t * 1e3 for t in samples_s]
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "p90_ms": percentile(ms, 90),
        "min_ms": min(ms),
        "mean_ms": statistics.fmean(ms),
    }


def config_values(config: Path, **over: Any) -> dict[str, Any]:
    """A model's values for an example's config (`c`: its `model.c` table; `b` and, where the
    task has a `seq`, `t`: as `tyr train` fills them from train.batch and task.seq); `over`
    replaces `c` fields or b/t."""
    cfg = json.loads(config.read_text(encoding="utf-8"))
    v: dict[str, Any] = {"c": dict(cfg["model"]["c"]), "b": cfg["train"]["batch"]}
    if "seq" in cfg["task"]:
        v["t"] = cfg["task"]["seq"]
    for k, x in over.items():
        (v if k in ("b", "t") else v["c"])[k] = x
    return v


def task_batches(table: dict[str, Any], micro_batch: int, n: int, seed: int
                 ) -> list[tuple[Any, ...]]:
    """`n` training batches as `tyr train` makes them: `training_batch(k)`, k < n, of the task
    of `table` (a config's `task` table) at `micro_batch` rows and run seed `seed`, each as the
    task's feeds in their order (the model's arguments)."""
    from pytyr.train.task import TaskContext
    from pytyr.train.tasks import make_task

    task = make_task(table, TaskContext(micro_batch, seed), "bench")
    task.prepare()
    names = list(task.feeds())
    return [tuple(task.training_batch(k)[name] for name in names) for k in range(n)]


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    """(seconds, result) of `fn(*args)`."""
    import time

    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def train_step(fwd: Any, opts: Sequence[Any], batch: Sequence[Any]) -> Any:
    """One training step of a module returning (..., loss) on `batch`, stepping every
    optimizer of `opts` (Muon and AdamW, say): the loss."""
    loss = fwd(*batch)[-1]
    for o in opts:
        o.zero_grad(set_to_none=True)
    loss.backward()
    for o in opts:
        o.step()
    return loss


def max_param_diff(tyr: Any, other: Any, key: Any = None) -> float:
    """The largest |difference| between `tyr`'s parameters and `other`'s, `key` mapping a Tyr
    state-dict key to `other`'s (default: the same keys)."""
    theirs = other.state_dict()
    return max(float((v - theirs[key(k) if key else k]).abs().max())
               for k, v in tyr.state_dict().items())


def forward_breakdown(fwds: dict[str, Any], tyr: Any, batch: Sequence[Any], iters: int
                      ) -> dict[str, Any]:
    """The forward alone of the `tyr` and `plain` sides of `fwds` (recording autograd, as in
    training; alternating), and the Tyr module's input check by itself where it has one."""
    fwd: dict[str, list[float]] = {"tyr": [], "plain": []}
    for i in range(iters):
        for side in (("tyr", "plain") if i % 2 == 0 else ("plain", "tyr")):
            fwd[side].append(timed(fwds[side], *batch)[0])
    out: dict[str, Any] = {"forward_tyr_ms": summarize(fwd["tyr"])["median_ms"],
                           "forward_plain_ms": summarize(fwd["plain"])["median_ms"]}
    check = getattr(tyr, "_check_inputs", None)
    if check is not None:
        out["check_inputs_us"] = summarize(
            [timed(check, tuple(batch))[0] for _ in range(iters)])["median_ms"] * 1e3
    return out


def alternate_steps(values: Any, mods: dict[str, Any], opts: dict[str, Sequence[Any]],
                    data: Sequence[Sequence[Any]], *, steps: int, warmup: int,
                    forward_iters: int = 0, plain_key: Any = None) -> dict[str, Any]:
    """Training steps of the `tyr` and `plain` sides (each with its optimizers) alternating,
    the order flipped every round, after `warmup` rounds: the `pair_result` record (the
    parameters compared through `plain_key`, see `max_param_diff`), with the forward alone
    under `breakdown` when `forward_iters` > 0."""
    import gc

    times: dict[str, list[float]] = {"tyr": [], "plain": []}
    max_loss_diff = 0.0
    gc.collect()
    for i in range(warmup + steps):
        losses = {}
        for side in (("tyr", "plain") if i % 2 == 0 else ("plain", "tyr")):
            dt, loss = timed(train_step, mods[side], opts[side], data[i % len(data)])
            losses[side] = float(loss.detach())
            if i >= warmup:
                times[side].append(dt)
        max_loss_diff = max(max_loss_diff, abs(losses["tyr"] - losses["plain"]))
    tyr = mods["tyr"]
    result = pair_result(values, sum(q.numel() for q in tyr.parameters()), steps, warmup,
                         times, max_loss_diff, max_param_diff(tyr, mods["plain"], plain_key))
    if forward_iters > 0:
        result["breakdown"] = forward_breakdown(mods, tyr, data[0], forward_iters)
    return result
