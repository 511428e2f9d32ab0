"""Tokens of the Tyr subset of Lean 4, read by Lean's own lexical rules.

Positions are 1-based lines and 0-based columns in code points, as Lean reports them.
Comments (`--`, nested `/- -/`) are skipped; doc comments (`/-- -/`, `/-! -/`) become tokens
so the parser can attach or skip them. The rules are those of `src/Lean/Parser/Basic.lean`
(`whitespace`, `identFnAux`, `numberFnAux`, `strLitFnAux`, `quotedCharCoreFn`,
`rawStrLitFnAux`) and `src/Init/Meta/Defs.lean` (`isIdFirst`, `isIdRest`, `isLetterLike`,
`isSubScriptAlnum`), with Lean's error messages; the tests in `tests/test_lean_lexer.py` pin them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import Diagnostic, LeanError, Pos
from .chars import NAME, is_digit, is_id_first, is_id_rest, numbered_parts
from .numerals import nat_literal

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
    "%", "=", "<", ">", "@", "→", "×", "λ", "↦", "·", "_", "!", "?", "#", "$", "^", "∀",
    "↑", "≤", "≥", "≠",
]
_QUOTABLE = {"\\": "\\", '"': '"', "'": "'", "r": "\r", "n": "\n", "t": "\t"}
_HEX = set("0123456789abcdefABCDEF")


# One regular token at a position; anything else (errors included) takes the slow path.
_FAST = re.compile(
    r"(?P<ws>[ \n]+)|(?P<line>--[^\n]*)"
    rf"|(?P<ident>(?!r#*\"){NAME})"
    r"|(?P<nat>[1-9][0-9]*(?![0-9_.eExXbBoO])|0(?![0-9_.eExXbBoO]))"
    r'|(?P<str>"[^"\\\n]*")'
    r"|(?P<sym>(?!/-)(?:" + "|".join(re.escape(x) for x in SYMBOLS) + "))")


_COMMENT_MARK = re.compile(r"/-|-/")


@dataclass(slots=True)  # not frozen: one per token, and a frozen __init__ costs 3x
class Token:
    kind: str  # ident | keyword | nat | sci | str | char | sym | doc | moddoc | eof
    text: str
    pos: Pos
    ws_before: bool = True  # whitespace or a comment precedes it (Lean's checkWsBefore)
    nl_before: bool = False  # a line break precedes it (Lean's checkLinebreakBefore)
    value: object = None  # the number of a `nat` token


def _err(file: str, line: int, col: int, msg: str) -> LeanError:
    return LeanError([Diagnostic(Pos(file, line, col), msg)])


class _Lexer:
    def __init__(self, text: str, file: str, line: int = 1):
        # Lean reads `\r\n` as a line break; an isolated `\r` is an error (below).
        self.text, self.file = text.replace("\r\n", "\n"), file
        self.n = len(self.text)
        self.i, self.line, self.col = 0, line, 0
        self.numbered: tuple[int, ...] | None = None  # of the last name read (`ident`)

    def at(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < self.n else ""

    def advance(self, k: int) -> None:
        text, i = self.text, self.i
        nls = text.count("\n", i, i + k)
        if nls:
            self.line += nls
            self.col = i + k - text.rfind("\n", i, i + k) - 1
        else:
            self.col += k
        self.i += k

    def error(self, msg: str, at: tuple[int, int] | None = None) -> LeanError:
        line, col = at or (self.line, self.col)
        return _err(self.file, line, col, msg)

    # -- whitespace and comments (Lean's `whitespace`) -------------------------------------
    def skip_space(self) -> tuple[bool, bool]:
        """Skip whitespace and comments; (anything skipped, a line break skipped)."""
        ws = nl = False
        while self.i < self.n:
            c = self.text[self.i]
            if c == "\t":
                raise self.error("tabs are not allowed; please configure your editor to "
                                 "expand them")
            if c == "\r":
                raise self.error("isolated carriage returns are not allowed")
            if c in " \n":
                nl = nl or c == "\n"
                self.advance(1)
            elif self.text.startswith("--", self.i):
                j = self.text.find("\n", self.i)
                self.advance((j if j >= 0 else self.n) - self.i)
            elif self.text.startswith("/-", self.i) and self.at(2) not in ("-", "!"):
                self.advance(2)
                self.comment_body()
                nl = True if "\n" in self.text[self.i - 2:self.i] else nl
            else:
                break
            ws = True
        return ws, nl

    def comment_body(self) -> None:
        """After `/-`: up to the matching `-/` (comments nest); Lean reports the end of input."""
        depth, j = 1, self.i
        while depth:
            m = _COMMENT_MARK.search(self.text, j)
            if m is None:
                j = self.n
                break
            depth, j = depth + (1 if m.group() == "/-" else -1), m.end()
        self.advance(j - self.i)
        if depth:
            raise self.error("unterminated comment")

    # -- tokens -----------------------------------------------------------------------------
    def tokens(self) -> list[Token]:
        toks: list[Token] = []
        ws, nl = True, True
        text, file, fast = self.text, self.file, _FAST.match
        while True:
            m = fast(text, self.i)
            while m is not None:  # regular tokens, without the character-by-character rules
                kind, i, j = m.lastgroup, self.i, m.end()
                if kind == "ws":
                    k = text.rfind("\n", i, j)
                    if k >= 0:
                        self.line += text.count("\n", i, j)
                        self.col = j - k - 1
                        nl = True
                    else:
                        self.col += j - i
                    ws = True
                elif kind == "line":
                    self.col += j - i
                    ws = True
                else:
                    word = m.group()
                    numbered = None
                    if kind == "ident":
                        if "«" in word:
                            break  # escaped names: the slow path unescapes them
                        if word in KEYWORDS:
                            kind = "keyword"
                        elif word == "_":
                            kind = "sym"
                        elif "." in word:
                            numbered = numbered_parts(word.split("."))
                    elif kind == "str":
                        word = word[1:-1]
                    toks.append(Token(kind, word, Pos(file, self.line, self.col), ws, nl,
                                      nat_literal(word) if kind == "nat" else numbered))
                    ws = nl = False
                    self.col += j - i
                self.i = j
                m = fast(text, j)
            skipped, saw_nl = self.skip_space()
            ws, nl = ws or skipped, nl or saw_nl
            if self.i >= self.n:
                toks.append(Token("eof", "", Pos(self.file, self.line, self.col), ws, nl))
                return toks
            start = self.i
            pos = Pos(self.file, self.line, self.col)
            self.numbered = None  # set by `ident`
            kind, value = self.token()
            # Doc comments and multi-line strings contain line breaks; the position is the start.
            word = self.text[start:self.i] if kind not in ("str",) else value
            if kind == "ident" and word in KEYWORDS:
                kind = "keyword"
            toks.append(Token(kind, word if kind != "ident" else value, pos, ws, nl,
                              value if kind == "nat" else
                              self.numbered if kind == "ident" else None))
            ws, nl = False, False

    def token(self) -> tuple[str, object]:
        c = self.text[self.i]
        text = self.text
        if text.startswith(("/--", "/-!"), self.i) and not text.startswith("/--/", self.i):
            kind = "doc" if self.at(2) == "-" else "moddoc"
            self.advance(3)
            self.comment_body()
            return kind, None
        if c == '"':
            return "str", self.string()
        if c == "r" and self._raw_string_start():
            return "str", self.raw_string()
        if c == "'" and self.at(1) != "'":
            self.char_literal()
            return "char", None
        if is_digit(c):
            return self.number()
        if c == "«" or is_id_first(c):
            name = self.ident()
            if name == "_":
                return "sym", None
            return "ident", name
        for sym in SYMBOLS:
            if self.text.startswith(sym, self.i):
                self.advance(len(sym))
                return "sym", None
        what = f"U+{ord(c):04X}"
        raise self.error(f"expected token: the character {c!r} ({what}) does not begin any "
                         f"token of the Tyr subset of Lean")

    def ident(self) -> str:
        """Dotted names (`torch.linear`, `c.hidden`, `p.2`) are one token, as in Lean; the
        parts written as numerals are `self.numbered` (numbered fields: `p.«2»` is a name)."""
        parts = [self.ident_part()]
        numbered = []
        while self.at() == "." and (is_id_first(self.at(1)) or self.at(1) == "«"
                                    or is_digit(self.at(1))):
            self.advance(1)
            if is_digit(self.at()):
                j = self.i
                while j < self.n and is_digit(self.text[j]):
                    j += 1
                numbered.append(len(parts))
                parts.append(self.text[self.i:j])
                self.advance(j - self.i)
            else:
                parts.append(self.ident_part())
        self.numbered = tuple(numbered) or None
        return ".".join(parts)

    def ident_part(self) -> str:
        if self.at() == "«":
            start = (self.line, self.col + 1)
            j = self.text.find("»", self.i + 1)
            if j < 0:
                self.advance(self.n - self.i)
                raise self.error("unterminated identifier escape", start)
            part = self.text[self.i + 1:j]
            self.advance(j + 1 - self.i)
            return part
        j = self.i + 1
        while j < self.n and is_id_rest(self.text[j]):
            j += 1
        part = self.text[self.i:j]
        self.advance(j - self.i)
        return part

    def digits(self, ok, expecting: str, need: bool) -> None:
        """Lean's `takeDigitsFn`: `many (many '_' >> many1 digit)`."""
        while True:
            c = self.at()
            if c == "_":
                need = True
            elif c and ok(c):
                need = False
            elif need:  # Lean's words; `expecting` says what was wanted
                raise self.error(f"unexpected {'character' if c else 'end of input'} "
                                 f"(expected a {expecting})")
            else:
                return
            self.advance(1)

    def number(self) -> tuple[str, object]:
        start = self.i
        if self.at() == "0" and self.at(1) and self.at(1) in "bBoOxX":
            base = self.at(1).lower()
            self.advance(2)
            ok = {"b": lambda c: c in "01", "o": lambda c: "0" <= c <= "7",
                  "x": lambda c: c in _HEX}[base]
            name = {"b": "binary", "o": "octal", "x": "hexadecimal"}[base]
            self.digits(ok, f"{name} number", True)
            return "nat", nat_literal(self.text[start:self.i])
        self.digits(is_digit, "decimal number", False)
        if self.at() not in (".", "e", "E"):
            return "nat", nat_literal(self.text[start:self.i])
        if self.at() == ".":  # `1.` is a scientific literal too
            self.advance(1)
            if is_digit(self.at()):
                self.digits(is_digit, "decimal number", False)
        if self.at() in ("e", "E"):
            at_e = (self.line, self.col)  # Lean reports a missing exponent at the `e`
            self.advance(1)
            if self.at() in ("+", "-"):
                self.advance(1)
            if not is_digit(self.at()):
                raise self.error("missing exponent digits in scientific literal", at_e)
            self.digits(is_digit, "decimal number", False)
        return "sci", None

    def quoted(self, in_string: bool) -> str:
        """After a `\\`: Lean's `quotedCharCoreFn`; returns the character(s) it stands for."""
        c = self.at()
        if not c:
            raise self.error("unexpected end of input")
        if c in _QUOTABLE:
            self.advance(1)
            return _QUOTABLE[c]
        if c in ("x", "u"):
            self.advance(1)
            digits = ""
            for _ in range(2 if c == "x" else 4):
                d = self.at()
                if not d:
                    raise self.error("unexpected end of input")
                if d not in _HEX:
                    raise self.error("invalid hexadecimal numeral")
                digits += d
                self.advance(1)
            return chr(int(digits, 16))
        if in_string and c == "\n":
            seen = False  # Lean's `stringGapFn`: exactly one line break, then spaces
            while self.i < self.n and self.at() in " \n\t\r":
                if self.at() == "\n":
                    if seen:
                        raise self.error("unexpected additional newline in string gap")
                    seen = True
                self.advance(1)
            return ""
        raise self.error("invalid escape sequence")

    def string(self) -> str:
        start = (self.line, self.col)
        self.advance(1)
        out: list[str] = []
        while True:
            c = self.at()
            if not c:
                raise self.error("unterminated string literal", start)
            self.advance(1)
            if c == '"':
                return "".join(out)
            out.append(self.quoted(True) if c == "\\" else c)

    def _raw_string_start(self) -> bool:
        j = self.i + 1
        while j < self.n and self.text[j] == "#":
            j += 1
        return j < self.n and self.text[j] == '"'

    def raw_string(self) -> str:
        """`r"…"`, `r#"…"#`: no escapes; closed by `"` and as many `#` as opened."""
        start = (self.line, self.col)
        hashes = 0
        self.advance(1)
        while self.at() == "#":
            hashes += 1
            self.advance(1)
        self.advance(1)
        close = '"' + "#" * hashes
        j = self.text.find(close, self.i)
        if j < 0:
            self.advance(self.n - self.i)
            raise self.error("unterminated raw string literal", start)
        body = self.text[self.i:j]
        self.advance(j + len(close) - self.i)
        return body

    def char_literal(self) -> None:
        self.advance(1)
        c = self.at()
        if not c:
            raise self.error("unexpected end of input")
        self.advance(1)
        if c == "\\":
            self.quoted(False)
        if self.at() != "'":
            raise self.error("missing end of character literal")
        self.advance(1)


def tokenize(text: str, file: str, line: int = 1) -> list[Token]:  # `line`: the first's
    return _Lexer(text, file, line).tokens()
