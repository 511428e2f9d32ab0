"""Names in a module: namespaces, sections, `open`s, and resolving a name as Lean does."""
from __future__ import annotations

from ..errors import Pos
from .env import BUILTIN_TYPES, Env
from .failure import Fail


class Scope:
    def __init__(self, env: Env):
        self.env = env
        self.namespaces: list[str] = []
        self.opens: list[str] = []
        # (kind, name, namespace depth, number of opens before it), innermost last
        self.stack: list[tuple[str, str | None, int, int]] = []

    def reset(self) -> None:
        """A new module starts outside every namespace, with nothing open."""
        self.namespaces, self.opens, self.stack = [], [], []

    def qualify(self, name: str) -> str:
        return ".".join(self.namespaces + [name]) if self.namespaces else name

    def resolve_global(self, name: str, pos: Pos) -> str | None:
        """The declaration `name` refers to: innermost namespace first, then the root, then
        the open namespaces (ambiguity among those is an error, as in Lean)."""
        decls = self.env.decls
        for k in range(len(self.namespaces), 0, -1):
            cand = ".".join(self.namespaces[:k]) + "." + name
            if cand in decls:
                return cand
        if name in decls or name in BUILTIN_TYPES:
            return name
        found = {o + "." + name for o in self.opens if o + "." + name in decls}
        if len(found) > 1:
            raise Fail(pos, f"ambiguous name '{name}': {', '.join(sorted(found))}")
        return found.pop() if found else None

    def resolve_namespace(self, name: str) -> str | None:
        for k in range(len(self.namespaces), -1, -1):
            cand = ".".join(self.namespaces[:k] + [name])
            if cand in self.env.namespaces:
                return cand
        return None

    def enter(self, kind: str, name: str | None) -> None:
        depth = len(name.split(".")) if kind == "namespace" and name else 0
        if depth:
            self.namespaces.extend(name.split("."))  # type: ignore[union-attr]
        self.stack.append((kind, name, depth, len(self.opens)))

    def leave(self, name: str | None, pos: Pos) -> None:
        if not self.stack:
            raise Fail(pos, "`end` without an open namespace or section")
        kind, opened, depth, nopens = self.stack.pop()
        if (name or None) != (opened or None):
            raise Fail(pos, f"invalid 'end', expected {kind} name '{opened or ''}', "
                            f"found '{name or ''}'")
        del self.namespaces[len(self.namespaces) - depth:]
        del self.opens[nopens:]
