"""`python -m bench.NAME [--quick] ...`: one benchmark module alone, its table rows then its
results as JSON on stdout (`python -m bench` runs them all into one table)."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def standalone(mod: ModuleType, argv: list[str] | None = None, *,
               options: Callable[[argparse.ArgumentParser], None] | None = None,
               kwargs: Callable[[argparse.Namespace, argparse.ArgumentParser], dict[str, Any]]
               | None = None) -> int:
    """The `main` of benchmark module `mod`: parse `argv` (`--quick`, and what `options`
    adds), call the module's `run` with the parsed options (or with what `kwargs` makes of
    them, which may refuse them through the parser), print its `rows`, dump its result."""
    name = mod.__spec__.name if mod.__spec__ is not None else mod.__name__  # not __main__
    p = argparse.ArgumentParser(prog=f"python -m {name}",
                                description=(mod.__doc__ or "").splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few iterations (a rough figure)")
    if options is not None:
        options(p)
    args = p.parse_args(argv)
    result = mod.run(**(kwargs(args, p) if kwargs is not None else vars(args)))
    for row in mod.rows(result):
        print("  ".join(x for x in vars(row).values() if x))
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0
