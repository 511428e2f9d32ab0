"""Positions between the checker (code points) and a client (UTF-16 units by default, or what
it negotiated): a point survives the round trip, on lines with characters of any plane. The
word a completion is asked for: the one before the cursor, found in time linear in it."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types as lsp
from pygls.workspace.position_codec import PositionCodec

from pytyr.lsp.complete import Site, site
from pytyr.lsp.convert import Units

LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
               max_size=30)


@given(st.lists(LINE, min_size=1, max_size=4), st.data(),
       st.sampled_from([lsp.PositionEncodingKind.Utf16, lsp.PositionEncodingKind.Utf8,
                        lsp.PositionEncodingKind.Utf32]))
def test_a_point_survives_the_round_trip(lines, data, encoding):
    units = Units(PositionCodec(encoding))
    line = data.draw(st.integers(1, len(lines)))
    col = data.draw(st.integers(0, len(lines[line - 1])))
    pos = units.position(lines, (line, col))
    assert pos.line == line - 1
    assert units.point(lines, pos) == (line, col)


def test_utf16_counts_a_crab_as_two_units():
    units = Units(PositionCodec(lsp.PositionEncodingKind.Utf16))
    lines = ["let 🦀 := x"]
    assert units.position(lines, (1, 6)) == lsp.Position(0, 7)
    assert units.point(lines, lsp.Position(0, 7)) == (1, 6)
    assert units.point(lines, lsp.Position(9, 99)) == (1, len(lines[0]))  # clamped


STOP = set(" \t()[]{}⟨⟩,:=#@+-*/%<>≤×→|;\"")


@given(st.text(st.sampled_from("ab.c_ (:+⟨\t1"), max_size=40), st.data())
def test_the_completion_site_is_the_word_before_the_cursor(line, data):
    col = data.draw(st.integers(0, len(line)))
    k = col
    while k > 0 and line[k - 1] not in STOP:
        k -= 1
    word = line[k:col]
    s = site(line, (3, col))
    assert s.start == (3, k) and s.dot == ("." in word)
    assert (s.prefix + "." + s.partial if s.dot else s.partial) == word


def test_the_completion_site_of_a_long_line_is_found_in_linear_time():
    """A word search anchored at the line's end (`...*$`) took 6 s for 20,000 characters
    before a space, and grows with the square: 50,000 here would take half a minute."""
    line = "a" * 50_000 + " p.c_"
    assert site(line, (1, len(line))) == Site("p", "c_", (1, 50_001), True)
