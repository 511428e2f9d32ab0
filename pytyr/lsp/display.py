"""Types and declarations as an author reads them: `T #[b, t, c.n_embd]`, signatures.

Types are folded into the author's names by the checker's own convention (`lean/folding.py`:
`S.f x` shown `x.f`, a normal form equal to `x.f` for a structure-typed local shown `x.f`),
so a hover names a width as the checker's error messages do.
"""
from __future__ import annotations

from typing import Any, Callable

from ..lean.defeq import Normalizer
from ..lean.env import CtorInfo, DefInfo, Env, IndInfo, StructInfo
from ..lean.folding import Folder
from ..lean.terms import App, MetaCtx, Pi, Term, Var, instantiate, show
from .record import Typed


class Shower:
    """Shows the types of one program's terms, in the author's names."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.norm = Normalizer(MetaCtx(), env.unfold)
        self.folder = Folder(env, self.norm)
        self._types: dict[int, dict[int, Term]] = {}

    def types(self, typed: Typed) -> dict[int, Term]:
        """The type of each local of `typed`'s context, by uid."""
        key = id(typed.ctx)
        hit = self._types.get(key)
        if hit is None:
            hit = {}
            c = typed.ctx
            while c is not None and c.local is not None:
                if isinstance(c.local.term, Var):
                    hit.setdefault(c.local.term.uid, c.local.type)
                c = c.parent
            self._types[key] = hit
        return hit

    def term(self, t: Term, typed: Typed | None = None, mctx: MetaCtx | None = None) -> str:
        if mctx is not None:
            t = instantiate(t, mctx)
        return show(self.folder.fold(t, self.types(typed) if typed is not None else {}))

    def plain(self, t: Term) -> str:
        """A declared type (no local context): only `S.f x` is shown `x.f`."""
        return show(self.folder.fold(t, {}))

    def typed(self, typed: Typed) -> str:
        """The type of a recorded term, its metavariables solved as the checker left them."""
        return self.term(typed.type, typed, typed.elab.mctx)


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
