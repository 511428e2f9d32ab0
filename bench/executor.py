"""The MLP of `examples/mlp/MLP.lean` through Tyr's executor vs the same MLP in plain PyTorch.

Both sides train the same network on the same batch in the same process: the Tyr side is
`module_from_graph(graph_from_lean(MLP.lean, "mlp", values))`; the plain side is three
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
import gc
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench import Row, pair_result, pair_rows, summarize
from bench.checker import MLP_FILE, mlp_values

GOAL_RATIO = 0.97
LR = 1e-3


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


def _step(module: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = module(x, y)[1]
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def _timed(fn: Any, *args: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def bench_size(values: dict[str, Any], *, steps: int, warmup: int, seed: int = 0,
               breakdown_iters: int = 0) -> dict[str, Any]:
    tyr, plain = build_pair(values, seed)
    opts = {"tyr": _optimizer(tyr), "plain": _optimizer(plain)}
    mods = {"tyr": tyr, "plain": plain}
    c, b = values["c"], values["b"]
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(b, c["inputs"], generator=gen)
    y = torch.randint(0, c["classes"], (b,), generator=gen)

    times: dict[str, list[float]] = {"tyr": [], "plain": []}
    max_loss_diff = 0.0
    gc.collect()
    for i in range(warmup + steps):
        order = ("tyr", "plain") if i % 2 == 0 else ("plain", "tyr")
        losses = {}
        for side in order:
            dt, loss = _timed(_step, mods[side], opts[side], x, y)
            losses[side] = float(loss.detach())
            if i >= warmup:
                times[side].append(dt)
        max_loss_diff = max(max_loss_diff, abs(losses["tyr"] - losses["plain"]))

    tyr_sd, plain_sd = tyr.state_dict(), plain.state_dict()
    max_param_diff = max(
        float((tyr_sd[f"{w}{k}"] - plain_sd[f"l{k}.{'weight' if w == 'w' else 'bias'}"]).abs().max())
        for k in (1, 2, 3) for w in ("w", "b")
    )
    result = pair_result(values, sum(q.numel() for q in tyr.parameters()), steps, warmup,
                         times, max_loss_diff, max_param_diff)
    if breakdown_iters > 0:
        result["breakdown"] = _breakdown(tyr, plain, x, y, breakdown_iters)
    return result


def _breakdown(tyr: nn.Module, plain: nn.Module, x: torch.Tensor, y: torch.Tensor,
               iters: int) -> dict[str, Any]:
    """Where the Tyr side could spend extra time: forward alone (with autograd recording, as
    in training, alternating) and the input check at the call boundary by itself."""
    fwd: dict[str, list[float]] = {"tyr": [], "plain": []}
    for i in range(iters):
        order = ("tyr", "plain") if i % 2 == 0 else ("plain", "tyr")
        for side in order:
            m = tyr if side == "tyr" else plain
            dt, _ = _timed(m, x, y)
            fwd[side].append(dt)
    out: dict[str, Any] = {
        "forward_tyr_ms": summarize(fwd["tyr"])["median_ms"],
        "forward_plain_ms": summarize(fwd["plain"])["median_ms"],
    }
    check = getattr(tyr, "_check_inputs", None)
    if check is not None:
        samples = [_timed(check, (x, y))[0] for _ in range(iters)]
        out["check_inputs_us"] = summarize(samples)["median_ms"] * 1e3
    return out


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
