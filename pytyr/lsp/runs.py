"""The numbers a run will have: every scope's values as the file's models are instantiated.

Each `@[model]` is instantiated with its config's values as `tyr graph` does (the same
evaluator, the same graph), and the evaluator tells every scope it evaluates: a def's
arguments at each call, a block's `let`s, a closure's arguments. So a helper called with
another value than the model's argument of the same name (a ViT layer applied to the class
token plus `t` patches: `1 + t`), or whose one call fixes its dims, gets the numbers of its
calls. A type's numbers are the type with those values substituted, normalised by the
checker's own arithmetic; a helper called with several sizes has several.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..lean.defeq import Normalizer
from ..lean.env import Env
from ..lean.instantiate import instantiate_model
from ..lean.program import Program
from ..lean.terms import (
    Arr,
    CtorV,
    FLit,
    Lit,
    MetaCtx,
    SLit,
    StructV,
    Term,
    Var,
    instantiate,
    map_children,
    subst,
)

MAX_SHOWN = 3  # sizes of one type shown at most (a helper called with many)

_PLAIN = (Lit, FLit, SLit)


def plain(v: Term) -> bool:
    """A value a type can mention: a number, a config, a vector of them (no tensor, no
    function: those differ at every call and never appear in a type)."""
    if isinstance(v, _PLAIN):
        return True
    if isinstance(v, StructV):
        return all(plain(x) for _, x in v.fields)
    if isinstance(v, (Arr, CtorV)):
        return all(plain(x) for x in (v.items if isinstance(v, Arr) else v.args))
    return False


def free_vars(t: Term) -> dict[int, Var]:
    """The variables of `t`, by uid."""
    out: dict[int, Var] = {}

    def visit(c: Term) -> Term:
        if isinstance(c, Var):
            out[c.uid] = c
        else:
            map_children(c, visit)
        return c

    visit(t)
    return out


@dataclass
class Runs:
    """The scopes of every model run: (model, the scope's plain values by uid)."""

    frames: list[tuple[str, dict[int, Term]]] = field(default_factory=list)
    index: dict[int, list[int]] = field(default_factory=dict)  # uid → frames that bind it
    problems: dict[str, str] = field(default_factory=dict)  # model → why it did not run
    _seen: set = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.frames)

    def add(self, model: str, s: dict[int, Term]) -> None:
        kept = {u: v for u, v in s.items() if plain(v)}
        key = (model, tuple(sorted(kept.items(), key=lambda kv: kv[0])))
        if not kept or key in self._seen:  # every layer of a stack repeats its sizes
            return
        self._seen.add(key)
        k = len(self.frames)
        self.frames.append((model, kept))
        for u in kept:
            self.index.setdefault(u, []).append(k)

    def assignments(self, uids: set[int]) -> list[tuple[str, dict[int, Term]]]:
        """The distinct values the runs gave `uids` (those bound in some scope), with the
        model of each; [] when no run bound any of them."""
        known = [u for u in uids if u in self.index]
        if not known:
            return []
        hits = set(self.index[known[0]])
        for u in known[1:]:
            hits &= set(self.index[u])
        out, seen = [], set()
        for k in sorted(hits):
            model, frame = self.frames[k]
            m = {u: frame[u] for u in known}
            key = (model, tuple(sorted(m.items(), key=lambda kv: kv[0])))
            if key not in seen:
                seen.add(key)
                out.append((model, m))
        return out


def model_runs(prog: Program, values: dict[str, dict[str, Any]]) -> Runs:
    """Instantiate each model of `prog` that has values (`values`: model → its values, as
    `tyr graph` takes them), noting every scope; a model that cannot be instantiated is
    noted with its reason."""
    runs = Runs()
    for name, vals in values.items():
        try:
            instantiate_model(prog, name, vals, seen=lambda s, n=name: runs.add(n, s))
        except Exception as err:  # noqa: BLE001 — display only: any refusal is a reason
            runs.problems[name] = str(err).splitlines()[0] if str(err) else type(err).__name__
    return runs


class RunTypes:
    """Types with the runs' numbers, for the terms of one program."""

    def __init__(self, env: Env, runs: Runs) -> None:
        self.runs = runs
        self.norm = Normalizer(MetaCtx(), env.unfold)

    def resolve(self, t: Term, mctx: MetaCtx | None = None) -> list[tuple[str, Term]]:
        """`t` under each distinct assignment the runs made to its variables, normalised
        (model, term); [] when no run reached them."""
        if mctx is not None:
            t = instantiate(t, mctx)
        names = free_vars(t)
        if not names:
            return []
        out: list[tuple[str, Term]] = []
        for model, m in self.runs.assignments(set(names)):
            try:
                r = self.norm(subst(t, m))
            except Exception:  # noqa: BLE001 — a value too large to compute: show none
                continue
            whole = {v: names[u] for u, v in m.items() if isinstance(v, StructV)}
            r = _named(r, whole)
            if (model, r) not in out:
                out.append((model, r))
        return out


def _named(t: Term, names: dict[Term, Term]) -> Term:
    """A whole config value is shown by its binder's name (`Block c`, not its fields)."""
    hit = names.get(t) if names and isinstance(t, StructV) else None
    if hit is not None:
        return hit
    return map_children(t, lambda c: _named(c, names)) if names else t
