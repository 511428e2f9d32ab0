"""`tyr train`: a Lean model, a task and a training config, end to end.

The config is JSON with these tables; every key is checked before anything runs, so a typo
fails in a second with the key named instead of after an hour of training:
  model   argument values of the @[model] def (dims, config structures)
  task    the data: {"name": "spirals", ...} or {"name": "shakespeare_char"}
  train   optimiser and schedule (spirals: SCHEMA below; language models: `lm.LMConfig`)
  sample  language models: what to generate after training (`lm_task.SAMPLE_KEYS`)
  out     directory for the run's outputs (checkpoint, loss curve PNG, metrics JSON)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..atomic import atomic_write_text
from ..errors import ConfigError

SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "task": {"name": str, "train_size": int, "test_size": int, "seed": int},
    "train": {"steps": int, "lr": (int, float), "weight_decay": (int, float), "warmup": int,
              "grad_clip": (int, float, type(None)), "seed": int, "eval_every": int},
}
TOP = {"model": dict, "task": dict, "train": dict, "sample": dict, "out": str}
TASKS = ("spirals", "shakespeare_char")


def check_config(cfg: dict[str, Any], source: str) -> None:
    for key, value in cfg.items():
        if key not in TOP:
            raise ConfigError(f"{source}: unknown key '{key}' (known: {', '.join(TOP)})")
        if not isinstance(value, TOP[key]):
            raise ConfigError(f"{source}: '{key}' must be a {TOP[key].__name__}, got {value!r}")
    for key in ("model", "task", "train"):
        if key not in cfg:
            raise ConfigError(f"{source}: missing table '{key}'")
    name = cfg["task"].get("name", "spirals")
    if name not in TASKS:
        raise ConfigError(f"{source}: unknown task '{name}' (known: {', '.join(TASKS)})")
    if name != "spirals":
        return  # the language-model path checks its own tables
    if "sample" in cfg:
        raise ConfigError(f"{source}: 'sample' is only for language-model tasks")
    for table, fields in SCHEMA.items():
        for key, value in cfg.get(table, {}).items():
            if key not in fields:
                raise ConfigError(f"{source}: unknown key '{table}.{key}' "
                                  f"(known: {', '.join(fields)})")
            want = fields[key]
            if isinstance(value, bool) or not isinstance(value, want):
                names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
                raise ConfigError(f"{source}: '{table}.{key}' must be {names}, got {value!r}")


def plot_losses(history: list[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot([h["step"] for h in history], [h["loss"] for h in history], lw=1, label="train loss")
    evals = [h for h in history if "test_accuracy" in h]
    if evals:
        ax2 = ax.twinx()
        ax2.plot([h["step"] for h in evals], [h["test_accuracy"] for h in evals], "o-",
                 color="tab:green", label="test accuracy")
        ax2.set_ylabel("test accuracy")
        ax2.set_ylim(0, 1)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def train_from_config(file: Path, model: str, cfg: dict[str, Any], *, source: str,
                      progress: bool = True, resume: bool = False) -> int:
    check_config(cfg, source)
    task = cfg["task"]
    if task.get("name", "spirals") == "shakespeare_char":
        from .lm_task import train_language_model

        return train_language_model(file, model, cfg, source=source, progress=progress,
                                    resume=resume)
    if resume:
        raise ConfigError(f"{source}: --resume is for language-model tasks (checkpointed)")
    from ..pipeline import graph_from_lean

    return train_graph(graph_from_lean(file, model, cfg["model"]), cfg, source=source,
                       origin=str(file), progress=progress)


def _spirals(graph: Any, cfg: dict[str, Any], source: str) -> tuple[Any, ...]:
    from . import tasks

    task = cfg["task"]
    seed = task.get("seed", 0)
    x, y = tasks.make_dataset(task.get("train_size", 4096), seed)
    xt, yt = tasks.make_dataset(task.get("test_size", 2048), seed + 1)
    if not graph.inputs or x.shape[1:] != tuple(graph.inputs[0].shape[1:]):
        got = list(graph.inputs[0].shape) if graph.inputs else "missing"
        raise ConfigError(f"{source}: the task's points have {x.shape[1]} features but the "
                          f"model's first input is {got}")
    return x, y, xt, yt, seed


def evaluate_graph(graph: Any, cfg: dict[str, Any], *, source: str, origin: str) -> int:
    """Test accuracy of a graph's initial weights on its task (`tyr run --eval`)."""
    import torch

    from ..pipeline import module_from_graph
    from . import tasks

    _, _, xt, yt, _ = _spirals(graph, cfg, source)
    module = module_from_graph(graph, seed=cfg["train"].get("seed", 0)).eval()
    with torch.no_grad():
        acc = tasks.accuracy(module, xt, yt, graph.inputs[0].shape[0])
    print(f"model {graph.model} from {origin}: {len(graph.nodes)} nodes; "
          f"test accuracy {acc:.2%} (initial weights, no training)")
    return 0


def train_graph(graph: Any, cfg: dict[str, Any], *, source: str, origin: str,
                progress: bool = True) -> int:
    """Train a validated graph on the spirals task: from a Lean file or a compiled library."""
    from ..pipeline import module_from_graph
    from . import tasks
    from .loop import train

    x, y, xt, yt, seed = _spirals(graph, cfg, source)
    batch = graph.inputs[0].shape[0]
    tc = {"steps": 500, "lr": 1e-2, "weight_decay": 0.0, "warmup": 0, "grad_clip": 1.0,
          "seed": 0, **cfg["train"]}
    module = module_from_graph(graph, seed=tc["seed"])

    def evaluate(m: Any) -> dict[str, float]:
        return {"test_accuracy": tasks.accuracy(m, xt, yt, batch)}

    print(f"model {graph.model} from {origin}: {len(graph.nodes)} nodes, "
          f"{sum(1 for _ in module.parameters())} parameter tensors, "
          f"{sum(p.numel() for p in module.parameters()):,} weights")
    history = train(module, tasks.batches(x, y, batch, seed), steps=tc["steps"], lr=tc["lr"],
                    weight_decay=tc["weight_decay"], warmup=tc["warmup"],
                    grad_clip=tc["grad_clip"], eval_fn=evaluate,
                    eval_every=tc.get("eval_every", max(tc["steps"] // 10, 1)),
                    progress=progress, seed=tc["seed"])
    final = history[-1]
    out = Path(cfg.get("out", "runs/" + graph.model))
    plot_losses(history, out / "loss.png", f"{graph.model}: training loss")
    atomic_write_text(out / "metrics.json", json.dumps(
        {"model": graph.model, "origin": origin, "final_loss": final["loss"],
         "test_accuracy": final["test_accuracy"], "history": history}, indent=1))
    print(f"step {int(final['step'])}: loss {final['loss']:.4f}, "
          f"test accuracy {final['test_accuracy']:.2%}")
    print(f"wrote {out / 'loss.png'} and {out / 'metrics.json'}")
    return 0
