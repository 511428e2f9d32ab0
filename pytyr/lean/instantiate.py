"""Instantiate a `@[model]` def with concrete configs and dims: the graph IR.

The model's binders decide what each argument is: a `Nat` (a dim such as `b`) or a structure
of numbers (a config) comes from the caller's values; a structure of tensors is the parameter
tree, named by field paths (`blocks.0.attn.w_q`); a `T s` / `IT s` is a graph input. The body
is then elaborated again with those values, which inlines every tensor-level def and makes
every typed op emit a node whose shape is its (now closed) result type.
"""
from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError, Diagnostic, LeanError, Pos, TyrError
from ..ir.graph import Graph, Input, Node, Output, Param, TensorType
from .elab import TENSOR_FAMILIES, Ctx, Elaborator, Fail
from .env import DefInfo, StructInfo
from .program import Program
from .terms import (FLOAT, NAT, App, Arr, Eq, FLit, InitV, Lit, Meta, NatOp, Opaque, Pair, Proj,
                    Rel, SLit, StructV, TensorV, Term, instantiate, is_closed, show, subst, unify)


class GraphBuilder:
    def __init__(self) -> None:
        self.inputs: list[Input] = []
        self.params: list[Param] = []
        self.nodes: list[Node] = []
        self.checkpoints: dict[str, Term] = {}

    def checkpoint_value(self, el: Elaborator, info: DefInfo, pos: Pos) -> Term:
        """A type provider's constant: its float tensors become parameters initialised from
        the checkpoint, at paths `Name.key`; the ones the model never uses are dropped."""
        if info.name not in self.checkpoints:
            self.checkpoints[info.name] = self._ckpt_tree(el, info, el.whnf(info.result), [], pos)
        return self.checkpoints[info.name]

    def _ckpt_tree(self, el: Elaborator, info: DefInfo, ty: Term, key: list[str], pos: Pos) -> Term:
        if isinstance(ty, App) and ty.head in TENSOR_FAMILIES:
            name = ".".join(key)
            if ty.head != "torch.T":
                return Opaque(f"integer tensor '{name}' of {info.name} (not a parameter)")
            shape, dtype = closed_tensor_type(el, ty, pos, f"'{info.name}.{name}'")
            path = f"{info.name}.{name}"
            self.params.append(Param(path, shape, dtype,
                                     {"kind": "checkpoint", "file": info.checkpoint, "key": name}))
            return TensorV(path)
        if isinstance(ty, App) and ty.head == "Vector":
            n = el.whnf(ty.args[1])
            assert isinstance(n, Lit)
            return Arr(tuple(self._ckpt_tree(el, info, el.whnf(ty.args[0]), key + [str(i)], pos)
                             for i in range(n.n)))
        sinfo = el.env[ty.head]
        return StructV(sinfo.name, tuple((f.name, self._ckpt_tree(el, info, el.whnf(f.type),
                                                                  key + [f.name], pos))
                                         for f in sinfo.fields))

    def prune_checkpoint_params(self, outputs: list[Output]) -> None:
        """Drop the checkpoint's tensors the model does not use, but keep whole lists whose
        elements it uses (`C.a.1.w` keeps `C.a.0.*` too): list paths stay 0…n-1."""
        used = {r for n in self.nodes for r in n.inputs} | {o.ref for o in outputs}
        lists = set()
        for path in used:
            parts = path.split(".")
            lists |= {".".join(parts[:i]) for i, seg in enumerate(parts) if seg.isdigit()}

        def keep(p: Param) -> bool:
            if p.init.get("kind") != "checkpoint" or p.path in used:
                return True
            parts = p.path.split(".")
            return any(seg.isdigit() and ".".join(parts[:i]) in lists
                       for i, seg in enumerate(parts))

        self.params = [p for p in self.params if keep(p)]

    def emit(self, el: Elaborator, info: DefInfo, values: list[Term], res: Term, pos: Pos) -> TensorV:
        assert info.op is not None
        byname = {p.name: v for p, v in zip(info.params, values)}
        refs = []
        for t in info.op.tensors:
            v = el.whnf(byname[t])
            if not isinstance(v, TensorV):
                what = v.tag if isinstance(v, Opaque) else show(v)
                raise Fail(pos, f"argument '{t}' of '{info.name}' is not a graph value: {what}")
            refs.append(v.ref)
        attrs = {a: to_python(el.whnf(byname[a]), pos, f"attribute '{a}' of '{info.name}'")
                 for a, _ in info.op.attrs}
        shape, dtype = closed_tensor_type(el, res, pos, f"the result of '{info.name}'")
        implicit = {p.name: to_python(el.whnf(byname[p.name]), pos,
                                      f"implicit argument '{p.name}' of '{info.name}'")
                    for p in info.params if p.kind == "implicit"}
        name = f"%{len(self.nodes)}"
        self.nodes.append(Node(name, info.op.prim, refs, attrs, shape, dtype,
                               f"{pos.file}:{pos.line}:{pos.col}", implicit))
        return TensorV(name)


