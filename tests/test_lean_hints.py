"""Notes after a type mismatch: a width that is not written as a product says why and what to
write, only where a product could not be split; the argument that fixed a dimension is named;
types are printed in the author's words; an open `by decide` gets advice that fits."""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from pytyr.lean import check_files
from tests.lean.helpers import examples_layout

HEAD = """import Tyr
open torch

structure Cfg where
  width : Nat
  n_head : Nat
  head_dim : Nat

"""
NOTE = ("note: a dimension is compared by its form, and unification never splits one into "
        "a product")


def _errors(tmp_path, body: str) -> list[str]:
    path = tmp_path / "M.lean"
    path.write_text(HEAD + body)
    return [str(d) for d in check_files(path)]


@pytest.mark.parametrize("body,col", [
    # the metavariables' product against an atom: Lean's unifier is stuck
    ("def f (c : Cfg) {b t : Nat} (x : T #[b, t, c.width]) : T #[b, t, c.width] :=\n"
     "  let q := splitHeads x\n  mergeHeads q\n", "10:22"),
    # the expected type propagated: the product of config fields against the atom
    ("def f (c : Cfg) {b t : Nat} (x : T #[b, t, c.width]) :\n"
     "    T #[b, c.n_head, t, c.head_dim] :=\n  splitHeads x\n", "11:13"),
])
def test_a_plain_width_names_the_product_to_write(tmp_path, body, col):
    [err] = _errors(tmp_path, body)
    assert f"M.lean:{col}: error: argument 'x' of 'splitHeads' has type T #[b, t, c.width]" in err
    assert NOTE in err and "docs/first-model.md#widths-are-products" in err


@pytest.mark.parametrize("body", [
    # both sides are products: the order is the problem, not the form
    "def f (c : Cfg) {b : Nat} (x : T #[b, 1, c.head_dim * c.n_head]) :\n"
    "    T #[b, c.n_head, 1, c.head_dim] :=\n  splitHeads x\n",
    # plain numbers that differ
    "def f {b : Nat} (x : T #[b, 3]) : T #[b, 4] :=\n  linear x (zeros : T #[4, 5])\n",
])
def test_other_mismatches_carry_no_note(tmp_path, body):
    errs = _errors(tmp_path, body)
    assert errs and not any("note:" in e for e in errs), errs


# ---- the note only where a product could not be split -----------------------------------

@pytest.mark.parametrize("body,note", [
    # a number against the op's product: the factors are given by name
    ("def f (x : T #[2, 12]) : T #[2, 12] :=\n  let y := splitLast x\n  x\n",
     "note: unification never splits the number 12 into a product: give the op's implicit "
     "arguments by name"),
    # the width, after the expected type fixed the heads: compared by its form
    ("def f (c : Cfg) {b t : Nat} (x : T #[b, t, c.width]) :\n"
     "    T #[b, c.n_head, t, c.head_dim] :=\n  splitHeads x\n", NOTE),
])
def test_the_note_says_what_cannot_be_split(tmp_path, body, note):
    [err] = _errors(tmp_path, body)
    assert note in err, err


@pytest.mark.parametrize("body", [
    # a transposed weight: both sides have the product; the order is wrong
    "def f (c : Cfg) {b : Nat} (x : T #[b, c.n_head * c.head_dim]) (w : T #[c.width, c.n_head * "
    "c.head_dim]) :\n    T #[b, c.width] :=\n  linear x (transpose w)\n",
    # the heads fixed by another argument: the product was split, into the wrong factors
    "def f (c : Cfg) {b t : Nat} (q : T #[b, 3, t, c.n_head * c.head_dim])\n"
    "    (k : T #[b, c.n_head, t, c.head_dim]) : T #[b, 3, t, c.n_head * c.head_dim] :=\n"
    "  causalAttention q k k 0.0\n",
    # a product of numbers against a number: a value that differs, not a form
    "def g {c : Nat} (x : T #[c * (2 * 2)]) (y : T #[c]) : T #[c] := y\n"
    "def f (x : T #[128]) (y : T #[33]) : T #[33] :=\n  g x y\n",
])
def test_no_note_where_nothing_needed_splitting(tmp_path, body):
    errs = _errors(tmp_path, body)
    assert errs and not any("note:" in e for e in errs), errs


# ---- the argument that fixed a dimension ----------------------------------------------

