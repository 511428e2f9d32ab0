"""The recording checker behind hover checks exactly as `tyr check` does (same diagnostics on
every example and on random edits of one), and the spans it gives terms cover their source."""
from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.lean import check_files
from pytyr.lean.program import Program
from pytyr.lsp.analysis import analyse
from pytyr.lsp.text import children

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").rglob("*.lean"))
GPT = (ROOT / "examples" / "gpt" / "GPT.lean").read_text(encoding="utf-8")


def _plain(path: Path, text: str) -> list:
    prog = Program()
    prog.sources = {str(path.resolve()): text}
    prog.load_file(path)
    return prog.diagnostics


def test_every_example_checks_the_same_recorded_or_not():
    assert EXAMPLES
    for f in EXAMPLES:
        a = analyse(f, f.read_text(encoding="utf-8"))
        assert a.diagnostics == check_files(f) == [], f
        assert a.typed and a.refs, f


@settings(max_examples=40, deadline=None)
@given(st.integers(0, len(GPT)), st.integers(0, 40),
       st.sampled_from(["", "x", ")", "(", "c.vocab", "p.c_fc", "4 *", "let y := x\n  ",
                        "T #[b]", "0", "→", "by decide", "\n"]))
def test_random_edits_check_the_same_recorded_or_not(tmp_path_factory, at, cut, insert):
    path = tmp_path_factory.getbasetemp() / "GPT.lean"
    text = GPT[:at] + insert + GPT[at + cut:]
    assert analyse(path, text).diagnostics == _plain(path, text)


def test_spans_cover_their_terms_and_nest():
    for f in EXAMPLES:
        a = analyse(f, f.read_text(encoding="utf-8"))
        lines = a.source.lines
        for span, t in a.typed:
            (l1, c1), (l2, c2) = span
            assert (l1, c1) <= (t.expr.pos.line, t.expr.pos.col) < (l2, c2), (f, span)
            src = "\n".join([lines[l1 - 1][c1:]] + lines[l1:l2 - 1] + [lines[l2 - 1][:c2]]) \
                if l1 != l2 else lines[l1 - 1][c1:c2]
            for o, c in ("()", "[]"):
                assert src.count(o) == src.count(c), (f, span, src)
            for child in children(t.expr):
                cs = a.spans.get(id(child))
                assert cs is None or (span[0] <= cs[0] and cs[1] <= span[1]), (f, span, cs)
