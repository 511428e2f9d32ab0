"""Code actions for the fixes that are unambiguous: each candidate edit is checked, and only an
edit after which the error is gone (and no other appears) is offered.

- a proof argument that is missing (`h : t ≤ n`): append `(by decide)` to the application;
- arguments in the wrong order: the one swap of two explicit arguments that makes the
  application check (offered only when exactly one swap does).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ..errors import Diagnostic
from ..lean import syntax as S
from .analysis import Analysis
from .text import Span, walk

MAX_CANDIDATES = 12  # each is a check of the whole file
_MISSING = re.compile(r"is missing its explicit argument '([^']+)' : (.+) \(it takes")
_ARG = re.compile(r"argument '([^']+)' of '([^']+)' has type")
_MISMATCH = re.compile(r"type mismatch: '([^']+) \.\.\.' has type")


@dataclass
class Fix:
    title: str
    edits: list[tuple[Span, str]]  # (span in the document, replacement)
    diagnostic: Diagnostic


def fixes(a: Analysis, diags: list[Diagnostic],
          check: Callable[[str], Analysis]) -> list[Fix]:
    """The verified fixes for `diags` (diagnostics of `a`); `check(text)` checks a text."""
    out = []
    budget = [MAX_CANDIDATES]
    for d in diags:
        for title, edits in _candidates(a, d):
            if budget[0] <= 0:
                return out
            budget[0] -= 1
            if _fixed(a, d, _apply(a.source.lines, edits), check):
                out.append(Fix(title, edits, d))
        if len([f for f in out if f.diagnostic is d]) > 1:  # ambiguous: offer none
            out = [f for f in out if f.diagnostic is not d]
    return out


def _candidates(a: Analysis, d: Diagnostic) -> list[tuple[str, list[tuple[Span, str]]]]:
    if a.module is None:
        return []
    at = (d.pos.line, d.pos.col)
    nodes = list(walk([x for c in a.module.commands for x in _exprs(c)]))
    m = _MISSING.search(d.message)
    if m and any(op in m.group(2) for op in ("≤", "<", "=")):
        node = next((e for e in nodes if isinstance(e, S.App) and e.pos == d.pos), None) or \
            next((e for e in nodes if isinstance(e, S.Ident) and e.pos == d.pos), None)
        span = a.spans.get(id(node)) if node is not None else None
        if span is not None:
            return [(f"Prove '{m.group(1)}' with `by decide`", [((span[1], span[1]),
                                                                  " (by decide)")])]
        return []
    app = None
    if _ARG.search(d.message):
        app = next((e for e in nodes if isinstance(e, S.App)
                    and any(x.expr.pos == d.pos and x.name is None for x in e.args)), None)
    elif _MISMATCH.search(d.message):
        app = next((e for e in nodes if isinstance(e, S.App) and e.pos == d.pos), None)
    if app is None:
        return []
    args = [x.expr for x in app.args if x.name is None]
    spans = [a.spans.get(id(x)) for x in args]
    if any(s is None for s in spans) or len(args) < 2:
        return []
    bad = next((i for i, x in enumerate(args) if (x.pos.line, x.pos.col) == at), None)
    pairs = [(i, j) for i in range(len(args)) for j in range(i + 1, len(args))
             if bad is None or bad in (i, j)]
    fn = getattr(app.fn, "name", "the function")
    out = []
    for i, j in pairs:
        ti, tj = _text(a, spans[i]), _text(a, spans[j])
        out.append((f"Swap the arguments `{ti}` and `{tj}` of '{fn}'",
                    [(spans[i], tj), (spans[j], ti)]))
    return out


def _exprs(cmd: S.Command) -> list[S.Expr]:
    from .text import command_exprs

    return command_exprs(cmd)


def _text(a: Analysis, span: Span) -> str:
    lines = a.source.lines
    (l1, c1), (l2, c2) = span
    if l1 == l2:
        return lines[l1 - 1][c1:c2]
    return "\n".join([lines[l1 - 1][c1:]] + lines[l1:l2 - 1] + [lines[l2 - 1][:c2]])


def _apply(lines: list[str], edits: list[tuple[Span, str]]) -> str:
    """The text with the edits made (they do not overlap), last first."""
    text = "\n".join(lines)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln) + 1)

    def off(p: tuple[int, int]) -> int:
        return starts[p[0] - 1] + p[1]

    for (s, e), new in sorted(edits, key=lambda x: x[0][0], reverse=True):
        text = text[:off(s)] + new + text[off(e):]
    return text


def _fixed(a: Analysis, d: Diagnostic, text: str, check: Callable[[str], Analysis]) -> bool:
    after = check(text).own_diagnostics()
    before = a.own_diagnostics()
    return len(after) < len(before) and not any(x.message == d.message for x in after)
