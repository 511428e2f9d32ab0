"""Lean's definitional equality on the fragment Tyr uses: normalisation and unification.

- closed `Nat` arithmetic evaluates as Lean defines it: truncated `-`, `x / 0 = 0`,
  `x % 0 = x`, arbitrary precision;
- `+`, `-`, `*` recurse on their second argument (`Nat.add`, `Nat.sub`, `Nat.mul` in
  `Init/Prelude.lean`), so a literal there reduces: `e + k` is an offset (`n + 0 ≡ n`,
  `(n + 1) + 1 ≡ n + 2`, `?n + 1 =?= 5` solves `?n := 4`), `n - 0 ≡ n`, `n + 1 - 1 ≡ n`,
  `n - 1 - 1 ≡ n - 2`, `n * 0 ≡ 0` (`nat_literal_rhs`); a successor there unfolds too:
  `a + (b + 1) ≡ (a + b) + 1`, `a - (b + 1) ≡ (a - b) - 1`, `3 * (n + 1) ≡ 3 * n + 3`
  (`Normalizer._succ_rhs`). A product with an open first factor grows as it unfolds, so it
  unfolds lazily, one step where it is unified with a sum, as Lean's lazy delta reduction
  takes it: `a * (b + 1) =?= a * b + a`, `n * 2 =?= 0 + n + n` (`_mul_step`);
- `a < b` is `a + 1 ≤ b` by definition, `a ≥ b` is `b ≤ a`, `a > b` is `b < a`;
- nothing else about open terms: `0 + n`, `n - 1 + 1`, `n * 1` vs `n`, `n + m` vs `m + n`,
  `4 * d` vs `d * 4`, `(n + 1) * 3` vs `3 * n + 3` differ;
- `let`s, `abbrev`/`def` constants, a `fun` applied and projections of known structure values
  unfold.
Where the checker cannot decide, it answers "not equal", and the caller reports an error.
Shared by the checker and the instantiator; neither state nor environment lives here.
Closed arithmetic is `arith.py`'s.
"""
from __future__ import annotations

from typing import Callable

from .arith import float_eval, nat_eval
from .terms import (
    PAIR_FIELDS,
    App,
    Arr,
    Block,
    Call,
    CtorV,
    Eq,
    FLit,
    FloatOp,
    Lam,
    Lit,
    Meta,
    MetaCtx,
    NatOp,
    Pair,
    Pi,
    Prod,
    Proj,
    Rel,
    StructV,
    Term,
    Var,
    instantiate,
    map_children,
    occurs,
    subst,
)
from .written import alike_as_written


