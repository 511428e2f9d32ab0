"""Completion: names in scope with their signatures; after `x.`, the fields of `x`'s structure
and the functions its type has (`c.n_embd`); after `Ns.`, the declarations of a namespace.

A half-typed `p.` does not parse, so the type of `p` comes from a check of the text with the
dot and the partial name taken out (`patched`), or else from the newest check that parsed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp

from ..lean import syntax as S
from ..lean.env import DefInfo, IndInfo, StructInfo
from ..lean.failure import Fail
from ..lean.terms import App, subst
from .analysis import Analysis
from .display import Shower, signature
from .record import Typed
from .text import Point

_WORD = re.compile(r"[^\s()\[\]{}⟨⟩,:=#@+\-*/%<>≤×→|;\"]*")  # matched backwards: linear
MAX_ITEMS = 400


@dataclass
class Site:
    """What is being completed: `prefix.partial` (prefix empty for a plain name)."""

    prefix: str
    partial: str
    start: Point  # where `prefix` starts
    dot: bool


def site(line_text: str, p: Point) -> Site:
    word = _WORD.match(line_text[:p[1]][::-1]).group()[::-1]  # type: ignore[union-attr]
    start = (p[0], p[1] - len(word))
    if "." in word:
        prefix, _, partial = word.rpartition(".")
        return Site(prefix, partial, start, True)
    return Site("", word, start, False)


def patched(text: str, s: Site, p: Point) -> str:
    """The text with `.partial` removed after `prefix`, so that `prefix` is a term again."""
    lines = text.split("\n")
    line = lines[p[0] - 1]
    cut = s.start[1] + len(s.prefix)
    lines[p[0] - 1] = line[:cut] + line[p[1]:]
    return "\n".join(lines)


def items(s: Site, a: Analysis, fallback: Analysis | None) -> list[lsp.CompletionItem]:
    """The completions at `s` from `a` (a check of the patched text when `s.dot`)."""
    env_a = a if a.prog is not None and a.prog.env is not None else fallback
    if env_a is None or env_a.prog is None:
        return []
    env = env_a.prog.env
    shower = Shower(env)
    out: list[lsp.CompletionItem] = []
    if s.dot:
        spaces = _namespaces(env_a, s.prefix)
        if spaces:
            out = _globals(env, shower, spaces, s.partial, qualified=False)
        else:
            where = _context(a, s.start, s.prefix) or (
                _context(fallback, s.start, s.prefix) if fallback else None)
            if where is not None:
                out = _members(where, s, shower)
    else:
        opens = _opens(env_a)
        out = _locals(a, fallback, s, shower) + _globals(env, shower, [""] + opens, s.partial,
                                                         qualified=True)
    return out[:MAX_ITEMS]


def _opens(a: Analysis) -> list[str]:
    mod = a.module
    return [n for c in (mod.commands if mod else []) if isinstance(c, S.Open) for n in c.names]


def _namespaces(a: Analysis, prefix: str) -> list[str]:
    env = a.prog.env
    cands = [prefix] + [f"{o}.{prefix}" for o in _opens(a)]
    return [c for c in cands if c in env.namespaces]


def _context(a: Analysis | None, p: Point, prefix: str) -> Typed | None:
    """A term elaborated where `prefix`'s first name is a local: at `p`, else the nearest
    before it on the same declaration's lines."""
    if a is None:
        return None
    first = prefix.split(".")[0]
    best = None
    for span, t in a.typed:
        if t.ctx.get(first) is None or span[0] > p:
            continue
        if best is None or span[0] >= best[0]:
            best = (span[0], t)
    return best[1] if best else None


def _members(where: Typed, s: Site, shower: Shower) -> list[lsp.CompletionItem]:
    el = where.elab
    el.quiet = True
    try:
        _, ty = el.elab(S.Ident(where.expr.pos, s.prefix), None, where.ctx)
        wty = el.whnf(ty)
    except (Fail, RecursionError):
        return []
    finally:
        el.quiet = False
    if not isinstance(wty, App):
        return []
    env, out = el.env, []
    info = env.get(wty.head)
    if isinstance(info, StructInfo):
        m = {p.uid: arg for p, arg in zip(info.params, wty.args)}
        for fi in info.fields:
            if fi.name.startswith(s.partial):
                ty_s = shower.plain(subst(fi.type, m))
                out.append(lsp.CompletionItem(
                    fi.name, kind=lsp.CompletionItemKind.Field, detail=ty_s,
                    documentation=_doc(fi.doc)))
    head = "torch.Shape" if wty.head == "Array" and f"torch.Shape.{s.partial}" in env else \
        wty.head
    for name, d in env.decls.items():
        if name.startswith(head + ".") and isinstance(d, DefInfo):
            short = name[len(head) + 1:]
            if "." not in short and short.startswith(s.partial):
                out.append(lsp.CompletionItem(
                    short, kind=lsp.CompletionItemKind.Method,
                    detail=signature(name, d, shower.plain), documentation=_doc(d.doc)))
    return out


def _locals(a: Analysis, fallback: Analysis | None, s: Site,
            shower: Shower) -> list[lsp.CompletionItem]:
    where = None
    for an in (a, fallback):
        if an is None:
            continue
        for span, t in an.typed:
            if span[0] <= s.start and (where is None or span[0] >= where[0]):
                where = (span[0], t)
        if where is not None:
            break
    if where is None:
        return []
    out, seen, c = [], set(), where[1].ctx
    while c is not None and c.local is not None:
        n = c.local.name
        if n not in seen and n.startswith(s.partial):
            seen.add(n)
            out.append(lsp.CompletionItem(
                n, kind=lsp.CompletionItemKind.Variable,
                detail=shower.term(c.local.type, where[1], where[1].elab.mctx)))
        c = c.parent
    return out


def _globals(env: Any, shower: Shower, spaces: list[str], partial: str,
             qualified: bool) -> list[lsp.CompletionItem]:
    """Declarations directly in `spaces` ("" the root): ops and defs with signatures."""
    out, seen = [], set()
    for name, info in env.decls.items():
        for ns in spaces:
            short = name[len(ns) + 1:] if ns and name.startswith(ns + ".") else (
                name if not ns else None)
            if short is None or not short.startswith(partial) or short in seen:
                continue
            if not qualified and "." in short:
                continue
            seen.add(short)
            out.append(lsp.CompletionItem(short, kind=_kind(info),
                                          detail=signature(name, info, shower.plain),
                                          documentation=_doc(getattr(info, "doc", None))))
    return out


def _kind(info: Any) -> lsp.CompletionItemKind:
    if isinstance(info, StructInfo):
        return lsp.CompletionItemKind.Struct
    if isinstance(info, IndInfo):
        return lsp.CompletionItemKind.Enum
    if isinstance(info, DefInfo) and (info.op is not None or info.params):
        return lsp.CompletionItemKind.Function
    return lsp.CompletionItemKind.Constant


def _doc(doc: str | None) -> lsp.MarkupContent | None:
    return lsp.MarkupContent(lsp.MarkupKind.Markdown, doc) if doc else None
