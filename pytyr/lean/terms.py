"""Core terms of the checker, and Lean's definitional equality on the fragment Tyr uses.

Types and the values that occur in types (dims, shapes, configs) are `Term`s. Definitional
equality follows Lean (see ../shared/reference.md and docs/lean-subset.md):
- closed `Nat` arithmetic evaluates as Lean defines it: truncated `-`, `x / 0 = 0`,
  `x % 0 = x`;
- `e + k` with a literal `k` is an offset: `n + 0 ≡ n`, `(n + 1) + 1 ≡ n + 2`, and
  `?n + 1 =?= 5` solves `?n := 4`;
- nothing else about open terms: `0 + n`, `n + m` vs `m + n`, `4 * d` vs `d * 4` differ;
- `let`s, `abbrev`/`def` constants and projections of known structure values unfold.
Where the checker cannot decide, it answers "not equal", and the caller reports an error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


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
    op: str  # + - * / %
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
    default: object = None  # surface default expression (syntax.Expr) or None
    tactic: str | None = None


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


PAIR_FIELDS = ("fst", "snd")  # `p.fst`, `p.snd`, `Prod.fst p`: the projections of `α × β`


@dataclass(frozen=True)
class Sort(Term):
    name: str  # Type | Prop


@dataclass(frozen=True)
class Eq(Term):
    a: Term
    b: Term


@dataclass(frozen=True)
class Rel(Term):
    """`a ≤ b` or `a < b` on Nat: a proposition."""

    op: str  # ≤ | <
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
        for k, v in self.fields:
            if k == name:
                return v
        return None


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


NAT = App("Nat")
FLOAT = App("Float")
STRING = App("String")
TYPE = Sort("Type")
PROP = Sort("Prop")
SHAPE = App("Array", (NAT,))


# ---- metavariables ---------------------------------------------------------------------


@dataclass
class MetaCtx:
    assign: dict[int, Term] = field(default_factory=dict)
    counter: int = 0

    def fresh(self, name: str) -> Meta:
        self.counter += 1
        return Meta(self.counter, name)

    def snapshot(self) -> dict[int, Term]:
        return dict(self.assign)

    def restore(self, snap: dict[int, Term]) -> None:
        self.assign = snap


# ---- traversal --------------------------------------------------------------------------


def map_children(t: Term, f: Callable[[Term], Term]) -> Term:
    if isinstance(t, App):
        return App(t.head, tuple(f(a) for a in t.args))
    if isinstance(t, (NatOp, FloatOp)):
        return type(t)(t.op, f(t.a), f(t.b))
    if isinstance(t, Proj):
        return Proj(f(t.e), t.field)
    if isinstance(t, Arr):
        return Arr(tuple(f(a) for a in t.items))
    if isinstance(t, (Prod, Pair, Eq)):
        return type(t)(f(t.a), f(t.b))
    if isinstance(t, Rel):
        return Rel(t.op, f(t.a), f(t.b))
    if isinstance(t, Pi):
        ps = tuple(Param(p.name, p.uid, p.kind, f(p.type), p.default, p.tactic) for p in t.params)
        return Pi(ps, f(t.result))
    if isinstance(t, StructV):
        return StructV(t.sname, tuple((k, f(v)) for k, v in t.fields))
    if isinstance(t, InitV):
        return InitV(t.kind, tuple((k, f(v)) for k, v in t.args))
    if isinstance(t, CtorV):
        return CtorV(t.name, tuple(f(a) for a in t.args))
    return t


def subst(t: Term, m: dict[int, Term]) -> Term:
    """Replace free variables (by uid)."""
    if not m:
        return t
    if isinstance(t, Var):
        return m.get(t.uid, t)
    return map_children(t, lambda c: subst(c, m))


def instantiate(t: Term, mctx: MetaCtx) -> Term:
    """Replace assigned metavariables by their values."""
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


def is_closed(t: Term) -> bool:
    return not occurs(t, lambda x: isinstance(x, (Var, Meta, Opaque)))


# ---- normalisation -----------------------------------------------------------------------


def nat_eval(op: str, a: int, b: int) -> int:
    """Lean's `Nat` operations: truncated subtraction, `x / 0 = 0`, `x % 0 = x`."""
    if op == "+":
        return a + b
    if op == "-":
        return max(a - b, 0)
    if op == "*":
        return a * b
    if op == "/":
        return a // b if b else 0
    if op == "%":
        return a % b if b else a
    raise ValueError(op)