class Normalizer:
    """Normalisation with delta (defs), zeta (`let`s), beta (a `fun` applied) and iota
    (projections of known structures, elements of known vectors).

    Normal forms of terms without metavariables depend only on the declarations, so they are
    remembered (`cache`, which a checker shares between its declarations)."""

    def __init__(self, mctx: MetaCtx, unfold: Callable[[App], Term | None],
                 cache: dict[Term, Term] | None = None):
        self.mctx = mctx
        self.unfold = unfold
        self.cache: dict[Term, Term] = {} if cache is None else cache
        self._saw_meta = False  # set when the term being normalised mentions a metavariable
        self.stuck = False  # set when a comparison failed on a term blocked by a metavariable

    def __call__(self, t: Term) -> Term:
        kind = type(t)  # terms are final classes: exact types, one set lookup each
        if kind in _NORMAL:
            return t
        if kind is Meta:
            self._saw_meta = True
            v = self.mctx.assign.get(t.uid)  # type: ignore[attr-defined]
            return self(v) if v is not None else t
        if kind not in _CACHED:
            return self._norm(t)
        hit = self.cache.get(t)
        if hit is not None:
            return hit
        outer, self._saw_meta = self._saw_meta, False
        r = self._norm(t)
        if not self._saw_meta:
            self.cache[t] = r
        self._saw_meta = outer or self._saw_meta
        return r

    def _norm(self, t: Term) -> Term:
        if isinstance(t, App):
            if t.args:
                args = tuple([self(a) for a in t.args])
                if args != t.args:
                    t = App(t.head, args)
            body = self.unfold(t)
            return self(body) if body is not None else t
        if isinstance(t, NatOp):
            a, b = self(t.a), self(t.b)
            if isinstance(a, Lit) and isinstance(b, Lit):
                return Lit(nat_eval(t.op, a.n, b.n))
            if isinstance(b, Lit):
                return nat_literal_rhs(t.op, a, b.n)
            if isinstance(b, NatOp) and b.op == "+" and isinstance(b.b, Lit):
                r = self._succ_rhs(t.op, a, b.a, b.b.n)
                if r is not None:
                    return r
            return t if a is t.a and b is t.b else NatOp(t.op, a, b)
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
            if isinstance(e, Arr) and t.field.startswith("[") \
                    and int(t.field[1:-1]) < len(e.items):  # else proved by a false hypothesis
                return self(e.items[int(t.field[1:-1])])
            if isinstance(e, Pair) and t.field in PAIR_FIELDS:  # `Prod` is a structure in Lean
                return self(e.a if t.field == "fst" else e.b)
            return t if e is t.e else Proj(e, t.field)
        if isinstance(t, Call) and isinstance(t.head, Lam) and len(t.args) == len(t.head.params):
            m = {p.uid: a for p, a in zip(t.head.params, t.args)}
            return self(subst(t.head.body, m))
        if isinstance(t, Rel) and t.op in _FLIPPED:  # `GE.ge a b := LE.le b a`, reducible
            return self(Rel(_FLIPPED[t.op], t.b, t.a))
        if isinstance(t, Block):
            body = t.body
            for _, uid, v in reversed(t.binds):
                body = subst(body, {uid: v})
            return self(body)
        return map_children(t, self)


    def _succ_rhs(self, op: str, a: Term, b: Term, j: int) -> Term | None:
        """`a op (b + j)`: `Nat.add`, `Nat.sub`, `Nat.mul` recurse on their second argument,
        so its `j` successors unfold, as Lean's whnf unfolds them: `a + (b + j) ≡ (a + b) + j`,
        `a - (b + j) ≡ (a - b) - j`, and for a literal `a`, `a * (b + j) ≡ a * b + a * j`
        (`n * succ m = n * m + n`, `j` times), so `3 * (n + 1) ≡ 3 * n + 3`. An open `a` is
        left to `_mul_step`: unfolded here, `a * (b + 1) * (c + 1) * …` would double at each
        factor. `/` and `%` stay stuck."""
        if op in ("+", "-"):
            return nat_literal_rhs(op, self(NatOp(op, a, b)), j)
        if op == "*" and isinstance(a, Lit):
            return nat_literal_rhs("+", self(NatOp("*", a, b)), nat_eval("*", a.n, j))
        return None


MUL_UNFOLD_LIMIT = 64  # successors of a product's second factor that unification unfolds
_CACHED = frozenset((App, Arr, NatOp, FloatOp, Proj, Prod, Rel, Eq, Pi))
_FLIPPED = {"≥": "≤", ">": "<"}  # `a ≥ b` is `b ≤ a`, `a > b` is `b < a` (`Init/Prelude.lean`)
_NORMAL = frozenset((Lit, FLit, Var, StructV))  # a structure value is made of values


def nat_literal_rhs(op: str, a: Term, k: int) -> Term:
    """`a op k` for a literal `k` and an open `a`, reduced as Lean's kernel reduces `Nat.add`,
    `Nat.sub`, `Nat.mul`: they recurse on their second argument, so a literal there unfolds.
    `e + 0 ≡ e`, `(e + j) + k ≡ e + (j + k)`; `e - 0 ≡ e`, `(e - j) - k ≡ e - (j + k)`,
    `(e + j) - k ≡ e + (j - k)` or `e - (k - j)` (`pred (succ x) ≡ x`); `e * 0 ≡ 0`.
    Nothing else: `e - j + k`, `e * 1`, `e / k`, `e % k` are stuck on the variable."""
    if op == "+":
        if k == 0:
            return a
        if isinstance(a, NatOp) and a.op == "+" and isinstance(a.b, Lit):
            return NatOp("+", a.a, Lit(a.b.n + k))
    elif op == "-":
        if k == 0:
            return a
        if isinstance(a, NatOp) and a.op == "-" and isinstance(a.b, Lit):
            return NatOp("-", a.a, Lit(a.b.n + k))
        if isinstance(a, NatOp) and a.op == "+" and isinstance(a.b, Lit):
            j = a.b.n
            return nat_literal_rhs("+", a.a, j - k) if j >= k else nat_literal_rhs("-", a.a, k - j)
    elif op == "*" and k == 0:
        return Lit(0)
    return NatOp(op, a, Lit(k))


