"""Mutated Lean sources — truncated, bytes flipped, lines deleted or repeated, deep nesting,
huge literals, odd Unicode — give located diagnostics: never a Python exception, never a hang."""
from __future__ import annotations

import time
import unicodedata
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytyr.lean import check_files

ROOT = Path(__file__).resolve().parents[1]
CORPUS = {p: (ROOT / p).read_bytes() for p in
          ["examples/gpt/GPT.lean", "examples/mlp/MLP.lean", "Tyr/Ops.lean", "Tyr/NN.lean"]}
ODD = ["\u200b", "\u200e", "\u202e", "\ufeff", "\u00a0", "\u2028", "\u0301", "\x00", "\x1b",
       "\U0001f600", "\ue000", "ß", "ﬁ", "٣", "²", "λ", "Π", "Σ", "«", "»", "\r", "\t", "\\"]


def _mutation():
    pos = st.floats(0, 1)
    return st.one_of(
        st.tuples(st.just("truncate"), pos),
        st.tuples(st.just("flip"), pos, st.integers(0, 7)),
        st.tuples(st.just("delete"), pos, st.integers(1, 8)),
        st.tuples(st.just("repeat"), pos, st.integers(1, 4)),
        st.tuples(st.just("swap"), pos, pos),
        st.tuples(st.just("nest"), pos, st.integers(50, 3000), st.sampled_from("([{⟨")),
        st.tuples(st.just("literal"), pos, st.integers(1, 20000),
                  st.sampled_from(["", "e9", ".5e-", "e-99999999999"])),
        st.tuples(st.just("unicode"), pos,
                  st.lists(st.sampled_from(ODD), min_size=1, max_size=4)),
    )


def _apply(src: bytes, m: tuple) -> bytes:
    kind, where = m[0], m[1]
    k = int(where * len(src))
    lines = src.split(b"\n")
    at = int(where * len(lines))
    if kind == "truncate":
        return src[:k]
    if kind == "flip":
        return src[:k] + bytes([src[k] ^ (1 << m[2])]) + src[k + 1:] if k < len(src) else src
    if kind == "delete":
        return b"\n".join(lines[:at] + lines[at + m[2]:])
    if kind == "repeat":
        return b"\n".join(lines[:at] + lines[at:at + 1] * (m[2] + 1) + lines[at + 1:])
    if kind == "swap":
        j = int(m[2] * len(lines))
        if at < len(lines) and j < len(lines):
            lines[at], lines[j] = lines[j], lines[at]
        return b"\n".join(lines)
    if kind == "nest":
        close = {"(": ")", "[": "]", "{": "}", "⟨": "⟩"}[m[3]]
        ins = (m[3] * m[2] + "x" + close * m[2]).encode()
    elif kind == "literal":
        ins = ("7" * m[2] + m[3]).encode()
    else:
        ins = "".join(m[2]).encode("utf-8", "surrogatepass")
    return src[:k] + ins + src[k:]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(CORPUS)), mutations=st.lists(_mutation(), min_size=1,
                                                                 max_size=3))
def test_mutated_sources_give_located_diagnostics(tmp_path, name, mutations):
    src = CORPUS[name]
    for m in mutations:
        src = _apply(src, m)
    f = tmp_path / "Fuzz.lean"
    f.write_bytes(src)
    t0 = time.perf_counter()
    diags = check_files(f)  # must not raise
    assert time.perf_counter() - t0 < 30, "the checker took too long"
    nlines = src.count(b"\n") + 1
    for d in diags:
        assert d.message and "Traceback" not in d.message
        if d.pos.file.endswith("Fuzz.lean"):
            assert 1 <= d.pos.line <= nlines, d


def test_odd_characters_are_errors_naming_the_code_point(tmp_path):
    for ch in ["\u200b", "\u202e", "\U0001f600", "\x00"]:
        f = tmp_path / "U.lean"
        f.write_text("import Tyr\nopen torch\ndef f : Nat := 1 " + ch + " 2\n", encoding="utf-8")
        (d,) = check_files(f)
        assert (d.pos.line, d.pos.col) == (3, 17), d
        assert f"U+{ord(ch):04X}" in d.message, (unicodedata.name(ch, "?"), d.message)


def test_an_import_the_file_system_cannot_name_is_an_unknown_module(tmp_path):
    f = tmp_path / "I.lean"
    f.write_text("import Tyr" + "7" * 5000 + "\n")
    (d,) = check_files(f)
    assert (d.pos.line, d.pos.col) == (1, 0) and d.message.startswith("unknown module 'Tyr777")
