"""The bound `i < n` of `xs[i]` as `omega` proves it, in part: a least value of `n` from the
numbers in it and the hypotheses in scope (Lean's `get_elem_tactic` tries `omega` after
`assumption`, `src/Init/Tactics.lean`; `elaborate.TermElab.index` asks)."""
from __future__ import annotations

from collections.abc import Callable

from .context import Ctx
from .terms import Eq, Lit, NatOp, Rel, Term

Whnf = Callable[[Term], Term]


def least_value(n: Term, at_least: dict[Term, int], whnf: Whnf) -> int:
    """A lower bound of the Nat `n`: its numbers, sums, `min`s, products and divisions by a
    number, over terms `at_least` their bounds (any other term at least 0). Each step is
    linear arithmetic over hypotheses, which `omega` decides (`min` split, `/` by a number, a
    product of two terms an atom, as its docstring says): what this proves, it proves; it
    proves less (no upper bounds, no subtraction, no contradictions)."""
    n = whnf(n)
    if isinstance(n, Lit):
        return n.n
    if isinstance(n, NatOp) and n.op in ("+", "min"):
        a, b = least_value(n.a, at_least, whnf), least_value(n.b, at_least, whnf)
        return a + b if n.op == "+" else min(a, b)
    if isinstance(n, NatOp) and n.op == "*":  # linear: a number times a term (`omega` takes
        a, b = whnf(n.a), whnf(n.b)  # any other product as an atom)
        if isinstance(a, Lit) or isinstance(b, Lit):
            return least_value(a, at_least, whnf) * least_value(b, at_least, whnf)
    if isinstance(n, NatOp) and n.op == "/":
        d = whnf(n.b)
        if isinstance(d, Lit) and d.n > 0:
            return least_value(n.a, at_least, whnf) // d.n
    try:
        return at_least.get(n, 0)
    except TypeError:  # a term with an unhashable part: no hypothesis is about it
        return 0


def floors(ctx: Ctx, whnf: Whnf) -> dict[Term, int]:
    """What the hypotheses in scope say a term is at least: `k ≤ x`, `k < x`, `x = k` or
    `k = x`, with `x` no number and no arithmetic (`k`: its least value alone)."""
    out: dict[Term, int] = {}

    def floor(x: Term, at_least: int) -> None:
        x = whnf(x)
        if not isinstance(x, (Lit, NatOp)):
            try:
                out[x] = max(out.get(x, 0), at_least)
            except TypeError:
                pass
    for h in ctx.locals():
        prop = whnf(h.type)
        if isinstance(prop, Rel) and prop.op in ("≤", "<"):
            floor(prop.b, least_value(prop.a, {}, whnf) + (prop.op == "<"))
        elif isinstance(prop, Eq):
            floor(prop.a, least_value(prop.b, {}, whnf))
            floor(prop.b, least_value(prop.a, {}, whnf))
    return out
