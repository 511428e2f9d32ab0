"""Names a source binds, and where each is visible: declarations, binders, `let`s, fields.

Read from the syntax alone (a file that does not elaborate still has its names): each binding
has the span of its name, its kind, the syntax of its type where it is written, and the span
in which it can be referred to. Go-to-definition, document symbols and `tyr shapes` use them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..lean import syntax as S
from .text import Point, Source, Span, children, command_exprs, contains, expr_spans

KINDS = ("def", "structure", "inductive", "field", "ctor", "binder", "let", "fun")


@dataclass(frozen=True)
class Binding:
    name: str
    kind: str  # one of KINDS
    at: Span  # the name
    scope: Span  # where the name can be used (empty for globals: they are looked up)
    type: S.Expr | None = None  # as written, if written
    value: S.Expr | None = None  # a `let`'s value, a field's default
    command: S.Command | None = None  # the declaration it belongs to
    doc: str | None = None


@dataclass
class Decl:
    """A declaration: its command, full extent, and the names it binds (itself first)."""

    command: S.Command
    span: Span
    bindings: list[Binding]


def declarations(src: Source, module: S.Module, spans: dict[int, Span] | None = None
                 ) -> list[Decl]:
    spans = spans if spans is not None else expr_spans(
        src, [x for c in module.commands for x in command_exprs(c)])
    out = []
    for cmd in module.commands:
        if not isinstance(cmd, (S.Def, S.Structure, S.Inductive)):
            continue
        name_at = _token(src, cmd.pos)
        if name_at is None:
            continue
        end = max([name_at[1]] + [spans[id(x)][1] for x in command_exprs(cmd)
                                  if id(x) in spans])
        start = _keyword_before(src, cmd.pos)
        whole = (start, end)
        kind = {S.Def: "def", S.Structure: "structure", S.Inductive: "inductive"}[type(cmd)]
        bs = [Binding(cmd.name, kind, name_at, (end, end), command=cmd,
                      doc=getattr(cmd, "doc", None))]
        after = (name_at[1], end)
        bs += _binders(src, cmd.binders, after, cmd, spans)
        if isinstance(cmd, S.Structure):
            for f in cmd.fields:
                at = _token(src, f.pos)
                if at is not None:
                    bs.append(Binding(f.name, "field", at, (at[1], end), f.type, f.default,
                                      cmd, f.doc))
        elif isinstance(cmd, S.Inductive):
            for c in cmd.ctors:
                at = _token(src, c.pos)
                if at is not None:
                    bs.append(Binding(c.name, "ctor", at, (end, end), command=cmd))
                    bs += _binders(src, c.binders, (at[1], end), cmd, spans)
        elif isinstance(cmd, S.Def):
            roots = ([cmd.type] if cmd.type is not None else []) + [cmd.body]
            bs += _locals(src, roots, cmd, spans)
        out.append(Decl(cmd, whole, bs))
    return out


def _token(src: Source, pos) -> Span | None:
    i = src.index.get((pos.line, pos.col))
    return src.token_span(i) if i is not None else None


def _keyword_before(src: Source, pos) -> Point:
    """The start of a declaration: its keyword, attributes included (`@[model] def`)."""
    k = src.index.get((pos.line, pos.col))
    if k is None:
        return pos.line, pos.col
    if k > 0 and src.toks[k - 1].kind == "keyword" and src.toks[k - 1].text in (
            "def", "abbrev", "structure", "inductive"):
        k -= 1
    if k > 0 and src.toks[k - 1].text == "]":
        m = src.match.get(k - 1)
        if m is not None and src.toks[m].text == "@[":
            k = m
    return src.token_span(k)[0]


def _binders(src: Source, binders: list[S.Binder], scope: Span, cmd: S.Command,
             spans: dict[int, Span]) -> list[Binding]:
    out = []
    for b in binders:
        at = _token(src, b.pos)
        if at is not None:
            out.append(Binding(b.name, "binder", at, (at[1], scope[1]), b.type, b.default, cmd))
    return out


def _locals(src: Source, roots: list[S.Expr], cmd: S.Command,
            spans: dict[int, Span]) -> list[Binding]:
    """`let` names and `fun` binders under `roots`, each visible in its body."""
    out: list[Binding] = []
    stack = list(reversed(roots))
    while stack:
        e = stack.pop()
        if isinstance(e, S.Let) and id(e.body) in spans:
            i = src.index.get((e.pos.line, e.pos.col))
            if i is not None and i + 1 < len(src.toks):
                out.append(Binding(e.name, "let", src.token_span(i + 1), spans[id(e.body)],
                                   e.type, e.value, cmd))
        elif isinstance(e, (S.Fun, S.Pi)) and id(e.body) in spans:
            body = spans[id(e.body)]
            for b in e.binders:
                at = _token(src, b.pos)
                if at is not None:
                    out.append(Binding(b.name, "fun", at, (at[1], body[1]), b.type, None, cmd))
        stack.extend(reversed(children(e)))
    return out


def decl_at(decls: list[Decl], p: Point) -> Decl | None:
    for d in decls:
        if d.span[0] <= p <= d.span[1]:
            return d
    return None


def binding_named_at(decls: list[Decl], p: Point) -> Binding | None:
    """The binding whose name is under `p`."""
    d = decl_at(decls, p)
    for b in d.bindings if d else []:
        if contains(b.at, p):
            return b
    return None


def visible(decls: list[Decl], name: str, p: Point) -> Binding | None:
    """The innermost local binding of `name` whose scope holds `p`."""
    d = decl_at(decls, p)
    best = None
    for b in d.bindings if d else []:
        if b.name == name and b.kind in ("binder", "let", "fun", "field") \
                and contains(b.scope, p):
            if best is None or b.scope[0] >= best.scope[0]:
                best = b
    return best
