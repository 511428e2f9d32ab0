"""Incremental re-checks equal full checks (rust-analyzer's discipline): after random edits of
the GPT, a check that reuses the previous one has the same diagnostics, the same types at the
same places, the same declarations at the same lines and the same graph as a check from
scratch. An edit re-checks what it touches and what depends on it, and reuses the rest."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.errors import TyrError
from pytyr.lean.instantiate import instantiate_model
from pytyr.lsp.analysis import Analysis, analyse
from pytyr.lsp.lookup import Lookup

ROOT = Path(__file__).resolve().parents[1]
GPT = (ROOT / "examples" / "gpt" / "GPT.lean").read_text(encoding="utf-8")
NANOCHAT = ROOT / "examples" / "nanochat" / "NanoChat.lean"
VALUES = {"c": {**json.loads((ROOT / "examples" / "gpt" / "config.json").read_text())["model"]["c"],
                "vocab": 75}, "b": 2, "t": 16}


def _view(a: Analysis) -> dict:
    """What an editor and `tyr graph` see of a check."""
    look = Lookup(a)
    shown = a.shown
    out = {
        "diagnostics": a.diagnostics,
        "bindings": [(b.at, b.name, look.binding(b).type) for d in look.decls
                     for b in d.bindings],
        "terms": sorted((span, look.shower.typed(t)) for span, t in a.typed),
        "refs": sorted((span, r.name, str(getattr(r.info, "pos", None))) for span, r in a.refs),
        "declared": sorted((n, str(i.pos)) for n, i in a.prog.env.decls.items()
                           if getattr(i, "pos", None) is not None and i.pos.file == shown),
    }
    if not a.diagnostics and "gpt" in a.prog.models():
        try:
            out["graph"] = instantiate_model(a.prog, "gpt", VALUES).to_dict()
        except TyrError as err:  # an edit the checker accepts and the instantiation refuses
            out["graph"] = str(err)
    return out


EDIT = st.tuples(st.integers(0, len(GPT)), st.integers(0, 30),
                 st.sampled_from(["", "\n", "\n\n", "x", ")", "-- a comment\n", "4 * ", " ",
                                  "c.vocab", "let y := x\n  ", "3 * c.n_embd",
                                  "\ndef extra (n : Nat) : Nat := n + 1\n"]))


@settings(max_examples=30, deadline=None)
@given(st.lists(EDIT, min_size=1, max_size=3))
def test_an_incremental_check_equals_a_full_check(tmp_path_factory, edits):
    path = tmp_path_factory.getbasetemp() / "GPT.lean"
    text = GPT
    prev = analyse(path, text)
    for at, cut, insert in edits:
        at = at % (len(text) + 1)
        text = text[:at] + insert + text[at + cut:]
        inc = analyse(path, text, previous=prev)
        assert _view(inc) == _view(analyse(path, text))
        prev = inc


def test_an_edit_reuses_what_it_does_not_touch(tmp_path):
    path = tmp_path / "GPT.lean"
    a = analyse(path, GPT)
    assert a.cache is not None and a.cache.reused == 0
    # inside `mlp`'s body: `mlp` and what comes after in its text are checked again
    text = GPT.replace("let h := gelu (linearBias3", "let h := gelu  (linearBias3")
    b = analyse(path, text, previous=a)
    assert b.diagnostics == [] and b.cache.checked == 1 and b.cache.reused > 10
    # lines added at the top: every declaration moves, none is checked again
    c = analyse(path, "-- a comment\n\n" + text, previous=b)
    assert c.cache.checked == 0 and c.cache.reused == b.cache.reused + 1
    assert _view(c) == _view(analyse(path, "-- a comment\n\n" + text))


def test_a_changed_declaration_rechecks_what_depends_on_it(tmp_path):
    path = tmp_path / "GPT.lean"
    a = analyse(path, GPT)
    # the MLP's structure changes; `mlp`, whose text did not, uses it: it is checked again
    text = GPT.replace("c_proj : T #[c.n_embd, 4 * c.n_embd]", "c_proj : T #[c.n_embd, 3 * c.n_embd]")
    b = analyse(path, text, previous=a)
    assert [d.message.split(" has type")[0] for d in b.diagnostics] == [
        "argument 'M' of 'linearBias3'"]
    assert b.diagnostics == analyse(path, text).diagnostics
    # and back: the error goes, as in a full check
    c = analyse(path, GPT, previous=b)
    assert c.diagnostics == [] and _view(c) == _view(analyse(path, GPT))


def test_nanochat_after_edits_equals_a_full_check(tmp_path):
    text = NANOCHAT.read_text(encoding="utf-8")
    path = tmp_path / "NanoChat.lean"
    prev = analyse(path, text)
    for old, new in [("\n\n", "\n\n\n"), ("c.rope_base", "c.rope_base "),
                     ("(hl : 0 < c.depth)", "(hl : 1 < c.depth)")]:
        text = text.replace(old, new, 1)
        inc = analyse(path, text, previous=prev)
        full = analyse(path, text)
        assert inc.diagnostics == full.diagnostics
        assert _view(inc)["terms"] == _view(full)["terms"]
        prev = inc


def test_a_numbered_field_in_a_dotted_name_is_looked_up_by_number(tmp_path):
    # `q.2.1`: `2` is `Q`'s second field (`y`), `q.«1»`'s `1` is `R`'s field named `1`
    text = ("import Tyr\nopen torch\n"
            "structure R where\n  «0» : T #[3]\n  «1» : T #[4]\n"
            "structure Q where\n  x : T #[5]\n  y : T #[2] × T #[6]\n  r : R\n"
            "def f (q : Q) : T #[2] := q.2.1\n"
            "def g (q : Q) : T #[4] := q.r.«1»\n")
    path = tmp_path / "M.lean"
    path.write_text(text, encoding="utf-8")
    a = analyse(path, text)
    assert a.diagnostics == []
    look = Lookup(a)
    line_f, line_g = 10, 11
    f_col = text.splitlines()[line_f - 1].index("q.2.1")
    two = look.at((line_f, f_col + 2))
    assert two is not None and two.type == "T #[2] × T #[6]", two
    assert (two.target.line, two.target.col) == (8, 2)  # `y`, the second field
    g_col = text.splitlines()[line_g - 1].index("q.r.«1»")
    r = look.at((line_g, g_col + 2))
    assert r is not None and r.type == "R" and (r.target.line, r.target.col) == (9, 2)
