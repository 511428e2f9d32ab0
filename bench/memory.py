"""Activation checkpointing per block (`train.checkpoint_blocks`) where it pays: a GPT whose
activations outweigh its weights (`bench.side.GPT_LARGE`: 8 layers of width 256, b 8 × t 256),
Tyr with and without checkpointing and plain PyTorch, each in its own process at one thread,
taking turns step by step (`bench.side.take_turns`), on `bench.side.build`'s batches (the
`char_lm` task's `training_batch`).

Reported: each side's step time and peak RSS (`VmHWM`: weights, AdamW's state, activations,
the allocator's slack, torch itself), the peak RSS saved by checkpointing and what it costs
in time, and Tyr's peak RSS over plain's without it (goal <= 1.05).
"""
from __future__ import annotations

import statistics
from typing import Any

from bench import Row, judge

SIDES = ("tyr", "tyr_checkpoint", "plain")
GOAL_MEMORY = 1.05


def run(*, quick: bool = False, steps: int | None = None) -> dict[str, Any]:
    from bench.side import GPT_LARGE, child_env, take_turns

    n, warmup = (steps, 1) if steps is not None else ((2, 1) if quick else (6, 1))
    turns = take_turns({side: ("gpt_large", side, child_env(side, "one")) for side in SIDES},
                       steps=n, warmup=warmup)
    records = turns["records"]
    times = {side: [t["wall_s"] for t in ts] for side, ts in turns["times"].items()}
    mb = {side: r["peak_rss_kb"] / 1024 for side, r in records.items()}
    return {"benchmark": "memory", "model": GPT_LARGE, "steps": n,
            "step_ms": {s: statistics.median(t) * 1e3 for s, t in times.items()},
            "checkpoint_time": statistics.median(
                a / b for a, b in zip(times["tyr_checkpoint"], times["tyr"])),
            "peak_rss_mb": mb, "params": records["tyr"]["params"],
            "activation_mb": {s: r["activation_bytes"] / 2**20 for s, r in records.items()},
            "load": turns["load"]}


def rows(result: dict[str, Any]) -> list[Row]:
    m, ms, act = result["peak_rss_mb"], result["step_ms"], result["activation_mb"]
    g = result["model"]
    what = f"{g['n_layer']}L width {g['n_head'] * g['head_dim']}, b {g['b']} t {g['t']}"
    load = f"load {min(result['load']):.1f}-{max(result['load']):.1f}" if result["load"] else ""
    return [
        Row(f"gpt_large step tyr [{what}]", f"{ms['tyr']:.0f}",
            note=f"peak RSS {m['tyr']:.0f} MB, {act['tyr']:.0f} MB saved for the backward; "
                 f"{result['params']:,} params; one thread; {load}"),
        Row("gpt_large step plain", f"{ms['plain']:.0f}",
            note=f"peak RSS {m['plain']:.0f} MB, {act['plain']:.0f} MB saved for the backward"),
        Row("  gpt_large peak RSS tyr/plain",
            **judge(m["tyr"] / m["plain"], GOAL_MEMORY, at_most=True, digits=3)),
        Row("gpt_large step tyr, train.checkpoint_blocks", f"{ms['tyr_checkpoint']:.0f}",
            ratio=f"{m['tyr_checkpoint'] / m['tyr']:.2f}",
            note=f"peak RSS {m['tyr_checkpoint']:.0f} MB ({m['tyr'] - m['tyr_checkpoint']:.0f} "
                 f"MB less; ratio: over without), {act['tyr_checkpoint']:.0f} MB kept between "
                 f"the passes; step x{result['checkpoint_time']:.2f}"),
    ]
