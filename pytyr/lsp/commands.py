"""`tyr lsp` and `tyr shapes`; `register(subparsers)` adds them to the CLI's parser."""
from __future__ import annotations

import argparse
import sys


def cmd_lsp(args: argparse.Namespace) -> int:
    from .server import main

    return main()


def cmd_shapes(args: argparse.Namespace) -> int:
    from .shapes import shapes

    lines, diags = shapes(args.file, args.config, args.line)
    print("\n".join(lines))
    for d in diags:
        print(d, file=sys.stderr)
    if diags:
        print(f"{len(diags)} error{'s' if len(diags) != 1 else ''} in 1 file(s): the types "
              "above are those of what checked", file=sys.stderr)  # as `tyr check` counts
    return 1 if diags else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "lsp", help="the language server (stdio): diagnostics, hover types, definitions",
        description="Serve the Language Server Protocol over stdin/stdout for .lean files of "
                    "the Tyr subset: diagnostics as you type, the type of any term on hover "
                    "(with the numbers of the config.json beside the file), go-to-definition, "
                    "symbols, completion and code actions. Editor setup: docs/editor.md.",
        epilog="examples:\n  tyr lsp            (started by the editor: see docs/editor.md)",
        formatter_class=raw)
    p.set_defaults(fn=cmd_lsp)
    s = subparsers.add_parser(
        "shapes", help="every binding of a Lean file with its type (and the config's numbers)",
        description="Print each declaration of FILE with the type of every binder, `let` and "
                    "field, as the checker elaborated them, and with the values of the config "
                    "substituted (the config.json beside FILE, or --config): Lean's #check and "
                    "infoview for terminals and CI logs.",
        epilog="examples:\n  tyr shapes examples/gpt/GPT.lean\n"
               "  tyr shapes examples/gpt/GPT.lean --line 74\n"
               "  tyr shapes my/Model.lean --config my/config.json",
        formatter_class=raw)
    s.add_argument("file", metavar="FILE.lean", help="the Lean file to show")
    s.add_argument("--config", metavar="FILE", help="the run config (default: config.json "
                   "beside FILE.lean)")
    s.add_argument("--line", type=int, metavar="N", help="only the declaration that holds line "
                   "N, and the terms on that line")
    s.set_defaults(fn=cmd_shapes)
