"""`Vector.extract` (Lean core's `Init/Data/Vector/Basic.lean`: `extract (xs : Vector α n)
(start : Nat := 0) (stop : Nat := n) : Vector α (min stop n - start)`): a run of a stack's
layers, folded on its own; FLUX.2's text encoder keeps the stream after three such runs.
Checked with Lean's type, instantiated as Lean computes it (the items `start` to `stop`,
clamped to the vector)."""
from __future__ import annotations

import pytest

from pytyr.lean import check_files, load
from pytyr.lean.instantiate import instantiate_model
from tests.lean.helpers import check_src

STACK = """
structure B (n : Nat) where
  w : T #[n, n] := normal 0.1
  deriving TensorStruct

structure Ps (n l : Nat) where
  blocks : Vector (B n) l
  deriving TensorStruct

def run {n b k : Nat} (xs : Vector (B n) k) (x : T #[b, n]) : T #[b, n] :=
  xs.foldl (fun y blk => linear y blk.w) x

@[model]
def m (n l i j : Nat) {b : Nat} (p : Ps n l) (x : T #[b, n]) : T #[b, n] × T #[b, n] :=
  let a := run (p.blocks.extract 0 i) x
  (a, run (p.blocks.extract i j) a)

@[model]
def rest (n l i : Nat) {b : Nat} (p : Ps n l) (x : T #[b, n]) : T #[b, n] :=
  run (p.blocks.extract i) x
"""


def _weights(tmp_path, model: str, values: dict) -> list[str]:
    path = tmp_path / "S.lean"
    path.write_text("import Tyr\nopen torch\n" + STACK, encoding="utf-8")
    assert check_files(path) == []
    g = instantiate_model(load(path), model, {"n": 2, "b": 1, **values})
    return [n.inputs[1] for n in g.nodes if n.op == "linear"]


def test_runs_of_a_stack_fold_their_own_layers(tmp_path):
    assert _weights(tmp_path, "m", {"l": 5, "i": 2, "j": 4}) == [
        "blocks.0.w", "blocks.1.w", "blocks.2.w", "blocks.3.w"]


@pytest.mark.parametrize("values,want", [
    ({"l": 3, "i": 1}, ["blocks.1.w", "blocks.2.w"]),  # stop defaults to the length
    ({"l": 3, "i": 5}, []),  # past the end: empty, as Lean's min clamps
])
def test_the_stop_defaults_to_the_end_and_clamps(tmp_path, values, want):
    assert _weights(tmp_path, "rest", values) == want


def test_a_run_has_lean_s_length_in_its_type(tmp_path):
    # `min stop n - start` elements, not a vector of the stack's length: both runs refused
    fixed = STACK.replace("def run {n b k : Nat} (xs : Vector (B n) k)",
                          "def run {n b : Nat} (xs : Vector (B n) 4)")
    first, rest = check_src(tmp_path, fixed)
    assert (first.pos.line, rest.pos.line) == (17, 22)  # the runs, past the 2-line prelude
    # as Lean prints it: `start` is the default `0`, and `min i l - 0` is not folded
    assert "has type Vector (B n) (min i l - 0) but is expected" in first.message, first.message
    assert "has type Vector (B n) (min l l - i) but is expected" in rest.message, rest.message
