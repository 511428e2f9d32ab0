"""Instantiate a `@[model]` def with concrete configs and dims: the graph IR.

The model's binders decide what each argument is: a `Nat` (a dim such as `b`) or a structure
of numbers (a config) comes from the caller's values; a structure of tensors is the parameter
tree, named by field paths (`blocks.0.attn.w_q`); a `T s` / `IT s n` is a graph input; a
hypothesis (`h : t ≤ c.block`) is decided on the values. The checked body is then evaluated
(`evaluate.py`): every typed op emits a node whose shape is its (now closed) result type.
Nothing of the checked program is written, so instantiations may run concurrently.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable

from ..errors import ConfigError, Diagnostic, LeanError, Pos
from ..ir.graph import Graph, Input, Output, Param
from .env import TENSOR_FAMILIES, DefInfo, StructInfo
from .evaluate import DEFAULT_MAX_UNROLL, INT64_MAX, Evaluator, brief, closed_tensor_type, to_python
from .failure import Fail
from .numerals import float_of_nat
from .obligations import decide
from .program import Program
from .signatures import LeanSignatures
from .terms import (
    FLOAT,
    NAT,
    App,
    Arr,
    Eq,
    FLit,
    InitV,
    Lit,
    NatOp,
    Opaque,
    Pair,
    Rel,
    StructV,
    TensorV,
    Term,
    show,
    subst,
)

__all__ = ["LeanSignatures", "instantiate_model"]


def instantiate_model(prog: Program, model: str, values: dict[str, Any], *,
                      max_unroll: int | None = None,
                      seen: Callable[[dict[int, Term]], None] | None = None) -> Graph:
    """Build the graph of `model` for the given argument values (keyed by binder name).
    `max_unroll` bounds the elements of one `Vector` (layers) the model may unroll; default
    `$TYR_MAX_UNROLL`, else 4096. `seen` is told the values of every scope evaluated
    (`Evaluator.seen`)."""
    info = prog.find_model(model)
    ev = Evaluator(prog.env, max_unroll if max_unroll is not None else _max_unroll())
    ev.seen = seen
    try:
        return _instantiate(ev, info, dict(values))
    except Fail as err:
        raise LeanError([Diagnostic(err.pos, err.msg + f" (while instantiating "
                                                       f"'{info.name}')")]) from None


def _max_unroll() -> int:
    raw = os.environ.get("TYR_MAX_UNROLL")
    if raw is None:
        return DEFAULT_MAX_UNROLL
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        raise ConfigError(f"TYR_MAX_UNROLL must be a natural number, got {raw!r}")
    return n


def _instantiate(ev: Evaluator, info: DefInfo, values: dict[str, Any]) -> Graph:
    names = {p.name for p in info.params}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"model '{info.name}' has no argument {', '.join(map(repr, unknown))}; "
                          f"its arguments are {', '.join(p.name for p in info.params)}")
    s: dict[int, Term] = {}
    config_out: dict[str, Any] = {}
    for p in info.params:
        pty = ev.norm(subst(p.type, s))
        if pty in (NAT, FLOAT):
            v = _number(values, p.name, pty == NAT, p.name)
            config_out[p.name] = v
            term: Term = Lit(v) if pty == NAT else FLit(v)
        elif isinstance(pty, (Eq, Rel)):
            # A hypothesis of the model (`h : t ≤ c.block`): decided on the values given.
            try:
                decide(ev.norm, info.name, p, pty, info.pos)
            except Fail:
                raise ConfigError(f"these values violate the hypothesis '{p.name} : "
                                  f"{show(p.type)}' of model '{info.name}': "
                                  f"{_violation(ev, p.type, s)}") from None
            term = Opaque("proof")
        elif isinstance(pty, App) and pty.head in TENSOR_FAMILIES:
            tt = closed_tensor_type(pty, info.pos, f"input '{p.name}'")
            ev.inputs.append(Input(p.name, tt.shape, tt.dtype, tt.bound))
            term = TensorV(p.name)
        elif isinstance(pty, App) and isinstance(ev.env.get(pty.head), StructInfo):
            sinfo = ev.env.get(pty.head)
            if _is_config(ev, sinfo):
                raw = values.get(p.name)
                if not isinstance(raw, dict):
                    raise ConfigError(f"missing config '{p.name}' : {show(pty)} (a table of "
                                      f"{', '.join(f.name for f in sinfo.fields)})"
                                      if raw is None else
                                      f"config '{p.name}' must be a table of fields, got "
                                      f"{brief(raw)}")
                term = _config(ev, sinfo, pty, raw, p.name)
                config_out[p.name] = dict(raw)
            else:
                term = _params(ev, sinfo, pty, "", info.pos)
        else:
            raise ConfigError(f"argument '{p.name}' of model '{info.name}' has type "
                              f"{show(pty)}; a model takes dims (Nat), configs, a parameter "
                              f"structure and tensors")
        s[p.uid] = term
    assert info.code is not None
    out = ev.scope(info.code, s)
    outputs = []
    flat = _flatten(out)
    for i, t in enumerate(flat):
        if not isinstance(t, TensorV):
            raise Fail(info.pos, f"output {i} of '{info.name}' is not a tensor")
        outputs.append(Output(f"out{i}" if len(flat) > 1 else "out", t.ref))
    ev.prune_checkpoint_params(outputs)
    seen: set[str] = set()
    for n in [i.name for i in ev.inputs] + [p.path for p in ev.params]:
        if n in seen:
            raise ConfigError(f"input and parameter names clash: '{n}'; rename one of them")
        seen.add(n)
    return Graph(info.name, ev.inputs, ev.params, ev.nodes, outputs, config_out,
                 str(info.pos.file), stacks=ev.stacks)


def _violation(ev: Evaluator, prop: Term, s: dict[int, Term]) -> str:
    """`4 % 3 = 0 is false (NanoChatConfig.n_head c = 4, c.n_kv_head = 3)`: the proposition
    with each of its quantities evaluated, and what each quantity was."""
    shown: dict[str, str] = {}

    def leaves(t: Term) -> Term:
        if isinstance(t, Eq):
            return Eq(leaves(t.a), leaves(t.b))
        if isinstance(t, (NatOp, Rel)):
            return type(t)(t.op, leaves(t.a), leaves(t.b))
        value = ev.norm(subst(t, s))
        if not isinstance(t, Lit) and isinstance(value, Lit):
            shown.setdefault(show(t), show(value))
        return value

    text = f"{show(leaves(prop))} is false"
    return text + (f" ({', '.join(f'{k} = {v}' for k, v in shown.items())})" if shown else "")


def _flatten(t: Term) -> list[Term]:
    if isinstance(t, Pair):
        return _flatten(t.a) + _flatten(t.b)
    return [t]


def _is_config(ev: Evaluator, sinfo: StructInfo) -> bool:
    return all(ev.norm(f.type) in (NAT, FLOAT) for f in sinfo.fields)


def _number(values: dict[str, Any], key: str, nat: bool, shown: str) -> Any:
    if key not in values:
        raise ConfigError(f"missing value for '{shown}' : {'Nat' if nat else 'Float'}")
    v = values[key]
    if nat:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"'{shown}' must be a natural number (Nat), got {brief(v)}")
        if v > INT64_MAX:
            raise ConfigError(f"'{shown}' = {brief(v)} does not fit the graph IR's 64-bit "
                              f"integers (at most {INT64_MAX})")
        return v
    x = float_of_nat(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else v
    if isinstance(v, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ConfigError(f"'{shown}' must be a finite number (Float), got {brief(v)}")
    return float(x)


def _config(ev: Evaluator, sinfo: StructInfo, sty: App, raw: dict[str, Any], key: str) -> StructV:
    known = {f.name for f in sinfo.fields}
    extra = sorted(set(raw) - known)
    if extra:
        raise ConfigError(f"unknown key{'s' if len(extra) > 1 else ''} "
                          f"{', '.join(f'{key}.{k}' for k in extra)} for {show(sty)} "
                          f"(fields: {', '.join(f.name for f in sinfo.fields)})")
    fields = []
    for f in sinfo.fields:
        nat = ev.norm(f.type) == NAT
        v = _number(raw, f.name, nat, f"{key}.{f.name}")
        fields.append((f.name, Lit(v) if nat else FLit(v)))
    return StructV(sinfo.name, tuple(fields))


def _params(ev: Evaluator, sinfo: StructInfo, sty: App, prefix: str, pos: Pos) -> StructV:
    """The parameter tree of a structure of tensors: a parameter per tensor field, at its
    field path, initialised by the field's default (an initialiser, evaluated now)."""
    fields = []
    for name, kind, data, fpos in _layout(ev, sinfo, sty, prefix):
        path = prefix + name
        if kind == "tensor":
            tt, spec = data
            ev.params.append(Param(path, tt.shape, tt.dtype, dict(spec)))
            val: Term = TensorV(path)
        elif kind == "struct":
            val = _params(ev, ev.env.get(data.head), data, path + ".", fpos)
        else:
            elem, n = data
            ev.check_unroll(n, path, fpos)
            val = Arr(tuple(_params(ev, ev.env.get(elem.head), elem, f"{path}.{i}.", fpos)
                            for i in range(n)))
        fields.append((name, val))
    return StructV(sinfo.name, tuple(fields))


