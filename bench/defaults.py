"""Every example's training step at the settings users get, Tyr beside plain PyTorch: time per
step, peak RSS and the activation memory of a step, each side in its own process.

Two settings: `defaults` (nothing in the environment: `make train`'s thread policy and entry
point against torch's default threads, as the plain scripts run) and `one` (OMP_NUM_THREADS=1
on both sides, as on a loaded machine). Each side of each setting runs in a process of its own
(`bench/side.py`); the processes take turns step by step, in a random order every round, so a
change of load hits all alike, and a time ratio is the median over rounds of plain/tyr. Peak
RSS (`VmHWM`) and activation memory are tyr/plain, each side's median over its processes.
The load is read every round. Each side's batches are `bench.side.build`'s.

Goals (issue 25): the GPT step >= 1.10x plain nanoGPT (default AdamW) at both settings and
>= 1.0x plain with `AdamW(fused=True)`; the other examples >= 0.97x their plain sides; peak
RSS and activation memory <= 1.05x plain at the same batch.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any

from bench import ROOT, Row, judge
from bench.standalone import standalone

GOAL_GPT, GOAL_FUSED, GOAL_OTHER, GOAL_MEMORY = 1.10, 1.0, 0.97, 1.05
# example -> its sides (the plain ones compared with tyr) and (steps, warmup) per process
PLAN: dict[str, tuple[tuple[str, ...], tuple[int, int]]] = {
    "gpt": (("tyr", "plain", "plain_fused"), (60, 5)),
    "diffusion": (("tyr", "plain"), (20, 4)),
    "flux": (("tyr", "plain"), (30, 5)),
    "nanochat": (("tyr", "plain"), (10, 3)),
}
SETTINGS = ("defaults", "one")
# more processes a side, for peak RSS alone: one process's peak varies by up to ±7% with the
# allocator's history (glibc's heap), so the ratio is a median over five processes a side
MEMORY_SETTINGS = ("one", "defaults", "one")


def bench_example(example: str, quick: bool, steps: int | None = None) -> dict[str, Any]:
    """Every side at every setting in a process of its own, taking turns step by step
    (`bench.side.take_turns`)."""
    from bench.side import child_env, take_turns

    sides, (n, warmup) = PLAN[example]
    if steps is not None:
        n = steps
    elif quick:
        n, warmup = max(4, n // 4), 2
    jobs = {f"{setting}/{side}": (example, side, child_env(side, setting))
            for setting in SETTINGS for side in sides}
    turns = take_turns(jobs, steps=n, warmup=warmup)
    peaks = {side: [turns["records"][f"{st}/{side}"]["peak_rss_kb"] for st in SETTINGS]
             for side in ("tyr", "plain")}
    short = quick or steps is not None  # a smoke run: one memory-only process a side
    for k, setting in enumerate(MEMORY_SETTINGS[:1] if short else MEMORY_SETTINGS):
        for side in ("tyr", "plain") if k % 2 == 0 else ("plain", "tyr"):
            peaks[side].append(peak_rss_kb(example, side, setting, n + warmup))
    return {"sides": sides, "steps": n, "warmup": warmup, **turns, "peak_rss_kb": peaks}


def peak_rss_kb(example: str, side: str, setting: str, steps: int) -> int:
    """The peak RSS of one more process of `side` at `setting` that runs `steps` steps
    alone (`python -m bench.side`), as the stepped processes do."""
    from bench.side import child_env

    out = subprocess.run([sys.executable, "-m", "bench.side", example, side, "--steps",
                          str(max(1, steps - 1))], cwd=ROOT, env=child_env(side, setting),
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"bench.side {example} {side} ({setting}) ended: {tail}")
    return int(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_kb"])


def summary(res: dict[str, Any], job: str) -> dict[str, Any]:
    """One side at one setting: median step time, memory, threads and why."""
    rec, ts = res["records"][job], res["times"][job]
    return {"step_ms": statistics.median(t["wall_s"] for t in ts) * 1e3,
            "cpu_ms": statistics.median(t["cpu_s"] for t in ts) * 1e3,
            "peak_rss_mb": rec["peak_rss_kb"] / 1024,
            "activation_mb": rec["activation_bytes"] / 2**20,
            "threads": rec["threads"], "reason": rec["reason"]}


def step_ratio(res: dict[str, Any], num: str, den: str, clock: str = "wall_s") -> float:
    """The median over rounds of num's step time over den's (adjacent in time)."""
    return statistics.median(a[clock] / b[clock]
                             for a, b in zip(res["times"][num], res["times"][den]))


def memory_ratios(res: dict[str, Any]) -> dict[str, float]:
    """Tyr's peak RSS and activation memory over plain's, at the same batch: each side's
    median over its processes (both settings; for peak RSS the memory-only processes too),
    since one process's peak RSS varies by a few per cent with the allocator's history (up to
    ±7% between two of the same side)."""
    def median(side: str, key: str) -> float:
        return statistics.median(float(res["records"][f"{s}/{side}"][key]) for s in SETTINGS)

    peaks = res.get("peak_rss_kb") or {side: [res["records"][f"{s}/{side}"]["peak_rss_kb"]
                                              for s in SETTINGS] for side in ("tyr", "plain")}
    return {"peak_rss": statistics.median(peaks["tyr"]) / statistics.median(peaks["plain"]),
            "activation": median("tyr", "activation_bytes") / median("plain", "activation_bytes")}


def run(*, quick: bool = False, steps: int | None = None,
        only: tuple[str, ...] = tuple(PLAN)) -> dict[str, Any]:
    out: dict[str, Any] = {"benchmark": "defaults", "cpus": os.cpu_count(), "examples": {}}
    for example in only:
        res = bench_example(example, quick, steps)
        res["summary"] = {job: summary(res, job) for job in res["records"]}
        res["ratios"] = {f"{setting}/{side}": {
            "time": step_ratio(res, f"{setting}/{side}", f"{setting}/tyr"),
            "cpu_time": step_ratio(res, f"{setting}/{side}", f"{setting}/tyr", "cpu_s")}
            for setting in SETTINGS for side in res["sides"] if side != "tyr"}
        res["memory"] = memory_ratios(res)
        out["examples"][example] = res
    return out


def _load(res: dict[str, Any]) -> str:
    return f"load {min(res['load']):.1f}-{max(res['load']):.1f}" if res["load"] else ""


def rows(result: dict[str, Any]) -> list[Row]:
    out = []
    for example, res in result["examples"].items():
        for setting in SETTINGS:
            t = res["summary"][f"{setting}/tyr"]
            out.append(Row(f"{example} step tyr [{setting}]", f"{t['step_ms']:.1f}",
                           note=f"{t['threads']} thread(s), {t['reason'].split('; set')[0]}; "
                                f"{res['steps']} steps; {_load(res)}"))
            for side in res["sides"][1:]:
                s, r = res["summary"][f"{setting}/{side}"], res["ratios"][f"{setting}/{side}"]
                goal = (GOAL_FUSED if side == "plain_fused" else GOAL_GPT) \
                    if example == "gpt" else GOAL_OTHER
                out.append(Row(f"{example} step {side} [{setting}]", f"{s['step_ms']:.1f}",
                               **judge(r["time"], goal, digits=3),
                               note=f"plain/tyr; {s['threads']} thread(s); cpu time "
                                    f"{r['cpu_time']:.3f}"))
        per = {f"{st}/{side}": res["summary"][f"{st}/{side}"] for st in SETTINGS
               for side in ("tyr", "plain")}
        rss = ", ".join(f"{st} {per[f'{st}/tyr']['peak_rss_mb']:.0f} / "
                        f"{per[f'{st}/plain']['peak_rss_mb']:.0f}" for st in SETTINGS)
        more = ", ".join(f"{side} " + " ".join(f"{kb / 1024:.0f}" for kb in kbs[2:])
                         for side, kbs in res.get("peak_rss_kb", {}).items() if kbs[2:])
        out.append(Row(f"  {example} peak RSS tyr/plain",
                       **judge(res["memory"]["peak_rss"], GOAL_MEMORY, at_most=True, digits=3),
                       note=f"MB, per process: {rss} (tyr / plain); memory-only: {more}"
                            if more else f"MB, per process: {rss}"))
        out.append(Row(f"  {example} activations tyr/plain",
                       **judge(res["memory"]["activation"], GOAL_MEMORY, at_most=True, digits=3),
                       note=f"{per['one/tyr']['activation_mb']:.2f} / "
                            f"{per['one/plain']['activation_mb']:.2f} MB saved for the backward"))
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.defaults [--quick] [--steps N] [EXAMPLE...]`: rows then JSON."""
    def options(p: Any) -> None:
        p.add_argument("examples", nargs="*", metavar="EXAMPLE", help=", ".join(PLAN))
        p.add_argument("--steps", type=int, help="timed steps per side")

    def kwargs(args: Any, p: Any) -> dict[str, Any]:
        unknown = sorted(set(args.examples) - set(PLAN))
        if unknown:
            p.error(f"unknown example(s) {', '.join(unknown)}; choose from {', '.join(PLAN)}")
        return {"quick": args.quick, "steps": args.steps, "only": tuple(args.examples or PLAN)}

    return standalone(sys.modules[__name__], argv, options=options, kwargs=kwargs)


if __name__ == "__main__":
    sys.exit(main())