def unify(a: Term, b: Term, norm: Normalizer) -> bool:
    """Lean-style `a =?= b` on the fragment; assigns metavariables in `norm.mctx`. The terms
    as written first (`written.py`: `?n := c.n_embd`, as Lean assigns it), then normal forms."""
    if a is b:
        return True
    mark = norm.mctx.mark()
    if alike_as_written(a, b, norm.mctx, norm.unfold):
        return True
    norm.mctx.undo(mark)
    return _unify(norm(a), norm(b), norm)


def _unify(a: Term, b: Term, norm: Normalizer) -> bool:
    """`a =?= b` for terms in normal form (their subterms are too, but for metavariables
    assigned meanwhile: those are resolved here, and a failure is retried normalised)."""
    if isinstance(a, Meta):
        a = norm(a)
    if isinstance(b, Meta):
        b = norm(b)
    if a == b:
        return True
    mark = norm.mctx.mark()
    if _structural(a, b, norm):
        return True
    # A failed attempt leaves no assignment behind, as Lean's `checkpointDefEq` does: `?a`
    # solved by one half of `?a * (n + 1) + ?a =?= 2 * n + 4` must not make the rest agree.
    norm.mctx.undo(mark)
    assigned = norm.mctx.assign
    if assigned and (_has_assigned(a, assigned) or _has_assigned(b, assigned)):
        na, nb = norm(a), norm(b)
        if (na, nb) != (a, b):
            return _unify(na, nb, norm)
    if _blocked(a) or _blocked(b):
        norm.stuck = True
    return False


def _blocked(t: Term) -> bool:
    """Whether unfolding `t` stops at a metavariable, so that Lean's `isDefEq` is stuck on it
    rather than false: `?a * 2` unfolds to `Nat.add (?a * 1) ?a`, which recurses on `?a`;
    `?a + 2` is `succ (succ ?a)`, a constructor, and compares definitely."""
    if isinstance(t, NatOp):
        if t.op in "/%":  # well-founded recursion: only numbers reduce
            return occurs(t, lambda x: isinstance(x, Meta))
        if isinstance(t.b, Lit):
            if t.op == "+" or t.b.n == 0:
                return False
            # `a - k` is `pred` of `a - (k - 1)`, matching on `a` at the end; `a * k` is
            # `Nat.add (a * (k - 1)) a`, recursing on `a`.
            return isinstance(t.a, Meta) or _blocked(t.a)
        return isinstance(t.b, Meta) or _blocked(t.b)  # the recursion is on the second
    if isinstance(t, Proj):
        return isinstance(t.e, Meta) or _blocked(t.e)
    return False


def _has_assigned(t: Term, assigned: dict[int, Term]) -> bool:
    return occurs(t, lambda x: isinstance(x, Meta) and x.uid in assigned)


