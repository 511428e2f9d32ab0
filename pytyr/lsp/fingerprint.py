"""What a declaration says to the checking of the declarations after it, as one number.

An incremental check (`incremental.py`) reuses a command when every name it looked up has the
version it had: the `fingerprint` of its declaration, a digest of its signature, its value, a
structure's fields or an inductive's constructors, and not of its place, its doc or its tensor
code (no other declaration's check reads those). Bound variables are numbered by their first
appearance, so two checks of one declaration, which draw different uids, agree.
"""
from __future__ import annotations

from typing import Any

from ..lean.env import CtorInfo, DefInfo, IndInfo, StructInfo
from ..lean.terms import Block, Lam, Param, Pi, Term, Var, map_children


def fingerprint(info: Any) -> int:
    """A digest of what a declaration says to the checker of the declarations after it (not
    its place, doc or tensor code), the same for two checks of it whatever uids they drew."""
    m: dict[int, int] = {}
    if isinstance(info, DefInfo):
        return hash(("def", info.name, info.kind, _canon_params(info.params, m),
                     _canon(info.result, m),
                     None if info.value is None else _canon(info.value, m),
                     tuple(info.attrs), info.native, repr(info.op), repr(info.init),
                     info.tensor_level, info.checkpoint))
    if isinstance(info, StructInfo):
        ps = _canon_params(info.params, m)
        fields = tuple((f.name, m.setdefault(f.uid, len(m)), _canon(f.type, m),
                        None if f.default is None else _canon(f.default, m))
                       for f in info.fields)
        return hash(("structure", info.name, ps, fields, tuple(info.deriving)))
    if isinstance(info, IndInfo):
        ps = _canon_params(info.params, m)
        ctors = tuple((n, _canon_params(c.params, dict(m))) for n, c in info.ctors.items())
        return hash(("inductive", info.name, ps, ctors, tuple(info.deriving)))
    if isinstance(info, CtorInfo):
        return hash(("ctor", info.name, info.inductive, _canon_params(info.params, m)))
    return hash(repr(info))


def _canon_params(ps: tuple[Param, ...], m: dict[int, int]) -> tuple:
    return tuple(Param(p.name, m.setdefault(p.uid, len(m)), p.kind, _canon(p.type, m),
                       None if p.default is None else _canon(p.default, m), p.tactic)
                 for p in ps)


def _canon(t: Term, m: dict[int, int]) -> Term:
    """`t` with every variable numbered by its first appearance (alpha-equivalent terms are
    equal)."""
    if isinstance(t, Var):
        return Var(t.name, m.setdefault(t.uid, len(m)))
    if isinstance(t, Pi):
        return Pi(_canon_params(t.params, m), _canon(t.result, m))
    if isinstance(t, Lam):
        return Lam(_canon_params(t.params, m), _canon(t.body, m))
    if isinstance(t, Block):
        return Block(tuple((n, m.setdefault(u, len(m)), _canon(v, m)) for n, u, v in t.binds),
                     _canon(t.body, m))
    return map_children(t, lambda c: _canon(c, m))
