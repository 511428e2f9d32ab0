"""Lexing an edited text again only where the edit touched it gives the tokens of lexing it
whole: after random edits of the examples (comments and strings opened and closed included),
and where the piece does not lex on its own."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.errors import LeanError
from pytyr.lean.lexer import tokenize
from pytyr.lsp.relex import relex

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [(ROOT / "examples" / f).read_text(encoding="utf-8")
         for f in ("gpt/GPT.lean", "nanochat/NanoChat.lean")]
PIECES = ["", "\n", "x", " ", "/-", "-/", "/-- doc -/\n", "--", '"', '"s"', "\n\n", "def f := 1\n",
          "(", "«", "0.5", "\t", "-- c\n", "⟨", "\r\n"]


def _lex(text: str) -> list | str:
    try:
        return tokenize(text, "F.lean")
    except LeanError as err:
        return str(err)


def _relex(old: str, toks: list, text: str) -> list | str:
    try:
        return relex(old, toks, text, "F.lean")
    except LeanError as err:
        return str(err)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([0, 1]), st.lists(st.tuples(st.floats(0, 1), st.integers(0, 40),
                                                   st.sampled_from(PIECES)),
                                         min_size=1, max_size=3))
def test_relexing_equals_lexing_after_random_edits(which, edits):
    text = TEXTS[which]
    toks = tokenize(text, "F.lean")
    for where, cut, piece in edits:
        at = int(where * len(text))
        new = text[:at] + piece + text[at + cut:]
        got, want = _relex(text, toks, new), _lex(new)
        assert got == want
        if isinstance(got, str):
            return
        text, toks = new, got


def test_an_edit_inside_a_declaration_reuses_the_tokens_of_the_others():
    text = TEXTS[1]
    toks = tokenize(text, "F.lean")
    at = text.index("let a := toCaches")
    new = text[:at] + "let a :=  toCaches" + text[at + len("let a := toCaches"):]
    got = relex(text, toks, new, "F.lean")
    assert got == tokenize(new, "F.lean")
    assert got[0] is toks[0] and got[-1] is toks[-1]  # the same objects, not lexed again
    ids = {id(t) for t in toks}
    # from the line at column 0 before the edit (the declaration's) to the one after it
    assert len(toks) - 300 <= sum(id(t) in ids for t in got) < len(toks)


@pytest.mark.parametrize("piece", ["/-", '"'])
def test_a_comment_or_string_opened_by_the_edit_lexes_the_whole_text(piece):
    text = TEXTS[0]
    toks = tokenize(text, "F.lean")
    at = text.index("def mlp")
    new = text[:at] + piece + text[at:]
    assert _relex(text, toks, new) == _lex(new)
