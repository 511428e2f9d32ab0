"""The engine's thread policy and OpenMP's wait policy, measured on the main job's step.

`make train` on a CPU times its own step at one thread and at every usable core and keeps the
faster (`pytyr/train/threads.py`). This benchmark runs the Tyr GPT step of `make train` in four
processes that take turns step by step (`bench.side.take_turns`, on `bench.side.build`'s
batches): one thread; every core with OpenMP's default wait policy (idle threads spin for a
while after each op); every core with `OMP_WAIT_POLICY=PASSIVE` (idle threads sleep at once);
and `make train`'s own choice. Reported: each median step, every core over one thread under
each policy (what PASSIVE costs or saves), and whether the policy's choice was within 10% of
the faster count (goal: it was)."""
from __future__ import annotations

import os
import statistics
from typing import Any

from bench import Row, judge

STEPS, WARMUP = 30, 5
SLACK = 1.10  # the choice's step may be this much slower than the best count's


def _env(threads: int | None, wait: str | None) -> dict[str, str]:
    from bench.side import THREAD_VARS

    env = dict(os.environ)
    for var in (*THREAD_VARS, "OMP_WAIT_POLICY"):
        env.pop(var, None)
    if threads is not None:
        env.update({var: str(threads) for var in THREAD_VARS})
    if wait is not None:
        env["OMP_WAIT_POLICY"] = wait
    return env


def run(*, quick: bool = False, steps: int | None = None) -> dict[str, Any]:
    from bench.side import take_turns
    from pytyr.train.threads import usable_cores

    n, warmup = (steps, 2) if steps is not None else ((8, 2) if quick else (STEPS, WARMUP))
    cores = usable_cores()
    envs = {"one": _env(1, None), "cores/default": _env(cores, None),
            "cores/passive": _env(cores, "PASSIVE"), "auto": _env(None, None)}
    turns = take_turns({job: ("gpt", "tyr", env) for job, env in envs.items()},
                       steps=n, warmup=warmup)
    times = {job: [t["wall_s"] for t in ts] for job, ts in turns["times"].items()}
    ready = {job: r["ready"] for job, r in turns["records"].items()}

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    chosen = ready["auto"]["threads"]
    best = min(("one", "cores/default"), key=lambda j: statistics.median(times[j]))
    return {"benchmark": "threads", "cores": cores, "steps": n,
            "median_ms": {j: statistics.median(t) * 1e3 for j, t in times.items()},
            "cores_over_one": {"default": ratio("cores/default", "one"),
                               "passive": ratio("cores/passive", "one")},
            "passive_over_default": ratio("cores/passive", "cores/default"),
            "auto": {"threads": chosen, "reason": ready["auto"]["reason"],
                     "over_best": ratio("auto", best), "best": best},
            "load": turns["load"]}


def rows(result: dict[str, Any]) -> list[Row]:
    m, c = result["median_ms"], result["cores"]
    load = f"load {min(result['load']):.1f}-{max(result['load']):.1f}" if result["load"] else ""
    a = result["auto"]
    return [
        Row("gpt step tyr, 1 thread [threads]", f"{m['one']:.1f}", note=load),
        Row(f"gpt step tyr, {c} threads, OpenMP's default wait [threads]",
            f"{m['cores/default']:.1f}", ratio=f"{result['cores_over_one']['default']:.2f}",
            note=f"{c} threads / 1 thread"),
        Row(f"gpt step tyr, {c} threads, OMP_WAIT_POLICY=PASSIVE [threads]",
            f"{m['cores/passive']:.1f}", ratio=f"{result['cores_over_one']['passive']:.2f}",
            note=f"{c} threads / 1 thread; PASSIVE / default "
                 f"{result['passive_over_default']:.2f}"),
        Row("gpt step tyr, make train's choice [threads]", f"{m['auto']:.1f}",
            **judge(a["over_best"], SLACK, at_most=True),
            note=f"choice / faster count ({a['best']}); {a['reason'].split('; set')[0]}"),
    ]
