"""The lexer follows Lean 4's lexical rules, with Lean's verdicts, positions and messages.

Each case is a one-line file; the expected error is what Lean 4.35 prints for it (the real
front end confirms every case where it can be installed: `tests/lean/real.py`).
"""
from __future__ import annotations

import math

import pytest

from pytyr.errors import LeanError
from pytyr.lean.lexer import tokenize
from tests.lean.helpers import check_src, one_error
from tests.lean.real import lean_messages, real_lean

# (name, source, Lean's first error as (line, col, message prefix), or None: it lexes)
LEXICAL = [
    ("digit separators", "def x := 1_000", None),
    ("hexadecimal", "def x := 0x1F", None),
    ("binary, upper-case prefix", "def x := 0B11", None),
    ("octal", "def x := 0o17", None),
    ("trailing dot is scientific", "def x := 1.", None),
    ("exponent with sign", "def x := 1E+5", None),
    ("dot then exponent", "def x := 1.e5", None),
    ("separator in a fraction", "def x := 1.5_0", None),
    ("missing exponent digits", "def x := 1e",
     (1, 10, "missing exponent digits in scientific literal")),
    ("base prefix without digits", "def x := 0x\n", (1, 11, "unexpected character")),
    ("binary prefix at the end", "def x := 0b", (1, 11, "unexpected end of input")),
    ("trailing separator", "def x := 1_\n", (1, 11, "unexpected character")),
    ("Lean's escapes", "def x := \"a\\x41\\u0041\\r\\t\\n\\\\\\\"\\'\"", None),
    ("invalid escape", "def x := \"\\q\"", (1, 11, "invalid escape sequence")),
    ("short hex escape", "def x := \"\\x4\"", (1, 13, "invalid hexadecimal numeral")),
    ("escape at the end", "def x := \"a\\", (1, 12, "unexpected end of input")),
    ("string gap", "def x := \"a\\\n   b\"", None),
    ("string gap of two lines", "def x := \"a\\\n \n  b\"",
     (2, 1, "unexpected additional newline in string gap")),
    ("space after backslash", "def x := \"a\\ b\"", (1, 12, "invalid escape sequence")),
    ("line break in a string", "def x := \"abc\ndef\"", None),
    ("unterminated string", "def x := \"abc\n", (1, 9, "unterminated string literal")),
    ("raw string", "def x := r\"a\\b\"", None),
    ("raw string with hashes", "def x := r#\"a\"b\"#", None),
    ("unterminated raw string", "def x := r#\"a\"b\"", (1, 9, "unterminated raw string literal")),
    ("unterminated comment at the end", "/- abc\ndef y := 2\n", (3, 0, "unterminated comment")),
    ("Latin-1 letter", "def é := 1", None),
    ("Latin Extended-A letter", "def ā := 1", None),
    ("double-struck letter", "def 𝔸 := 1", None),
    ("subscripts", "def x₁ := 1\ndef xⱼ := 2", None),
    ("escaped name", "def «a b» := 1", None),
    ("unterminated name escape", "def x := «ab", (1, 10, "unterminated identifier escape")),
    ("Arabic-Indic digit", "def x := ٣", (1, 9, "expected token")),
    ("stray symbol", "def x := ¢", (1, 9, "expected token")),
    ("no-break space", "def x :=\u00a01", (1, 8, "expected token")),
    ("tab", "def x :=\t1",
     (1, 8, "tabs are not allowed; please configure your editor to expand them")),
    ("isolated carriage return", "def x := 1\rdef y := 2\n",
     (1, 10, "isolated carriage returns are not allowed")),
    ("CRLF line ends", "def x := 1\r\ndef y := 2\r\n", None),
    ("λ is lambda", "def x := λ y => y", None),
    ("↦ in fun", "def x := fun y ↦ y", None),
]


def _first_error(src: str):
    try:
        tokenize(src, "t.lean")
    except LeanError as err:
        d = err.diagnostics[0]
        return d.pos.line, d.pos.col, d.message
    return None


