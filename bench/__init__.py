"""Benchmarks of Tyr: the checker (`bench.checker`) and the executor (`bench.executor`).

Run them all with `python -m bench` (see `bench/__main__.py`). Each benchmark module exposes
`run(...) -> dict` (JSON-serialisable results) and `rows(result) -> list[tuple]` (the lines of
the printed table). The helpers here are the shared timing statistics.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

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
