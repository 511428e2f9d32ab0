"""The local context of one declaration's elaboration: what the binders and `let`s in scope
are, shared by the term rules (`elaborate.py`) and the application rules (`application.py`)."""
from __future__ import annotations

from dataclasses import dataclass

from .terms import Term


@dataclass(frozen=True)
class Local:
    name: str
    term: Term
    type: Term


class Ctx:
    """A local context: a persistent linked list of locals (later ones shadow earlier ones)."""

    __slots__ = ("parent", "local")

    def __init__(self, parent: "Ctx | None" = None, local: Local | None = None):
        self.parent, self.local = parent, local

    def push(self, name: str, term: Term, type_: Term) -> "Ctx":
        return Ctx(self, Local(name, term, type_))

    def locals(self) -> list[Local]:
        """The locals in scope, innermost first (the order Lean's `assumption` tries them)."""
        out, c = [], self
        while c is not None and c.local is not None:
            out.append(c.local)
            c = c.parent
        return out

    def get(self, name: str) -> Local | None:
        c: Ctx | None = self
        while c is not None and c.local is not None:
            if c.local.name == name:
                return c.local
            c = c.parent
        return None
