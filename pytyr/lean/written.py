"""Unification of terms as written, before any unfolding.

Lean's `isDefEq` compares two applications of one head by their arguments before it unfolds
either (`isDefEqApp`, `lazyDeltaReduction` in `src/Lean/Meta/ExprDefEq.lean`), and assigns a
metavariable the other side as it stands. So `?c * (2 * 2) =?= 32 * (2 * 2)` solves `?c := 32`
where the values alone (`?c * 4 =?= 128`) are stuck, and `?n =?= c.n_embd` keeps the name the
author wrote, which messages then print. `defeq.unify` tries this first; where it fails, the
normal forms decide, with no assignment left behind.
"""
from __future__ import annotations

from collections.abc import Callable

from .terms import App, Arr, Eq, Meta, MetaCtx, NatOp, Prod, Proj, Rel, Term, instantiate, occurs


def alike_as_written(a: Term, b: Term, mctx: MetaCtx,
                     unfold: Callable[[App], Term | None]) -> bool:
    """`a` and `b` alike as written, up to assigning metavariables (to the other side as it
    is) and unfolding a definition one step where the two differ (`c.dim =?= ?h * ?d` is
    `c.heads * c.head =?= ?h * ?d`: `?h := c.heads`). Only a sufficient test: `False` leaves
    the question to the normal forms."""
    while isinstance(a, Meta) and a.uid in mctx.assign:
        a = mctx.assign[a.uid]
    while isinstance(b, Meta) and b.uid in mctx.assign:
        b = mctx.assign[b.uid]
    if a == b:
        return True
    for m, t in ((a, b), (b, a)):
        if isinstance(m, Meta) and not isinstance(t, Meta):
            t = instantiate(t, mctx)
            if occurs(t, lambda x: isinstance(x, Meta) and x.uid == m.uid):
                return False
            mctx.set(m.uid, t)
            return True
    if isinstance(a, Meta) or isinstance(b, Meta):
        return False
    if type(a) is not type(b) or (isinstance(a, App) and a.head != b.head):
        for x, y in ((a, b), (b, a)):  # Lean's lazy delta reduction: one step, one side
            body = unfold(x) if isinstance(x, App) else None
            if body is not None:
                return alike_as_written(body, y, mctx, unfold)
        return False
    if isinstance(a, App):
        return len(a.args) == len(b.args) and all(
            alike_as_written(x, y, mctx, unfold) for x, y in zip(a.args, b.args))
    if isinstance(a, Arr):
        return len(a.items) == len(b.items) and all(
            alike_as_written(x, y, mctx, unfold) for x, y in zip(a.items, b.items))
    if isinstance(a, (NatOp, Rel)):
        return a.op == b.op and alike_as_written(a.a, b.a, mctx, unfold) \
            and alike_as_written(a.b, b.b, mctx, unfold)
    if isinstance(a, Proj):
        return a.field == b.field and alike_as_written(a.e, b.e, mctx, unfold)
    if isinstance(a, (Prod, Eq)):
        return alike_as_written(a.a, b.a, mctx, unfold) and alike_as_written(a.b, b.b, mctx, unfold)
    return False
