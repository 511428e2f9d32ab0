"""Types and declarations as an author reads them: `T #[b, t, c.n_embd]`, signatures.

The checker keeps types as it unifies them: a solved implicit argument is a normal form
(`c.n_head * c.head_dim`) and a def on a structure is an application (`GPTConfig.n_embd c`).
For display, as Lean's delaborator does with field notation, `S.f x` is shown `x.f`, and a
normal form equal to `x.f` for a structure-typed local `x` is shown `x.f` again: the same
term up to unfolding, in the words of the source.
"""
from __future__ import annotations

from typing import Any, Callable

from ..lean.defeq import Normalizer
from ..lean.env import CtorInfo, DefInfo, Env, IndInfo, StructInfo
from ..lean.terms import (
    App,
    FloatOp,
    MetaCtx,
    NatOp,
    Pi,
    Proj,
    Term,
    instantiate,
    map_children,
    show,
)
from .record import Typed


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


class Shower:
    """Shows the types of one declaration's terms, folded back into field notation."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.norm = Normalizer(MetaCtx(), env.unfold)
        self._fields: dict[str, list[DefInfo]] = {}
        self._folds: dict[int, dict[Term, Term]] = {}

    def _field_defs(self, sname: str) -> list[DefInfo]:
        if sname not in self._fields:
            self._fields[sname] = field_defs(self.env, sname)
        return self._fields[sname]

    def folds(self, typed: Typed) -> dict[Term, Term]:
        """Normal form → `x.f`, for the structure-typed locals of `typed`'s context."""
        key = id(typed.ctx)
        if key in self._folds:
            return self._folds[key]
        out: dict[Term, Term] = {}
        c = typed.ctx
        while c is not None and c.local is not None:
            ty = c.local.type
            if isinstance(ty, App) and isinstance(self.env.get(ty.head), StructInfo):
                for d in self._field_defs(ty.head):
                    try:
                        nf = self.norm(App(d.name, (c.local.term,)))
                    except Exception:  # noqa: BLE001 — display only: a term too large, …
                        continue
                    if isinstance(nf, (NatOp, FloatOp)):
                        out.setdefault(nf, Proj(c.local.term, d.name.rsplit(".", 1)[-1]))
            c = c.parent
        self._folds[key] = out
        return out

    def term(self, t: Term, typed: Typed | None = None, mctx: MetaCtx | None = None) -> str:
        if mctx is not None:
            t = instantiate(t, mctx)
        return show(self.fold(t, self.folds(typed) if typed is not None else {}))

    def plain(self, t: Term) -> str:
        """A declared type (no local context): only `S.f x` is shown `x.f`."""
        return show(self.fold(t, {}))

    def typed(self, typed: Typed) -> str:
        """The type of a recorded term, its metavariables solved as the checker left them."""
        return self.term(typed.type, typed, typed.elab.mctx)

    def fold(self, t: Term, folds: dict[Term, Term]) -> Term:
        hit = folds.get(t)
        if hit is not None:
            return hit
        t = map_children(t, lambda c: self.fold(c, folds))
        if isinstance(t, App) and len(t.args) == 1 and "." in t.head:
            sname, f = t.head.rsplit(".", 1)
            if any(d.name == t.head for d in self._field_defs(sname)):
                return Proj(t.args[0], f)
        return t


def signature(name: str, info: Any, shown: Callable[[Term], str] = show) -> str:
    """A declaration as Lean source: `def linear {b m n : Nat} (x : T #[b, m]) … : T #[b, n]`;
    `shown` prints its types (`Shower.plain`: with field notation)."""
    short = name[len("torch."):] if name.startswith("torch.") else name
    if isinstance(info, DefInfo):
        head = "def" if info.kind in ("def", "builtin") else info.kind
        return f"{head} {short}{_binders(info.params, shown)} : {shown(info.result)}"
    if isinstance(info, StructInfo):
        fields = "".join(f"\n  {f.name} : {shown(f.type)}" for f in info.fields)
        return f"structure {short}{_binders(info.params, shown)} where{fields}"
    if isinstance(info, IndInfo):
        ctors = "".join(f"\n  | {c}{_binders(ci.params[len(info.params):], shown)}"
                        for c, ci in info.ctors.items())
        return f"inductive {short}{_binders(info.params, shown)} where{ctors}"
    if isinstance(info, CtorInfo):
        return f"{short}{_binders(info.params, shown)} : {info.inductive}"
    if isinstance(info, str):
        return f"{short} : Type"
    return short


def _binders(params: tuple, shown: Callable[[Term], str]) -> str:
    out, i = [], 0
    while i < len(params):  # consecutive binders of one type and kind share a group
        p = params[i]
        names = [p.name]
        while i + 1 < len(params) and params[i + 1].kind == p.kind \
                and params[i + 1].type == p.type and p.default is None \
                and params[i + 1].default is None and p.tactic is None \
                and params[i + 1].tactic is None:
            i += 1
            names.append(params[i].name)
        extra = f" := by {p.tactic}" if p.tactic else (f" := {shown(p.default)}"
                                                       if p.default is not None else "")
        o, c = ("{", "}") if p.kind == "implicit" else ("(", ")")
        out.append(f" {o}{' '.join(names)} : {shown(p.type)}{extra}{c}")
        i += 1
    return "".join(out)


def type_of(info: Any) -> Term | None:
    """The type of a global, as a term (for the type of a name used as a value)."""
    if isinstance(info, DefInfo):
        return info.type
    if isinstance(info, CtorInfo):
        return Pi(info.params, App(info.inductive)) if info.params else App(info.inductive)
    return None
