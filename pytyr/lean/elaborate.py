"""Elaboration of the terms of one declaration, the way Lean would type them.

Each term elaborates to `(term, type)`. Implicit arguments become metavariables solved by
unification (`defeq.py`); a value that occurs in types stays a first-order term; a tensor
computation becomes a core term (`Call`, `Lam`, `Block`, see `terms.py`) that the instantiator
evaluates later. The rules for applications are in `application.py`.
"""
from __future__ import annotations

from typing import Callable

from ..errors import Pos
from . import syntax as S
from .application import ApplyRules
from .bounds import floors, least_value
from .context import Ctx
from .defeq import Normalizer, unify
from .env import TENSOR_FAMILIES, Env
from .failure import Fail
from .failure import short as _short
from .folding import Folder
from .hints import origin_note
from .numerals import float_literal, float_of_nat
from .obligations import decide
from .parser import SUBSET
from .scope import Scope
from .terms import (
    FLOAT,
    NAT,
    PROP,
    STRING,
    TYPE,
    App,
    Arr,
    Block,
    Eq,
    FLit,
    FloatOp,
    Lam,
    Lit,
    Meta,
    MetaCtx,
    NatOp,
    Pair,
    Param,
    Pi,
    Prod,
    Proj,
    Rel,
    SLit,
    Sort,
    Term,
    Var,
    computes,
    instantiate,
    occurs,
    show,
    subst,
)
from .wording import authored


