"""The masked diffusion model of `examples/diffusion/Diffusion.lean` through Tyr's executor vs
the same bidirectional transformer and loss in plain PyTorch (`bench/diffusion_plain.py`).

Config: the model of `examples/diffusion/config.json` (the CPU recipe). The plain model loads
the Tyr module's state dict as it is (the same keys), so both do the same arithmetic (save
Tyr's C GELU kernel on CPU, within float rounding of torch's): losses are compared step by
step and the parameters at the end. A training step is forward +
`zero_grad` + backward + AdamW step (lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on rank >= 2
via `pytyr.train.optim.param_groups`) on MDLM batches of Shakespeare (the `mdlm` task's
`training_batch`, as `tyr train` makes them), the same batches on both sides. Steps ALTERNATE
between the sides, the order flipped every pair, after a warm-up, so drift in machine speed
hits both alike.

Reported: median ms per step each, `plain/tyr` (goal >= 0.97) and the median of the per-pair
ratios, the forward alone, and the same-math check.
"""
from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn

from bench import ROOT, Row, alternate_steps, config_values, pair_rows, task_batches
from bench.diffusion_plain import Diffusion, DiffusionConfig
from bench.standalone import standalone

GOAL_RATIO = 0.97
LEAN_FILE = ROOT / "examples" / "diffusion" / "Diffusion.lean"
CONFIG = ROOT / "examples" / "diffusion" / "config.json"
LR, BETAS, WEIGHT_DECAY = 1e-3, (0.9, 0.99), 0.1
N_BATCHES = 8  # distinct batches, cycled


def recipe_values(**over: Any) -> dict[str, Any]:
    """The model's values for config.json's recipe; `over` replaces `c` fields or b/t."""
    return config_values(CONFIG, **over)


def build_pair(values: dict[str, Any], seed: int = 0) -> tuple[nn.Module, Diffusion]:
    """The Tyr module of Diffusion.lean's `diffusion` for `values` and a plain model holding
    its weights."""
    from pytyr.pipeline import graph_from_lean, module_from_graph

    tyr = module_from_graph(graph_from_lean(LEAN_FILE, "diffusion", values), seed=seed)
    plain = Diffusion(DiffusionConfig.from_tyr(values["c"]))
    plain.load_state_dict(tyr.state_dict())
    return tyr, plain


def batches(values: dict[str, Any], n: int, seed: int) -> list[tuple[torch.Tensor, ...]]:
    """`n` MDLM batches (ids, targets, weights) of the Shakespeare corpus, made as `tyr train`
    makes them: the `mdlm` task's `training_batch(k)`."""
    return task_batches({"name": "mdlm", "seq": values["t"]}, values["b"], n, seed)


def _optimizer(module: nn.Module) -> torch.optim.Optimizer:
    from pytyr.train.optim import param_groups

    return torch.optim.AdamW(param_groups(module, WEIGHT_DECAY), lr=LR, betas=BETAS)


def bench_pair(values: dict[str, Any], *, steps: int, warmup: int, seed: int = 0,
               breakdown_iters: int = 0) -> dict[str, Any]:
    """Alternating training steps of both sides on the same batches."""
    tyr, plain = build_pair(values, seed)
    mods = {"tyr": tyr, "plain": plain}
    opts = {side: [_optimizer(m)] for side, m in mods.items()}
    data = batches(values, N_BATCHES, seed + 1)
    return alternate_steps(values, mods, opts, data, steps=steps, warmup=warmup,
                           forward_iters=breakdown_iters)


def run(*, quick: bool = False, steps: int | None = None, warmup: int | None = None,
        breakdown_iters: int | None = None, values: dict[str, Any] | None = None
        ) -> dict[str, Any]:
    """Time the pair on the recipe's model (or `values`); keywords override the counts."""
    n, w = (30, 5) if quick else (80, 10)
    n = steps if steps is not None else n
    w = warmup if warmup is not None else w
    bd = breakdown_iters if breakdown_iters is not None else n // 2
    return {
        "benchmark": "diffusion",
        "goal_ratio": GOAL_RATIO,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "optimizer": f"AdamW(lr={LR}, betas={BETAS}, weight decay {WEIGHT_DECAY} on rank>=2)",
        "result": bench_pair(values or recipe_values(), steps=n, warmup=w, breakdown_iters=bd),
    }


def rows(result: dict[str, Any]) -> list[Row]:
    """The lines of the printed table."""
    r = result["result"]
    v, c = r["values"], r["values"]["c"]
    label = f"diffusion: {c['n_layer']}L {c['n_head']}x{c['head_dim']}, b {v['b']} t {v['t']}"
    return pair_rows(label, r, result["goal_ratio"], 2)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.diffusion [--quick]`: this benchmark alone, rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
