"""Float attributes whose Lean type admits any value are checked against their meaning on
every graph a model source gives (`pytyr.ir.ranges`): one line naming the op, its source
place and the config value, before any work; values inside the range pass."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.cli import main
from pytyr.ir.ranges import RANGES

ROOT = Path(__file__).resolve().parents[1]
BERT = ["examples/bert/Bert.lean", "--model", "bert", "--set", "model.b=1", "--set", "model.t=8"]
# (command line before --set, config key, attribute, a value inside the range)
CASES = [
    (["examples/gpt/GPT.lean", "--model", "gpt"], "model.c.dropout", "p", 0.5),
    (BERT, "model.c.eps", "eps", 0.0),
    (BERT, "model.c.attn_dropout", "p", 0.0),
    (["examples/nanochat/NanoChat.lean", "--model", "nanochat"], "model.c.rope_base", "base",
     5e5),
    (["examples/nanochat/NanoChat.lean", "--model", "nanochat"], "model.c.softcap", "cap", 30.0),
    (["examples/flux/Flux.lean", "--model", "flux"], "model.c.theta", "theta", 1e4),
]


def _graph(argv: list[str], capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    rc = main(["graph", *argv])
    return rc, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("argv, key, attr, good", CASES, ids=[c[1] for c in CASES])
def test_a_value_outside_the_meaning_is_refused_in_one_line(argv, key, attr, good, capsys,
                                                             monkeypatch):
    monkeypatch.chdir(ROOT)
    rule = RANGES[attr]
    bad = rule.low - 1 if rule.low_open is False else rule.low  # just outside
    rc, err = _graph([*argv, "--set", f"{key}={bad}"], capsys)
    assert rc == 1 and len(err) == 1, err
    assert f"has {rule.what} {float(bad)}" in err[0] and f"{key} is {float(bad)}" in err[0]
    assert ".lean:" in err[0].split(" has ")[0]  # the op's place in the source
    rc, err = _graph([*argv, "--set", f"{key}={good}"], capsys)
    assert rc == 0, err


@settings(max_examples=40, deadline=None)
@given(attr=st.sampled_from(sorted(RANGES)),
       v=st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_each_range_holds_exactly_inside_its_bounds(attr, v):
    rule = RANGES[attr]
    inside = (v > rule.low if rule.low_open else v >= rule.low) and v < rule.high
    assert rule.holds(v) == inside
    assert rule.holds(rule.low) is (not rule.low_open)
    assert not rule.holds(rule.low - 1) and not rule.holds(rule.high)
    assert str(rule) in (f"[{rule.low:g}, {rule.high:g})", f"≥ {rule.low:g}", f"> {rule.low:g}")
    assert (rule.high == math.inf) == (str(rule)[0] in "≥>")
