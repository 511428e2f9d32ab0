"""The families' tables as `tyr run --help` prints them (`families.FAMILIES`)."""
from __future__ import annotations

import textwrap
from typing import Any

from .families import FAMILIES, Fixed


def mapping_help() -> str:
    """The tables, for `tyr run --help`."""
    lines = ["a Hugging Face checkpoint: config.json in the --weights directory (or beside the "
             "file, or --hf-config FILE)", "fills the model's config by name, over the config "
             "beside FILE.lean and under --config/--set;", "keys that are no parameter of the "
             "model are left out and named in the output. Without FILE.lean, the family's Lean "
             "file and model", "(by tie_word_embeddings, unless the family says otherwise) "
             "are run:"]
    for fam in FAMILIES:
        lines.append(f"  {fam.name} (model_type {', '.join(fam.model_types)}; "
                     f"fills {fam.example}):")
        for f in fam.fields:
            lines.append(f"    {f.shown()}")
        lines += _wrapped("must be: " + _musts(fam.fixed))
        lines += _wrapped("not parameters (left out, named): " + ", ".join(
            f"{u.pattern} ({u.what})" for u in fam.unused))
        if fam.prefixes:
            lines += _wrapped("keys under " + ", ".join(repr(p) for p in fam.prefixes)
                              + " (a model with a task head) are read without it where the "
                              "model's names have none, a bare model's with it where they do")
        if fam.pick_note:
            lines += _wrapped(f"without FILE.lean, the model {fam.pick_note}")
        if fam.narrower is not None:
            n = fam.narrower
            lines += _wrapped(f"a model config without {', '.join(n.lacks)} ({n.example}'s) "
                              f"leaves them out, and then: {_musts(n.fixed)}")
        if fam.rename_note:
            lines += _wrapped(f"read by {fam.rename_note}")
    return "\n".join(lines)


def _musts(fixed: tuple[Fixed, ...]) -> str:
    return ", ".join(
        f"{x.hf}={'|'.join([*map(_show, x.allowed)] + [x.also_shown] * bool(x.also_shown))}"
        for x in fixed)


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, 96, initial_indent="    ", subsequent_indent="      ")


def _show(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return {True: "true", False: "false", None: "null"}[v]
    return "{}" if v == {} else str(v)