def to_python(v: Term, pos: Pos, what: str) -> Any:
    if isinstance(v, Lit):
        return v.n
    if isinstance(v, SLit):
        return v.s
    if isinstance(v, FLit):
        if not math.isfinite(v.x):
            raise Fail(pos, f"{what} evaluates to {v.x}, which is not finite")
        return v.x
    if isinstance(v, Arr) and all(isinstance(x, Lit) for x in v.items):
        return [x.n for x in v.items]
    raise Fail(pos, f"{what} is not a closed value at instantiation: {show(v)}")


def closed_tensor_type(el: Elaborator, ty: Term, pos: Pos, what: str) -> tuple[tuple[int, ...], str]:
    t = el.whnf(instantiate(ty, el.mctx))
    if isinstance(t, App) and t.head in TENSOR_FAMILIES and len(t.args) == 1:
        s = t.args[0]
        if isinstance(s, Arr) and all(isinstance(x, Lit) for x in s.items):
            return tuple(x.n for x in s.items), TENSOR_FAMILIES[t.head]
    raise Fail(pos, f"{what} has type {show(t)}, which is not a closed tensor type")


def _is_config(el: Elaborator, sinfo: StructInfo) -> bool:
    return all(el.whnf(f.type) in (NAT, FLOAT) for f in sinfo.fields)


def instantiate_model(prog: Program, model: str, values: dict[str, Any]) -> Graph:
    """Build the graph of `model` for the given argument values (keyed by binder name)."""
    info = prog.find_model(model)
    el = prog.elab
    el.builder = GraphBuilder()
    el.pending = []
    try:
        return _instantiate(prog, el, info, dict(values))
    except Fail as err:
        raise LeanError([Diagnostic(err.pos, err.msg + f" (while instantiating '{info.name}')")]) from None
    finally:
        el.builder = None


def _instantiate(prog: Program, el: Elaborator, info: DefInfo, values: dict[str, Any]) -> Graph:
    b: GraphBuilder = el.builder
    names = {p.name for p in info.params}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"model '{info.name}' has no argument {', '.join(map(repr, unknown))}; "
                          f"its arguments are {', '.join(p.name for p in info.params)}")
    m: dict[int, Term] = {}
    ctx = Ctx()
    config_out: dict[str, Any] = {}
    for p in info.params:
        pty = el.whnf(subst(p.type, m))
        if pty in (NAT, FLOAT):
            v = _number(values, p.name, pty == NAT, p.name)
            config_out[p.name] = v
            term: Term = Lit(v) if pty == NAT else FLit(float(v))
        elif isinstance(pty, (Eq, Rel)):
            # A hypothesis of the model (`h : t ≤ c.block`): decided on the values given.
            try:
                el.decide(info.name, p, pty, info.pos)
            except Fail:
                raise ConfigError(f"these values violate the hypothesis '{p.name} : "
                                  f"{show(instantiate(subst(p.type, {}), el.mctx))}' of model "
                                  f"'{info.name}': {_violation(el, p.type, m)}") from None
            term = Opaque("proof")
        elif isinstance(pty, App) and pty.head in TENSOR_FAMILIES:
            shape, dtype = closed_tensor_type(el, pty, info.pos, f"input '{p.name}'")
            b.inputs.append(Input(p.name, shape, dtype))
            term = TensorV(p.name)
        elif isinstance(pty, App) and isinstance(el.env.get(pty.head), StructInfo):
            sinfo = el.env[pty.head]
            if _is_config(el, sinfo):
                raw = values.get(p.name)
                if not isinstance(raw, dict):
                    raise ConfigError(f"missing config '{p.name}' : {show(pty)} (a table of "
                                      f"{', '.join(f.name for f in sinfo.fields)})"
                                      if raw is None else
                                      f"config '{p.name}' must be a table of fields, got {raw!r}")
                term = _config(el, sinfo, pty, raw, p.name)
                config_out[p.name] = dict(raw)
            else:
                term = _params(el, sinfo, pty, "", info.pos)
        else:
            raise ConfigError(f"argument '{p.name}' of model '{info.name}' has type {show(pty)}; "
                              f"a model takes dims (Nat), configs, a parameter structure and tensors")
        m[p.uid] = term
        ctx = ctx.push(p.name, term, pty)
    result = subst(info.result, m)
    term, _ = el.elab(info.body, result, ctx)
    outputs = []
    for i, t in enumerate(_flatten(el, term)):
        if not isinstance(t, TensorV):
            raise Fail(info.pos, f"output {i} of '{info.name}' is not a tensor")
        outputs.append(Output(f"out{i}" if i or isinstance(el.whnf(term), Pair) else "out", t.ref))
    b.prune_checkpoint_params(outputs)
    names_seen: set[str] = set()
    for n in [i.name for i in b.inputs] + [p.path for p in b.params]:
        if n in names_seen:
            raise ConfigError(f"input and parameter names clash: '{n}'; rename one of them")
        names_seen.add(n)
    return Graph(info.name, b.inputs, b.params, b.nodes, outputs, config_out, str(info.pos.file))


