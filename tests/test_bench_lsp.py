"""Smoke test of `python -m bench --only lsp`: a real client times opens in fresh processes,
re-checks, hovers, completions and inlay hints of the three example files through `tyr lsp`,
and measures its memory over edits; the results are well formed (no timing or memory
asserted)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository
    sys.path.insert(0, str(ROOT))

from bench import Row, lsp  # noqa: E402


def test_lsp_results_well_formed():
    # at smoke size, the GPT alone (the benchmark: the GPT, NanoChat and Flux)
    assert [p.name for p in lsp.FILES] == ["GPT.lean", "NanoChat.lean", "Flux.lean"]
    r = lsp.run(iters=1, files=lsp.FILES[:1])
    assert r["benchmark"] == "lsp" and r["goal_ms"] == 100.0 and r["open_goal_ms"] == 1000.0
    assert r["hover_goal_ms"] == 16.0 and r["inlay_goal_ms"] == 50.0
    assert set(r["open"]) == {"examples/gpt/GPT.lean"}
    assert all(o["n"] == 1 and o["median_ms"] > 0 for o in r["open"].values())
    assert set(r["files"]) == {"examples/gpt/GPT.lean"}
    for f in r["files"].values():
        assert f["recheck"]["n"] == 1 and f["hover"]["n"] == 2
        assert f["completion"]["n"] == 2 and f["inlay"]["n"] == 1
        assert 0 < f["recheck"]["first_ms"] and 0 < f["hover"]["median_ms"]
        assert f["hovers_with_config"] == 2  # every hover had the config's numbers
        assert f["hints"] == f["lets"]  # a hint for every let of the file
    m = r["memory"]
    assert (m["edits"], m["warmup"], m["every"]) == (100, 100, 10)
    assert 0 < m["rss_start_mib"] and m["growth_mib"] == m["rss_end_mib"] - m["rss_start_mib"]
    rows = lsp.rows(r)
    assert len(rows) == 6 and all(isinstance(x, Row) for x in rows)
    judged = [x.what for x in rows if x.verdict]  # every row has its goal
    assert judged == ["lsp open → first diagnostic, cold process examples/gpt/GPT.lean",
                      "lsp re-check after an edit examples/gpt/GPT.lean",
                      "lsp hover examples/gpt/GPT.lean", "lsp completion examples/gpt/GPT.lean",
                      "lsp inlay hints, whole file examples/gpt/GPT.lean",
                      "lsp memory growth over 100 edits examples/gpt/GPT.lean"]
    json.dumps(r)


def test_value_positions_are_where_the_values_start():
    text = "def f :=\n  let qkv := x\n  let y : T := qkv\n  y\n"
    assert lsp.value_positions(text) == [(1, 13), (2, 15)]
    assert lsp.edited(text) == text.replace(":= qkv", ":=  qkv")  # the middle let's value


def test_let_positions_are_the_names():
    text = "def f :=\n  let qkv := x\n  let y : T := qkv\n  y\n"
    assert lsp.let_positions(text) == [(1, 6), (2, 6)]
