"""Benchmarks of Tyr: the checker (`bench.checker`) and the executor (`bench.executor`).

Run them all with `python -m bench` (see `bench/__main__.py`). Each benchmark module exposes
`run(...) -> dict` (JSON-serialisable results) and `rows(result) -> list[tuple]` (the lines of
the printed table). The helpers here are the shared timing statistics.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


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
              prefix: str = "") -> list[tuple[str, str, str, str]]:
    """Table lines of one alternating tyr/plain training-step comparison `r` (the dict made by
    `bench.executor.bench_size` and `bench.gpt.bench_pair`): both step times, the ratio
    against the goal, the forward-only breakdown and the same-math check."""
    f = f"{{:.{digits}f}}"
    ok = "ok" if r["ratio"] >= goal else "BELOW GOAL"
    out = [(f"{prefix}train step tyr   [{label}]", f.format(r["tyr"]["median_ms"]),
            f.format(r["tyr"]["p90_ms"]), f"{r['params']} params, {r['steps']} steps"),
           (f"{prefix}train step plain [{label}]", f.format(r["plain"]["median_ms"]),
            f.format(r["plain"]["p90_ms"]),
            f"plain/tyr {r['ratio']:.3f} (pairs {r['pair_ratio_median']:.3f}); "
            f"goal >= {goal}: {ok}")]
    name = label.split(":")[0]
    bd = r.get("breakdown")
    if bd:
        note = f"plain {f.format(bd['forward_plain_ms'])} ms"
        if "check_inputs_us" in bd:
            note += f"; _check_inputs {bd['check_inputs_us']:.1f} us"
        out.append((f"  {prefix}forward only tyr [{name}]", f.format(bd["forward_tyr_ms"]), "",
                    note))
    out.append((f"  {prefix}same math [{name}]", "", "",
                f"max |loss diff| {r['max_loss_diff']:.1e}, "
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
