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
        # (kind, name, namespaces and opens before it), one per scope, innermost last
        self.stack: list[tuple[str, str, int, int]] = []

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
        """`namespace A.B` (or `section A.B`) opens one scope per component, as Lean's
        `addScopes` does; `section` alone opens one unnamed scope."""
        for part in name.split(".") if name else [""]:
            self.stack.append((kind, part, len(self.namespaces), len(self.opens)))
            if kind == "namespace":
                self.namespaces.append(part)

    def leave(self, name: str | None, pos: Pos) -> None:
        """Lean's `end` (`elabEnd`, `src/Lean/Elab/BuiltinCommand.lean`): `end N₁.….Nₖ` closes
        the k innermost scopes, whose names must be `N₁ … Nₖ`, so `end Model` closes the
        `Model` of `namespace Toy.Model` and leaves `Toy` open; a bare `end` closes one
        unnamed section. The scopes are closed even when the name is wrong, as in Lean, and a
        scope still open at the end of the file is fine."""
        parts = name.split(".") if name else []
        if not self.stack:
            raise Fail(pos, "invalid `end`: there is no current scope to end")
        if len(parts) > len(self.stack):
            self._close(len(self.stack))
            raise Fail(pos, f"invalid name after `end`: `{name}` contains too many components")
        n = max(len(parts), 1)
        headers = ".".join(h for _, h, _, _ in self.stack[len(self.stack) - n:])
        self._close(n)
        if not parts and headers:
            raise Fail(pos, f"missing name after `end`: expected the current scope name "
                            f"`{headers}`")
        if len(parts) == 1 and not headers:
            raise Fail(pos, f"unexpected name `{name}` after `end`: the current section is "
                            f"unnamed")
        if parts and headers != name:
            raise Fail(pos, f"invalid name after `end`: expected `{headers}`, but found "
                            f"`{name}`")

    def _close(self, n: int) -> None:
        _, _, nspaces, nopens = self.stack[len(self.stack) - n]
        del self.stack[len(self.stack) - n:]
        del self.namespaces[nspaces:]
        del self.opens[nopens:]
