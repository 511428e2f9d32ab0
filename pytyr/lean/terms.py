"""Core terms of the checker: types, the values that occur in types, and the computations a
model performs.

Types and the values in them (dims, shapes, configs) are first-order terms (`App`, `NatOp`,
`Arr`, `Proj`, ...), compared by the definitional equality of `defeq.py`. A tensor-level body
is checked once into a *core term* that says what to compute (`Call` of an op, a def or a local
function, `Lam`, `Block` of `let`s); `evaluate.py` runs it when a model is instantiated. Every
implicit argument a call needs is already in its `Call`: elaborate once, evaluate later.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import Pos
from .numerals import nat_str


class Term:
    __slots__ = ()


@dataclass(frozen=True)
class Lit(Term):
    n: int


@dataclass(frozen=True)
class FLit(Term):
    x: float


@dataclass(frozen=True)
class SLit(Term):
    s: str


@dataclass(frozen=True)
class Var(Term):
    name: str
    uid: int


@dataclass(frozen=True)
class Meta(Term):
    uid: int
    name: str


@dataclass(frozen=True)
class App(Term):
    """A global constant applied to arguments: a type former, a def, a constructor."""

    head: str
    args: tuple[Term, ...] = ()


@dataclass(frozen=True)
class NatOp(Term):
    op: str  # + - * / % min (`min` only from a builtin's type: `Vector.extract`'s)
    a: Term
    b: Term


@dataclass(frozen=True)
class FloatOp(Term):
    op: str  # + - * /
    a: Term
    b: Term


@dataclass(frozen=True)
class Proj(Term):
    e: Term
    field: str


@dataclass(frozen=True)
class Arr(Term):
    items: tuple[Term, ...]


@dataclass(frozen=True)
class Param:
    name: str
    uid: int
    kind: str  # explicit | implicit
    type: Term
    default: Term | None = None  # `(k : A := v)`: `v`, elaborated against `A` at the declaration
    tactic: str | None = None  # `(h : P := by decide)`


@dataclass(frozen=True)
class Pi(Term):
    params: tuple[Param, ...]
    result: Term


@dataclass(frozen=True)
class Prod(Term):
    a: Term
    b: Term


@dataclass(frozen=True)
class Pair(Term):
    a: Term
    b: Term


@dataclass(frozen=True)
class Sort(Term):
    name: str  # Type | Prop


@dataclass(frozen=True)
class Eq(Term):
    a: Term
    b: Term


@dataclass(frozen=True)
class Rel(Term):
    """`a ≤ b`, `a < b`, `a ≠ b` (`Ne a b`), `a ≥ b` or `a > b` on Nat: a proposition. The
    last two are as written; their normal forms are `b ≤ a` and `b < a` (`defeq.Normalizer`)."""

    op: str  # ≤ | < | ≠ | ≥ | >
    a: Term
    b: Term


@dataclass(frozen=True)
class Opaque(Term):
    """A value the checker does not track (a tensor at check time, a proof)."""

    tag: str


@dataclass(frozen=True)
class StructV(Term):
    sname: str
    fields: tuple[tuple[str, Term], ...]

    def get(self, name: str) -> Term | None:
        return next((v for k, v in self.fields if k == name), None)


@dataclass(frozen=True)
class TensorV(Term):
    """A graph value while a model is instantiated (input, parameter path or `%k`)."""

    ref: str


@dataclass(frozen=True)
class InitV(Term):
    kind: str
    args: tuple[tuple[str, Term], ...]


@dataclass(frozen=True)
class CtorV(Term):
    """A constructor of a (non-structure) inductive applied to arguments: `.f32`."""

    name: str
    args: tuple[Term, ...] = ()


@dataclass(frozen=True)
class Call(Term):
    """A computation: a typed op, a tensor-level def, a checkpoint constant or `Vector.foldl`
    (`head` its name), or a local function value (`head` a term), applied to every argument
    (implicit ones included, as solved when the caller was checked). `pos`: the call site."""

    head: str | Term
    args: tuple[Term, ...]
    pos: Pos


@dataclass(frozen=True)
class Lam(Term):
    """`fun (x : A) => body`."""

    params: tuple[Param, ...]
    body: Term


@dataclass(frozen=True)
class Block(Term):
    """`let`s whose values are computations, evaluated once each, in order; then `body`.
    (`let`s of plain values are substituted, as Lean's zeta reduction would.)"""

    binds: tuple[tuple[str, int, Term], ...]  # (name, uid of its `Var`, value)
    body: Term


NAT = App("Nat")
FLOAT = App("Float")
STRING = App("String")
BOOL = App("Bool")
TYPE = Sort("Type")
PROP = Sort("Prop")
SHAPE = App("Array", (NAT,))


# ---- metavariables ---------------------------------------------------------------------

_META_IDS = itertools.count(1)


class MetaCtx:
    """Assignments of metavariables, with an undo trail: a failed unification is rolled back
    without copying the assignments."""

    def __init__(self) -> None:
        self.assign: dict[int, Term] = {}
        self._trail: list[int] = []

    def fresh(self, name: str) -> Meta:
        return Meta(next(_META_IDS), name)

    def set(self, uid: int, t: Term) -> None:
        self.assign[uid] = t
        self._trail.append(uid)

    def mark(self) -> int:
        return len(self._trail)

    def since(self, mark: int) -> list[int]:
        return self._trail[mark:]

    def undo(self, mark: int) -> None:
        while len(self._trail) > mark:
            del self.assign[self._trail.pop()]


# ---- traversal --------------------------------------------------------------------------


def _param(p: Param, f: Callable[[Term], Term]) -> Param:
    return Param(p.name, p.uid, p.kind, f(p.type), None if p.default is None else f(p.default),
                 p.tactic)


def _map_app(t: App, f: Callable[[Term], Term]) -> Term:
    return App(t.head, tuple([f(a) for a in t.args])) if t.args else t


def _map_call(t: Call, f: Callable[[Term], Term]) -> Term:
    return Call(t.head if isinstance(t.head, str) else f(t.head), tuple([f(a) for a in t.args]),
                t.pos)


# the children of each composite term, rebuilt by `f`: one lookup by type instead of a chain
# of isinstance tests (this is the checker's innermost loop)
_MAP_CHILDREN: dict[type, Callable[[Any, Callable[[Term], Term]], Term]] = {
    App: _map_app,
    NatOp: lambda t, f: NatOp(t.op, f(t.a), f(t.b)),
    FloatOp: lambda t, f: FloatOp(t.op, f(t.a), f(t.b)),
    Proj: lambda t, f: Proj(f(t.e), t.field),
    Arr: lambda t, f: Arr(tuple([f(a) for a in t.items])),
    Prod: lambda t, f: Prod(f(t.a), f(t.b)),
    Pair: lambda t, f: Pair(f(t.a), f(t.b)),
    Eq: lambda t, f: Eq(f(t.a), f(t.b)),
    Rel: lambda t, f: Rel(t.op, f(t.a), f(t.b)),
    Pi: lambda t, f: Pi(tuple([_param(p, f) for p in t.params]), f(t.result)),
    StructV: lambda t, f: StructV(t.sname, tuple([(k, f(v)) for k, v in t.fields])),
    InitV: lambda t, f: InitV(t.kind, tuple([(k, f(v)) for k, v in t.args])),
    CtorV: lambda t, f: CtorV(t.name, tuple([f(a) for a in t.args])),
    Call: _map_call,
    Lam: lambda t, f: Lam(tuple([_param(p, f) for p in t.params]), f(t.body)),
    Block: lambda t, f: Block(tuple([(n, u, f(v)) for n, u, v in t.binds]), f(t.body)),
}


def map_children(t: Term, f: Callable[[Term], Term]) -> Term:
    """`t` with `f` applied to its immediate subterms (leaves are returned as they are)."""
    m = _MAP_CHILDREN.get(type(t))
    return t if m is None else m(t, f)


def subst(t: Term, m: dict[int, Term]) -> Term:
    """Replace free variables (by uid)."""
    if not m:
        return t
    if isinstance(t, Var):
        return m.get(t.uid, t)
    return map_children(t, lambda c: subst(c, m))


def instantiate(t: Term, mctx: MetaCtx) -> Term:
    """Replace assigned metavariables by their values."""
    if not mctx.assign:
        return t
    if isinstance(t, Meta):
        v = mctx.assign.get(t.uid)
        return instantiate(v, mctx) if v is not None else t
    return map_children(t, lambda c: instantiate(c, mctx))


def occurs(t: Term, pred: Callable[[Term], bool]) -> bool:
    if pred(t):
        return True
    found = False

    def visit(c: Term) -> Term:
        nonlocal found
        if not found and occurs(c, pred):
            found = True
        return c

    map_children(t, visit)
    return found


PAIR_FIELDS = ("fst", "snd")  # `p.fst`, `p.snd`, `Prod.fst p`: the projections of `α × β`


def is_closed(t: Term) -> bool:
    return not occurs(t, lambda x: isinstance(x, (Var, Meta, Opaque)))


def computes(t: Term) -> bool:
    """Whether `t` performs a computation (a `let` of it is bound once, not substituted)."""
    return occurs(t, lambda x: isinstance(x, (Call, Lam, Block)))


# ---- printing ----------------------------------------------------------------------------

_PREC = {"+": 65, "-": 65, "*": 70, "/": 70, "%": 70}


def show(t: Term, prec: int = 0) -> str:
    """Render a term as Lean source (`T #[b, 4 * d]`, `?n`, `c.hidden`)."""
    def paren(s: str, p: int) -> str:
        return f"({s})" if p < prec else s

    if isinstance(t, Lit):
        return nat_str(t.n)
    if isinstance(t, FLit):
        return repr(t.x)
    if isinstance(t, SLit):
        return f'"{t.s}"'
    if isinstance(t, Var):
        return t.name
    if isinstance(t, Meta):
        return f"?{t.name}"
    if isinstance(t, NatOp) and t.op == "min":  # `min a b`, an application
        return paren(f"min {show(t.a, 1024)} {show(t.b, 1024)}", 1023)
    if isinstance(t, (NatOp, FloatOp)):
        p = _PREC[t.op]
        return paren(f"{show(t.a, p)} {t.op} {show(t.b, p + 1)}", p)
    if isinstance(t, Proj):
        return f"{show(t.e, 1024)}.{t.field}"
    if isinstance(t, Arr):
        return "#[" + ", ".join(show(x) for x in t.items) + "]"
    if isinstance(t, App):
        name = _short(t.head)
        if t.head == "Array" and t.args == (NAT,):
            return "Shape"
        if not t.args:
            return name
        return paren(name + " " + " ".join(show(a, 1024) for a in t.args), 1023)
    if isinstance(t, Prod):
        return paren(f"{show(t.a, 36)} × {show(t.b, 35)}", 35)
    if isinstance(t, Pair):
        return f"({show(t.a)}, {show(t.b)})"
    if isinstance(t, Sort):
        return t.name
    if isinstance(t, Rel):
        return paren(f"{show(t.a, 51)} {t.op} {show(t.b, 51)}", 50)
    if isinstance(t, Eq):
        return paren(f"{show(t.a, 51)} = {show(t.b, 51)}", 50)
    if isinstance(t, Pi):
        bs = " ".join(("(" if p.kind == "explicit" else "{") + f"{p.name} : {show(p.type)}"
                      + (")" if p.kind == "explicit" else "}") for p in t.params)
        return paren(f"{bs} → {show(t.result, 25)}", 25)
    if isinstance(t, StructV):
        return "{ " + ", ".join(f"{k} := {show(v)}" for k, v in t.fields) + " }"
    if isinstance(t, TensorV):
        return f"<{t.ref}>"
    if isinstance(t, InitV):
        return f"{t.kind}" + "".join(" " + show(v, 1024) for _, v in t.args)
    if isinstance(t, CtorV):
        return "." + t.name.rsplit(".", 1)[-1] + "".join(" " + show(a, 1024) for a in t.args)
    if isinstance(t, Opaque):
        return t.tag
    if isinstance(t, Call):
        head = _short(t.head) if isinstance(t.head, str) else show(t.head, 1024)
        return paren(head + "".join(" " + show(a, 1024) for a in t.args), 1023)
    if isinstance(t, Lam):
        return paren("fun " + " ".join(p.name for p in t.params) + " => " + show(t.body), 0)
    if isinstance(t, Block):
        return "; ".join(f"let {n} := {show(v)}" for n, _, v in t.binds) + "; " + show(t.body)
    return repr(t)


def _short(name: str) -> str:  # `Bool.true` is `true`: `export Bool (false true)`
    return name[len("torch."):] if name.startswith("torch.") else name.removeprefix("Bool.")
