"""Tokens of the Tyr subset of Lean 4.

Positions are 1-based lines and 0-based columns in code points, as Lean reports them.
Comments (`--`, nested `/- -/`) are skipped; doc comments (`/-- -/`, `/-! -/`) become tokens
so the parser can attach or skip them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import Diagnostic, LeanError, Pos

KEYWORDS = {
    "import", "open", "namespace", "section", "end", "def", "abbrev", "structure",
    "inductive", "where", "deriving", "let", "fun", "by", "theorem", "instance", "class",
    "private", "protected", "noncomputable", "partial", "unsafe", "variable", "universe",
    "if", "then", "else", "match", "with", "do", "have", "show", "from", "mutual", "example",
    "set_option", "attribute", "macro", "syntax", "notation", "infixl", "infixr", "elab",
    "initialize", "local", "scoped", "extends", "at",
}

# Longest first: the lexer tries them in this order.
SYMBOLS = [
    ":=", "=>", "->", "#[", "@[", "<|", "|>", "==", "!=", "<=", ">=", "&&", "||", "++",
    "(", ")", "{", "}", "[", "]", "⟨", "⟩", ",", ":", ".", ";", "|", "+", "-", "*", "/",
    "%", "=", "<", ">", "@", "→", "×", "λ", "·", "_", "!", "?", "#", "$", "^", "∀", "↑", "≤",
]

_IDENT_START = re.compile(r"[A-Za-z_\u03b1-\u03c9\u0391-\u03a9\u1f00-\u1ffe\u2100-\u214f]")
_IDENT_REST = re.compile(r"[A-Za-z0-9_'!?\u03b1-\u03c9\u0391-\u03a9\u2080-\u2089\u2100-\u214f]")
_DOTTED = re.compile(_IDENT_START.pattern + _IDENT_REST.pattern + "*"
                     + r"(?:\.(?:" + _IDENT_START.pattern + _IDENT_REST.pattern + r"*|\d+))*")
_SPACE = re.compile(r"[ \t\r\n]+")
_NUMBER = re.compile(r"(\d+)(\.\d+)?([eE][+-]?\d+)?")


@dataclass(frozen=True)
class Token:
    kind: str  # ident | keyword | nat | sci | str | sym | doc | moddoc | eof
    text: str
    pos: Pos
    # True when whitespace or a comment precedes the token (Lean's checkWsBefore).
    ws_before: bool = True
    # True when a line break precedes the token (Lean's checkLinebreakBefore).
    nl_before: bool = False


def _err(file: str, line: int, col: int, msg: str) -> LeanError:
    return LeanError([Diagnostic(Pos(file, line, col), msg)])


def tokenize(text: str, file: str) -> list[Token]:
    toks: list[Token] = []
    i, line, col = 0, 1, 0
    n = len(text)
    ws = True
    nl = True

    def advance(k: int) -> None:
        nonlocal i, line, col
        nls = text.count("\n", i, i + k)
        if nls:
            line += nls
            col = i + k - text.rfind("\n", i, i + k) - 1
        else:
            col += k
        i += k

    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            m = _SPACE.match(text, i)
            assert m
            run = m.group(0)
            if "\t" in run:
                advance(run.index("\t"))
                raise _err(file, line, col, "tabs are not allowed in Lean source; use spaces")
            if "\n" in run:
                nl = True
            advance(len(run))
            ws = True
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            advance((j if j >= 0 else n) - i)
            ws = True
            continue
        if text.startswith("/-", i):
            start = (line, col)
            kind = None
            if text.startswith("/--", i) and not text.startswith("/--/", i):
                kind = "doc"
            elif text.startswith("/-!", i):
                kind = "moddoc"
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/-", j):
                    depth += 1
                    j += 2
                elif text.startswith("-/", j):
                    depth -= 1
                    j += 2
                else:
                    j += 1
            if depth:
                raise _err(file, *start, "unterminated comment")
            body = text[i:j]
            if kind:
                toks.append(Token(kind, body, Pos(file, *start), ws, nl))
            advance(j - i)
            ws = True
            continue
        pos = Pos(file, line, col)
        if ch == '"':
            j, out = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    esc = text[j + 1]
                    out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"'}.get(esc, esc))
                    j += 2
                    continue
                if text[j] == "\n":
                    break
                out.append(text[j])
                j += 1
            if j >= n or text[j] != '"':
                raise _err(file, line, col, "unterminated string literal")
            toks.append(Token("str", "".join(out), pos, ws, nl))
            advance(j + 1 - i)
        elif ch.isdigit():
            m = _NUMBER.match(text, i)
            assert m
            kind = "sci" if (m.group(2) or m.group(3)) else "nat"
            toks.append(Token(kind, m.group(0), pos, ws, nl))
            advance(m.end() - i)
        elif ch == "«":
            j = text.find("»", i)
            if j < 0:
                raise _err(file, line, col, "unterminated «name»")
            toks.append(Token("ident", text[i + 1 : j], pos, ws, nl))
            advance(j + 1 - i)
        elif _IDENT_START.match(ch):
            # Dotted names (`torch.linear`, `c.hidden`, `xs.0`) are one token, as in Lean.
            m = _DOTTED.match(text, i)
            assert m
            j = m.end()
            word = text[i:j]
            kind = "keyword" if word in KEYWORDS else "ident"
            if word == "_":
                kind = "sym"
            toks.append(Token(kind, word, pos, ws, nl))
            advance(j - i)
        else:
            for sym in SYMBOLS:
                if text.startswith(sym, i):
                    toks.append(Token("sym", sym, pos, ws, nl))
                    advance(len(sym))
                    break
            else:
                raise _err(file, line, col, f"unexpected character {ch!r}")
        ws = False
        nl = False
    toks.append(Token("eof", "", Pos(file, line, col), ws, nl))
    return toks