@pytest.mark.parametrize("body,said", [
    # the heads of `q` fix `?h` and `?d`; the error lands on `k`
    ("def f (c : Cfg) {b t : Nat} (q : T #[b, 3, t, c.width])\n"
     "    (k : T #[b, c.n_head, t, c.head_dim]) :=\n  causalAttention q k k 0.0\n",
     "argument 'k' of 'causalAttention' has type T #[b, c.n_head, t, c.head_dim] but is "
     "expected to have type T #[b, 3, t, c.width]; ?h := 3 and ?d := c.width come from "
     "argument 'q'"),
    # a later argument fixes `?c`; the stuck product fails at `x`
    ("def g {c : Nat} (x : T #[c * (2 * 2)]) (y : T #[c]) : Nat := 0\n"
     "def f (x : T #[128]) (y : T #[33]) : Nat :=\n  g x y\n",
     "argument 'x' of 'g' has type T #[128] but is expected to have type T #[132]; ?c := 33 "
     "comes from argument 'y'"),
    # the expected type fixes the output width of a linear layer
    ("def f (x : T #[2, 3]) (w : T #[4, 3]) : T #[2, 5] :=\n  linear x w\n",
     "argument 'M' of 'linear' has type T #[4, 3] but is expected to have type T #[5, 3]; "
     "?n := 5 comes from the expected type"),
])
def test_the_argument_that_fixed_a_dimension_is_named(tmp_path, body, said):
    [err] = _errors(tmp_path, body)
    assert err.endswith(said), err


# ---- in the author's words --------------------------------------------------------------

def test_a_width_is_printed_by_the_name_the_author_gave_it(tmp_path):
    # `Cfg.heads c` is printed `c.heads` (Lean's field notation) and not unfolded to
    # `c.width / c.head_dim`: `c.dim` unfolds one step where `?m * ?n` meets it, as Lean's lazy
    # delta reduction takes it, so `?m := c.heads`, the author's word
    body = ("def Cfg.heads (c : Cfg) : Nat := c.width / c.head_dim\n"
            "def Cfg.dim (c : Cfg) : Nat := c.heads * c.head_dim\n"
            "def f (c : Cfg) {b t : Nat} (x : T #[b, t, c.dim])\n"
            "    (y : T #[b, t, c.n_head, c.head_dim]) :=\n"
            "  add (splitLast3 x) y\n")
    [err] = _errors(tmp_path, body)
    assert err.endswith("argument 'y' of 'add' has type T #[b, t, c.n_head, c.head_dim] but is "
                        "expected to have type T #[b, t, c.heads, c.head_dim]; ?s := #[b, t, "
                        "c.heads, c.head_dim] comes from argument 'x'"), err


# ---- `by decide` on an open proposition: advice that fits -------------------------------

@pytest.mark.parametrize("body,said", [
    # the count of chunks comes from the type of `x`: a hypothesis proves it
    ("structure C2 where\n  k : Nat\n  d : Nat\n"
     "def f (c : C2) {a : Nat} (x : T #[a, c.k * c.d]) : T #[a, c.d] :=\n  chunk x 0\n",
     "the proposition 0 < c.k mentions variables, and `decide` needs a closed proposition; "
     "?n := c.k comes from argument 'x'; give the proof by name, `(h := h')`, from a "
     "hypothesis `(h' : 0 < c.k)` of the declaration"),
    # a shape with a variable: closed shapes, or the structural ops
    ("def f (n : Nat) (x : T #[2, n]) : T #[2 * n] :=\n  reshape x #[2 * n]\n",
     "mentions variables, and `decide` needs a closed proposition; ?s := #[2, n] comes from "
     "argument 'x'; use closed shapes, or the structural ops of `Tyr.Shape`"),
])
def test_an_open_obligation_gets_advice_that_fits(tmp_path, body, said):
    [err] = _errors(tmp_path, body)
    assert said in err, err
    assert "use closed shapes" not in err or "reshape" in body


def test_the_advised_hypothesis_checks(tmp_path):
    body = ("structure C2 where\n  k : Nat\n  d : Nat\n"
            "def f (c : C2) (h' : 0 < c.k) {a : Nat} (x : T #[a, c.k * c.d]) : T #[a, c.d] :=\n"
            "  chunk x 0 (h := h')\n")
    assert _errors(tmp_path, body) == []


# ---- measured over every example ----------------------------------------------------------

def test_a_transposed_weight_in_any_example_gets_no_split_note():
    # Every 2-D weight field of every example (`w : T #[a, b]`), transposed: the first error
    # says where the expected dimensions came from and never that a product cannot be split
    # (before, 12 of these 37 errors carried that note, pointing the wrong way).
    root = Path(__file__).resolve().parents[1]
    seen = 0
    for f in sorted((root / "examples").rglob("*.lean")):
        src = f.read_text(encoding="utf-8")
        for m in re.finditer(r"^  (\w+) : T #\[([^,\[\]]+), ([^,\[\]]+)\]", src, re.M):
            if m.group(2) == m.group(3):
                continue
            mutated = src[:m.start(2)] + m.group(3) + ", " + m.group(2) + src[m.end(3):]
            with tempfile.TemporaryDirectory() as tmp:  # imports resolved as in the repo
                path = examples_layout(Path(tmp)) / f.relative_to(root)
                path.write_text(mutated, encoding="utf-8")
                diags = check_files(path)
            if not diags:
                continue  # a square weight of equal sizes by another name
            seen += 1
            msg = diags[0].message
            assert "note:" not in msg and "comes from" in msg, (f.name, m.group(1), msg)
    assert seen >= 30
