"""Hints appended to a type mismatch where the cause is a rule newcomers do not expect.

Lean's unifier solves `?h * ?d =?= c.n_head * c.head_dim` (the same shape) but never splits an
atom: `?h * ?d =?= c.width` is stuck, since nothing says which factors were meant, and
`c.width` is not definitionally `c.n_head * (c.width / c.n_head)` either. The fix is in the
config, not at the call: a width written as a product.
"""
from __future__ import annotations

from .terms import NatOp, Term, occurs

_WHAT = {"*": ("a product", "c.n_head * c.head_dim"), "+": ("a sum", "c.txt_len + c.img_len")}


def _ops(t: Term) -> set[str]:
    """The `Nat` operations that occur in `t`."""
    found: set[str] = set()

    def visit(u: Term) -> bool:
        if isinstance(u, NatOp):
            found.add(u.op)
        return False  # keep walking

    occurs(t, visit)
    return found


def split_hint(actual: Term, expected: Term) -> str:
    """`; note: …` when `expected` (instantiated) has a dimension built by `*` (or `+`) and
    `actual` none: an atom there can never match it; else ''."""
    missing = [op for op in _WHAT if op in _ops(expected) - _ops(actual)]
    if not missing:
        return ""
    what, example = _WHAT[missing[0]]
    return (f"; note: a dimension is compared by its form, and unification never splits one "
            f"into {what}: write it as {what} where it is defined (e.g. a config's width as "
            f"`{example}`, see docs/first-model.md#widths-are-products)")
