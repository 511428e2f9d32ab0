"""Applications, as Lean's `ElabAppArgs` elaborates them (`src/Lean/Elab/App.lean`).

The head is a name, a projection or a `.ctor`; implicit arguments become metavariables; before
each explicit or named argument, until it succeeds once, the expected type is unified with the
result type (`propagateExpectedType`), so a mismatch is reported at the argument that causes
it; explicit arguments are checked against their binder types; a `fun` argument is elaborated
last, against its binder type with what is solved by then (Lean postpones it);
`(h : P := by decide)` obligations are decided on closed propositions when the declaration's
tactic blocks run, after the rest of it (`TermElab.run_tactics`); a type mismatch stuck on a
metavariable waits until then too (`ensure_type`, Lean's postponed coercion); defaults are the
declaration's, instantiated.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..errors import Pos
from . import syntax as S
from .context import Ctx
from .env import BUILTIN_TYPES, CtorInfo, DefInfo, IndInfo, StructInfo
from .failure import Fail, short
from .hints import origin_note, split_note
from .parser import SUBSET
from .terms import (
    FLOAT,
    NAT,
    PAIR_FIELDS,
    PROP,
    SHAPE,
    App,
    Call,
    CtorV,
    InitV,
    Meta,
    Opaque,
    Param,
    Pi,
    Prod,
    Proj,
    StructV,
    Term,
    Var,
    instantiate,
    occurs,
    subst,
)

if TYPE_CHECKING:
    from .elaborate import TermElab  # the class this mixin is part of


class ApplyRules:
    """Mixed into `TermElab`: everything about `f a b`, `x.f`, `.c a`."""

    def app(self: "TermElab", fn: S.Expr, args: list[S.Arg], expected: Term | None, ctx: "Ctx",
            pos: Pos, soft: bool = False) -> tuple[Term, Term]:
        head = self.head(fn, expected, ctx)
        if head[0] == "value":
            term, ty = head[1], head[2]
            if not args:
                if expected is not None and not soft:
                    self.ensure_type(ty, expected, lambda: Fail(
                        pos, f"type mismatch: '{_src(fn)}' has type {self.show(ty)} but is "
                             f"expected to have type {self.show(expected)}"))
                return term, ty
            fty = self.whnf(ty)
            if not isinstance(fty, Pi):
                raise Fail(fn.pos, f"'{_src(fn)}' is not a function; it has type {self.show(ty)}")
            return self.apply(_src(fn), fty.params, fty.result, args, expected, ctx, pos,
                              callee=term, self_arg=None, soft=soft)
        _, name, info, self_arg = head
        params, result = self.env.signature(info)
        return self.apply(name, params, result, args, expected, ctx, pos, callee=info,
                          self_arg=self_arg, soft=soft)

    def head(self: "TermElab", fn: S.Expr, expected: Term | None, ctx: "Ctx") -> tuple:
        """The function position: ("value", term, type) or ("const", name, info, self)."""
        if isinstance(fn, S.DotIdent):
            exp = self.whnf(expected) if expected is not None else None
            ind = self.env.get(exp.head) if isinstance(exp, App) else None
            if isinstance(ind, IndInfo):
                if fn.name in ind.ctors:
                    return ("const", ind.ctors[fn.name].name, ind.ctors[fn.name], None)
                raise Fail(fn.pos, f"'{exp.head}' has no constructor '{fn.name}'")
            raise Fail(fn.pos, f"cannot resolve '.{fn.name}': the expected type is not known "
                               f"to be an inductive type")
        if isinstance(fn, S.Proj):
            term, ty = self.elab(fn.expr, None, ctx)
            return self.field(term, ty, [fn.field], fn.pos)
        if isinstance(fn, S.Index):
            term, ty = self.index(fn, ctx)
            return ("value", term, ty)
        assert isinstance(fn, S.Ident)
        names = fn.name.split(".")
        parts: list[str | int] = list(names)
        for k in fn.numbered:  # numerals: numbered fields
            if names[k][0] == "0":  # Lean's `fieldIdx` is a numeral from 1: `p.0` does not parse
                dot = Pos(fn.pos.file, fn.pos.line, fn.pos.col + len(".".join(names[:k])))
                raise Fail(dot, f"invalid field notation: '.{names[k]}' is no field; numbered "
                                f"fields count from 1 (`.1` is the first)")
            parts[k] = int(names[k])
        loc = ctx.get(parts[0])
        if loc is not None:
            if len(parts) == 1:
                return ("value", loc.term, loc.type)
            return self.field(loc.term, loc.type, parts[1:], fn.pos)
        # a numeral is a field, never a component of a declaration's name
        for k in range(min(fn.numbered, default=len(names)), 0, -1):
            g = self.scope.resolve_global(".".join(names[:k]), fn.pos)
            if g is None:
                continue
            info = self.env.get(g) or (g if g in BUILTIN_TYPES else None)
            if k == len(parts):
                return ("const", g, info, None)
            term, ty = self.apply(g, *self.env.signature(info), [], None, ctx, fn.pos,
                                  callee=info, self_arg=None)
            return self.field(term, ty, parts[k:], fn.pos)
        if self.header and "." not in fn.name:
            raise Fail(fn.pos, f"unknown identifier '{fn.name}'; a name in a signature needs "
                               f"its binder `{{{fn.name} : ...}}`: `autoImplicit` is off, in "
                               f"Lean too (lakefile.lean)")
        raise Fail(fn.pos, f"unknown identifier '{fn.name}'")

    def field(self: "TermElab", term: Term, ty: Term, fields: list[str | int],
              pos: Pos) -> tuple:
        """`x.f.g`: each field in turn, a number being a numbered field (`numbered_field`)."""
        for i, f in enumerate(fields):
            wty = self.whnf(ty)
            if isinstance(f, int):
                f = self.numbered_field(wty, ty, f, pos)
            if isinstance(wty, Prod) and f in PAIR_FIELDS:  # `Prod` is a structure in Lean
                term, ty = self.whnf(Proj(term, f)), wty.a if f == "fst" else wty.b
                continue
            sinfo = self.env.get(wty.head) if isinstance(wty, App) else None
            if isinstance(sinfo, StructInfo) and any(fi.name == f for fi in sinfo.fields):
                written = instantiate(ty, self.mctx)  # its arguments as written, if it is `S …`
                sty = written if isinstance(written, App) and written.head == wty.head else wty
                term, ty = self.project(term, sty, sinfo, f)
                continue
            # Generalized field notation: `x.f` is `S.f x` for a def `S.f`.
            tname = wty.head if isinstance(wty, App) else None
            if tname == "Array" and wty == SHAPE:
                tname = "torch.Shape" if "torch.Shape." + f in self.env else "Array"
            cand = f"{tname}.{f}" if tname else None
            info = self.env.get(cand) if cand else None
            if isinstance(info, DefInfo):
                if i == len(fields) - 1:
                    return ("const", cand, info, (term, ty))
                term, ty = self.apply(cand, info.params, info.result, [], None, ctx_empty(), pos,
                                      callee=info, self_arg=(term, ty))
                continue
            raise Fail(pos, f"invalid field '{f}': {self.show(ty)} has no field or function "
                            f"'{f}'")
        return ("value", term, ty)

    def numbered_field(self: "TermElab", wty: Term, ty: Term, i: int, pos: Pos) -> str:
        """The name of field `i` of a structure, counted from 1: `p.2` is `p.snd`, `c.1` the
        first field of `C` (`LVal.fieldIdx` in `src/Lean/Elab/App.lean`)."""
        if isinstance(wty, Prod):
            names = list(PAIR_FIELDS)
        else:
            sinfo = self.env.get(wty.head) if isinstance(wty, App) else None
            if not isinstance(sinfo, StructInfo):
                raise Fail(pos, f"invalid projection: {self.show(ty)} is no structure, whose "
                                f"fields `.{i}` numbers")
            names = [fi.name for fi in sinfo.fields]
        if i > len(names):
            raise Fail(pos, f"invalid projection: index {i} is invalid for {self.show(ty)}; "
                            f"it must be between 1 and {len(names)}")
        return names[i - 1]

    def project(self: "TermElab", term: Term, sty: App, sinfo: StructInfo,
                f: str) -> tuple[Term, Term]:
        m: dict[int, Term] = {p.uid: a for p, a in zip(sinfo.params, sty.args)}
        for fi in sinfo.fields:
            if fi.name == f:
                val = self.whnf(Proj(term, f)) if isinstance(self.whnf(term), StructV) \
                    else Proj(term, f)
                return val, subst(fi.type, m)
            m[fi.uid] = Proj(term, fi.name)
        raise AssertionError(f)

    def apply(self: "TermElab", name: str, params: tuple[Param, ...], result: Term,
              args: list[S.Arg], expected: Term | None, ctx: "Ctx", pos: Pos, *, callee: Any,
              self_arg: tuple[Term, Term] | None, soft: bool = False) -> tuple[Term, Term]:
        named: dict[str, S.Arg] = {}
        for a in args:
            if a.name in named:  # Lean's `addNamedArg`, before anything is elaborated
                raise Fail(a.pos or a.expr.pos, f"argument '{a.name}' was already set")
            if a.name:
                named[a.name] = a
        positional = [a for a in args if not a.name]
        for a in named:
            if not any(p.name == a for p in params):
                raise Fail(named[a].expr.pos, f"'{short(name)}' has no argument named '{a}'")
        m: dict[int, Term] = {}
        values: list[Term] = []
        funs: list[tuple[int, Param, S.Fun]] = []  # elaborated last, as Lean postpones them
        propagate = expected is not None and expected != PROP  # Lean keeps `Prop` to itself
        for i, p in enumerate(params):
            pty = subst(p.type, m)
            if p.name in named:
                arg = named.pop(p.name).expr
                if propagate and not isinstance(arg, (S.By, S.Hole)):
                    propagate = not self.propagate_expected(name, params[i:], result, m, expected)
                v = self.check_arg(name, p, arg, pty, ctx)
            elif p.kind == "implicit":
                v = self.mctx.fresh(p.name)
                self.pending.append((v, p.name, name, pos))
            elif self_arg is not None and _same_head(self.whnf(pty), self.whnf(self_arg[1])):
                v = self_arg[0]
                if not self.unify(self_arg[1], pty):
                    raise Fail(pos, f"'{short(name)}' expects {self.show(pty)}, got "
                                    f"{self.show(self_arg[1])}")
                self_arg = None
            elif positional:
                arg = positional.pop(0).expr
                if propagate and not isinstance(arg, (S.By, S.Hole)):
                    propagate = not self.propagate_expected(name, params[i:], result, m, expected)
                if isinstance(arg, S.Fun):
                    v = Opaque("fun")
                    funs.append((len(values), p, arg))
                else:
                    v = self.check_arg(name, p, arg, pty, ctx)
            elif p.tactic is not None:  # run with the declaration's other tactic blocks
                v = Opaque("proof")
                self.deferred.append((name, p, pty, pos))
            elif p.default is not None:
                v = subst(p.default, m)
            else:
                nexp = sum(1 for q in params if q.kind == "explicit" and q.default is None
                           and q.tactic is None)
                raise Fail(pos, f"'{short(name)}' is missing its explicit argument '{p.name}' : "
                                f"{self.show(pty)} (it takes {nexp}; partial application is "
                                f"{SUBSET})")
            m[p.uid] = v
            values.append(v)
        if positional:
            nexp = sum(1 for q in params if q.kind == "explicit")
            raise Fail(positional[0].expr.pos, f"function '{short(name)}' takes {nexp} explicit "
                                               f"argument{'s' if nexp != 1 else ''}, but is given "
                                               f"{nexp + len(positional)}")
        res = subst(result, m)
        if expected is not None and not soft:
            self.ensure_type(res, expected, lambda: Fail(
                pos, f"type mismatch: '{short(name)} ...' has type {self.show(res)} but is "
                     f"expected to have type {self.show(expected)}"))
        for i, p, fe in funs:
            pty = instantiate(subst(p.type, m), self.mctx)
            t, ty = self.elab(fe, pty, ctx)
            if not self.unify(ty, pty):
                raise Fail(fe.pos, f"argument '{p.name}' of '{short(name)}' has type "
                                   f"{self.show(ty)} but is expected to have type "
                                   f"{self.show(pty)}")
            values[i] = m[p.uid] = t
        return self.result_term(name, params, values, callee, pos), res

    def propagate_expected(self: "TermElab", name: str, rest: tuple[Param, ...], result: Term,
                           m: dict[int, Term], expected: Term) -> bool:
        """Lean's `propagateExpectedType`, tried before each explicit or named argument until
        it succeeds: when the result type does not depend on the arguments still to come
        (this one, later ones, implicit ones, defaults), unify it with the expected type now.
        A failure is silent (the mismatch is reported where it shows, later) and the next
        argument tries again; `True` when it succeeded."""
        later = {p.uid for p in rest}
        if occurs(result, lambda t: isinstance(t, Var) and t.uid in later):
            return False
        mark = self.mctx.mark()
        done = self.unify(subst(result, m), expected)
        own = {v.uid for v in m.values() if isinstance(v, Meta)}  # an outer one: its argument's
        self.label(mark, name, "the expected type", own)
        return done

    def check_arg(self: "TermElab", fname: str, p: Param, e: S.Expr, pty: Term,
                  ctx: "Ctx") -> Term:
        if isinstance(e, S.By):
            if not self.is_prop(pty):
                raise Fail(e.pos, f"`by {e.tactic}` proves propositions, but argument "
                                  f"'{p.name}' of '{short(fname)}' has type {self.show(pty)}")
            self.deferred.append((fname, p, pty, e.pos))
            return Opaque("proof")
        # The binder type is the argument's expected type (Lean's `elabTerm stx expectedType`);
        # literals and arithmetic take it when it is a number type, as `binop%` does.
        mark = self.mctx.mark()
        if isinstance(e, (S.BinOp, S.NatLit, S.SciLit, S.ArrayLit)) and not self._literal_fits(pty):
            t, ty = self.elab(e, None, ctx)
        else:
            t, ty = self.elab(e, pty, ctx, soft=True)
        self.ensure_type(ty, pty, lambda: Fail(
            e.pos, f"argument '{p.name}' of '{short(fname)}' has type {self.show(ty)} but is "
                   f"expected to have type {self.show(pty)}" + self.notes(ty, pty, fname, p)))
        self.label(mark, fname, f"argument '{p.name}'")
        return t

    def notes(self: "TermElab", ty: Term, pty: Term, fname: str, p: Param) -> str:
        """What the two types do not say (`hints.py`): a product no unification splits, and
        the arguments that fixed the metavariables of the dimensions that differ."""
        actual = instantiate(ty, self.mctx)
        return split_note(actual, pty, self.whnf) + origin_note(
            actual, pty, fname, f"argument '{p.name}'", self.origin,
            self.mctx.assign, self.differs, self.show)

    def label(self: "TermElab", mark: int, fname: str, source: str,
              only: set[int] | None = None) -> None:
        """Remember which argument of `fname` (or its expected type) assigned each
        metavariable assigned since `mark` (of those in `only`): notes name it."""
        for uid in self.mctx.since(mark):
            if only is None or uid in only:
                self.origin.setdefault(uid, (fname, source))

    def differs(self: "TermElab", a: Term, b: Term) -> bool:
        mark = self.mctx.mark()
        same = self.unify(a, b)
        self.mctx.undo(mark)
        return not same

    def ensure_type(self: "TermElab", ty: Term, expected: Term, mismatch: "Callable[[], Fail]"
                    ) -> None:
        """`ty =?= expected`, else the error `mismatch` makes. A comparison stuck on a
        metavariable (`V 3 =?= V (?a * 2)`) waits instead: Lean's `ensureHasType` leaves it to
        a coercion that is retried when the rest of the declaration is elaborated (`mkCoe`,
        `src/Lean/Elab/Term.lean`), and a later argument may solve it."""
        self.norm.stuck = False
        if not self.unify(ty, expected):
            if not self.norm.stuck:
                raise mismatch()
            self.postponed.append((ty, expected, mismatch))

    def _literal_fits(self: "TermElab", pty: Term) -> bool:
        t = self.whnf(pty)
        return t in (NAT, FLOAT) or (isinstance(t, App) and t.head == "Array")

    def result_term(self: "TermElab", name: str, params: tuple[Param, ...], values: list[Term],
                    callee: Any, pos: Pos) -> Term:
        """What the application is: a type or value (`App`, `CtorV`, `InitV`), or a
        computation to run when the model is instantiated (`Call`)."""
        if isinstance(callee, Term):  # a local function value
            return Call(callee, tuple(values), pos)
        if isinstance(callee, str) or isinstance(callee, (StructInfo, IndInfo)):
            return App(name, tuple(values))
        if isinstance(callee, CtorInfo):
            return CtorV(name, tuple(values))
        info: DefInfo = callee
        if info.init is not None:
            byname = {p.name: v for p, v in zip(info.params, values)}
            return InitV(info.init.kind, tuple((k, byname[a]) for k, a in info.init.args))
        if name in ("Prod.fst", "Prod.snd"):
            return self.whnf(Proj(values[2], name.removeprefix("Prod.")))
        if info.op is not None or info.checkpoint is not None or info.tensor_level \
                or name in ("Vector.foldl", "Vector.extract"):
            return Call(name, tuple(values), pos)
        return App(name, tuple(values))


def ctx_empty() -> Ctx:
    return Ctx()


def _same_head(a: Term, b: Term) -> bool:
    return isinstance(a, App) and isinstance(b, App) and a.head == b.head


def _src(e: S.Expr) -> str:
    if isinstance(e, S.Ident):  # a part of digits not written as a numeral was escaped
        parts = e.name.split(".")
        return ".".join(f"«{p}»" if p[:1].isdigit() and k not in e.numbered else p
                        for k, p in enumerate(parts))
    if isinstance(e, S.DotIdent):
        return "." + e.name
    if isinstance(e, S.Proj):
        return _src(e.expr) + "." + str(e.field)
    return "..."
