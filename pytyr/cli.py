"""`tyr`: check Lean model files, print their graph IR, train the examples.

    tyr check FILE.lean...                      located errors; exit 1 if any
    tyr graph FILE.lean --model NAME --set b=128 --config cfg.json   print the IR
    tyr validate GRAPH.json                     validate an IR document
    tyr train FILE.lean --model NAME [--config cfg.json] [--resume]   train (config.json beside FILE)
    tyr sample --run runs/gpt --prompt "ROMEO:"   generate from a trained language model
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from .config import merge, parse_set, read_json
from .errors import ConfigError, LeanError, TyrError


def cmd_check(args: argparse.Namespace) -> int:
    from .lean import check_files

    t0 = time.perf_counter()
    diags = check_files(*args.files)
    for d in diags:
        print(d, file=sys.stderr)
    ms = (time.perf_counter() - t0) * 1e3
    if diags:
        print(f"{len(diags)} error{'s' if len(diags) != 1 else ''} in {len(args.files)} file(s)",
              file=sys.stderr)
        return 1
    print(f"ok: {len(args.files)} file(s) checked in {ms:.0f} ms")
    return 0


def _model_values(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if args.config:
        cfg = read_json(Path(args.config), "config")
        values = cfg.get("model", cfg)
    return merge(values, parse_set(args.set or []))


def cmd_graph(args: argparse.Namespace) -> int:
    from .pipeline import graph_from_lean

    graph = graph_from_lean(args.file, args.model, _model_values(args))
    text = graph.to_json(indent=1)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
        print(f"wrote {args.output}: {len(graph.nodes)} nodes, {len(graph.params)} parameters")
    else:
        print(text)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from .ir.validate import load_graph
    from .lean import LeanSignatures

    path = Path(args.graph)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    graph = load_graph(data, LeanSignatures(), source=str(path))
    print(f"ok: {path}: model '{graph.model}', {len(graph.nodes)} nodes, "
          f"{len(graph.params)} parameters")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from .train.run import train_from_config

    cfg_path = Path(args.config) if args.config else Path(args.file).parent / "config.json"
    cfg = merge(read_json(cfg_path, "training config"), parse_set(args.set or []))
    return train_from_config(Path(args.file), args.model, cfg, source=str(cfg_path),
                             progress=not args.quiet, resume=args.resume)


def cmd_sample(args: argparse.Namespace) -> int:
    from .train.lm_task import sample_from_run

    overrides = {k: v for k, v in (("prompt", args.prompt), ("max_new_tokens", args.max_new_tokens),
                                   ("temperature", args.temperature), ("top_k", args.top_k),
                                   ("seed", args.seed)) if v is not None}
    print(sample_from_run(Path(args.run), overrides))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tyr", description="Shape-typed models in Lean 4, run on PyTorch.")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="type-check Lean files of the Tyr subset")
    c.add_argument("files", nargs="+")
    c.set_defaults(fn=cmd_check)
    g = sub.add_parser("graph", help="instantiate a model and print its graph IR")
    g.add_argument("file")
    g.add_argument("--model", required=True)
    g.add_argument("--config", help="JSON object of argument values (or with a 'model' table)")
    g.add_argument("--set", action="append", metavar="KEY=VALUE", help="e.g. b=128 or c.hidden=64")
    g.add_argument("-o", "--output")
    g.set_defaults(fn=cmd_graph)
    v = sub.add_parser("validate", help="validate a graph IR JSON document")
    v.add_argument("graph")
    v.set_defaults(fn=cmd_validate)
    t = sub.add_parser("train", help="train a model on its example task")
    t.add_argument("file")
    t.add_argument("--model", required=True)
    t.add_argument("--config", help="training config JSON (default: config.json beside FILE)")
    t.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config value, e.g. train.steps=100")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    t.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint in the run's output directory")
    t.set_defaults(fn=cmd_train)
    s = sub.add_parser("sample", help="generate text from a trained language model")
    s.add_argument("--run", default="runs/gpt", help="output directory of `tyr train` (default runs/gpt)")
    s.add_argument("--prompt")
    s.add_argument("--max-new-tokens", type=int)
    s.add_argument("--temperature", type=float)
    s.add_argument("--top-k", type=int)
    s.add_argument("--seed", type=int)
    s.set_defaults(fn=cmd_sample)
    from .abi.commands import register as register_run
    from .data.commands import register as register_data

    from .safetensors.commands import register as register_safetensors

    register_run(sub)
    register_data(sub)
    register_safetensors(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except LeanError as err:
        print(err, file=sys.stderr)  # already `file:line:col: error: ...` lines
        return 1
    except TyrError as err:
        print(f"tyr {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
