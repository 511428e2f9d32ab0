"""Types in the author's words, one convention for error messages and the editor's hovers.

The checker keeps types as it unifies them: a def on a structure is unfolded (`c.n_embd` is
`c.n_head * c.head_dim`), and one applied to a term that is no local is an application
(`GPTConfig.n_embd c`). For display, as Lean's delaborator does with field notation, `S.f x`
is shown `x.f`, and a normal form equal to the body of such a def for a structure-typed local
`x` is shown `x.f` again: the same term up to unfolding, in the names the author defined.
Only a def whose body computes (`+`, `*`, …) folds; one that renames a field does not.
"""
from __future__ import annotations

from collections.abc import Mapping

from .defeq import Normalizer
from .env import DefInfo, Env, StructInfo
from .terms import App, FloatOp, NatOp, Proj, Term, Var, map_children


def field_defs(env: Env, sname: str) -> list[DefInfo]:
    """Defs `S.f (x : S) : A := …` with a value: what `x.f` unfolds to."""
    out = []
    for name, info in env.decls.items():
        if not (isinstance(info, DefInfo) and name.startswith(sname + ".")
                and "." not in name[len(sname) + 1:]):
            continue
        ps = info.params
        if len(ps) == 1 and ps[0].kind == "explicit" and info.value is not None \
                and isinstance(ps[0].type, App) and ps[0].type.head == sname:
            out.append(info)
    return out


def _vars(t: Term, out: dict[int, Var]) -> dict[int, Var]:
    if isinstance(t, Var):
        out.setdefault(t.uid, t)
    else:
        map_children(t, lambda c: (_vars(c, out), c)[1])
    return out


class Folder:
    """Folds the types of one environment (its structures' defs are read once)."""

    def __init__(self, env: Env, norm: Normalizer) -> None:
        self.env, self.norm = env, norm
        self._fields: dict[str, list[DefInfo]] = {}
        self._folds: dict[tuple[Var, Term], dict[Term, Term]] = {}

    def defs(self, sname: str) -> list[DefInfo]:
        if sname not in self._fields:
            self._fields[sname] = field_defs(self.env, sname)
        return self._fields[sname]

    def folds(self, local: Var, ty: Term) -> dict[Term, Term]:
        """Normal form of each computing def on `ty`'s structure applied to `local` →
        `local.f`."""
        key = (local, ty)
        hit = self._folds.get(key)
        if hit is not None:
            return hit
        out: dict[Term, Term] = {}
        if isinstance(ty, App) and isinstance(self.env.get(ty.head), StructInfo):
            for d in self.defs(ty.head):
                try:
                    nf = self.norm(App(d.name, (local,)))
                except Exception:  # noqa: BLE001 — display only: a term too large, …
                    continue
                if isinstance(nf, (NatOp, FloatOp)):
                    out.setdefault(nf, Proj(local, d.name.rsplit(".", 1)[-1]))
        self._folds[key] = out
        return out

    def fold(self, t: Term, types: Mapping[int, Term]) -> Term:
        """`t` in the author's names; `types`: the type of each local by uid (those of a
        structure type fold)."""
        table: dict[Term, Term] = {}
        for uid, v in _vars(t, {}).items():
            ty = types.get(uid)
            if ty is not None:
                for k, f in self.folds(v, ty).items():
                    table.setdefault(k, f)
        return self._fold(t, table)

    def _fold(self, t: Term, table: dict[Term, Term]) -> Term:
        hit = table.get(t) if table else None
        if hit is not None:
            return hit
        t = map_children(t, lambda c: self._fold(c, table))
        if isinstance(t, App) and len(t.args) == 1 and "." in t.head:
            sname, f = t.head.rsplit(".", 1)
            if any(d.name == t.head for d in self.defs(sname)):
                return Proj(t.args[0], f)
        return t