def _structural(a: Term, b: Term, norm: Normalizer) -> bool:
    if isinstance(a, Meta):
        return _assign(a, b, norm)
    if isinstance(b, Meta):
        return _assign(b, a, norm)
    # `e * s =?= x + y` with `s` a successor: one step of `Nat.mul`'s recursion,
    # `e * (s - 1) + e`, as Lean's lazy delta reduction takes it (`n * 2 =?= 0 + n + n`,
    # `m * (n + 1) =?= m * n + m`, `?a * (n + 1) =?= 3 * n + 3` solves `?a := 3`).
    for x, y in ((a, b), (b, a)):
        if isinstance(y, NatOp) and y.op == "+":
            step = _mul_step(x)
            if step is not None:
                return _unify(norm(step), y, norm)
    # Offsets: `e + k =?= n` and `e + k =?= e' + j` with literal k, j (`isDefEqOffsetNat`).
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
            return _unify(ra, rb, norm)
        if oa is not None and ob is not None:
            return False  # `e + k =?= 0`: both sides are numbers or offsets, Lean decides
        # One side is no offset: Lean's offset check is undecided and `isDefEq` goes on to
        # the arguments, `?a * n + ?a =?= 3 * n + 3` solving `?a := 3`.
    # Predecessors: `e - j =?= e' - k` cancels min(j, k), as unfolding `Nat.sub` to `pred`s
    # does (Lean solves `?m - 1 =?= n - 2` with `?m := n - 1`).
    sa, sb = _pred(a), _pred(b)
    if sa is not None and sb is not None and sa[1] != sb[1]:
        k = min(sa[1], sb[1])
        return _unify(_mk_pred(sa[0], sa[1] - k), _mk_pred(sb[0], sb[1] - k), norm)
    # `a < b` is by definition `a + 1 ≤ b` (`Nat.lt n m := Nat.le (n + 1) m`).
    if isinstance(a, Rel) and isinstance(b, Rel) and a.op != b.op and "≠" not in (a.op, b.op):
        return unify(_le(a), _le(b), norm)
    if type(a) is not type(b):
        return False
    if isinstance(a, App):
        return a.head == b.head and len(a.args) == len(b.args) and all(
            _unify(x, y, norm) for x, y in zip(a.args, b.args))
    if isinstance(a, (NatOp, FloatOp)):
        return a.op == b.op and _unify(a.a, b.a, norm) and _unify(a.b, b.b, norm)
    if isinstance(a, Proj):
        return a.field == b.field and _unify(a.e, b.e, norm)
    if isinstance(a, Arr):
        return len(a.items) == len(b.items) and all(
            _unify(x, y, norm) for x, y in zip(a.items, b.items))
    if isinstance(a, Rel):
        return a.op == b.op and _unify(a.a, b.a, norm) and _unify(a.b, b.b, norm)
    if isinstance(a, (Prod, Pair, Eq)):
        return _unify(a.a, b.a, norm) and _unify(a.b, b.b, norm)
    if isinstance(a, StructV):
        return a.sname == b.sname and len(a.fields) == len(b.fields) and all(
            k1 == k2 and _unify(v1, v2, norm) for (k1, v1), (k2, v2) in zip(a.fields, b.fields))
    if isinstance(a, CtorV):
        return a.name == b.name and len(a.args) == len(b.args) and all(
            _unify(x, y, norm) for x, y in zip(a.args, b.args))
    if isinstance(a, Pi):
        if len(a.params) != len(b.params) or any(
                p.kind != q.kind for p, q in zip(a.params, b.params)):
            return False
        m = {q.uid: Var(p.name, p.uid) for p, q in zip(a.params, b.params)}
        return all(unify(p.type, subst(q.type, m), norm) for p, q in zip(a.params, b.params)) \
            and unify(a.result, subst(b.result, m), norm)
    return False


def _mul_step(t: Term) -> Term | None:
    """`e * s` with `s` a successor (a literal `k > 0`, or `b + j`), one step unfolded:
    `e * (s - 1) + e` (`Nat.mul n (succ m) = Nat.add (Nat.mul n m) n`)."""
    if not (isinstance(t, NatOp) and t.op == "*"):
        return None
    s = t.b
    if isinstance(s, Lit) and 0 < s.n <= MUL_UNFOLD_LIMIT:
        pred: Term = Lit(s.n - 1)
    elif isinstance(s, NatOp) and s.op == "+" and isinstance(s.b, Lit) \
            and s.b.n <= MUL_UNFOLD_LIMIT:
        pred = _mk_offset(s.a, s.b.n - 1)
    else:
        return None
    return NatOp("+", NatOp("*", t.a, pred), t.a)


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


def _pred(t: Term) -> tuple[Term, int] | None:
    if isinstance(t, NatOp) and t.op == "-" and isinstance(t.b, Lit):
        return t.a, t.b.n
    return None


def _mk_pred(e: Term, k: int) -> Term:
    return e if k == 0 else NatOp("-", e, Lit(k))


def _le(r: Rel) -> Rel:
    return r if r.op == "≤" else Rel("≤", NatOp("+", r.a, Lit(1)), r.b)  # unify normalises


def _assign(m: Meta, t: Term, norm: Normalizer) -> bool:
    t = instantiate(t, norm.mctx)
    if occurs(t, lambda x: isinstance(x, Meta) and x.uid == m.uid):
        return False
    norm.mctx.set(m.uid, t)
    return True