def float_eval(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b if b else (float("inf") if a > 0 else float("-inf") if a < 0 else float("nan"))
    raise ValueError(op)


class Normalizer:
    """Weak normalisation with delta (defs), zeta (lets, substituted), iota (projections)."""

    def __init__(self, mctx: MetaCtx, unfold: Callable[[App], Term | None]):
        self.mctx = mctx
        self.unfold = unfold

    def __call__(self, t: Term) -> Term:
        if isinstance(t, Meta):
            v = self.mctx.assign.get(t.uid)
            return self(v) if v is not None else t
        if isinstance(t, App):
            t = App(t.head, tuple(self(a) for a in t.args))
            body = self.unfold(t)
            return self(body) if body is not None else t
        if isinstance(t, NatOp):
            a, b = self(t.a), self(t.b)
            if isinstance(a, Lit) and isinstance(b, Lit):
                return Lit(nat_eval(t.op, a.n, b.n))
            if t.op == "+" and isinstance(b, Lit):
                if b.n == 0:
                    return a
                if isinstance(a, NatOp) and a.op == "+" and isinstance(a.b, Lit):
                    return NatOp("+", a.a, Lit(a.b.n + b.n))
            return NatOp(t.op, a, b)
        if isinstance(t, FloatOp):
            a, b = self(t.a), self(t.b)
            if isinstance(a, FLit) and isinstance(b, FLit):
                return FLit(float_eval(t.op, a.x, b.x))
            return FloatOp(t.op, a, b)
        if isinstance(t, Proj):
            e = self(t.e)
            if isinstance(e, StructV):
                v = e.get(t.field)
                if v is not None:
                    return self(v)
            if isinstance(e, Pair) and t.field in PAIR_FIELDS:
                return self(e.a if t.field == "fst" else e.b)
            return Proj(e, t.field)
        return map_children(t, self)


def unify(a: Term, b: Term, norm: Normalizer) -> bool:
    """Lean-style `a =?= b` on the fragment; assigns metavariables in `norm.mctx`."""
    a, b = norm(a), norm(b)
    if a == b:
        return True
    if isinstance(a, Meta):
        return _assign(a, b, norm)
    if isinstance(b, Meta):
        return _assign(b, a, norm)
    # Offsets: `e + k =?= n` and `e + k =?= e' + j` with literal k, j.
    oa, ob = _offset(a), _offset(b)
    if oa is not None or ob is not None:
        (ea, ka), (eb, kb) = oa or (a, 0), ob or (b, 0)
        if isinstance(a, Lit):
            ea, ka = None, a.n
        if isinstance(b, Lit):
            eb, kb = None, b.n
        k = min(ka, kb)
        if k > 0:
            ra = _mk_offset(ea, ka - k)
            rb = _mk_offset(eb, kb - k)
            return unify(ra, rb, norm)
        return False
    if type(a) is not type(b):
        return False
    if isinstance(a, App):
        return a.head == b.head and len(a.args) == len(b.args) and all(
            unify(x, y, norm) for x, y in zip(a.args, b.args))
    if isinstance(a, (NatOp, FloatOp)):
        return a.op == b.op and unify(a.a, b.a, norm) and unify(a.b, b.b, norm)
    if isinstance(a, Proj):
        return a.field == b.field and unify(a.e, b.e, norm)
    if isinstance(a, Arr):
        return len(a.items) == len(b.items) and all(
            unify(x, y, norm) for x, y in zip(a.items, b.items))
    if isinstance(a, Rel):
        return a.op == b.op and unify(a.a, b.a, norm) and unify(a.b, b.b, norm)
    if isinstance(a, (Prod, Pair, Eq)):
        return unify(a.a, b.a, norm) and unify(a.b, b.b, norm)
    if isinstance(a, StructV):
        return a.sname == b.sname and len(a.fields) == len(b.fields) and all(
            k1 == k2 and unify(v1, v2, norm) for (k1, v1), (k2, v2) in zip(a.fields, b.fields))
    if isinstance(a, CtorV):
        return a.name == b.name and len(a.args) == len(b.args) and all(
            unify(x, y, norm) for x, y in zip(a.args, b.args))
    if isinstance(a, Pi):
        if len(a.params) != len(b.params) or any(
                p.kind != q.kind for p, q in zip(a.params, b.params)):
            return False
        m = {q.uid: Var(p.name, p.uid) for p, q in zip(a.params, b.params)}
        return all(unify(p.type, subst(q.type, m), norm) for p, q in zip(a.params, b.params)) \
            and unify(a.result, subst(b.result, m), norm)
    return False


def _offset(t: Term) -> tuple[Term | None, int] | None:
    if isinstance(t, NatOp) and t.op == "+" and isinstance(t.b, Lit):
        return t.a, t.b.n
    if isinstance(t, Lit):
        return None, t.n
    return None


def _mk_offset(e: Term | None, k: int) -> Term:
    if e is None:
        return Lit(k)
    return e if k == 0 else NatOp("+", e, Lit(k))


def _assign(m: Meta, t: Term, norm: Normalizer) -> bool:
    t = instantiate(t, norm.mctx)
    if occurs(t, lambda x: isinstance(x, Meta) and x.uid == m.uid):
        return False
    norm.mctx.assign[m.uid] = t
    return True


# ---- printing ----------------------------------------------------------------------------

_PREC = {"+": 65, "-": 65, "*": 70, "/": 70, "%": 70}


def show(t: Term, prec: int = 0) -> str:
    """Render a term as Lean source (`T #[b, 4 * d]`, `?n`, `c.hidden`)."""
    def paren(s: str, p: int) -> str:
        return f"({s})" if p < prec else s

    if isinstance(t, Lit):
        return str(t.n)
    if isinstance(t, FLit):
        return repr(t.x)
    if isinstance(t, SLit):
        return f'"{t.s}"'
    if isinstance(t, Var):
        return t.name
    if isinstance(t, Meta):
        return f"?{t.name}"
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
    return repr(t)


def _short(name: str) -> str:
    return name[len("torch."):] if name.startswith("torch.") else name