def _violation(el: Elaborator, prop: Term, m: dict[int, Term]) -> str:
    """`4 % 3 = 0 is false (NanoChatConfig.n_head c = 4, c.n_kv_head = 3)`: the proposition
    with each of its quantities evaluated, and what each quantity was."""
    shown: dict[str, str] = {}

    def leaves(t: Term) -> Term:
        if isinstance(t, Eq):
            return Eq(leaves(t.a), leaves(t.b))
        if isinstance(t, (NatOp, Rel)):
            return type(t)(t.op, leaves(t.a), leaves(t.b))
        value = el.whnf(subst(t, m))
        if not isinstance(t, Lit) and isinstance(value, Lit):
            shown.setdefault(show(t), show(value))
        return value

    text = f"{show(leaves(prop))} is false"
    return text + (f" ({', '.join(f'{k} = {v}' for k, v in shown.items())})" if shown else "")


def _flatten(el: Elaborator, t: Term) -> list[Term]:
    t = el.whnf(t)
    if isinstance(t, Pair):
        return _flatten(el, t.a) + _flatten(el, t.b)
    return [t]


def _number(values: dict[str, Any], key: str, nat: bool, shown: str) -> int | float:
    if key not in values:
        raise ConfigError(f"missing value for '{shown}' : {'Nat' if nat else 'Float'}")
    v = values[key]
    if nat:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"'{shown}' must be a natural number (Nat), got {v!r}")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"'{shown}' must be a finite number (Float), got {v!r}")
    return float(v)


def _config(el: Elaborator, sinfo: StructInfo, sty: App, raw: dict[str, Any], key: str) -> StructV:
    known = {f.name for f in sinfo.fields}
    extra = sorted(set(raw) - known)
    if extra:
        raise ConfigError(f"unknown key{'s' if len(extra) > 1 else ''} "
                          f"{', '.join(f'{key}.{k}' for k in extra)} for {show(sty)} "
                          f"(fields: {', '.join(f.name for f in sinfo.fields)})")
    fields = []
    for f in sinfo.fields:
        nat = el.whnf(f.type) == NAT
        v = _number(raw, f.name, nat, f"{key}.{f.name}")
        fields.append((f.name, Lit(v) if nat else FLit(float(v))))
    return StructV(sinfo.name, tuple(fields))


def _vector(el: Elaborator, vty: App, path: str, f: Any, ctx: Ctx) -> Arr:
    """`blocks : Vector (Block c) c.n_layer`: elements at `blocks.0`, `blocks.1`, ..."""
    elem, n = el.whnf(vty.args[0]), el.whnf(vty.args[1])
    if not isinstance(n, Lit):
        raise Fail(f.pos, f"the length of parameter vector '{path}' is {show(n)}, not a number")
    if not (isinstance(elem, App) and isinstance(el.env.get(elem.head), StructInfo)):
        raise Fail(f.pos, f"parameter vector '{path}' must hold structures of tensors, "
                          f"not {show(elem)}")
    return Arr(tuple(_params(el, el.env[elem.head], elem, f"{path}.{i}.", f.pos)
                     for i in range(n.n)))


