"""The checker: every command of the Tyr subset, declared into the program's `Env` the way
Lean would accept it (docs/lean-subset.md). Terms are elaborated by `elaborate.TermElab`, one
per declaration; the instances `deriving` needs are found by `instances.py`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import Pos
from . import syntax as S
from .context import Ctx
from .conventions import init_convention, op_convention
from .elaborate import TermElab
from .env import (
    KNOWN_ATTRS,
    NATIVE_DEFS,
    NATIVE_DERIVING,
    CtorInfo,
    DefInfo,
    Env,
    FieldInfo,
    IndInfo,
    StructInfo,
)
from .failure import Fail
from .instances import missing_instance
from .parser import SUBSET
from .scope import Scope
from .terms import TYPE, Opaque, Param, Term, Var


class Checker:
    def __init__(self, env: Env | None = None) -> None:
        self.env = env or Env()
        self.scope = Scope(self.env)
        self.meta_imported = False  # `import Tyr` seen: `@[model]`, `deriving TensorStruct`, …
        self.normal_forms: dict[Term, Term] = {}  # shared by the declarations' normalisers

    def elaborator(self, decl: str) -> TermElab:
        return TermElab(self.env, self.scope, decl, self.normal_forms)

    def declare(self, name: str, pos: Pos, info: Any) -> None:
        if name in self.env:
            raise Fail(pos, f"'{name}' has already been declared")
        self.env.declare(name, info)

    # ---- commands -------------------------------------------------------------------------
    def command(self, cmd: S.Command) -> None:
        if isinstance(cmd, S.Namespace):
            self.scope.enter("namespace", cmd.name)
        elif isinstance(cmd, S.Section):
            self.scope.enter("section", cmd.name)
        elif isinstance(cmd, S.End):
            self.scope.leave(cmd.name, cmd.pos)
        elif isinstance(cmd, S.Open):
            for n in cmd.names:
                full = self.scope.resolve_namespace(n)
                if full is None:
                    raise Fail(cmd.pos, f"unknown namespace '{n}'")
                self.scope.opens.append(full)
        elif isinstance(cmd, S.Structure):
            self.structure(cmd)
        elif isinstance(cmd, S.Inductive):
            self.inductive(cmd)
        elif isinstance(cmd, S.Def):
            self.definition(cmd)
        elif isinstance(cmd, S.TypeProvider):
            self.type_provider(cmd)

    def type_provider(self, cmd: S.TypeProvider) -> None:
        from .provider import ProviderError, declare

        if not self.meta_imported:
            raise Fail(cmd.pos, "`safetensors_type_provider` needs `import Tyr`")
        here = Path(cmd.pos.file).parent
        path = here / cmd.path if (here / cmd.path).exists() else Path(cmd.path)
        if not path.exists():
            raise Fail(cmd.pos, f"checkpoint '{cmd.path}' not found (looked beside the file and "
                                f"in the current directory)")
        name = self.scope.qualify(cmd.name)
        try:
            decls = declare(name, path, cmd.pos)
        except ProviderError as err:
            raise Fail(cmd.pos, err.msg) from None
        for dname, info in decls.items():
            self.declare(dname, cmd.pos, info)

    def _deriving(self, cmd: S.Structure | S.Inductive, inductive: bool) -> None:
        for d, pos in zip(cmd.deriving, cmd.deriving_pos):
            if d not in NATIVE_DERIVING or (inductive and d == "TensorStruct"):
                where = " for an inductive" if inductive and d in NATIVE_DERIVING else ""
                raise Fail(pos, f"deriving '{d}'{where} is {SUBSET}")
            if d == "TensorStruct" and not self.meta_imported:
                raise Fail(pos, "deriving TensorStruct needs `import Tyr`")

    def structure(self, cmd: S.Structure) -> None:
        name = self.scope.qualify(cmd.name)
        self._deriving(cmd, inductive=False)
        el = self.elaborator(name)
        el.header = True
        params, ctx = el.binders(cmd.binders, Ctx())
        el.header = False
        info = StructInfo(name, params, [], cmd.deriving, cmd.pos)
        self.declare(name, cmd.pos, info)
        seen = set()
        for f in cmd.fields:
            if f.name in seen:
                raise Fail(f.pos, f"field '{f.name}' has already been declared")
            seen.add(f.name)
            ty = el.elab_type(f.type, ctx)
            uid = self.env.fresh_uid()
            default = None
            if f.default is not None:
                default, _ = el.elab(f.default, ty, ctx)
            info.fields.append(FieldInfo(f.name, uid, el.finish(ty), f.pos,
                                         None if default is None else el.finish(default), f.doc))
            ctx = ctx.push(f.name, Var(f.name, uid), ty)
        for d, pos in zip(cmd.deriving, cmd.deriving_pos):
            for fi in info.fields:
                why = missing_instance(self.env, el.norm, d, fi.type, (name, d))
                if why is not None:
                    raise Fail(pos, f"failed to synthesize {why}: deriving {d} for '{name}' needs "
                                    f"an instance for field '{fi.name}' : {el.show(fi.type)}")

    def inductive(self, cmd: S.Inductive) -> None:
        name = self.scope.qualify(cmd.name)
        self._deriving(cmd, inductive=True)
        el = self.elaborator(name)
        params, ctx = el.binders(cmd.binders, Ctx())
        info = IndInfo(name, params, {}, cmd.pos, list(cmd.deriving))
        self.declare(name, cmd.pos, info)
        for c in cmd.ctors:
            cparams, _ = el.binders(c.binders, ctx)
            ci = CtorInfo(f"{name}.{c.name}", name, params + cparams)
            info.ctors[c.name] = ci
            self.declare(ci.name, c.pos, ci)
        el.resume_postponed()
        el.run_tactics()
        for d, pos in zip(cmd.deriving, cmd.deriving_pos):
            # `Inhabited` needs one constructor whose arguments all have instances; the others
            # need every constructor argument to have one.
            whys = [[missing_instance(self.env, el.norm, d, p.type, (name, d))
                     for p in ci.params[len(params):]] for ci in info.ctors.values()]
            bad = [w for ws in whys for w in ws if w is not None]
            if d == "Inhabited" and any(all(w is None for w in ws) for ws in whys):
                continue
            if bad:
                raise Fail(pos, f"failed to synthesize {bad[0]}: deriving {d} for '{name}' "
                                f"needs an instance for every constructor argument")

    def definition(self, cmd: S.Def) -> None:
        name = self.scope.qualify(cmd.name)
        for a in cmd.attrs:
            if a not in KNOWN_ATTRS:
                raise Fail(cmd.pos, f"attribute '@[{a}]' is {SUBSET}")
            if a == "model" and not self.meta_imported:
                raise Fail(cmd.pos, "the attribute '@[model]' needs `import Tyr`")
        el = self.elaborator(name)
        el.header = True
        params, ctx = el.binders(cmd.binders, Ctx())
        result = el.elab_type(cmd.type, ctx) if cmd.type is not None else None
        el.header = False
        params = tuple(Param(p.name, p.uid, p.kind, el.finish(p.type),
                             None if p.default is None else el.finish(p.default), p.tactic)
                       for p in params)
        info = DefInfo(name, cmd.pos, cmd.kind, params, el.finish(result) if result else TYPE,
                       cmd.attrs, doc=cmd.doc)
        if name in NATIVE_DEFS:
            if result is None:
                raise Fail(cmd.pos, f"'{name}' must declare its result type")
            info.native = True
            self.declare(name, cmd.pos, info)
            return
        op = op_convention(el, info, cmd.body)
        init = init_convention(el, cmd.body) if op is None else None
        if op or init:
            if result is None:
                raise Fail(cmd.pos, f"'{name}' must declare its result type")
            info.op, info.init, info.tensor_level = op, init, True
            self.declare(name, cmd.pos, info)
            return
        try:
            term, ty = el.elab(cmd.body, result, ctx)
            term = el.finish(term)
        except Fail:
            # As Lean does, keep a declaration whose header is fine, so that its uses are
            # checked against its signature instead of failing as unknown identifiers.
            if result is not None and name not in self.env:
                info.tensor_level = el.mentions_tensor(result)
                self.declare(name, cmd.pos, info)
            raise
        if result is None:
            info.result = el.finish(ty)
        info.tensor_level = el.mentions_tensor(info.result)
        if info.tensor_level:
            info.code = term
        elif not isinstance(term, Opaque):
            info.value = term
        # A model without tensors is valid Lean (the attribute's `validate` asks only for a
        # definition); the harness refuses it when asked to run it (`Program.find_model`).
        self.declare(name, cmd.pos, info)
