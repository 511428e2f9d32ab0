"""What is at a point of a checked document: its type, the same type with the config's values,
its signature and doc, and where it is declared. Hover, go-to-definition and `tyr shapes`
all ask this one question.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Pos
from ..lean import syntax as S
from ..lean.env import CtorInfo, DefInfo, IndInfo, StructInfo
from ..lean.failure import Fail
from ..lean.terms import FLOAT, NAT, FLit, Lit, Opaque, Term
from .analysis import Analysis
from .display import Shower, signature
from .record import Typed
from .runs import MAX_SHOWN, Runs, RunTypes
from .scopes import Binding, Decl, binding_named_at, declarations, visible
from .text import Point, Span, contains
from .values import Resolver, Values


@dataclass
class Found:
    span: Span
    name: str | None = None  # the name whose type this is; None for a term
    type: str | None = None
    resolved: str | None = None  # the type with the config's values, where they change it
    value: str | None = None  # a number's value under the config
    signature: str | None = None
    doc: str | None = None
    target: Pos | None = None  # where the name is declared
    text: str | None = None  # the term's source, when short


class Lookup:
    """Questions about one analysis (build one per analysis and config)."""

    def __init__(self, a: Analysis, values: Values | None = None,
                 runs: Runs | None = None) -> None:
        self.a = a
        self.env = a.prog.env if a.prog is not None else None
        self.shower = Shower(self.env) if self.env is not None else None
        self.resolver = Resolver(self.env, values.values) if values and self.env else None
        self.runs = RunTypes(self.env, runs) if runs and self.env else None
        self.decls: list[Decl] = declarations(a.source, a.module, a.spans) if a.module else []
        self.by_expr: dict[int, Typed] = {id(t.expr): t for _, t in a.typed}
        self.app_of: dict[int, Typed] = {id(t.expr.fn): t for _, t in a.typed
                                         if isinstance(t.expr, S.App)}
        self._by_pos: dict[tuple, tuple[str, Any]] | None = None

    # ---- the one question ---------------------------------------------------------------
    def at(self, p: Point) -> Found | None:
        if self.env is None:
            return None
        b = binding_named_at(self.decls, p)
        if b is not None:
            return self.binding(b)
        dotted = self._dotted(p)
        if dotted is not None:
            return dotted
        ref = self.a.ref_at(p)
        if ref is not None:
            return self.ref(*ref)
        for t in self.a.typed_at(p):
            return self.typed(t, p)
        return None

    def typed(self, t: Typed, p: Point | None = None) -> Found:
        span = self.a.spans[id(t.expr)]
        f = Found(span, type=self.shower.typed(t), text=self._text(span))
        if isinstance(t.expr, S.Ident):
            f.name = t.expr.name
            first = t.expr.name.split(".")[0]
            local = visible(self.decls, first, p or span[0])
            if local is not None and "." not in t.expr.name:
                f.target = self._pos(local.at)
            elif "." in t.expr.name and t.ctx.get(first) is not None:
                parts = t.expr.name.split(".")
                f.target = self._field_target(t, ".".join(parts[:-1]), parts[-1])
        self.resolve(f, t.type, t)
        self.value(f, t.term, t.type, t)
        return f

    def ref(self, span: Span, r: Any) -> Found:
        name = r.name[len("torch."):] if r.name.startswith("torch.") else r.name
        f = Found(span, name=name, signature=signature(r.name, r.info, self.shower.plain),
                  doc=self.doc(r.info),
                  target=self._info_pos(r.info))
        use = self.app_of.get(id(r.expr)) or self.by_expr.get(id(r.expr))
        if use is not None:
            f.type = self.shower.typed(use)
            self.resolve(f, use.type, use)
            self.value(f, use.term, use.type, use)
        return f

    def binding(self, b: Binding) -> Found:
        f = Found(b.at, name=b.name, target=self._pos(b.at), doc=b.doc)
        if b.kind in ("def", "structure", "inductive", "ctor"):
            hit = self._declared(b)
            if hit is not None:
                f.signature = signature(*hit, self.shower.plain)
                f.doc = f.doc or self.doc(hit[1])
            return f
        ty_t = self.by_expr.get(id(b.type)) if b.type is not None else None
        val_t = self.by_expr.get(id(b.value)) if b.value is not None else None
        if ty_t is not None:  # the written type, as elaborated (the term is the type)
            f.type = self.shower.term(ty_t.term, ty_t, ty_t.elab.mctx)
            self.resolve(f, ty_t.term, ty_t)
        elif val_t is not None and b.kind == "let":
            f.type = self.shower.typed(val_t)
            self.resolve(f, val_t.type, val_t)
        else:
            inner = self._in_scope(b)
            if inner is not None:
                local = inner.ctx.get(b.name)
                f.type = self.shower.term(local.type, inner, inner.elab.mctx)
                self.resolve(f, local.type, inner)
        if val_t is not None and b.kind == "let":
            self.value(f, val_t.term, val_t.type, val_t)
        elif b.kind == "binder" and ty_t is not None:  # a dim's value under the config
            inner = self._in_scope(b)
            local = inner.ctx.get(b.name) if inner is not None else None
            if local is not None:
                self.value(f, local.term, local.type, inner)
        return f

    # ---- pieces -------------------------------------------------------------------------
    def resolve(self, f: Found, ty: Term, t: Typed) -> None:
        shown = self._numbers(ty, t)
        if shown is not None and shown != f.type:
            f.resolved = shown

    def value(self, f: Found, term: Term, ty: Term, t: Typed) -> None:
        if isinstance(term, Opaque):
            return
        try:
            if self.shower.norm(ty) not in (NAT, FLOAT):
                return
        except Exception:  # noqa: BLE001 — display only
            return
        f.value = self._numbers(term, t, numbers_only=True)

    def _numbers(self, t: Term, typed: Typed, numbers_only: bool = False) -> str | None:
        """`t` with the numbers of the runs that reached it (each distinct result, with its
        model where models differ); else with the config's value of each binder named as a
        model argument (a file whose models cannot run); None when neither applies."""
        found = self.runs.resolve(t, typed.elab.mctx) if self.runs is not None else []
        if not found and self.resolver is not None:
            r = self.resolver.resolve(t, typed.elab.decl, typed.elab.mctx)
            found = [("", r)] if r is not None else []
        if numbers_only:
            found = [(m, r) for m, r in found if isinstance(r, (Lit, FLit))]
        if not found:
            return None
        by_text: dict[str, list[str]] = {}
        for model, r in found:
            models = by_text.setdefault(self.shower.term(r), [])
            if model and model not in models:
                models.append(model)
        if len(by_text) == 1:
            return next(iter(by_text))
        tagged = len({tuple(ms) for ms in by_text.values()}) > 1
        parts = [text + (f" ({', '.join(ms)})" if tagged and ms else "")
                 for text, ms in list(by_text.items())[:MAX_SHOWN]]
        return " | ".join(parts) + (" | …" if len(by_text) > MAX_SHOWN else "")

    def _in_scope(self, b: Binding) -> Typed | None:
        """The first term elaborated where `b` is visible (its context has `b`'s type)."""
        best = None
        for span, t in self.a.typed:
            if contains(b.scope, span[0]) and t.ctx.get(b.name) is not None:
                if best is None or span[0] < best[0]:
                    best = (span[0], t)
        return best[1] if best else None

    def _dotted(self, p: Point) -> Found | None:
        """A part of `a.b.c` before the last: the type of the prefix up to it."""
        i = self.a.source.token_at(p)
        if i is None or self.a.source.toks[i].kind != "ident":
            return None
        tok = self.a.source.toks[i]
        parts = tok.text.split(".")
        if len(parts) < 2:
            return None
        col, k = tok.pos.col, 0
        while k < len(parts) - 1 and p[1] > col + len(parts[k]):
            col += len(parts[k]) + 1
            k += 1
        if k == len(parts) - 1:
            return None
        where = next((t for _, t in self.a.typed if t.expr.pos == tok.pos), None) \
            or next((r for _, r in self.a.refs if r.expr.pos == tok.pos), None)
        if where is None or where.ctx.get(parts[0]) is None:
            return None
        prefix = ".".join(parts[:k + 1])
        numbered = tuple(i for i in tok.value or () if i <= k)  # `p.2`: numbered fields
        span = (tok.pos.line, tok.pos.col), (tok.pos.line, col + len(parts[k]))
        el = where.elab
        el.quiet = True
        try:
            term, ty = el.elab(S.Ident(tok.pos, prefix, numbered), None, where.ctx)
        except (Fail, RecursionError):
            return None
        finally:
            el.quiet = False
        t = Typed(S.Ident(tok.pos, prefix, numbered), term, ty, where.ctx, el)
        f = Found(span, name=prefix, type=self.shower.typed(t))
        if k == 0:
            local = visible(self.decls, parts[0], p)
            f.target = self._pos(local.at) if local is not None else None
        else:
            f.target = self._field_target(t, ".".join(parts[:k]),
                                          int(parts[k]) if k in numbered else parts[k])
        self.resolve(f, ty, t)
        self.value(f, term, ty, t)
        return f

    def _field_target(self, t: Typed, prefix: str, name: str | int) -> Pos | None:
        """Where field `name` (an int: numbered from 1) of `prefix`'s structure is declared."""
        el = t.elab
        el.quiet = True
        numbered = tuple(i for i in getattr(t.expr, "numbered", ()) if i < prefix.count(".") + 1)
        try:
            _, ty = el.elab(S.Ident(t.expr.pos, prefix, numbered), None, t.ctx)
            wty = el.whnf(ty)
        except (Fail, RecursionError):
            return None
        finally:
            el.quiet = False
        head = getattr(wty, "head", None)
        info = self.env.get(head) if head else None
        if isinstance(info, StructInfo):
            if isinstance(name, int):
                return info.fields[name - 1].pos if 0 < name <= len(info.fields) else None
            for fi in info.fields:
                if fi.name == name:
                    return fi.pos
        return self._info_pos(self.env.get(f"{head}.{name}")) if head and \
            isinstance(name, str) else None

    def _declared(self, b: Binding) -> tuple[str, Any] | None:
        if self._by_pos is None:
            self._by_pos = {}
            for n, info in self.env.decls.items():
                pos = getattr(info, "pos", None)
                if pos is not None and pos.file == self.a.shown:
                    self._by_pos[(pos.line, pos.col)] = (n, info)
        if b.kind == "ctor":
            ind = self._by_pos.get((b.command.pos.line, b.command.pos.col))
            if ind is not None and isinstance(ind[1], IndInfo) and b.name in ind[1].ctors:
                ci = ind[1].ctors[b.name]
                return ci.name, ci
            return None
        return self._by_pos.get(b.at[0])

    def doc(self, info: Any) -> str | None:
        """A declaration's doc comment (structures keep theirs in the syntax only)."""
        if isinstance(info, DefInfo):
            return info.doc
        pos = getattr(info, "pos", None)
        if pos is None or self.a.prog is None:
            return None
        for mod in self.a.prog.modules.values():
            if mod.file == pos.file:
                for cmd in mod.commands:
                    if cmd.pos == pos:
                        return getattr(cmd, "doc", None)
        return None

    def _info_pos(self, info: Any) -> Pos | None:
        if isinstance(info, CtorInfo):
            info = self.env.get(info.inductive)
        pos = getattr(info, "pos", None)
        return pos if pos is not None and not pos.file.startswith("<") else None

    def _pos(self, span: Span) -> Pos:
        return Pos(self.a.shown, span[0][0], span[0][1])

    def _text(self, span: Span) -> str | None:
        (l1, c1), (l2, c2) = span
        if l1 != l2 or c2 - c1 > 60:
            return None
        return self.a.source.lines[l1 - 1][c1:c2]