@pytest.mark.parametrize("name,src,want", LEXICAL, ids=[c[0] for c in LEXICAL])
def test_the_lexer_has_leans_verdict(name, src, want):
    got = _first_error(src)
    if want is None:
        assert got is None, got
    else:
        assert got is not None, "lexed what Lean rejects"
        assert got[:2] == want[:2] and got[2].startswith(want[2]), got


@pytest.mark.parametrize("name,src,want", LEXICAL, ids=[c[0] for c in LEXICAL])
def test_real_lean_agrees(tmp_path, name, src, want):
    lean = real_lean()
    msgs = lean_messages(lean, tmp_path, src)
    # Without the real Init every body fails to elaborate; lexical errors are the others.
    lexical = [m for m in msgs if not _is_elaboration(m.first_line)]
    if want is None:
        assert lexical == [], lexical
    else:
        line, col, text = want
        assert any((m.line, m.col) == (line, col) and m.first_line.startswith(text.split(" (")[0])
                   for m in lexical), msgs


def _is_elaboration(msg: str) -> bool:
    return msg.startswith(("Unknown constant", "Unknown identifier", "Failed to infer")) \
        or "universe level" in msg


def test_greek_letters_lean_reserves_are_not_identifier_letters():
    assert [t.text for t in tokenize("λx", "t")][:2] == ["λ", "x"]
    assert [t.kind for t in tokenize("aλ", "t")][:2] == ["ident", "sym"]
    for c in "ΠΣ":
        with pytest.raises(LeanError, match="expected token"):
            tokenize(f"def {c} := 1", "t")
    assert tokenize("αβγ Δ ϕ", "t")[0].text == "αβγ"


def test_numerals_take_their_value_as_lean_reads_them():
    vals = [t.value for t in tokenize("1_000 0x1F 0b101 0o17 007", "t") if t.kind == "nat"]
    assert vals == [1000, 31, 5, 15, 7]
    assert [t.kind for t in tokenize("1. 1e5 2.5", "t")][:3] == ["sci", "sci", "sci"]


def test_string_escapes_and_gaps_decode_as_in_lean():
    (s, *_) = tokenize('"a\\x41\\u00e9\\t\\\n    b"', "t")
    assert s.text == "aAé\tb"
    (r, *_) = tokenize('r#"x"y\\n"#', "t")
    assert r.text == 'x"y\\n'


def test_lambda_and_unicode_names_check(tmp_path):
    src = ("def é₁ : Nat := 0x10 + 2\n"
           "def g (x : T #[é₁]) : T #[18] :=\n  let h := λ (y : T #[18]) ↦ relu y\n  h x\n")
    assert check_src(tmp_path, src) == []


def test_a_char_literal_is_lexed_then_outside_the_subset(tmp_path):
    d = one_error(tmp_path, "def c : Nat := 'a'")
    assert "character literals are not in the Tyr subset" in d.message and d.pos.line == 3


def test_huge_literals_are_exact_naturals(tmp_path):
    big = "1" + "0" * 5000
    src = f"def f (x : T #[{big} / {big[:-1]}]) : T #[10] := x\n"
    assert check_src(tmp_path, src) == []
    d = one_error(tmp_path, f"def f (x : T #[{big}]) : T #[1] := x\n")
    assert "T #[1" + "0" * 20 in d.message  # printed whole, beyond Python's 4,300 digits


def test_float_literals_overflow_and_underflow_as_in_lean():
    from pytyr.lean.numerals import float_literal
    assert float_literal("1e400") == math.inf and float_literal("1e-400") == 0.0
    assert float_literal("1" + "0" * 400 + ".0") == math.inf
    assert float_literal("0.1") == 0.1 and float_literal("1.7976931348623157e308") > 1e308
    # Lean keeps 64 bits of the mantissa (truncated) before rounding to a double, so a few
    # literals land one ulp below the correctly rounded value (Float.ofScientific).
    assert float_literal("3752974648811.914163071e-148") == 3.752974648811914e-136
    assert float("3752974648811.914163071e-148") == 3.7529746488119145e-136
