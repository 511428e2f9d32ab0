"""Inlay hints: each `let`'s type inline, after its name, as the hover gives it.

`let h := gelu (…)` reads `let h: T #[b, t, 4 * c.n_embd] := gelu (…)`, and, where a config
gives numbers, `let h: T #[b, t, 4 * c.n_embd] = T #[12, 64, 512] := …` (the two types are
equal under the config's values; a `Nat` shows its value, `: Nat = 256`). A `let` whose type is
written shows only the numbers, after the written type. The client asks for a range and may
turn them off; `{"inlayHints": false}` in the initialization options turns them off here.
"""
from __future__ import annotations

from dataclasses import dataclass

from .lookup import Lookup
from .text import Point


@dataclass(frozen=True)
class Hint:
    at: Point
    label: str
    tooltip: str | None = None


def let_hints(look: Lookup, lo: Point, hi: Point, config: str | None = None) -> list[Hint]:
    """The hints of the `let`s whose names lie in [lo, hi]; `config`: the config's name, for
    the tooltip."""
    out = []
    for d in look.decls:
        if d.span[1] < lo or d.span[0] > hi:
            continue
        for b in d.bindings:
            if b.kind != "let" or not lo <= b.at[0] <= hi:
                continue
            f = look.binding(b)
            numbers = f.value if f.value is not None else f.resolved
            if f.type is None:
                continue
            tip = f"with `{config}`: `{numbers}`" if numbers and config else None
            if b.type is None:
                label = f": {f.type}" + (f" = {numbers}" if numbers else "")
                out.append(Hint(b.at[1], label, tip))
            elif numbers and id(b.type) in look.a.spans:
                out.append(Hint(look.a.spans[id(b.type)][1], f" = {numbers}", tip))
    return out
