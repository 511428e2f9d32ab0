"""Where things are in a Lean source: tokens with their ends, and the extent of every term.

The parser gives each syntax node its start (`Pos`: 1-based line, 0-based column in code
points); an editor needs ranges. A node's end is the end of its last token: the largest end
of its own tokens and its children, widened over parentheses that enclose it exactly (the
parser drops them), found by matching brackets in the token stream.
"""
from __future__ import annotations

import re
from dataclasses import InitVar, dataclass
from typing import Iterator

from ..errors import LeanError
from ..lean import syntax as S
from ..lean.chars import NAME
from ..lean.lexer import Token, tokenize
from .relex import relex

Point = tuple[int, int]  # (line 1-based, column 0-based in code points), as `Pos`
Span = tuple[Point, Point]  # [start, end)

_OPEN = {"(": ")", "#[": "]", "@[": "]", "[": "]", "⟨": "⟩", "{": "}"}
_CLOSE = set(_OPEN.values())
_IDENT = re.compile(NAME)


@dataclass
class Source:
    """One text: its lines, tokens (none when it does not lex) and brackets."""

    text: str
    file: str
    lex: bool = True  # False: lines only (a text too large to check)
    previous: InitVar[Source | None] = None  # an earlier version: what it lexed is reused

    def __post_init__(self, previous: Source | None) -> None:
        self.lines = self.text.replace("\r\n", "\n").split("\n")
        self.lexed: list[Token] | None = None  # every token, `eof` included
        try:
            if self.lex and previous is not None and previous.lexed:
                self.lexed = relex(previous.text, previous.lexed, self.text, self.file)
            elif self.lex:
                self.lexed = tokenize(self.text, self.file)
        except (LeanError, RecursionError):
            pass
        self.toks = [t for t in self.lexed if t.kind != "eof"] if self.lexed else []
        self.index = {(t.pos.line, t.pos.col): i for i, t in enumerate(self.toks)}
        self.ends = [self._end(t) for t in self.toks]
        self.match: dict[int, int] = {}
        stack: list[int] = []
        for i, t in enumerate(self.toks):
            if t.kind == "sym" and t.text in _OPEN:
                stack.append(i)
            elif t.kind == "sym" and t.text in _CLOSE and stack:
                j = stack.pop()
                self.match[j], self.match[i] = i, j

    def _end(self, t: Token) -> Point:
        line, col = t.pos.line, t.pos.col
        src = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        if t.kind in ("str", "doc", "moddoc") or not src.startswith(t.text, col):
            return self._scan_end(t, line, col)
        return line, col + len(t.text)

    def _scan_end(self, t: Token, line: int, col: int) -> Point:
        """The end of a token whose text is not its source (strings, escaped names, docs)."""
        if t.kind == "ident" and line - 1 < len(self.lines):
            m = _IDENT.match(self.lines[line - 1], col)  # `p.to_out.«0».weight`
            if m is not None and "\n" not in m.group():
                return line, m.end()
        closer = {"str": '"', "doc": "-/", "moddoc": "-/"}.get(t.kind, "»")
        start = col + (1 if t.kind == "str" else 0)
        for ln in range(line, len(self.lines) + 1):
            src = self.lines[ln - 1]
            k = start
            while True:
                k = src.find(closer, k)
                if k < 0 or t.kind != "str" or _unescaped(src, k):
                    break
                k += 1
            if k >= 0:
                end = (ln, k + len(closer))
                if t.kind != "ident" or self.lines[ln - 1][end[1]:end[1] + 1] != ".":
                    return end
                start = end[1] + 1
                continue
            start = 0
        return line, len(self.lines[line - 1]) if line - 1 < len(self.lines) else col

    # ---- queries --------------------------------------------------------------------------
    def token_at(self, p: Point) -> int | None:
        """The index of the token under `p` (its start included, its end excluded)."""
        lo, hi = 0, len(self.toks)
        while lo < hi:
            mid = (lo + hi) // 2
            if (self.toks[mid].pos.line, self.toks[mid].pos.col) <= p:
                lo = mid + 1
            else:
                hi = mid
        i = lo - 1
        if i >= 0 and p < self.ends[i]:
            return i
        return None

    def token_span(self, i: int) -> Span:
        t = self.toks[i]
        return (t.pos.line, t.pos.col), self.ends[i]

    def word_span(self, p: Point) -> Span:
        """The token at `p`, else the rest of its line: where a diagnostic is shown."""
        i = self.index.get(p)
        if i is not None:
            return self.token_span(i)
        line = p[0] if 1 <= p[0] <= len(self.lines) else 1
        text = self.lines[line - 1] if self.lines else ""
        col = min(p[1], len(text))
        return (line, col), (line, max(len(text), col + 1) if col < len(text) else col + 1)

    def offset(self, p: Point) -> int:
        """A point as one number, to compare the sizes of spans."""
        return p[0] * 1_000_000 + p[1]


