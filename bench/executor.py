"""The MLP of `examples/mlp/MLP.lean` through Tyr's executor vs the same MLP in plain PyTorch.

Both sides train the same network on the same batches in the same process (8 batches of the
example's `classification` task on spirals, made by its `training_batch` as `tyr train` makes
them): the Tyr side is `module_from_graph(graph_from_lean(MLP.lean, "mlp", values))`; the
plain side is three
`nn.Linear` layers with ReLU and `F.cross_entropy`, its weights copied from the Tyr module
so that the arithmetic is identical (the losses are compared step by step and the parameters
at the end, as evidence). A training step is forward + `zero_grad` + backward + AdamW step,
with the same optimizer set-up on both sides (`pytyr.train.optim.param_groups`, as `tyr train`
does, applied to both). Steps ALTERNATE between the two, with the order flipped every pair,
after a warm-up, so drift in machine speed hits both alike.

Reported per size: median ms per step for each side and `plain/tyr` (median plain step time
over median Tyr step time; 1.0 means no overhead, goal >= 0.97), plus the median of the
per-pair ratios, and a breakdown of the forward alone and of `TyrModule._check_inputs`.
"""
from __future__ import annotations

import copy
import json
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench import Row, alternate_steps, pair_rows, task_batches
from bench.checker import MLP_CONFIG, MLP_FILE, mlp_values

GOAL_RATIO = 0.97
LR = 1e-3
N_BATCHES = 8  # distinct batches, cycled


class PlainMLP(nn.Module):
    """The MLP of MLP.lean written by hand: Linear-ReLU-Linear-ReLU-Linear, (logits, loss)."""

    def __init__(self, inputs: int, hidden: int, classes: int):
        super().__init__()
        self.l1 = nn.Linear(inputs, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.l1(x))
        h = F.relu(self.l2(h))
        z = self.l3(h)
        return z, F.cross_entropy(z, y)


def sizes(quick: bool = False) -> list[dict[str, Any]]:
    """The example config (hidden 64, batch 128) and a wide one (hidden 1024, batch 512)."""
    base = mlp_values()
    wide = copy.deepcopy(base)
    wide["c"]["hidden"] = 1024
    wide["b"] = 512
    return [{"name": "example", "values": base}, {"name": "wide", "values": wide}]


def build_pair(values: dict[str, Any], seed: int = 0) -> tuple[nn.Module, PlainMLP]:
    """The Tyr module of MLP.lean for `values` and a plain MLP holding copies of its weights."""
    from pytyr.pipeline import graph_from_lean, module_from_graph

    tyr = module_from_graph(graph_from_lean(MLP_FILE, "mlp", values), seed=seed)
    c = values["c"]
    plain = PlainMLP(c["inputs"], c["hidden"], c["classes"])
    sd = tyr.state_dict()
    with torch.no_grad():
        for k, lin in enumerate((plain.l1, plain.l2, plain.l3), start=1):
            lin.weight.copy_(sd[f"w{k}"])
            lin.bias.copy_(sd[f"b{k}"])
    return tyr, plain


def _optimizer(module: nn.Module) -> torch.optim.Optimizer:
    from pytyr.train.optim import param_groups

    return torch.optim.AdamW(param_groups(module, 0.0), lr=LR)


def _plain_key(key: str) -> str:
    """The plain MLP's state-dict key of the Tyr module's `key` (`w1` -> `l1.weight`)."""
    return f"l{key[1:]}.{'weight' if key[0] == 'w' else 'bias'}"


def bench_size(values: dict[str, Any], *, steps: int, warmup: int, seed: int = 0,
               breakdown_iters: int = 0) -> dict[str, Any]:
    """Alternating training steps of both sides on the spirals task's batches."""
    tyr, plain = build_pair(values, seed)
    mods = {"tyr": tyr, "plain": plain}
    opts = {side: [_optimizer(m)] for side, m in mods.items()}
    task = json.loads(MLP_CONFIG.read_text(encoding="utf-8"))["task"]
    data = task_batches(task, values["b"], N_BATCHES, seed + 1)
    return alternate_steps(values, mods, opts, data, steps=steps, warmup=warmup,
                           forward_iters=breakdown_iters, plain_key=_plain_key)


def run(*, quick: bool = False, steps: int | None = None, warmup: int | None = None,
        breakdown_iters: int | None = None, only_sizes: list[str] | None = None) -> dict[str, Any]:
    """Time both sizes; the keyword arguments override the iteration counts."""
    plan = {"example": (300, 50), "wide": (120, 15)} if not quick else {"example": (100, 20), "wide": (40, 8)}
    result: dict[str, Any] = {
        "benchmark": "executor",
        "goal_ratio": GOAL_RATIO,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "optimizer": f"AdamW(lr={LR}, pytyr.train.optim.param_groups, weight_decay 0), foreach default",
        "sizes": {},
    }
    for size in sizes(quick):
        name = size["name"]
        if only_sizes and name not in only_sizes:
            continue
        n, w = plan[name]
        result["sizes"][name] = bench_size(
            size["values"],
            steps=steps if steps is not None else n,
            warmup=warmup if warmup is not None else w,
            breakdown_iters=breakdown_iters if breakdown_iters is not None else (n // 2),
        )
    return result


def rows(result: dict[str, Any]) -> list[Row]:
    """The lines of the printed table."""
    out = []
    for name, r in result["sizes"].items():
        v = r["values"]
        out += pair_rows(f"{name}: hidden {v['c']['hidden']}, batch {v['b']}", r,
                         result["goal_ratio"], 3)
    return out