class TermElab(ApplyRules):
    """The elaborator of one declaration: its metavariables live and die with it."""

    def __init__(self, env: Env, scope: Scope, decl: str, cache: dict[Term, Term] | None = None):
        self.env, self.scope, self.decl = env, scope, decl
        self.mctx = MetaCtx()
        self.norm = Normalizer(self.mctx, env.unfold, cache)
        self.header = False  # elaborating binders and result type (where autoImplicit would bind)
        self.pending: list[tuple[Meta, str, str, Pos]] = []  # implicit args to be solved
        self.deferred: list[tuple[str, Param, Term, Pos]] = []  # `(h := by decide)` to run
        # mismatches stuck on a metavariable, retried at the end (`resume_postponed`)
        self.postponed: list[tuple[Term, Term, Callable[[], Fail]]] = []
        # which application and argument assigned each metavariable (`ApplyRules.label`)
        self.origin: dict[int, tuple[str, str]] = {}
        self.local_types: dict[int, Term] = {}  # each binder's type, for messages' names
        self._folder: Folder | None = None

    # ---- unification ----------------------------------------------------------------------
    def whnf(self, t: Term) -> Term:
        return self.norm(t)

    def show(self, t: Term) -> str:
        """`t` as Lean prints it: instantiated, in the author's words (`wording.py`), a width
        the author named folded back to that name as hovers show it (`folding.py`:
        `1 + c.gh * c.gw` is `c.tokens`)."""
        if self._folder is None:
            self._folder = Folder(self.env, self.norm)
        written = authored(instantiate(t, self.mctx), self.env, self.norm)
        return show(self._folder.fold(written, self.local_types))

    def unify(self, a: Term, b: Term) -> bool:
        mark = self.mctx.mark()
        ok = unify(a, b, self.norm)
        if not ok:
            self.mctx.undo(mark)
        return ok

    def is_prop(self, ty: Term) -> bool:
        return isinstance(self.whnf(ty), (Eq, Rel))

    def mentions_tensor(self, ty: Term) -> bool:
        return occurs(self.whnf(ty), lambda t: isinstance(t, App) and t.head in TENSOR_FAMILIES)

    def finish(self, t: Term) -> Term:
        """The term with every metavariable replaced by its solution, once the tactic blocks
        have run; an unsolved implicit argument is Lean's `don't know how to synthesize
        implicit argument`."""
        self.resume_postponed()
        self.run_tactics()
        for m, pname, fname, pos in self.pending:
            if m.uid not in self.mctx.assign:
                raise Fail(pos, f"don't know how to synthesize implicit argument '{pname}' of "
                                f"'{_short(fname)}'; give it as a named argument "
                                f"`({pname} := ...)`")
        self.pending = []
        return instantiate(t, self.mctx)

    def resume_postponed(self) -> None:
        """The mismatches that were stuck on a metavariable, tried again with what the rest of
        the header or body solved, as Lean resumes its postponed coercions, in the order they
        were made (`synthesizeSyntheticMVars`, `src/Lean/Elab/SyntheticMVars.lean`): the
        first that still fails is reported."""
        todo, self.postponed = self.postponed, []
        for ty, expected, mismatch in todo:
            if not self.unify(ty, expected):
                raise mismatch()

    def run_tactics(self) -> None:
        """The `by decide` obligations of the header or body, run after the rest of it, in
        the order they were made, as Lean runs tactic blocks last
        (`synthesizeSyntheticMVarsNoPostponing`): a type mismatch anywhere in the declaration
        is reported first."""
        todo, self.deferred = self.deferred, []
        for fname, p, pty, pos in todo:
            fixed = origin_note(pty, pty, fname, "", self.origin, self.mctx.assign,
                                lambda a, b: True, self.show)
            decide(self.norm, fname, p, instantiate(pty, self.mctx), pos, fixed)

    # ---- binders --------------------------------------------------------------------------
    def binders(self, bs: list[S.Binder], ctx: Ctx) -> tuple[tuple[Param, ...], Ctx]:
        """Binder types in order; a default `(k : A := v)` is elaborated against `A` here, at
        the declaration, as Lean elaborates `optParam A v`."""
        params = []
        for b in bs:
            if b.type is None:
                raise Fail(b.pos, f"binder '{b.name}' needs a type in the Tyr subset")
            ty = self.elab_type(b.type, ctx)
            if b.tactic is not None and not self.is_prop(ty):
                raise Fail(b.pos, f"`by {b.tactic}` can only prove a proposition, but "
                                  f"'{b.name}' has type {self.show(ty)}")
            default = None
            if b.default is not None:
                default, _ = self.elab(b.default, ty, ctx)
            uid = self.env.fresh_uid()
            params.append(Param(b.name, uid, b.kind, ty, default, b.tactic))
            ctx = ctx.push(b.name, Var(b.name, uid), ty)
            self.local_types[uid] = ty
        return tuple(params), ctx

    # ---- types ----------------------------------------------------------------------------
    def elab_type(self, e: S.Expr, ctx: Ctx) -> Term:
        term, ty = self.elab(e, None, ctx)
        if not isinstance(self.whnf(ty), Sort):
            raise Fail(e.pos, f"type expected, but '{self.show(term)}' has type {self.show(ty)}")
        return term

    # ---- terms ----------------------------------------------------------------------------
    def elab(self, e: S.Expr, expected: Term | None, ctx: Ctx,
             soft: bool = False) -> tuple[Term, Term]:
        """`e` against `expected`. `soft`: the expected type only guides (an argument's binder
        type); a mismatch is left to the caller, which reports it at the argument."""
        term, ty = self._elab(e, expected, ctx, soft)
        if expected is not None and not soft and not isinstance(e, (S.App, S.Ident, S.Let)):
            self.expect(e, ty, expected)
        return term, ty

    def expect(self, e: S.Expr, ty: Term, expected: Term) -> None:
        self.ensure_type(ty, expected, lambda: Fail(
            e.pos, f"type mismatch: this term has type {self.show(ty)} but is expected to have "
                   f"type {self.show(expected)}"))

    def _elab(self, e: S.Expr, expected: Term | None, ctx: Ctx,
              soft: bool = False) -> tuple[Term, Term]:
        if isinstance(e, S.NatLit):
            if expected is not None and self.whnf(expected) == FLOAT:
                return FLit(float_of_nat(e.value)), FLOAT  # `OfNat Float n` is `Float.ofNat n`
            return Lit(e.value), NAT
        if isinstance(e, S.SciLit):
            return FLit(float_literal(e.text)), FLOAT
        if isinstance(e, S.StrLit):
            return SLit(e.value), STRING
        if isinstance(e, S.Sort):
            return Sort(e.name), TYPE
        if isinstance(e, S.Index):
            return self.index(e, ctx)
        if isinstance(e, (S.Ident, S.App, S.DotIdent, S.Proj)):
            fn, args = (e.fn, e.args) if isinstance(e, S.App) else (e, [])
            return self.app(fn, args, expected, ctx, e.pos, soft)
        if isinstance(e, S.BinOp):
            return self.binop(e, expected, ctx)
        if isinstance(e, S.ArrayLit):
            elem = None
            exp = self.whnf(expected) if expected is not None else None
            if isinstance(exp, App) and exp.head == "Array":
                elem = exp.args[0]
            items = []
            for it in e.items:
                t, ty = self.elab(it, elem, ctx)
                elem = elem or ty
                items.append(t)
            return Arr(tuple(items)), App("Array", (elem or NAT,))
        if isinstance(e, S.Tuple):
            exp = self.whnf(expected) if expected is not None else None
            if len(e.items) > 2:
                e = S.Tuple(e.pos, [e.items[0], S.Tuple(e.items[1].pos, e.items[1:])])
            ea, eb = (exp.a, exp.b) if isinstance(exp, Prod) else (None, None)
            a, ta = self.elab(e.items[0], ea, ctx)
            b, tb = self.elab(e.items[1], eb, ctx)
            return Pair(a, b), Prod(ta, tb)
        if isinstance(e, S.Ascribe):
            ty = self.elab_type(e.type, ctx)
            t, _ = self.elab(e.expr, ty, ctx)
            return t, ty
        if isinstance(e, S.Let):
            return self.let_chain(e, expected, ctx)
        if isinstance(e, S.Fun):
            return self.fun(e, expected, ctx)
        if isinstance(e, S.Pi):
            params, ctx2 = self.binders(e.binders, ctx)
            return Pi(params, self.elab_type(e.body, ctx2)), TYPE
        if isinstance(e, S.By):
            raise Fail(e.pos, f"`by {e.tactic}` is only in the Tyr subset as a binder default "
                              f"`(h : P := by decide)`")
        if isinstance(e, S.ListLit):
            exp = self.whnf(expected) if expected is not None else None
            if not (isinstance(exp, App) and exp.head == "List"):
                raise Fail(e.pos, f"list literals are {SUBSET} where no `List` is expected "
                                  f"(a `prim` body, a `List` default)")
            return Arr(tuple(self.elab(it, exp.args[0], ctx)[0] for it in e.items)), exp
        if isinstance(e, S.AnonCtor):
            raise Fail(e.pos, f"anonymous constructors `⟨...⟩` are {SUBSET} outside Tyr.Core")
        if isinstance(e, S.Hole):
            raise Fail(e.pos, f"holes `_` are {SUBSET}; name the argument")
        raise Fail(e.pos, f"this term is {SUBSET}")

    def let_chain(self, e: S.Let, expected: Term | None, ctx: Ctx) -> tuple[Term, Term]:
        """A run of `let`s, in a loop (a long chain is not nesting). A value that computes
        is bound once (`Block`); a plain value is substituted, as Lean's zeta does."""
        binds: list[tuple[str, int, Term]] = []
        body: S.Expr = e
        while isinstance(body, S.Let):
            v, ty = self.let_value(body, ctx)
            if computes(v):
                uid = self.env.fresh_uid()
                binds.append((body.name, uid, v))
                v = Var(body.name, uid)
            ctx = ctx.push(body.name, v, ty)
            body = body.body
        t, ty = self.let_body(body, expected, ctx)
        return (Block(tuple(binds), t) if binds else t), ty

    def let_value(self, e: S.Let, ctx: Ctx) -> tuple[Term, Term]:
        """A `let`'s value and its type (the written one, when written)."""
        vty = self.elab_type(e.type, ctx) if e.type is not None else None
        v, ty = self.elab(e.value, vty, ctx)
        return v, vty or ty

    def let_body(self, e: S.Expr, expected: Term | None, ctx: Ctx) -> tuple[Term, Term]:
        """What follows a run of `let`s."""
        return self.elab(e, expected, ctx)

    def index(self, e: S.Index, ctx: Ctx) -> tuple[Term, Term]:
        """`xs[i]` on a `Vector α n`: the bound `i < n` is proved as Lean's `get_elem_tactic`
        (`src/Init/Tactics.lean`: `first | done | assumption | get_elem_tactic_extensible`,
        which tries `omega`) proves it: by a hypothesis in scope whose type is `i < n` up to
        definitional equality (`assumption`), or when `i` is below the least value of `n`
        that numbers and the hypotheses in scope give (`bounds.least_value`: a part of what
        `omega` proves). The index itself must be a number: instantiation selects the element."""
        term, ty = self.elab(e.expr, None, ctx)
        vty = self.whnf(ty)
        if not (isinstance(vty, App) and vty.head == "Vector"):
            raise Fail(e.pos, f"indexing `[i]` needs a Vector, but this has type {self.show(ty)}")
        i, _ = self.elab(e.index, NAT, ctx)
        i, n = self.whnf(i), self.whnf(vty.args[1])
        if not isinstance(i, Lit) or not (i.n < least_value(n, floors(ctx, self.whnf), self.whnf)
                                          or self.assumed(Rel("<", i, n), ctx)):
            if isinstance(i, Lit) and isinstance(n, Lit):
                raise Fail(e.index.pos, f"index {i.n} is out of bounds: the vector has {n.n} "
                                        f"element{'s' if n.n != 1 else ''}")
            raise Fail(e.index.pos, f"cannot prove the index {show(i)} < {show(n)}; the Tyr "
                                    f"subset indexes vectors with closed numbers, proved below "
                                    f"the size by numbers and hypotheses `h : k ≤ x`, `k < x` "
                                    f"or `x = k` in scope, or by `h : {show(i)} < {show(n)}`")
        base = self.whnf(term)
        item = base.items[i.n] if isinstance(base, Arr) and i.n < len(base.items) \
            else Proj(term, f"[{i.n}]")
        return item, vty.args[0]

    def assumed(self, prop: Term, ctx: Ctx) -> bool:
        """Lean's `assumption`: a local in scope, innermost first, whose type is `prop` up to
        definitional equality (so `h : i + 1 ≤ n` proves `i < n`)."""
        return any(self.is_prop(h.type) and self.unify(h.type, prop) for h in ctx.locals())

    def fun(self, e: S.Fun, expected: Term | None, ctx: Ctx) -> tuple[Term, Term]:
        exp = self.whnf(expected) if expected is not None else None
        exp_params = list(exp.params) if isinstance(exp, Pi) else []
        params = []
        inner = ctx
        m: dict[int, Term] = {}
        for i, b in enumerate(e.binders):
            if b.type is not None:
                ty = self.elab_type(b.type, inner)
            elif i < len(exp_params):
                ty = subst(exp_params[i].type, m)
            else:
                raise Fail(b.pos, f"cannot infer the type of '{b.name}'; write "
                                  f"`fun ({b.name} : A) => ...`")
            uid = self.env.fresh_uid()
            if i < len(exp_params):
                m[exp_params[i].uid] = Var(b.name, uid)
            params.append(Param(b.name, uid, "explicit", ty))
            inner = inner.push(b.name, Var(b.name, uid), ty)
            self.local_types[uid] = ty
        exp_res = subst(exp.result, m) if isinstance(exp, Pi) and len(exp_params) == len(params) \
            else None
        body, bty = self.elab(e.body, exp_res, inner)
        return Lam(tuple(params), body), Pi(tuple(params), bty)

    def binop(self, e: S.BinOp, expected: Term | None, ctx: Ctx) -> tuple[Term, Term]:
        if e.op == "→":
            a = self.elab_type(e.lhs, ctx)
            b = self.elab_type(e.rhs, ctx)
            return Pi((Param("_", self.env.fresh_uid(), "explicit", a),), b), TYPE
        if e.op == "×":
            return Prod(self.elab_type(e.lhs, ctx), self.elab_type(e.rhs, ctx)), TYPE
        # Arithmetic and `=`: operands share one type; a literal takes the other side's type.
        lit = (S.NatLit,)
        first, second = (e.rhs, e.lhs) if isinstance(e.lhs, lit) and not isinstance(e.rhs, lit) \
            else (e.lhs, e.rhs)
        hint = None if e.op in ("=", "≤", "<", "≠", "≥", ">") else expected
        t1, ty1 = self.elab(first, hint, ctx)
        t2, ty2 = self.elab(second, ty1, ctx)
        a, b = (t1, t2) if first is e.lhs else (t2, t1)
        ty = self.whnf(ty1)
        if e.op == "=":
            return Eq(a, b), PROP
        # `a ≠ b` is `Ne a b` (`Init/Core.lean`); `a ≥ b` and `a > b` are `GE.ge a b` and
        # `GT.gt a b`, reducible to `b ≤ a` and `b < a` (`Init/Prelude.lean`), which `whnf` does
        if e.op in ("≤", "<", "≠", "≥", ">"):
            if ty != NAT:
                raise Fail(e.pos, f"'{e.op}' on {self.show(ty)} is {SUBSET} (Nat only)")
            return Rel(e.op, a, b), PROP
        if ty == NAT:
            return NatOp(e.op, a, b), NAT
        if ty == FLOAT:
            if e.op == "%":
                raise Fail(e.pos, "`%` on Float is not in the Tyr subset")
            return FloatOp(e.op, a, b), FLOAT
        raise Fail(e.pos, f"arithmetic '{e.op}' on {self.show(ty)} is {SUBSET} "
                          f"(Nat and Float only)")