def _layout(ev: Evaluator, sinfo: StructInfo, sty: App,
            prefix: str) -> list[tuple[str, str, Any, Pos]]:
    """What each field of `sty` is, with paths left out: every layer of a model has the same
    layout, computed once per instantiation (errors name the first path that has it)."""
    hit = ev.layouts.get(sty)
    if hit is not None:
        return hit
    s: dict[int, Term] = {p.uid: a for p, a in zip(sinfo.params, sty.args)}
    out: list[tuple[str, str, Any, Pos]] = []
    for f in sinfo.fields:
        path = prefix + f.name
        fty = ev.norm(subst(f.type, s))
        if isinstance(fty, App) and fty.head in TENSOR_FAMILIES:
            tt = closed_tensor_type(fty, f.pos, f"parameter '{path}'")
            if f.default is None:
                raise Fail(f.pos, f"parameter '{path}' has no initialiser; write "
                                  f"`{f.name} : {show(fty)} := normal 0.02` (or zeros, ones, "
                                  f"uniform, interval, fill, ramp)")
            init = ev.eval(f.default, s)
            if not isinstance(init, InitV):
                raise Fail(f.pos, f"the default of parameter '{path}' must be an initialiser "
                                  f"(normal, uniform, zeros, ones, interval, fill, ramp)")
            spec: dict[str, Any] = {"kind": init.kind}
            for k, v in init.args:
                spec[k] = to_python(v, f.pos, f"initialiser argument '{k}' of '{path}'")
            out.append((f.name, "tensor", (tt, spec), f.pos))
            s[f.uid] = Opaque(f.name)
        elif isinstance(fty, App) and isinstance(ev.env.get(fty.head), StructInfo):
            out.append((f.name, "struct", fty, f.pos))
            s[f.uid] = Opaque(f.name)
        elif isinstance(fty, App) and fty.head == "Vector":
            elem, n = ev.norm(fty.args[0]), ev.norm(fty.args[1])
            if not isinstance(n, Lit):
                raise Fail(f.pos, f"the length of parameter vector '{path}' is {show(n)}, "
                                  f"not a number")
            if not (isinstance(elem, App) and isinstance(ev.env.get(elem.head), StructInfo)):
                raise Fail(f.pos, f"parameter vector '{path}' must hold structures of "
                                  f"tensors, not {show(elem)}")
            out.append((f.name, "vector", (elem, n.n), f.pos))
            s[f.uid] = Opaque(f.name)
        else:
            raise Fail(f.pos, f"field '{path}' : {show(fty)} of a parameter structure must be "
                              f"a tensor or a structure of tensors")
    ev.layouts[sty] = out
    return out