def _params(el: Elaborator, sinfo: StructInfo, sty: App, prefix: str, pos: Pos) -> StructV:
    b: GraphBuilder = el.builder
    m: dict[int, Term] = {p.uid: a for p, a in zip(sinfo.params, sty.args)}
    ctx = Ctx()
    for p, a in zip(sinfo.params, sty.args):
        ctx = ctx.push(p.name, a, p.type)
    fields = []
    for f in sinfo.fields:
        path = prefix + f.name
        fty = el.whnf(subst(f.type, m))
        if isinstance(fty, App) and fty.head in TENSOR_FAMILIES:
            shape, dtype = closed_tensor_type(el, fty, f.pos, f"parameter '{path}'")
            if f.default is None:
                raise Fail(f.pos, f"parameter '{path}' has no initialiser; write "
                                  f"`{f.name} : {show(fty)} := normal 0.02` (or zeros, ones, uniform)")
            init, _ = el.elab(f.default, fty, ctx)
            init = el.whnf(init)
            if not isinstance(init, InitV):
                raise Fail(f.pos, f"the default of parameter '{path}' must be an initialiser "
                                  f"(normal, uniform, zeros, ones)")
            spec: dict[str, Any] = {"kind": init.kind}
            for k, v in init.args:
                spec[k] = to_python(
                    el.whnf(v), f.pos, f"initialiser argument '{k}' of '{path}'")
            b.params.append(Param(path, shape, dtype, spec))
            val: Term = TensorV(path)
        elif isinstance(fty, App) and isinstance(el.env.get(fty.head), StructInfo):
            val = _params(el, el.env[fty.head], fty, path + ".", f.pos)
        elif isinstance(fty, App) and fty.head == "Vector":
            val = _vector(el, fty, path, f, ctx)
        else:
            raise Fail(f.pos, f"field '{path}' : {show(fty)} of a parameter structure must be a "
                              f"tensor or a structure of tensors")
        fields.append((f.name, val))
        m[f.uid] = val
        ctx = ctx.push(f.name, val, fty)
    return StructV(sinfo.name, tuple(fields))


class LeanSignatures:
    """Op typing rules read from `Tyr/*.lean`: what the IR validator re-derives shapes with."""

    def __init__(self, prog: Program | None = None):
        from .program import library
        self.prog = prog or library()
        self.table = self.prog.ops()

    def __contains__(self, op: str) -> bool:
        return op in self.table

    def infer(self, op: str, inputs: list[TensorType], attrs: dict[str, Any],
              implicit: dict[str, Any] | None = None) -> TensorType:
        info = self.table[op]
        el = self.prog.elab
        assert info.op is not None
        if len(inputs) != len(info.op.tensors):
            raise TyrError(f"'{op}' takes {len(info.op.tensors)} tensor input"
                           f"{'s' if len(info.op.tensors) != 1 else ''}, got {len(inputs)}")
        want_attrs = {a for a, _ in info.op.attrs}
        extra = sorted(set(attrs) - want_attrs)
        if extra:
            raise TyrError(f"'{op}' has no attribute {', '.join(map(repr, extra))}")
        imps = {p.name for p in info.params if p.kind == "implicit"}
        extra = sorted(set(implicit or {}) - imps)
        if extra:
            raise TyrError(f"'{op}' has no implicit argument {', '.join(map(repr, extra))}")
        m: dict[int, Term] = {}
        it = iter(inputs)
        snap = el.mctx.snapshot()
        try:
            for p in info.params:
                pty = subst(p.type, m)
                if p.kind == "implicit":
                    given_imp = (implicit or {}).get(p.name)
                    m[p.uid] = (el.mctx.fresh(p.name) if given_imp is None
                                else _attr_term(op, p.name, given_imp, el.whnf(pty)))
                elif p.name in info.op.tensors:
                    given = next(it)
                    fam = "torch.T" if given.dtype == "f32" else "torch.IT"
                    gty = App(fam, (Arr(tuple(Lit(d) for d in given.shape)),))
                    if not unify(gty, pty, el.norm):
                        raise TyrError(f"input '{p.name}' of '{op}' has type {given} but "
                                       f"{el.show(pty)} is expected")
                    m[p.uid] = TensorV(p.name)
                elif p.name in want_attrs:
                    if p.name not in attrs:
                        raise TyrError(f"'{op}' needs the attribute '{p.name}'")
                    m[p.uid] = _attr_term(op, p.name, attrs[p.name], el.whnf(pty))
                elif p.tactic is not None or el._is_prop(pty):
                    el.decide(op, p, pty, Pos("<graph>", 0, 0))
            res = el.whnf(instantiate(subst(info.result, m), el.mctx))
            if not is_closed(res):
                raise TyrError(f"'{op}': the result type {show(res)} is not determined by the inputs")
            shape, dtype = closed_tensor_type(el, res, Pos("<graph>", 0, 0), f"'{op}'")
            return TensorType(shape, dtype)
        except Fail as err:
            raise TyrError(err.msg) from None
        finally:
            el.mctx.restore(snap)


def _attr_term(op: str, name: str, v: Any, ty: Term) -> Term:
    if ty == NAT and isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return Lit(v)
    if ty == FLOAT and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return FLit(float(v))
    if isinstance(ty, App) and ty.head == "Array" and isinstance(v, list) and all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        return Arr(tuple(Lit(x) for x in v))
    raise TyrError(f"attribute '{name}' of '{op}' must be a {show(ty)}, got {v!r}")


_ = (Meta, Proj)
