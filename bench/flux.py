"""The Flux-style DiT of `examples/flux/Flux.lean` through Tyr's executor vs the same DiT
hand-written in plain PyTorch in Flux's module structure (`bench/flux_plain.py`).

Config: `examples/flux/config.json` (8 × 8 digits, 2 double-stream and 2 single-stream
blocks, width 64), batch as there. The plain model gets a copy of the Tyr module's state dict,
so both sides do the same arithmetic (the forward passes agree bit for bit; the gradients up
to summation order), and both see the same rectified-flow batches of real digits (the
`image_flow` task's `training_batch`). A training step is forward + `zero_grad` + backward +
AdamW step. Steps ALTERNATE between the sides, the order flipped every pair, after a warm-up.

Reported: median ms per step each, `plain/tyr` (goal >= 0.97), the median of the per-pair
ratios, the forward alone, and the largest loss and parameter differences.
"""
from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn

from bench import ROOT, Row, alternate_steps, config_values, pair_rows, task_batches
from bench.flux_plain import Flux, FluxConfig
from bench.standalone import standalone

GOAL_RATIO = 0.97
FLUX_FILE = ROOT / "examples" / "flux" / "Flux.lean"
CONFIG_FILE = ROOT / "examples" / "flux" / "config.json"
LR, BETAS = 1e-3, (0.9, 0.99)
N_BATCHES = 8


def flux_values(**over: Any) -> dict[str, Any]:
    """The example's model values (config.json's recipe); `over` replaces `c` fields or `b`."""
    return config_values(CONFIG_FILE, **over)


def build_pair(values: dict[str, Any], seed: int = 0) -> tuple[nn.Module, Flux]:
    """The Tyr module of Flux.lean's `flux` and a plain Flux holding the same state."""
    from pytyr.pipeline import graph_from_lean, module_from_graph

    tyr = module_from_graph(graph_from_lean(FLUX_FILE, "flux", values), seed=seed)
    plain = Flux(FluxConfig.from_tyr(values["c"]))
    plain.load_state_dict(tyr.state_dict())
    return tyr, plain


def batches(values: dict[str, Any], n: int, seed: int) -> list[tuple[torch.Tensor, ...]]:
    """`n` rectified-flow batches of real digits, as the model's inputs in order, made as
    `tyr train` makes them: the `image_flow` task's `training_batch(k)`."""
    table = {"name": "image_flow", "txt_len": values["c"]["txt_len"]}
    return task_batches(table, values["b"], n, seed)


def bench_pair(values: dict[str, Any], *, steps: int, warmup: int, seed: int = 0,
               forward_iters: int = 0) -> dict[str, Any]:
    """Alternating training steps of both sides, then (optionally) forwards alone."""
    tyr, plain = build_pair(values, seed)
    mods: dict[str, nn.Module] = {"tyr": tyr, "plain": plain}
    opts = {side: [torch.optim.AdamW(m.parameters(), lr=LR, betas=BETAS)]
            for side, m in mods.items()}
    data = batches(values, N_BATCHES, seed + 1)
    return alternate_steps(values, mods, opts, data, steps=steps, warmup=warmup,
                           forward_iters=forward_iters)


def run(*, quick: bool = False, steps: int | None = None, warmup: int | None = None,
        values: dict[str, Any] | None = None) -> dict[str, Any]:
    n, w = (20, 4) if quick else (100, 10)
    n = steps if steps is not None else n
    w = warmup if warmup is not None else w
    values = values or flux_values()
    return {"benchmark": "flux", "goal_ratio": GOAL_RATIO, "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "optimizer": f"AdamW(lr={LR}, betas={BETAS}), foreach default",
            "modes": {"eager": bench_pair(values, steps=n, warmup=w, forward_iters=n // 2)}}


def rows(result: dict[str, Any]) -> list[Row]:
    """The lines of the printed table."""
    out = []
    for mode, r in result["modes"].items():
        v, c = r["values"], r["values"]["c"]
        label = (f"{mode}: {c['depth']}+{c['depth_single_blocks']} blocks, "
                 f"{c['num_heads']} heads, b {v['b']}")
        out += pair_rows(label, r, result["goal_ratio"], 2, prefix="flux ")
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.flux [--quick]`: this benchmark alone, rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
