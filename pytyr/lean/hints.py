"""Notes appended to a type mismatch, where its cause is not in the two types printed.

- A product (or sum) that an op splits (`splitHeads` takes `T #[b, t, h * d]`) against a
  dimension that is no product: Lean's unifier solves `?h * ?d =?= c.n_head * c.head_dim` but
  never splits an atom (`?h * ?d =?= c.width` is stuck: nothing says which factors were meant)
  nor a number. The fix is where the width is defined: a product. Only there: a transposed
  weight or two numbers that differ are no such case.
- A metavariable fixed by another argument: `causalAttention q k v` with `q` of 3 heads makes
  `?h := 3`, and the error lands on `k`; the note names `q`.
"""
from __future__ import annotations

from collections.abc import Callable

from .terms import App, Arr, Lit, Meta, NatOp, Term, occurs

_WHAT = {"*": ("a product", "c.n_head * c.head_dim"), "+": ("a sum", "c.txt_len + c.img_len")}


def dim_pairs(actual: Term, expected: Term) -> list[tuple[Term, Term]]:
    """The dimensions of two types side by side: the shapes of two tensor types of one rank
    (`T #[…]`, `IT #[…] n`), else the two types whole."""
    if isinstance(actual, App) and isinstance(expected, App) and actual.head == expected.head \
            and len(actual.args) == len(expected.args) and actual.args:
        out: list[tuple[Term, Term]] = []
        for a, e in zip(actual.args, expected.args):
            if isinstance(a, Arr) and isinstance(e, Arr) and len(a.items) == len(e.items):
                out += zip(a.items, e.items)
            else:
                out.append((a, e))
        return out
    return [(actual, expected)]


def split_note(actual: Term, expected: Term, norm: Callable[[Term], Term]) -> str:
    """`; note: …` when a dimension the op builds by `*` (or `+`) of its implicit arguments
    (`expected` as the binder has it; `norm` instantiates and unfolds) meets one that is no
    product (no sum), as written or unfolded; else ''."""
    for a, e in dim_pairs(actual, expected):
        if not (isinstance(e, NatOp) and e.op in _WHAT and occurs(e, _meta)):
            continue
        na, ne = norm(a), norm(e)
        if na == ne or isinstance(ne, Lit):
            continue
        op, atom = _unsplit(na, ne)
        if atom is None:
            continue
        what, example = _WHAT[op]
        if isinstance(atom, Lit):
            return (f"; note: unification never splits the number {atom.n} into {what}: give "
                    f"the op's implicit arguments by name (both factors of a product, "
                    f"`(h := 4) (d := 16)`)")
        return (f"; note: a dimension is compared by its form, and unification never splits "
                f"one into {what}: write it as {what} where it is defined (e.g. a config's "
                f"width as `{example}`, see docs/first-model.md#widths-are-products)")
    return ""


def _unsplit(a: Term, e: Term) -> tuple[str, Term | None]:
    """Where the product (sum) `e` meets a term `a` that is none: `(op, that term)`, going
    down the factors the two share (`3 * c.head_dim` against `3 * (?h * ?d)`)."""
    if not (isinstance(e, NatOp) and e.op in _WHAT):
        return "", None
    if not (isinstance(a, NatOp) and a.op == e.op):
        return e.op, a
    for x, y in ((a.a, e.a), (a.b, e.b)):
        if x != y:
            found = _unsplit(x, y)
            if found[1] is not None:
                return found
    return "", None


def origin_note(actual: Term, expected: Term, fname: str, arg: str,
                origin: dict[int, tuple[str, str]], assign: dict[int, Term],
                differs: Callable[[Term, Term], bool], show: Callable[[Term], str]) -> str:
    """`; ?h := 3 comes from argument 'q'` for the metavariables of the mismatching
    dimensions that another argument of the same application `fname` fixed (`origin`: the
    application and argument that assigned each); else ''."""
    said: dict[str, list[str]] = {}
    for a, e in dim_pairs(actual, expected):
        metas: list[Meta] = []
        occurs(e, lambda t: isinstance(t, Meta) and metas.append(t) is not None)
        if not metas or not differs(a, e):
            continue
        for m in metas:
            last = m  # a metavariable assigned another: the last of the chain took the value
            while isinstance(assign.get(last.uid), Meta):
                last = assign[last.uid]  # type: ignore[assignment]
            v, (app, src) = assign.get(last.uid), origin.get(last.uid, ("", ""))
            if v is None or app != fname or src == arg or _unsolved(v, assign):
                continue
            fixed = f"?{m.name} := {show(v)}"
            if fixed not in sum(said.values(), []):
                said.setdefault(src, []).append(fixed)
    return "".join(f"; {' and '.join(fixed)} {'come' if len(fixed) > 1 else 'comes'} from "
                   f"{src}" for src, fixed in said.items())


def _meta(t: Term) -> bool:
    return isinstance(t, Meta)


def _unsolved(t: Term, assign: dict[int, Term]) -> bool:
    """Whether `t` still has a metavariable that nothing assigned (through chains)."""
    return occurs(t, lambda u: isinstance(u, Meta) and (
        u.uid not in assign or _unsolved(assign[u.uid], assign)))
