"""A width that is not written as a product: the mismatch says why and what to write."""
from __future__ import annotations

import pytest

from pytyr.lean import check_files

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
