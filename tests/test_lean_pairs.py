"""Pairs as a fold's accumulator: `p.fst`, `p.snd`, `Prod.fst p`, `Prod.snd p` (Lean's
projections of `α × β`), checked and instantiated (the KV-cache step models use them)."""
from __future__ import annotations

import pytest

from pytyr.lean import check_files, load
from pytyr.lean.instantiate import instantiate_model
from tests.lean.helpers import check_src, one_error

FOLD = """
structure B (n : Nat) where
  w : T #[n, n] := normal 0.1
  deriving TensorStruct

structure Ps (n l : Nat) where
  blocks : Vector (B n) l
  deriving TensorStruct

def step {n b : Nat} (p : B n) (s : T #[b, n] × (T #[b, n] × T #[b, n])) :
    T #[b, n] × (T #[b, n] × T #[b, n]) :=
  let x := linear s.fst p.w
  (x, (s.snd.snd, add s.snd.fst x))

@[model]
def m (n l : Nat) {b : Nat} (p : Ps n l) (x : T #[b, n]) :
    T #[b, n] × (T #[b, n] × T #[b, n]) :=
  p.blocks.foldl (fun s blk => step blk s) (x, (x, x))
"""


@pytest.mark.parametrize("body", ["(p.snd, p.fst)", "(Prod.snd p, Prod.fst p)",
                                  "(p.snd, (Prod.fst p))"])
def test_projections_check(tmp_path, body):
    src = f"def swap (p : T #[2] × T #[3]) : T #[3] × T #[2] := {body}"
    assert check_src(tmp_path, src) == []


@pytest.mark.parametrize("src,frags", [
    ("def f (p : T #[2] × T #[3]) : T #[2] := p.snd", ["T #[3]", "T #[2]"]),
    ("def f (p : T #[2] × T #[3]) : T #[2] := p.third", ["invalid field 'third'"]),
    ("def f (x : T #[2]) : T #[2] := x.fst", ["invalid field 'fst'", "T #[2]"]),
    ("def f (x : T #[2]) : T #[2] := Prod.fst x", ["argument 'p' of 'Prod.fst'", "T #[2]"]),
])
def test_projections_are_typed(tmp_path, src, frags):
    d = one_error(tmp_path, src)
    assert d.pos.line == 3
    for frag in frags:
        assert frag in d.message, (frag, d.message)


def test_fold_threads_a_pair_of_stacks(tmp_path):
    path = tmp_path / "F.lean"
    path.write_text("import Tyr\nopen torch\n" + FOLD, encoding="utf-8")
    assert check_files(path) == []
    g = instantiate_model(load(path), "m", {"n": 3, "l": 2, "b": 1})
    ops = [(n.op, n.inputs) for n in g.nodes]
    # layer 0: x1 = lin x, s = (x1, (x, x + x1)); layer 1: x2 = lin x1, s = (x2, (x + x1, x + x2))
    assert ops == [("linear", ["x", "blocks.0.w"]), ("add", ["x", "%0"]),
                   ("linear", ["%0", "blocks.1.w"]), ("add", ["x", "%2"])]
    assert [o.ref for o in g.outputs] == ["%2", "%1", "%3"]
