"""Two commands compared as whole processes: each run in a process of its own at one thread,
alternating, the order flipped every pair, after a warm-up pair; measured per process: its
wall time (start to exit) and its peak RSS (`VmHWM`, which the child prints as its last line:
the parent's `ru_maxrss` would carry this process's size over fork and exec). Used by
`hf_load` (tyr run against transformers) and `generate` (tyr generate against diffusers)."""
from __future__ import annotations

import os
import statistics
import subprocess
import time
from typing import Any

from bench import Row, judge

# The last line a child prints: its own peak RSS in kB.
PEAK = "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])"
# `tyr ARGS` in a child that prints its peak RSS last.
TYR = """
import sys
from pytyr.cli import main
rc = main(sys.argv[1:])
""" + PEAK + "\nsys.exit(rc)"
MEMORY_GOAL = 1 / 1.2  # tyr's peak RSS within 1.2x of the other side's


def child(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {done.stderr[-2000:]}")
    return wall, int(done.stdout.split()[-1]) / 1024


def alternate(sides: dict[str, list[str]], pairs: int) -> dict[str, Any]:
    """Each side's samples (`wall_s`, `rss_mb`) and the medians of the per-pair ratios, the
    second side over the first (`time_ratio`, `memory_ratio`)."""
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    for i in range(pairs + 1):  # the first pair warms up (the page cache, compiled imports)
        for name in (list(sides) if i % 2 == 0 else list(reversed(sides))):
            sample = child(sides[name])
            if i:
                got[name].append(sample)
    out: dict[str, Any] = {name: {"wall_s": [w for w, _ in s], "rss_mb": [m for _, m in s]}
                           for name, s in got.items()}
    ours, theirs = got.values()
    out["time_ratio"] = statistics.median(o[0] / t[0] for t, o in zip(ours, theirs))
    out["memory_ratio"] = statistics.median(o[1] / t[1] for t, o in zip(ours, theirs))
    return out


def rows(r: dict[str, Any], label: str, other: str, what: str) -> list[Row]:
    """Wall and peak-RSS rows of `tyr` and `other` (`label`: the rows' name); the goals are
    time >= 1.0 and `MEMORY_GOAL`."""
    out = []
    for key, unit, ratio, goal in (("wall_s", "s", "time_ratio", 1.0),
                                   ("rss_mb", "MB", "memory_ratio", MEMORY_GOAL)):
        for side in ("tyr", other):
            values = sorted(r[side][key])
            row = Row(f"{label} {key.split('_')[0]} ({side})",
                      f"{statistics.median(values):.2f}" if unit == "s"
                      else f"{statistics.median(values):.0f}", f"{values[-1]:.2f}")
            if side == "tyr":
                row = Row(row.what, row.median, row.p90, **judge(r[ratio], goal),
                          note=f"{unit}; {what}" if key == "wall_s" else
                          f"peak RSS {unit} ({other}/tyr; goal: tyr within 1.2x)")
            out.append(row)
    return out
