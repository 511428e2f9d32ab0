"""An edited text's tokens, lexing only what the edit touched.

Between two versions of a text, the part before the first changed character and the part
after the last one are the same. A token that starts a line (column 0) starts in a clean
state of the lexer (no comment or string is open there), so the tokens before the last such
token ahead of the change, and those from the first such token inside the unchanged end on,
are the old ones (moved by the lines the edit added or removed); only the lines between are
lexed again, as a piece of their own. Where that piece does not lex (a comment or string the
edit opened runs past it) or the text has carriage returns, the whole text is lexed: the
result is always `tokenize(text)`'s.
"""
from __future__ import annotations

import bisect
from itertools import accumulate

from ..errors import LeanError, Pos
from ..lean.lexer import Token, tokenize


def relex(old_text: str, old: list[Token], text: str, file: str) -> list[Token]:
    """`tokenize(text, file)`, reusing `old` (the tokens of `old_text`)."""
    if "\r" in text or "\r" in old_text or not old or old[-1].pos.file != file:
        return tokenize(text, file)
    p, s = _common(old_text, text)
    if p == len(old_text) == len(text):
        return old
    starts0 = _line_starts(old_text)
    offsets = [starts0[t.pos.line - 1] + t.pos.col for t in old]
    # the last token at column 0 at or before the change, the first one inside the same end
    a = bisect.bisect_right(offsets, p) - 1
    while a > 0 and old[a].pos.col != 0:
        a -= 1
    end0 = len(old_text) - s
    b = bisect.bisect_left(offsets, end0 + 1)
    while b < len(old) - 1 and old[b].pos.col != 0:
        b += 1
    lo = offsets[a] if a > 0 else 0
    a = a if a > 0 else 0
    shift = len(text) - len(old_text)
    hi = offsets[b] + shift if b < len(old) - 1 else len(text)
    first = old[a].pos.line if a > 0 else 1
    try:
        mid = tokenize(text[lo:hi], file, first)
    except (LeanError, RecursionError):
        return tokenize(text, file)
    if b >= len(old) - 1:
        return old[:a] + mid
    lines = first + text.count("\n", lo, hi) - old[b].pos.line  # lines added before b
    rest = old[b:] if not lines else [
        Token(t.kind, t.text, Pos(t.pos.file, t.pos.line + lines, t.pos.col), t.ws_before,
              t.nl_before, t.value) for t in old[b:]]
    return old[:a] + mid[:-1] + rest


def _common(a: str, b: str) -> tuple[int, int]:
    """The lengths of the longest common prefix and, of what remains, common suffix."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the prefix: the longest k with a[:k] == b[:k]
        k = (lo + hi + 1) // 2
        if a[:k] == b[:k]:
            lo = k
        else:
            hi = k - 1
    p = lo
    lo, hi = 0, min(len(a), len(b)) - p
    while lo < hi:
        k = (lo + hi + 1) // 2
        if a[len(a) - k:] == b[len(b) - k:]:
            lo = k
        else:
            hi = k - 1
    return p, lo


def _line_starts(text: str) -> list[int]:
    return [0, *accumulate(len(line) + 1 for line in text.split("\n"))]
