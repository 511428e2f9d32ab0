"""`tyr shapes FILE [--config CFG] [--line N]`: every binding of every declaration with its
type (and the type with the config's numbers), for terminals and CI logs — Lean's `#check`
and infoview, answered by the same record the language server hovers from.

`--line N` keeps the declaration that holds line N and adds every term elaborated on that
line. The config is `--config`, else the `config.json` beside the file, as for `tyr train`.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError, Diagnostic
from ..lean import syntax as S
from ..paths import input_file, read_text
from .analysis import analyse
from .lookup import Found, Lookup
from .runs import model_runs
from .scopes import Decl
from .values import Values, config_beside, model_values


def shapes(file: str, config: str | None = None, line: int | None = None
           ) -> tuple[list[str], list[Diagnostic]]:
    """The lines to print, and the file's diagnostics. Bad input is a ConfigError."""
    path = input_file(file, "Lean file")
    text = read_text(path, "Lean file")
    cfg = input_file(config, "config") if config else config_beside(path)
    a = analyse(path, text)
    n_lines = len(a.source.lines)
    if line is not None and not 1 <= line <= n_lines:
        raise ConfigError(f"{path}: --line {line} is out of range (the file has {n_lines} "
                          f"lines)")
    values = model_values(a.prog, path, cfg, data=True) if a.prog is not None else Values()
    if config and values.problem:
        raise ConfigError(values.problem)
    runs = model_runs(a.prog, values.models) if a.prog is not None else None
    look = Lookup(a, values, runs)
    decls = look.decls
    if line is not None:
        decls = [d for d in decls if d.span[0][0] <= line <= d.span[1][0]]
        if not decls:
            raise ConfigError(f"{path}:{line}: no declaration (def, structure, inductive) "
                              f"holds this line")
    out = [_config_line(cfg, values)]
    for d in decls:
        out += _decl(look, d)
        if line is not None:
            out += _line_terms(look, line)
    return out, a.diagnostics


def _config_line(cfg: Path | None, values: Values) -> str:
    if cfg is None:
        return "config: none (no config.json beside the file; types are shown as written)"
    if values.problem:
        return f"config: {cfg} not applied: {values.problem}"
    if not values.values:
        return f"config: {cfg} (no @[model] in the file to take its values)"
    shown = ", ".join(f"{k} = {v}" for k, v in values.values.items() if not isinstance(v, dict))
    return f"config: {cfg}" + (f" ({shown}, and the tables of its `model`)" if shown else "")


def _decl(look: Lookup, d: Decl) -> list[str]:
    head = d.bindings[0]
    (line, col) = head.at[0]
    kind = head.kind
    title = f"{look.a.shown}:{line}:{col}: {kind} {head.name}"
    result = _result(look, d)
    out = [title + (f" : {_typed(result)}" if result is not None else "")]
    rows = [(b.at[0], look.binding(b)) for b in d.bindings[1:]]
    width = max([len(f.name or "") for _, f in rows] + [1])
    for (ln, c), f in rows:
        out.append(f"  {ln}:{c}".ljust(10) + f"{(f.name or '').ljust(width)} : {_typed(f)}")
    return out


def _result(look: Lookup, d: Decl) -> Found | None:
    cmd = d.command
    if not isinstance(cmd, S.Def):
        return None
    if cmd.type is not None:
        t = look.by_expr.get(id(cmd.type))
        if t is not None:
            f = Found(look.a.spans[id(cmd.type)], type=look.shower.term(t.term, t, t.elab.mctx))
            look.resolve(f, t.term, t)
            return f
    t = look.by_expr.get(id(cmd.body))
    return look.typed(t) if t is not None else None


def _line_terms(look: Lookup, line: int) -> list[str]:
    out = [f"  terms on line {line}:"]
    seen = set()
    for span, t in sorted(look.a.typed, key=lambda x: (x[0][0], -x[0][1][1])):
        if span[0][0] != line or id(t.expr) in seen:
            continue
        seen.add(id(t.expr))
        f = look.typed(t)
        what = f.text or f"{look.a.source.lines[line - 1][span[0][1]:].strip()[:40]}…"
        out.append(f"    {span[0][0]}:{span[0][1]}".ljust(12) + f"{what} : {_typed(f)}")
    return out if len(out) > 1 else out + ["    (nothing elaborated on this line)"]


def _typed(f: Found) -> str:
    s = f.type or "?"
    if f.resolved:
        s += f"   [config: {f.resolved}]"
    elif f.value is not None:
        s += f"   [config: {f.value}]"
    return s
