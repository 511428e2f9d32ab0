"""The elaborator: types every declaration of the Tyr subset the way Lean would.

Implicit arguments become metavariables solved by unification, explicit arguments are
checked against their binder types, `(h : P := by decide)` obligations are evaluated on
closed propositions. The same code instantiates a model: with a `GraphBuilder` attached,
tensor-level definitions are inlined and every typed op emits a graph node.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import Diagnostic, LeanError, Pos
from . import syntax as S
from .env import (BUILTIN_TYPES, KNOWN_ATTRS, NATIVE_DEFS, NATIVE_DERIVING, CtorInfo, DefInfo,
                  FieldInfo, IndInfo, InitInfo, OpInfo, StructInfo, builtin_defs)
from .parser import SUBSET
from .terms import (FLOAT, NAT, PROP, SHAPE, STRING, TYPE, App, Arr, CtorV, Eq, FLit, FloatOp,
                    InitV, Lit, Meta, MetaCtx, NatOp, Normalizer, Opaque, PAIR_FIELDS, Pair, Param,
                    Pi, Prod, Proj, Rel, SLit, Sort, StructV, Term, Var, instantiate, is_closed,
                    map_children, show, subst, unify)

TENSOR_FAMILIES = {"torch.T": "f32", "torch.IT": "i64"}


class Fail(Exception):
    """One located error; the declaration being elaborated is abandoned."""

    def __init__(self, pos: Pos, msg: str):
        super().__init__(msg)
        self.pos, self.msg = pos, msg


@dataclass
class Local:
    name: str
    term: Term
    type: Term


class Ctx:
    """A local context: a persistent list of locals (later ones shadow earlier ones)."""

    def __init__(self, locals_: tuple[Local, ...] = ()):
        self.locals = locals_

    def push(self, name: str, term: Term, type_: Term) -> "Ctx":
        return Ctx(self.locals + (Local(name, term, type_),))

    def get(self, name: str) -> Local | None:
        for loc in reversed(self.locals):
            if loc.name == name:
                return loc
        return None


@dataclass
class Closure(Term):
    """A `fun` value while instantiating."""

    binders: tuple[str, ...]
    body: S.Expr
    ctx: Ctx

    def __hash__(self) -> int:
        return id(self)


class Elaborator:
    def __init__(self) -> None:
        self.env: dict[str, Any] = dict(builtin_defs())
        self.mctx = MetaCtx()
        self.norm = Normalizer(self.mctx, self._unfold)
        self.uid = 0
        self.diags: list[Diagnostic] = []
        self.builder: Any = None  # GraphBuilder while instantiating
        self.pending: list[tuple[Meta, str, str, Pos]] = []
        self.namespaces: list[str] = []
        self.opens: list[str] = []
        self.meta_imported = False
        self.current_def = ""
        self.scopes: list[tuple[str, str | None, int, int]] = []
        self.deferred: list[tuple[str, Param, Term, Pos]] = []  # `(h := by decide)` to run
        self.solutions: dict[tuple[Pos, str], list[Term]] = {}  # implicit args, per call site

    # ---- names ----------------------------------------------------------------------------
    def fresh_uid(self) -> int:
        self.uid += 1
        return self.uid

    def qualify(self, name: str) -> str:
        return ".".join(self.namespaces + [name]) if self.namespaces else name

    def resolve_global(self, name: str) -> str | None:
        ns = list(self.namespaces)
        while ns:
            cand = ".".join(ns + [name])
            if cand in self.env:
                return cand
            ns.pop()
        if name in self.env or name in BUILTIN_TYPES:
            return name
        found = {o + "." + name for o in self.opens if o + "." + name in self.env}
        if len(found) > 1:
            raise Fail(Pos("", 0, 0), f"ambiguous name '{name}': {', '.join(sorted(found))}")
        return found.pop() if found else None

    # ---- normalisation hooks -------------------------------------------------------------
    def _unfold(self, t: App) -> Term | None:
        info = self.env.get(t.head)
        if isinstance(info, DefInfo):
            if t.head == "torch.numel" and t.args and isinstance(t.args[0], Arr) \
                    and all(isinstance(x, Lit) for x in t.args[0].items):
                return Lit(math.prod(x.n for x in t.args[0].items))
            if t.head in _FLOAT_FNS and t.args and isinstance(t.args[0], (Lit, FLit)):
                v = t.args[0].n if isinstance(t.args[0], Lit) else t.args[0].x
                fn = _FLOAT_FNS[t.head]
                try:
                    return FLit(fn(v))
                except ValueError:
                    return FLit(float("nan"))
            if info.value is not None and len(t.args) == len(info.params):
                return subst(info.value, {p.uid: a for p, a in zip(info.params, t.args)})
        return None

    def whnf(self, t: Term) -> Term:
        return self.norm(t)

    def show(self, t: Term) -> str:
        return show(self.norm(instantiate(t, self.mctx)))

    def unify(self, a: Term, b: Term) -> bool:
        snap = self.mctx.snapshot()
        ok = unify(a, b, self.norm)
        if not ok:
            self.mctx.restore(snap)
        return ok

    # ---- commands -------------------------------------------------------------------------
    def command(self, cmd: S.Command) -> None:
        if isinstance(cmd, S.Namespace):
            self.namespaces.extend(cmd.name.split("."))
            self.scopes.append(("namespace", cmd.name, len(cmd.name.split(".")), len(self.opens)))
        elif isinstance(cmd, S.Section):
            self.scopes.append(("section", cmd.name, 0, len(self.opens)))
        elif isinstance(cmd, S.End):
            if not self.scopes:
                raise Fail(cmd.pos, "`end` without an open namespace or section")
            kind, name, depth, nopens = self.scopes.pop()
            if (cmd.name or None) != (name or None):
                raise Fail(cmd.pos, f"invalid 'end', expected {kind} name "
                                    f"'{name or ''}', found '{cmd.name or ''}'")
            del self.namespaces[len(self.namespaces) - depth:]
            del self.opens[nopens:]
        elif isinstance(cmd, S.Open):
            for n in cmd.names:
                full = self._resolve_namespace(n)
                if full is None:
                    raise Fail(cmd.pos, f"unknown namespace '{n}'")
                self.opens.append(full)
        elif isinstance(cmd, S.Structure):
            self.structure(cmd)
        elif isinstance(cmd, S.Inductive):
            self.inductive(cmd)
        elif isinstance(cmd, S.Def):
            self.definition(cmd)
        elif isinstance(cmd, S.TypeProvider):
            self.type_provider(cmd)

    def type_provider(self, cmd: S.TypeProvider) -> None:
        from pathlib import Path

        from .provider import ProviderError, declare

        if not self.meta_imported:
            raise Fail(cmd.pos, "`safetensors_type_provider` needs `import Tyr`")
        here = Path(cmd.pos.file).parent
        path = here / cmd.path if (here / cmd.path).exists() else Path(cmd.path)
        if not path.exists():
            raise Fail(cmd.pos, f"checkpoint '{cmd.path}' not found (looked beside the file and "
                                f"in the current directory)")
        name = self.qualify(cmd.name)
        try:
            decls = declare(name, path, cmd.pos)
        except ProviderError as err:
            raise Fail(cmd.pos, err.msg) from None
        for dname, info in decls.items():
            self._declare(dname, cmd.pos, info)

    def _resolve_namespace(self, n: str) -> str | None:
        cands = [".".join(self.namespaces[:k] + [n]) for k in range(len(self.namespaces), -1, -1)]
        for c in cands:
            if any(k.startswith(c + ".") for k in self.env):
                return c
        return None

    def _declare(self, name: str, pos: Pos, info: Any) -> None:
        if name in self.env:
            raise Fail(pos, f"'{name}' has already been declared")
        self.env[name] = info

    def binders(self, bs: list[S.Binder], ctx: Ctx) -> tuple[tuple[Param, ...], Ctx]:
        params = []
        for b in bs:
            if b.type is None:
                raise Fail(b.pos, f"binder '{b.name}' needs a type in the Tyr subset")
            ty = self.elab_type(b.type, ctx)
            if b.tactic is not None and not self._is_prop(ty):
                raise Fail(b.pos, f"`by {b.tactic}` can only prove a proposition, but "
                                  f"'{b.name}' has type {self.show(ty)}")
            uid = self.fresh_uid()
            params.append(Param(b.name, uid, b.kind, ty, b.default, b.tactic))
            term = Opaque(b.name) if self._is_prop(ty) else Var(b.name, uid)
            ctx = ctx.push(b.name, term if not isinstance(term, Opaque) else Var(b.name, uid), ty)
        return tuple(params), ctx

    def _is_prop(self, ty: Term) -> bool:
        return isinstance(self.whnf(ty), (Eq, Rel))

    def structure(self, cmd: S.Structure) -> None:
        name = self.qualify(cmd.name)
        for d in cmd.deriving:
            if d not in NATIVE_DERIVING:
                raise Fail(cmd.pos, f"deriving '{d}' is {SUBSET}")
            if d == "TensorStruct" and not self.meta_imported:
                raise Fail(cmd.pos, "deriving TensorStruct needs `import Tyr`")
        params, ctx = self.binders(cmd.binders, Ctx())
        info = StructInfo(name, params, [], cmd.deriving, cmd.pos)
        self._declare(name, cmd.pos, info)
        seen = set()
        for f in cmd.fields:
            if f.name in seen:
                raise Fail(f.pos, f"field '{f.name}' has already been declared")
            seen.add(f.name)
            ty = self.elab_type(f.type, ctx)
            uid = self.fresh_uid()
            fi = FieldInfo(f.name, uid, ty, f.pos, f.default, f.doc)
            if f.default is not None:
                self.pending = []
                self.elab(f.default, ty, ctx)
                self.check_pending()
            info.fields.append(fi)
            ctx = ctx.push(f.name, Var(f.name, uid), ty)

    def inductive(self, cmd: S.Inductive) -> None:
        name = self.qualify(cmd.name)
        for d in cmd.deriving:
            if d not in NATIVE_DERIVING or d == "TensorStruct":
                raise Fail(cmd.pos, f"deriving '{d}' for an inductive is {SUBSET}")
        params, ctx = self.binders(cmd.binders, Ctx())
        info = IndInfo(name, params, {}, cmd.pos)
        self._declare(name, cmd.pos, info)
        for c in cmd.ctors:
            cparams, _ = self.binders(c.binders, ctx)
            ci = CtorInfo(f"{name}.{c.name}", name, params + cparams)
            info.ctors[c.name] = ci
            self._declare(ci.name, c.pos, ci)

    def definition(self, cmd: S.Def) -> None:
        name = self.qualify(cmd.name)
        self.current_def = name
        for a in cmd.attrs:
            if a not in KNOWN_ATTRS:
                raise Fail(cmd.pos, f"attribute '@[{a}]' is {SUBSET}")
            if a == "model" and not self.meta_imported:
                raise Fail(cmd.pos, "the attribute '@[model]' needs `import Tyr`")
        params, ctx = self.binders(cmd.binders, Ctx())
        result = self.elab_type(cmd.type, ctx) if cmd.type is not None else None
        info = DefInfo(name, cmd.pos, cmd.kind, params, result or TYPE, cmd.body, cmd.attrs,
                       doc=cmd.doc)
        if name in NATIVE_DEFS:
            if result is None:
                raise Fail(cmd.pos, f"'{name}' must declare its result type")
            info.native = True
            self._declare(name, cmd.pos, info)
            return
        op = self._op_convention(info, cmd.body)
        init = self._init_convention(info, cmd.body) if op is None else None
        if op or init:
            if result is None:
                raise Fail(cmd.pos, f"'{name}' must declare its result type")
            if op is not None:
                for other in self.env.values():
                    if isinstance(other, DefInfo) and other.op and other.op.prim == op.prim:
                        raise Fail(cmd.body.pos, f"the op name \"{op.prim}\" is already declared by "
                                                 f"'{other.name}'; an IR op has one signature")
            info.op, info.init = op, init
            info.tensor_level = True
            self._declare(name, cmd.pos, info)
            return
        self.pending = []
        try:
            term, ty = self.elab(cmd.body, result, ctx)
            self.check_pending()
        except Fail:
            # As Lean does, keep a declaration whose header is fine, so that its uses are
            # checked against its signature instead of failing as unknown identifiers.
            if result is not None and name not in self.env:
                info.tensor_level = self.mentions_tensor(result)
                self._declare(name, cmd.pos, info)
            raise
        if result is None:
            info.result = instantiate(ty, self.mctx)
        info.tensor_level = self.mentions_tensor(info.result)
        if not info.tensor_level and not isinstance(term, Opaque):
            info.value = instantiate(term, self.mctx)
        if "model" in cmd.attrs and not info.tensor_level:
            raise Fail(cmd.pos, f"model '{name}' must return tensors, not {self.show(info.result)}")
        self._declare(name, cmd.pos, info)

    def mentions_tensor(self, ty: Term) -> bool:
        from .terms import occurs
        return occurs(self.whnf(ty), lambda t: isinstance(t, App) and t.head in TENSOR_FAMILIES)

    # -- op and init conventions ------------------------------------------------------------
    def _op_convention(self, info: DefInfo, body: S.Expr) -> OpInfo | None:
        if not (isinstance(body, S.App) and isinstance(body.fn, S.Ident)
                and self._global(body.fn.name) == "torch.prim"):
            return None
        pos = body.pos
        args = body.args
        if not (2 <= len(args) <= 3) or any(a.name for a in args) \
                or not isinstance(args[0].expr, S.StrLit) or not isinstance(args[1].expr, S.ListLit):
            raise Fail(pos, "a typed op's body must be `prim \"name\" [x.node, ...] [attrs]`")
        res = self.whnf(info.result)
        if not (isinstance(res, App) and res.head == "torch.T"):
            raise Fail(pos, "a `prim` op must return a float tensor `T s`")
        tensors = [p.name for p in info.params if p.kind == "explicit" and self._tensor_param(p)]
        given = []
        for item in args[1].expr.items:
            if not (isinstance(item, S.Ident) and item.name.endswith(".node")):
                raise Fail(item.pos, "`prim` arguments must be the op's tensor arguments `x.node`")
            given.append(item.name[: -len(".node")])
        if given != tensors:
            raise Fail(args[1].expr.pos, f"`prim` arguments must be the op's tensor arguments in "
                                         f"order: [{', '.join(t + '.node' for t in tensors)}]")
        others = [p for p in info.params if p.kind == "explicit" and not self._tensor_param(p)
                  and not self._is_prop(p.type)]
        attrs: list[tuple[str, str]] = []
        items = args[2].expr.items if len(args) == 3 and isinstance(args[2].expr, S.ListLit) else []
        if len(args) == 3 and not isinstance(args[2].expr, S.ListLit):
            raise Fail(args[2].expr.pos, "`prim` attributes must be a list literal")
        for item in items:
            ok = (isinstance(item, S.App) and isinstance(item.fn, S.DotIdent)
                  and item.fn.name in ("nat", "float", "shape") and len(item.args) == 2
                  and isinstance(item.args[0].expr, S.StrLit) and isinstance(item.args[1].expr, S.Ident)
                  and item.args[0].expr.value == item.args[1].expr.name)
            if not ok:
                raise Fail(item.pos, "a `prim` attribute must be `.nat \"k\" k`, `.float \"k\" k` "
                                     "or `.shape \"k\" k` naming an explicit argument `k`")
            attrs.append((item.args[1].expr.name, item.fn.name))
        if [a for a, _ in attrs] != [p.name for p in others]:
            raise Fail(pos, f"`prim` attributes must list the op's other explicit arguments in "
                            f"order: {[p.name for p in others]}")
        want = {"nat": NAT, "float": FLOAT, "shape": SHAPE}
        for (aname, kind), p in zip(attrs, others):
            if not self.unify(p.type, want[kind]):
                raise Fail(pos, f"attribute '{aname}' is `.{kind}` but the argument has type "
                                f"{self.show(p.type)}")
        return OpInfo(args[0].expr.value, tensors, attrs)

    def _init_convention(self, info: DefInfo, body: S.Expr) -> InitInfo | None:
        if not (isinstance(body, S.App) and isinstance(body.fn, S.Ident)
                and self._global(body.fn.name) == "torch.param"):
            return None
        if len(body.args) != 1:
            raise Fail(body.pos, "an initialiser's body must be `param (.kind arg...)`")
        e = body.args[0].expr
        if isinstance(e, S.DotIdent):
            kind, args = e.name, []
        elif isinstance(e, S.App) and isinstance(e.fn, S.DotIdent) and all(
                isinstance(a.expr, S.Ident) for a in e.args):
            kind, args = e.fn.name, [a.expr.name for a in e.args]
        else:
            raise Fail(body.pos, "an initialiser's body must be `param (.kind arg...)`")
        ind = self.env.get("torch.Init")
        ctor = ind.ctors.get(kind) if isinstance(ind, IndInfo) else None
        if ctor is None:
            raise Fail(e.pos, f"'Init' has no constructor '{kind}'")
        if len(ctor.params) != len(args):
            raise Fail(e.pos, f"'Init.{kind}' takes {len(ctor.params)} argument(s), given {len(args)}")
        return InitInfo(kind, [(cp.name, a) for cp, a in zip(ctor.params, args)])

    def _global(self, name: str) -> str | None:
        try:
            return self.resolve_global(name)
        except Fail:
            return None

    def _tensor_param(self, p: Param) -> bool:
        t = self.whnf(p.type)
        return isinstance(t, App) and t.head in TENSOR_FAMILIES

    def check_pending(self) -> None:
        for m, pname, fname, pos in self.pending:
            if m.uid not in self.mctx.assign:
                raise Fail(pos, f"don't know how to synthesize implicit argument '{pname}' of "
                                f"'{_short(fname)}'; give it as a named argument `({pname} := ...)`")
        self.pending = []

    # ---- types ----------------------------------------------------------------------------
    def elab_type(self, e: S.Expr, ctx: Ctx) -> Term:
        term, ty = self.elab(e, None, ctx)
        if not isinstance(self.whnf(ty), Sort):
            raise Fail(e.pos, f"type expected, but '{self.show(term)}' has type {self.show(ty)}")
        return term

    # ---- terms ----------------------------------------------------------------------------
    def elab(self, e: S.Expr, expected: Term | None, ctx: Ctx) -> tuple[Term, Term]:
        term, ty = self._elab(e, expected, ctx)
        if expected is not None and not isinstance(e, (S.App, S.Ident)):
            self.expect(e, ty, expected)
        return term, ty

    def expect(self, e: S.Expr, ty: Term, expected: Term) -> None:
        if not self.unify(ty, expected):
            raise Fail(e.pos, f"type mismatch: this term has type {self.show(ty)} but is expected "
                              f"to have type {self.show(expected)}")

    def _elab(self, e: S.Expr, expected: Term | None, ctx: Ctx) -> tuple[Term, Term]:
        if isinstance(e, S.NatLit):
            if expected is not None and self.whnf(expected) == FLOAT:
                return FLit(float(e.value)), FLOAT
            return Lit(e.value), NAT
        if isinstance(e, S.SciLit):
            return FLit(float(e.text)), FLOAT
        if isinstance(e, S.StrLit):
            return SLit(e.value), STRING
        if isinstance(e, S.Sort):
            return Sort(e.name), TYPE
        if isinstance(e, S.Index):
            return self.index(e, ctx)
        if isinstance(e, (S.Ident, S.App, S.DotIdent, S.Proj)):
            fn, args = (e.fn, e.args) if isinstance(e, S.App) else (e, [])
            return self.app(fn, args, expected, ctx, e.pos)
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
            vty = self.elab_type(e.type, ctx) if e.type is not None else None
            v, ty = self.elab(e.value, vty, ctx)
            return self.elab(e.body, expected, ctx.push(e.name, v, vty or ty))
        if isinstance(e, S.Fun):
            return self.fun(e, expected, ctx)
        if isinstance(e, S.Pi):
            params, ctx2 = self.binders(e.binders, ctx)
            return Pi(params, self.elab_type(e.body, ctx2)), TYPE
        if isinstance(e, S.By):
            raise Fail(e.pos, f"`by {e.tactic}` is only in the Tyr subset as a binder default "
                              f"`(h : P := by decide)`")
        if isinstance(e, S.ListLit):
            raise Fail(e.pos, f"list literals are {SUBSET} outside `prim` bodies")
        if isinstance(e, S.AnonCtor):
            raise Fail(e.pos, f"anonymous constructors `⟨...⟩` are {SUBSET} outside Tyr.Core")
        if isinstance(e, S.Hole):
            raise Fail(e.pos, f"holes `_` are {SUBSET}; name the argument")
        raise Fail(e.pos, f"this term is {SUBSET}")

    def index(self, e: S.Index, ctx: Ctx) -> tuple[Term, Term]:
        """`xs[i]` on a `Vector α n`: the bound `i < n` is decided, as Lean's
        `get_elem_tactic` does for literals."""
        term, ty = self.elab(e.expr, None, ctx)
        vty = self.whnf(ty)
        if not (isinstance(vty, App) and vty.head == "Vector"):
            raise Fail(e.pos, f"indexing `[i]` needs a Vector, but this has type {self.show(ty)}")
        i, _ = self.elab(e.index, NAT, ctx)
        i, n = self.whnf(i), self.whnf(vty.args[1])
        if not (isinstance(i, Lit) and isinstance(n, Lit)):
            raise Fail(e.index.pos, f"cannot prove the index {show(i)} < {show(n)}; the Tyr subset "
                                    f"indexes vectors with closed numbers")
        if i.n >= n.n:
            raise Fail(e.index.pos, f"index {i.n} is out of bounds: the vector has {n.n} "
                                    f"element{'s' if n.n != 1 else ''}")
        base = self.whnf(term)
        item = base.items[i.n] if isinstance(base, Arr) else Proj(term, f"[{i.n}]")
        return item, vty.args[0]

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
                raise Fail(b.pos, f"cannot infer the type of '{b.name}'; write `fun ({b.name} : A) => ...`")
            uid = self.fresh_uid()
            if i < len(exp_params):
                m[exp_params[i].uid] = Var(b.name, uid)
            params.append(Param(b.name, uid, "explicit", ty))
            inner = inner.push(b.name, Var(b.name, uid), ty)
        exp_res = subst(exp.result, m) if isinstance(exp, Pi) and len(exp_params) == len(params) else None
        if self.builder is not None:
            # Checked already; while instantiating, the body runs when the closure is applied.
            return (Closure(tuple(b.name for b in e.binders), e.body, ctx),
                    Pi(tuple(params), exp_res if exp_res is not None else Opaque("?")))
        body, bty = self.elab(e.body, exp_res, inner)
        return Opaque("fun"), Pi(tuple(params), bty)

    def binop(self, e: S.BinOp, expected: Term | None, ctx: Ctx) -> tuple[Term, Term]:
        if e.op == "→":
            a = self.elab_type(e.lhs, ctx)
            b = self.elab_type(e.rhs, ctx)
            return Pi((Param("_", self.fresh_uid(), "explicit", a),), b), TYPE
        if e.op == "×":
            return Prod(self.elab_type(e.lhs, ctx), self.elab_type(e.rhs, ctx)), TYPE
        # Arithmetic and `=`: operands share one type; a literal takes the other side's type.
        lit = (S.NatLit,)
        first, second = (e.rhs, e.lhs) if isinstance(e.lhs, lit) and not isinstance(e.rhs, lit) \
            else (e.lhs, e.rhs)
        hint = None if e.op in ("=", "≤", "<") else expected
        t1, ty1 = self.elab(first, hint, ctx)
        t2, ty2 = self.elab(second, ty1, ctx)
        a, b = (t1, t2) if first is e.lhs else (t2, t1)
        ty = self.whnf(ty1)
        if e.op == "=":
            return Eq(a, b), PROP
        if e.op in ("≤", "<"):
            if ty != NAT:
                raise Fail(e.pos, f"'{e.op}' on {self.show(ty)} is {SUBSET} (Nat only)")
            return Rel(e.op, a, b), PROP
        if ty == NAT:
            return NatOp(e.op, a, b), NAT
        if ty == FLOAT:
            if e.op == "%":
                raise Fail(e.pos, "`%` on Float is not in the Tyr subset")
            return FloatOp(e.op, a, b), FLOAT
        raise Fail(e.pos, f"arithmetic '{e.op}' on {self.show(ty)} is {SUBSET} (Nat and Float only)")

    # ---- application ----------------------------------------------------------------------
    def app(self, fn: S.Expr, args: list[S.Arg], expected: Term | None, ctx: Ctx,
            pos: Pos) -> tuple[Term, Term]:
        head = self.head(fn, expected, ctx)
        kind = head[0]
        if kind == "value":
            term, ty = head[1], head[2]
            if not args:
                if expected is not None and not self.unify(ty, expected):
                    raise Fail(pos, f"type mismatch: '{_src(fn)}' has type {self.show(ty)} but is "
                                    f"expected to have type {self.show(expected)}")
                return term, ty
            fty = self.whnf(ty)
            if not isinstance(fty, Pi):
                raise Fail(fn.pos, f"'{_src(fn)}' is not a function; it has type {self.show(ty)}")
            return self.apply(_src(fn), fty.params, fty.result, args, expected, ctx, pos,
                              callee=("closure", term), self_arg=None)
        _, name, info, self_arg = head
        params, result = self.signature(info)
        return self.apply(name, params, result, args, expected, ctx, pos,
                          callee=("const", info), self_arg=self_arg)

    def signature(self, info: Any) -> tuple[tuple[Param, ...], Term]:
        if isinstance(info, DefInfo):
            return info.params, info.result
        if isinstance(info, (StructInfo, IndInfo)):
            return info.params, TYPE
        if isinstance(info, CtorInfo):
            ind = self.env[info.inductive]
            return info.params, App(ind.name, tuple(Var(p.name, p.uid) for p in ind.params))
        if isinstance(info, str):  # builtin type former
            sorts = BUILTIN_TYPES[info]
            return tuple(Param(f"α{i}", -100 - i, "explicit", TYPE if k == "type" else NAT)
                         for i, k in enumerate(sorts)), TYPE
        raise AssertionError(info)

    def head(self, fn: S.Expr, expected: Term | None, ctx: Ctx) -> tuple:
        """Resolve the function position: ("value", term, type) or ("const", name, info, self)."""
        if isinstance(fn, S.DotIdent):
            exp = self.whnf(expected) if expected is not None else None
            if isinstance(exp, App) and isinstance(self.env.get(exp.head), IndInfo):
                ind = self.env[exp.head]
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
        parts = fn.name.split(".")
        loc = ctx.get(parts[0])
        if loc is not None:
            if len(parts) == 1:
                return ("value", loc.term, loc.type)
            return self.field(loc.term, loc.type, parts[1:], fn.pos)
        for k in range(len(parts), 0, -1):
            try:
                g = self.resolve_global(".".join(parts[:k]))
            except Fail as err:
                raise Fail(fn.pos, err.msg) from None
            if g is None:
                continue
            info = self.env.get(g, g if g in BUILTIN_TYPES else None)
            if k == len(parts):
                return ("const", g, info, None)
            term, ty = self.apply(g, *self.signature(info), [], None, ctx, fn.pos,
                                  callee=("const", info), self_arg=None)
            return self.field(term, ty, parts[k:], fn.pos)
        raise Fail(fn.pos, f"unknown identifier '{fn.name}'")

    def field(self, term: Term, ty: Term, fields: list[str], pos: Pos) -> tuple:
        for i, f in enumerate(fields):
            wty = self.whnf(ty)
            last = i == len(fields) - 1
            sinfo = self.env.get(wty.head) if isinstance(wty, App) else None
            if isinstance(wty, Prod) and f in PAIR_FIELDS:  # Prod is a structure in Lean
                term, ty = self.whnf(Proj(term, f)), wty.a if f == "fst" else wty.b
                continue
            if isinstance(sinfo, StructInfo) and any(fi.name == f for fi in sinfo.fields):
                term, ty = self.project(term, wty, sinfo, f)
                continue
            # Generalized field notation: `x.f` is `S.f x` for a def `S.f`.
            tname = wty.head if isinstance(wty, App) else None
            if tname == "Array" and wty == SHAPE:
                tname = "torch.Shape" if "torch.Shape." + f in self.env else "Array"
            cand = f"{tname}.{f}" if tname else None
            if cand and isinstance(self.env.get(cand), DefInfo):
                if last:
                    return ("const", cand, self.env[cand], (term, ty))
                term, ty = self.apply(cand, *self.signature(self.env[cand]), [], None, Ctx(), pos,
                                      callee=("const", self.env[cand]), self_arg=(term, ty))
                continue
            raise Fail(pos, f"invalid field '{f}': {self.show(ty)} has no field or function '{f}'")
        return ("value", term, ty)

    def project(self, term: Term, sty: App, sinfo: StructInfo, f: str) -> tuple[Term, Term]:
        m: dict[int, Term] = {p.uid: a for p, a in zip(sinfo.params, sty.args)}
        for fi in sinfo.fields:
            if fi.name == f:
                val = self.whnf(Proj(term, f)) if isinstance(self.whnf(term), StructV) else Proj(term, f)
                return val, subst(fi.type, m)
            m[fi.uid] = Proj(term, fi.name)
        raise AssertionError(f)

    def apply(self, name: str, params: tuple[Param, ...], result: Term, args: list[S.Arg],
              expected: Term | None, ctx: Ctx, pos: Pos, *, callee: tuple,
              self_arg: tuple[Term, Term] | None) -> tuple[Term, Term]:
        named = {a.name: a for a in args if a.name}
        positional = [a for a in args if not a.name]
        for a in named:
            if not any(p.name == a for p in params):
                raise Fail(named[a].expr.pos, f"'{_short(name)}' has no argument named '{a}'")
        m: dict[int, Term] = {}
        values: list[Term] = []
        obligations: list[tuple[Param, Term]] = []
        funs: list[tuple[int, Param, S.Fun]] = []  # elaborated last, as Lean postpones them
        first_deferred = len(self.deferred)
        site = (pos, name)
        # While instantiating, implicit arguments are the ones solved when the definition
        # was checked (rebound to the values now in scope): elaborate once, evaluate later.
        recorded = self.solutions.get(site) if self.builder is not None else None
        implicits: list[Term] = []
        pctx = Ctx()  # the callee's binders, for default values
        for p in params:
            pty = subst(p.type, m)
            if p.name in named:
                arg = named.pop(p.name)
                v = self.check_arg(name, p, arg.expr, pty, ctx)
            elif p.kind == "implicit":
                if recorded is not None and len(implicits) < len(recorded):
                    v = self.whnf(self.rebind(recorded[len(implicits)], ctx))
                else:
                    v = self.mctx.fresh(p.name)
                    self.pending.append((v, p.name, name, pos))
                implicits.append(v)
            elif self_arg is not None and self._self_fits(pty, self_arg[1]):
                v = self_arg[0]
                if not self.unify(self_arg[1], pty):
                    raise Fail(pos, f"'{_short(name)}' expects {self.show(pty)}, got {self.show(self_arg[1])}")
                self_arg = None
            elif positional and isinstance(positional[0].expr, S.Fun):
                v = Opaque("fun")
                funs.append((len(values), p, positional.pop(0).expr))
            elif positional:
                v = self.check_arg(name, p, positional.pop(0).expr, pty, ctx)
            elif p.tactic is not None:
                v = Opaque("proof")
                obligations.append((p, pty))
            elif p.default is not None:
                v, _ = self.elab(p.default, pty, pctx)
            else:
                nexp = sum(1 for q in params if q.kind == "explicit" and q.default is None
                           and q.tactic is None)
                raise Fail(pos, f"'{_short(name)}' is missing its explicit argument '{p.name}' : "
                                f"{self.show(pty)} (it takes {nexp}; partial application is "
                                f"{SUBSET})")
            m[p.uid] = v
            values.append(v)
            pctx = pctx.push(p.name, v, pty)
        if positional:
            nexp = sum(1 for q in params if q.kind == "explicit")
            raise Fail(positional[0].expr.pos, f"function '{_short(name)}' takes {nexp} explicit "
                                               f"argument{'s' if nexp != 1 else ''}, but is given "
                                               f"{nexp + len(positional)}")
        res = subst(result, m)
        if expected is not None and not self.unify(res, expected):
            raise Fail(pos, f"type mismatch: '{_short(name)} ...' has type {self.show(res)} but "
                            f"is expected to have type {self.show(expected)}")
        for i, p, fe in funs:
            pty = instantiate(subst(p.type, m), self.mctx)
            t, ty = self.elab(fe, pty, ctx)
            if not self.unify(ty, pty):
                raise Fail(fe.pos, f"argument '{p.name}' of '{_short(name)}' has type "
                                   f"{self.show(ty)} but is expected to have type {self.show(pty)}")
            values[i] = m[p.uid] = t
        for p, pty in obligations:
            self.decide(name, p, pty, pos)
        mine = self.deferred[first_deferred:]
        del self.deferred[first_deferred:]
        for fname, dp, dty, dpos in mine:
            self.decide(fname, dp, dty, dpos)
        if self.builder is None and implicits:
            self.solutions[site] = implicits
        term = self.result_term(name, params, values, res, callee, pos)
        return term, res

    def call_closure(self, clo: Closure, params: tuple[Param, ...], values: list[Term]) -> Term:
        inner = clo.ctx
        m = {p.uid: v for p, v in zip(params, values)}
        for b, v, p in zip(clo.binders, values, params):
            inner = inner.push(b, v, self.whnf(instantiate(subst(p.type, m), self.mctx)))
        t, _ = self.elab(clo.body, None, inner)
        return t

    def rebind(self, t: Term, ctx: Ctx) -> Term:
        """A term recorded while checking, with its local variables replaced by the values
        the same names have now."""
        t = instantiate(t, self.mctx)
        if isinstance(t, Var):
            loc = ctx.get(t.name)
            return loc.term if loc is not None else t
        return map_children(t, lambda c: self.rebind(c, ctx))

    def _self_fits(self, pty: Term, sty: Term) -> bool:
        a, b = self.whnf(pty), self.whnf(sty)
        return isinstance(a, App) and isinstance(b, App) and a.head == b.head

    def check_arg(self, fname: str, p: Param, e: S.Expr, pty: Term, ctx: Ctx) -> Term:
        if isinstance(e, S.By):
            if not self._is_prop(pty):
                raise Fail(e.pos, f"`by {e.tactic}` proves propositions, but argument '{p.name}' of "
                                  f"'{_short(fname)}' has type {self.show(pty)}")
            self.deferred.append((fname, p, pty, e.pos))
            return Opaque("proof")
        if isinstance(e, (S.BinOp, S.NatLit, S.SciLit, S.ArrayLit)):
            # Literals and arithmetic take their type from the binder, as Lean's binop% does.
            t, ty = self.elab(e, pty, ctx) if self._literal_fits(pty) else self.elab(e, None, ctx)
            if not self.unify(ty, pty):
                raise Fail(e.pos, f"argument '{p.name}' of '{_short(fname)}' has type "
                                  f"{self.show(ty)} but is expected to have type {self.show(pty)}")
            return t
        try:
            t, ty = self.elab(e, None, ctx)
        except Fail as err:
            # An argument that needs its expected type (a literal Float, `.ctor`): try again.
            if isinstance(e, (S.DotIdent, S.App, S.Ident)):
                t, ty = self._retry_with_expected(e, pty, ctx, err)
            else:
                raise
        if isinstance(e, S.NatLit) and self.whnf(pty) == FLOAT:
            t, ty = FLit(float(e.value)), FLOAT
        if not self.unify(ty, pty):
            raise Fail(e.pos, f"argument '{p.name}' of '{_short(fname)}' has type {self.show(ty)} "
                              f"but is expected to have type {self.show(pty)}")
        return t

    def _literal_fits(self, pty: Term) -> bool:
        t = self.whnf(pty)
        return t in (NAT, FLOAT) or (isinstance(t, App) and t.head == "Array")

    def _retry_with_expected(self, e: S.Expr, pty: Term, ctx: Ctx, err: Fail) -> tuple[Term, Term]:
        if isinstance(e, S.DotIdent) or (isinstance(e, S.App) and isinstance(e.fn, S.DotIdent)):
            return self.elab(e, pty, ctx)
        raise err

    def decide(self, fname: str, p: Param, pty: Term, pos: Pos) -> None:
        prop = self.whnf(instantiate(pty, self.mctx))
        shown = show(prop)
        if not isinstance(prop, (Eq, Rel)):
            raise Fail(pos, f"`by decide` cannot prove {shown}")
        if not (is_closed(prop.a) and is_closed(prop.b)):
            raise Fail(pos, f"`by decide` failed for argument '{p.name}' of '{_short(fname)}': "
                            f"the proposition {shown} mentions variables, and `decide` needs a "
                            f"closed proposition; use closed shapes")
        if isinstance(prop, Rel):
            a, b = prop.a, prop.b
            holds = isinstance(a, Lit) and isinstance(b, Lit) and (
                a.n <= b.n if prop.op == "≤" else a.n < b.n)
            if not holds:
                raise Fail(pos, f"`by decide` failed for argument '{p.name}' of '{_short(fname)}': "
                                f"the proposition {show(instantiate(pty, self.mctx))} is false "
                                f"({shown})")
            return
        if prop.a != prop.b:
            raise Fail(pos, f"`by decide` failed for argument '{p.name}' of '{_short(fname)}': "
                            f"the proposition {show(instantiate(pty, self.mctx))} is false "
                            f"({show(prop.a)} ≠ {show(prop.b)})")

    def result_term(self, name: str, params: tuple[Param, ...], values: list[Term], res: Term,
                    callee: tuple, pos: Pos) -> Term:
        kind, obj = callee
        if kind == "closure":
            if isinstance(obj, Closure):
                return self.call_closure(obj, params, values)
            return Opaque("tensor")
        info = obj
        if isinstance(info, str) or isinstance(info, (StructInfo, IndInfo)):
            return App(name, tuple(values))
        if isinstance(info, CtorInfo):
            return CtorV(name, tuple(values))
        assert isinstance(info, DefInfo)
        if name == "Vector.foldl" and self.builder is not None:
            f, acc, xs = values[3], values[4], self.whnf(values[5])
            fty = self.whnf(instantiate(subst(params[3].type, dict(
                (p.uid, v) for p, v in zip(params, values))), self.mctx))
            if not (isinstance(f, Closure) and isinstance(xs, Arr) and isinstance(fty, Pi)):
                raise Fail(pos, "internal: `Vector.foldl` needs a `fun` and a known vector")
            for item in xs.items:
                acc = self.call_closure(f, fty.params, [acc, item])
            return acc
        if name in ("Prod.fst", "Prod.snd"):
            return self.whnf(Proj(values[2], name.removeprefix("Prod.")))
        if info.kind == "builtin" and self.mentions_tensor(res):
            return Opaque("tensor")
        if info.init is not None:
            m = {p.name: v for p, v in zip(info.params, values)}
            return InitV(info.init.kind, tuple((k, self.whnf(m[a])) for k, a in info.init.args))
        if info.op is not None:
            if self.builder is None:
                return Opaque("tensor")
            return self.builder.emit(self, info, values, res, pos)
        if info.checkpoint is not None:
            if self.builder is None:
                return Opaque("tensor")
            return self.builder.checkpoint_value(self, info, pos)
        if info.tensor_level:
            if self.builder is None:
                return Opaque("tensor")
            inner = Ctx()
            m = {p.uid: v for p, v in zip(info.params, values)}
            for p, v in zip(info.params, values):
                inner = inner.push(p.name, v, subst(p.type, m))
            saved, self.current_def = self.current_def, name
            t, _ = self.elab(info.body, subst(info.result, m), inner)
            self.current_def = saved
            return t
        return App(name, tuple(values))


_FLOAT_FNS = {"Nat.toFloat": float, "Float.sqrt": math.sqrt, "Float.exp": math.exp,
              "Float.log": math.log}


def _short(name: str) -> str:
    return name[len("torch."):] if name.startswith("torch.") else name


def _src(e: S.Expr) -> str:
    if isinstance(e, S.Ident):
        return e.name
    if isinstance(e, S.DotIdent):
        return "." + e.name
    if isinstance(e, S.Proj):
        return _src(e.expr) + "." + e.field
    return "..."


def located(err: Fail) -> LeanError:
    return LeanError([Diagnostic(err.pos, err.msg)])
