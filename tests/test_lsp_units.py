"""Positions between the checker (code points) and a client (UTF-16 units by default, or what
it negotiated): a point survives the round trip, on lines with characters of any plane."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types as lsp
from pygls.workspace.position_codec import PositionCodec

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
