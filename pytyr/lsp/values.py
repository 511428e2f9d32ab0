"""The config's values for a file's models, and the fallback that substitutes them by name.

The values are those `tyr graph` and `tyr train` give a `@[model]`: the `config.json` beside
the file (or the one named), its `model` table, the dims the config's task feeds
(`pytyr.train.run.graph_values`: `b` from the batch, `t` from the sequence length), and the
fields only the data decides (`c.vocab`), from the data's metadata in the editor. The numbers
a hover shows come from running the models with them (`runs.py`); where no run reaches a term
(a file whose models cannot be instantiated), `Resolver` gives a binder the value of the model
argument of the same name when the value fits the binder's type (a `Nat`, a `Float`, a config
structure whose fields are all given), normalised by the checker's own `defeq.Normalizer`.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import read_json
from ..errors import TyrError
from ..lean.defeq import Normalizer
from ..lean.env import DefInfo, Env, StructInfo
from ..lean.program import Program
from ..lean.terms import (
    FLOAT,
    NAT,
    App,
    FLit,
    Lit,
    MetaCtx,
    StructV,
    Term,
    Var,
    instantiate,
    map_children,
    subst,
)


@dataclass
class Values:
    """A config's values for the models of a file, or why there are none."""

    path: Path | None = None  # the config file
    values: dict[str, Any] = field(default_factory=dict)  # model argument → value
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # each model's values
    problem: str | None = None  # a config that cannot be read or does not fit

    def __bool__(self) -> bool:
        return bool(self.values)


def config_beside(file: Path) -> Path | None:
    """`config.json` in the file's directory: the config `tyr train FILE` reads."""
    beside = file.parent / "config.json"
    try:
        return beside if beside.is_file() else None
    except OSError:
        return None


class _Declarations:
    """The model source `graph_values` asks for declarations: a checked program."""

    def __init__(self, prog: Program) -> None:
        self.prog = prog

    def declaration(self, model: str) -> Any:
        from ..pipeline import model_declaration

        return model_declaration(self.prog, model)


_CACHE: dict[tuple, Values] = {}
_CACHE_LOCK = threading.Lock()


def model_values(prog: Program, file: Path, config: Path | None, *, data: bool = False,
                 peek: bool = False) -> Values:
    """The values of every `@[model]` of `prog` under `config` (None: no config); with
    `data`, those only the task's data decides read from it, as `tyr graph` does (`tyr
    shapes`); with `peek` instead, from the data's metadata alone (the editor: a corpus is
    never read)."""
    if config is None:
        return Values()
    models = sorted((n, i) for n, i in prog.models().items() if i.tensor_level)  # runnable
    try:
        st = config.stat()
        key = (str(config.resolve()), st.st_mtime_ns, st.st_size, data, peek,
               tuple((n, repr(i.params)) for n, i in models))
    except OSError:
        key = None
    if key is not None:
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit
    out = _compute(prog, config, models, data or peek, peek)
    if key is not None:
        with _CACHE_LOCK:
            if len(_CACHE) > 64:
                _CACHE.clear()
            _CACHE[key] = out
    return out


def _compute(prog: Program, config: Path, models: list[tuple[str, DefInfo]], data: bool,
             peek: bool) -> Values:
    from ..train.run import graph_values  # loads the task registry (torch): on first use

    out = Values(config)
    if not models:
        return out
    try:
        raw = read_json(config, "config")
    except TyrError as err:
        out.problem = str(err)
        return out
    memo: dict[str, Any] = {}  # the data read once for every model
    for name, _ in models:
        try:
            vals = graph_values(_Declarations(prog), name, raw, str(config), data=data,
                                memo=memo, peek=peek)
        except TyrError as err:
            out.problem = out.problem or str(err).splitlines()[0]
            continue
        out.models[name] = vals
        for k, v in vals.items():
            out.values.setdefault(k, v)
    return out


class Resolver:
    """Substitutes a config's values into the types of one program's declarations."""

    def __init__(self, env: Env, values: dict[str, Any]) -> None:
        self.env, self.values = env, values
        self.norm = Normalizer(MetaCtx(), env.unfold)
        self._maps: dict[str, dict[int, Term]] = {}
        self._names: dict[str, dict[Term, Term]] = {}  # a structure value → its binder

    def binding(self, decl: str) -> dict[int, Term]:
        """uid of each binder of `decl` that a value fits → the value as a term."""
        if decl in self._maps:
            return self._maps[decl]
        info = self.env.get(decl)
        params = info.params if isinstance(info, (DefInfo, StructInfo)) else ()
        out: dict[int, Term] = {}
        names: dict[Term, Term] = {}
        for p in params:
            if p.name in self.values:
                t = self.value(self.values[p.name], subst(p.type, out))
                if t is not None:
                    out[p.uid] = t
                    if isinstance(t, StructV):
                        names.setdefault(t, Var(p.name, p.uid))
        self._maps[decl], self._names[decl] = out, names
        return out

    def value(self, v: Any, ty: Term) -> Term | None:
        """A config value as a term of type `ty`, if it is one."""
        ty = self.norm(ty)
        if ty == NAT:
            return Lit(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
        if ty == FLOAT:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
            return FLit(float(v)) if ok and math.isfinite(float(v)) else None
        info = self.env.get(ty.head) if isinstance(ty, App) else None
        if isinstance(info, StructInfo) and isinstance(v, dict) and not info.params:
            fields = []
            for f in info.fields:
                if f.name not in v:
                    return None
                t = self.value(v[f.name], f.type)
                if t is None:
                    return None
                fields.append((f.name, t))
            return StructV(info.name, tuple(fields))
        return None

    def resolve(self, t: Term, decl: str, mctx: MetaCtx | None = None) -> Term | None:
        """`t` with the config's values for `decl`'s binders, normalised; None when no value
        applies."""
        m = self.binding(decl)
        if not m:
            return None
        if mctx is not None:
            t = instantiate(t, mctx)
        out = subst(t, m)
        if out == t:
            return None
        try:
            out = self.norm(out)
        except Exception:  # noqa: BLE001 — a value too large to compute: show none
            return None
        return self._named(out, self._names[decl])

    def _named(self, t: Term, names: dict[Term, Term]) -> Term:
        """A whole config value is shown by its binder's name (`Block c`, not its fields)."""
        hit = names.get(t) if isinstance(t, StructV) else None
        return hit if hit is not None else map_children(t, lambda c: self._named(c, names))
