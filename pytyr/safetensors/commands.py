"""`tyr safetensors ...`: look at checkpoints and generate typed modules from them.

    tyr safetensors inspect PATH                    tensor count and tree, shapes and dtypes
    tyr safetensors provide PATH --module NAME      write NAME.py / NAME.pyi (typed weights)
    tyr safetensors schema PATH [-o OUT]            write the .schema.json snapshot

PATH is a `.safetensors` file, a shard directory (with or without an index) or, for inspect
and provide, a `.schema.json` snapshot. A file that breaks a rule of the format is reported
with the reader's error (file and rule named) and exit status 1.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from pytyr.errors import SafeTensorsError

from .loaders import Weights, open_weights
from .schema import NodeList, TensorRef


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"


def _shape(ref: TensorRef) -> str:
    return f"{ref.dtype} [{', '.join(map(str, ref.shape))}]"


def _alike(items: NodeList[Any]) -> bool:
    """Whether every item has the same relative names, dtypes and shapes (printed once)."""
    def rel(item: Any) -> list[tuple[str, Any, Any]]:
        cut = len(item.path) if isinstance(item, TensorRef) else len(item.path) + 1
        return [(n[cut:], s.dtype, s.shape) for n, s in item.specs().items()]
    first = rel(items[0])
    return all(rel(it) == first for it in items)


def tree_lines(node: Any, label: str = "", depth: int = -1) -> list[str]:
    """The tree as indented lines: `layers[0..11]` when the items are alike."""
    pad = "  " * max(depth, 0)
    if isinstance(node, TensorRef):
        return [f"{pad}{label}  {_shape(node)}"]
    if isinstance(node, NodeList):
        if _alike(node):
            return tree_lines(node[0], f"{label}[0..{len(node) - 1}]", depth)
        out = []
        for i, item in enumerate(node):
            out += tree_lines(item, f"{label}[{i}]", depth)
        return out
    out = [f"{pad}{label}"] if depth >= 0 else []
    for key in node.keys():
        out += tree_lines(node[key], key, depth + 1)
    return out


def describe(w: Weights) -> list[str]:
    """The report of `inspect`: a summary line, dtypes, metadata, then the tree."""
    files = {s.file for s in w.specs.values()}
    nbytes = 0
    for s in w.specs.values():
        n = 1
        for d in s.shape:
            n *= d
        nbytes += s.dtype.nbytes(n) or 0
    kind = "snapshot of " if w.checkpoint is None else ""
    lines = [f"{w.source}: {kind}{len(w.specs)} tensors in {len(files)} file"
             f"{'s' * (len(files) != 1)}, {_size(nbytes)} of data"]
    counts = Counter(s.dtype.value for s in w.specs.values())
    if counts:
        lines.append("dtypes: " + ", ".join(f"{d} x {n}" for d, n in sorted(counts.items())))
    if w.metadata:
        lines.append("metadata: " + ", ".join(f"{k}={v}" for k, v in sorted(w.metadata.items())))
    try:
        tree = w.tree
    except SafeTensorsError as e:  # a valid file whose names make no tree: list them flat
        lines.append(f"(names make no tree: {e.message}; rule {e.rule})")
        lines += [f"{n}  {s.dtype} [{', '.join(map(str, s.shape))}]" for n, s in w.specs.items()]
        return lines
    if isinstance(tree, NodeList):
        return lines + tree_lines(tree, "", 0)
    return lines + tree_lines(tree)


def _fail(command: str, err: SafeTensorsError) -> int:
    print(f"tyr safetensors {command}: {err}", file=sys.stderr)
    return 1


def cmd_inspect(args: argparse.Namespace) -> int:
    try:
        with open_weights(args.path) as w:
            print("\n".join(describe(w)))
    except SafeTensorsError as e:
        return _fail("inspect", e)
    return 0


def cmd_provide(args: argparse.Namespace) -> int:
    from .provide import provide

    if not args.module.isidentifier():
        print(f"tyr safetensors provide: --module {args.module!r} is not a Python identifier",
              file=sys.stderr)
        return 2
    try:
        py, pyi = provide(args.path, args.module, args.out)
    except SafeTensorsError as e:
        return _fail("provide", e)
    print(f"wrote {py} and {pyi}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    out = Path(args.output) if args.output else Path(f"{Path(args.path).name}.schema.json")
    try:
        with open_weights(args.path) as w:
            w.write_schema(out)
    except SafeTensorsError as e:
        return _fail("schema", e)
    print(f"wrote {out}")
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `tyr safetensors {inspect,provide,schema}` to the `tyr` subparsers; commands set
    `fn` (args → exit status), as the other `tyr` commands do."""
    p = subparsers.add_parser("safetensors", help="inspect safetensors checkpoints, type them",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="safetensors_command", required=True, metavar="COMMAND")
    i = sub.add_parser("inspect", help="tensor count and tree with shapes and dtypes",
                       description="Validate a checkpoint's header (every rule of the format) "
                                   "and print its tensors as a tree with shapes and dtypes; "
                                   "no tensor data is read.",
                       epilog="examples:\n  tyr safetensors inspect model.safetensors\n"
                              "  tyr safetensors inspect ckpt/   # a shard directory",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("path", help=".safetensors file, shard directory or .schema.json")
    i.set_defaults(fn=cmd_inspect)
    v = sub.add_parser("provide", help="write a typed Python module (and .pyi) for a checkpoint",
                       description="Write a Python module (and .pyi stub) whose classes mirror "
                                   "the checkpoint's tree, typed by its header.",
                       epilog="examples:\n  tyr safetensors provide bert.safetensors "
                              "--module bert_weights --out src/",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("path", help=".safetensors file, shard directory or .schema.json")
    v.add_argument("--module", required=True, help="module name (NAME.py, NAME.pyi)")
    v.add_argument("--out", default=".", help="directory to write into (default: %(default)s)")
    v.set_defaults(fn=cmd_provide)
    s = sub.add_parser("schema", help="write the .schema.json snapshot (specs without data)",
                       description="Write a .schema.json snapshot of the checkpoint: every "
                                   "tensor's name, dtype and shape, without data (what "
                                   "safetensors_type_provider can read instead of the file).",
                       epilog="examples:\n  tyr safetensors schema model.safetensors -o "
                              "model.schema.json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("path", help=".safetensors file or shard directory")
    s.add_argument("-o", "--output", help="default: PATH's name + .schema.json, here")
    s.set_defaults(fn=cmd_schema)
    return p