def _unescaped(src: str, k: int) -> bool:
    n = 0
    while k - 1 - n >= 0 and src[k - 1 - n] == "\\":
        n += 1
    return n % 2 == 0


# ---- the syntax tree ------------------------------------------------------------------------

def children(e: S.Expr) -> list[S.Expr]:
    """The sub-terms of a syntax node, in source order."""
    if isinstance(e, S.App):
        return [e.fn] + [a.expr for a in e.args]
    if isinstance(e, (S.Proj,)):
        return [e.expr]
    if isinstance(e, S.BinOp):
        return [e.lhs, e.rhs]
    if isinstance(e, (S.ArrayLit, S.ListLit, S.Tuple, S.AnonCtor)):
        return list(e.items)
    if isinstance(e, S.Ascribe):
        return [e.expr, e.type]
    if isinstance(e, S.Index):
        return [e.expr, e.index]
    if isinstance(e, S.Let):
        return ([e.type] if e.type is not None else []) + [e.value, e.body]
    if isinstance(e, (S.Fun, S.Pi)):
        return binder_exprs(e.binders) + [e.body]
    return []


def binder_exprs(bs: list[S.Binder]) -> list[S.Expr]:
    out: list[S.Expr] = []
    for b in bs:
        if b.type is not None and (not out or out[-1] is not b.type):
            out.append(b.type)
        if b.default is not None:
            out.append(b.default)
    return out


def command_exprs(cmd: S.Command) -> list[S.Expr]:
    """The terms of a command: binder types and defaults, result type, body, fields."""
    out: list[S.Expr] = []
    if isinstance(cmd, (S.Def, S.Structure, S.Inductive)):
        out += binder_exprs(cmd.binders)
    if isinstance(cmd, S.Def):
        out += ([cmd.type] if cmd.type is not None else []) + [cmd.body]
    elif isinstance(cmd, S.Structure):
        seen: set[int] = set()
        for f in cmd.fields:
            for x in (f.type, f.default):
                if x is not None and id(x) not in seen:
                    seen.add(id(x))
                    out.append(x)
    elif isinstance(cmd, S.Inductive):
        for c in cmd.ctors:
            out += binder_exprs(c.binders)
    return out


def walk(roots: list[S.Expr]) -> Iterator[S.Expr]:
    """Every node under `roots`, parents before children, without recursion (a chain of
    `let`s nests as deep as it is long)."""
    stack = list(reversed(roots))
    while stack:
        e = stack.pop()
        yield e
        stack.extend(reversed(children(e)))


def expr_spans(src: Source, roots: list[S.Expr]) -> dict[int, Span]:
    """`id(node)` → its span, for every node under `roots` whose start is a token."""
    order = list(walk(roots))
    spans: dict[int, Span] = {}
    for e in reversed(order):  # children before parents
        start = _start_index(src, e)
        if start is None:
            continue
        first = src.token_span(start)[0]
        last = _own_end(src, e, start)
        for c in children(e):
            cs = spans.get(id(c))
            if cs is None:
                continue
            first = min(first, cs[0])
            last = max(last, cs[1])
        spans[id(e)] = _widen(src, (first, last))
    return spans


def _start_index(src: Source, e: S.Expr) -> int | None:
    return src.index.get((e.pos.line, e.pos.col))


def _own_end(src: Source, e: S.Expr, i: int) -> Point:
    """The end of the tokens a node owns itself (not through its children)."""
    if isinstance(e, (S.ArrayLit, S.ListLit, S.Tuple, S.AnonCtor, S.Index, S.Ascribe)):
        j = src.match.get(i)
        if j is not None:
            return src.ends[j]
    if isinstance(e, (S.DotIdent, S.Proj, S.By)) and i + 1 < len(src.toks):
        return src.ends[i + 1]
    return src.ends[i]


def _widen(src: Source, span: Span) -> Span:
    """The span with the parentheses that enclose exactly it."""
    while True:
        i, j = src.index.get(span[0]), _ending_at(src, span[1])
        if i is None or j is None or i == 0 or j + 1 >= len(src.toks):
            return span
        if src.toks[i - 1].text != "(" or src.match.get(i - 1) != j + 1:
            return span
        span = src.token_span(i - 1)[0], src.ends[j + 1]


def _ending_at(src: Source, p: Point) -> int | None:
    i = src.token_at((p[0], p[1] - 1)) if p[1] > 0 else None
    return i if i is not None and src.ends[i] == p else None


def contains(span: Span, p: Point) -> bool:
    return span[0] <= p < span[1]
