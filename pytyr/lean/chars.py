"""Lean's character classes for names (`src/Lean/Parser/Basic.lean`: `isLetterLike`,
`isSubScriptAlnum`, `isIdFirst`, `isIdRest`), as predicates for the lexer's character by
character path and as regular expressions for its fast path (`NAME`, also the editor's)."""
from __future__ import annotations


def is_letter_like(c: str) -> bool:
    """Lean's `isLetterLike`: Greek but `λ Π Σ`, Coptic, letter-like symbols, Latin-1."""
    v = ord(c)
    return ((0x3B1 <= v <= 0x3C9 and v != 0x3BB)
            or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
            or 0x3CA <= v <= 0x3FB or 0x1F00 <= v <= 0x1FFE or 0x2100 <= v <= 0x214F
            or 0x1D49C <= v <= 0x1D59F or (0xC0 <= v <= 0xFF and v not in (0xD7, 0xF7))
            or 0x100 <= v <= 0x17F)


def is_subscript_alnum(c: str) -> bool:
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A or v == 0x2C7C


# The same classes as regular expressions, for the fast path of `_Lexer.tokens`.
_LETTER_LIKE = ("\u03b1-\u03ba\u03bc-\u03c9\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9"
                "\u03ca-\u03fb\u1f00-\u1ffe\u2100-\u214f\U0001d49c-\U0001d59f"
                "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff\u0100-\u017f")
_SUBSCRIPT = "\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a\u2c7c"
_PART = f"(?:[A-Za-z_{_LETTER_LIKE}][A-Za-z0-9_'!?{_LETTER_LIKE}{_SUBSCRIPT}]*|«[^»]*»)"
NAME = rf"{_PART}(?:\.(?:{_PART}|[0-9]+))*"  # a dotted name, as `_Lexer.ident` reads it


def _ascii_alpha(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z")


def is_id_first(c: str) -> bool:
    return _ascii_alpha(c) or c == "_" or is_letter_like(c)


def is_id_rest(c: str) -> bool:
    return (_ascii_alpha(c) or "0" <= c <= "9" or c in "_'!?" or is_letter_like(c)
            or is_subscript_alnum(c))


def numbered_parts(parts: list[str]) -> tuple[int, ...] | None:
    """The indices of the parts of a dotted name written as numerals (`p.2.1`: 1, 2)."""
    return tuple(i for i, p in enumerate(parts) if p[:1].isdigit()) or None


def is_digit(c: str) -> bool:
    return "0" <= c <= "9"  # `Char.isDigit` is ASCII only
