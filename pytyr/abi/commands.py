"""`tyr run`: train or evaluate a model served by a compiled model library (C ABI).

    tyr run --lib build/lib/libTyrModels.so --model mlp --config examples/mlp/config.json
    tyr run --lib ... --model mlp --config cfg.json --set train.steps=50 --steps 100 --eval

The training config is the one of `tyr train` (tables model/task/train/out); its `model`
table is sent to the library as the model's config. The graph comes back through the ABI,
is validated like any IR document, and runs in the same harness as a `.lean` model.

`register(subparsers)` adds the subcommand to the `tyr` parser (`pytyr/cli.py`).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `run` to the `tyr` subcommands; its handler is `args.fn`."""
    r = subparsers.add_parser("run", help="train or evaluate a model from a compiled model library")
    r.add_argument("--lib", required=True, help="the model library (libTyrModels.so)")
    r.add_argument("--model", required=True, help="a model the library exports")
    r.add_argument("--config", help="training config JSON, as for `tyr train` "
                   "(default: empty tables; give the model values with --set model.KEY=VALUE)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config value, e.g. model.b=64 or train.lr=0.003")
    r.add_argument("--steps", type=int, help="training steps (same as --set train.steps=N)")
    r.add_argument("--eval", action="store_true",
                   help="only evaluate the freshly initialised model on the task's test set")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    r.set_defaults(fn=cmd_run)
    return r


def cmd_run(args: argparse.Namespace) -> int:
    from .loader import load_model_graph

    cfg: dict[str, Any] = {"model": {}, "task": {}, "train": {}}
    source = "the command line"
    if args.config:
        cfg = _merge(cfg, _read_json(Path(args.config)))
        source = str(args.config)
    cfg = _merge(cfg, _parse_set(args.set or []))
    if args.steps is not None:
        if args.steps < 1:
            raise ConfigError(f"--steps must be a positive integer, got {args.steps}")
        cfg = _merge(cfg, {"train": {"steps": args.steps}})
    from ..train.run import check_config

    check_config(cfg, source)
    if cfg["task"].get("name", "spirals") != "spirals":
        raise ConfigError(f"{source}: unknown task '{cfg['task']['name']}' (known: spirals)")
    graph = load_model_graph(args.lib, args.model, cfg["model"])
    origin = f"{args.lib}:{args.model}"
    if args.eval:
        return _evaluate(graph, cfg, source, origin)
    return _train(graph, cfg, source, origin, progress=not args.quiet)


# ---- the harness, for a graph instead of a Lean file ---------------------------------------
# These follow `pytyr.train.run.train_from_config` step for step (which takes a Lean file);
# once that function is split at the graph, both commands should share it.

def _data(graph: Any, cfg: dict[str, Any], source: str) -> tuple[Any, ...]:
    from ..train import tasks

    task = cfg["task"]
    seed = task.get("seed", 0)
    x, y = tasks.make_dataset(task.get("train_size", 4096), seed)
    xt, yt = tasks.make_dataset(task.get("test_size", 2048), seed + 1)
    if not graph.inputs or x.shape[1:] != tuple(graph.inputs[0].shape[1:]):
        got = list(graph.inputs[0].shape) if graph.inputs else "missing"
        raise ConfigError(f"{source}: the task's points have {x.shape[1]} features but the "
                          f"model's first input is {got}")
    return x, y, xt, yt, seed


def _evaluate(graph: Any, cfg: dict[str, Any], source: str, origin: str) -> int:
    import torch

    from ..pipeline import module_from_graph
    from ..train import tasks

    _, _, xt, yt, _ = _data(graph, cfg, source)
    module = module_from_graph(graph, seed=cfg["train"].get("seed", 0))
    module.eval()
    with torch.no_grad():
        acc = tasks.accuracy(module, xt, yt, graph.inputs[0].shape[0])
    print(f"model {graph.model} from {origin}: {len(graph.nodes)} nodes; "
          f"test accuracy {acc:.2%} (initial weights, no training)")
    return 0


def _train(graph: Any, cfg: dict[str, Any], source: str, origin: str, *, progress: bool) -> int:
    from ..pipeline import module_from_graph
    from ..train import tasks
    from ..train.loop import train
    from ..train.run import atomic_write_text, plot_losses

    x, y, xt, yt, seed = _data(graph, cfg, source)
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
        {"model": graph.model, "library": str(origin), "final_loss": final["loss"],
         "test_accuracy": final["test_accuracy"], "history": history}, indent=1))
    print(f"step {int(final['step'])}: loss {final['loss']:.4f}, "
          f"test accuracy {final['test_accuracy']:.2%}")
    print(f"wrote {out / 'loss.png'} and {out / 'metrics.json'}")
    return 0


# ---- config glue (as in pytyr/cli.py, which this layer may not import) ----------------------

def _parse_set(items: list[str]) -> dict[str, Any]:
    """`--set model.c.hidden=64` → nested dict; values are JSON, else strings."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: '{part}' is already a value, not a table")
        node[parts[-1]] = value
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: training config not found") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}:{err.lineno}:{err.colno}: training config is not valid "
                          f"JSON: {err.msg}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: training config must be a JSON object")
    return data
