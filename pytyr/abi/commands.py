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
from pathlib import Path
from typing import Any

from ..config import merge, parse_set, read_json
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
        cfg = merge(cfg, read_json(Path(args.config), "training config"))
        source = str(args.config)
    cfg = merge(cfg, parse_set(args.set or []))
    if args.steps is not None:
        if args.steps < 1:
            raise ConfigError(f"--steps must be a positive integer, got {args.steps}")
        cfg = merge(cfg, {"train": {"steps": args.steps}})
    from ..train.run import check_config

    check_config(cfg, source)
    if cfg["task"].get("name", "spirals") != "spirals":
        raise ConfigError(f"{source}: unknown task '{cfg['task']['name']}' (known: spirals)")
    graph = load_model_graph(args.lib, args.model, cfg["model"])
    origin = f"{args.lib}:{args.model}"
    from ..train.run import evaluate_graph, train_graph

    if args.eval:
        return evaluate_graph(graph, cfg, source=source, origin=origin)
    return train_graph(graph, cfg, source=source, origin=origin, progress=not args.quiet)
