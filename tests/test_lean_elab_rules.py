"""Lean's elaboration rules the checker follows, each pinned by Lean's verdict and message:
the expected type is propagated into an application before its explicit arguments
(`propagateExpectedType` in `src/Lean/Elab/App.lean`), binder defaults are elaborated at the
declaration (`optParam`), and `deriving C` needs an instance of `C` for every field."""
from __future__ import annotations

import pytest

from tests.lean.helpers import check_src, one_error

# ---- propagateExpectedType --------------------------------------------------------------


def test_the_expected_type_solves_implicits_before_the_arguments(tmp_path):
    # `linear {m n b} (x : T #[b, m]) (M : T #[n, m]) : T #[b, n]` against `T #[2, 5]`: Lean
    # unifies the result first (?b := 2, ?n := 5), so the wrong argument is `w`, at its column.
    src = "def f (x : T #[2, 3]) (w : T #[4, 3]) : T #[2, 5] := linear x w"
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col) == (3, src.rindex("w"))
    assert d.message == ("argument 'M' of 'linear' has type T #[4, 3] but is expected to have "
                         "type T #[5, 3]; ?n := 5 comes from the expected type")


def test_without_an_expected_type_the_arguments_decide(tmp_path):
    # The README's example: no expected type, so `?n` is still open at `w`.
    src = ("def bad :=\n  let x : T #[32, 768] := zeros\n  let w : T #[768, 512] := zeros\n"
           "  linear x w\n")
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col) == (6, 11) and "T #[?n, 768]" in d.message


def test_propagation_lets_a_literal_take_the_expected_type(tmp_path):
    # `id' 2 : Float`: the expected type gives `?α := Float` before `2` is elaborated, so the
    # literal is a Float (Lean accepts; elaborating `2` first would make `?α := Nat`).
    src = ("def id' {α : Type} (a : α) : α := a\n"
           "def f : Float := id' 2\n"
           "def g (x : T #[2]) : T #[2] := scale x (id' 3)\n")
    assert check_src(tmp_path, src) == []


def test_no_propagation_when_the_result_depends_on_an_explicit_argument(tmp_path):
    # `reshape (x : T s) (target : Shape) : T target`: the result mentions `target`, so Lean
    # does not propagate; the mismatch is the whole application's, at its start.
    src = "def f (x : T #[6]) : T #[3, 2] := reshape x #[2, 3]"
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col) == (3, src.index("reshape"))
    assert d.message.startswith("type mismatch: 'reshape ...' has type T #[2, 3]")


def test_a_failed_propagation_is_silent(tmp_path):
    # `relu x : T #[3]` with `x : T #[2]`: propagation fails quietly; the argument is reported.
    d = one_error(tmp_path, "def f (x : T #[2]) : T #[3] := relu x")
    assert d.message.startswith("argument 'x' of 'relu' has type T #[2]")


# ---- binder defaults --------------------------------------------------------------------

def test_a_default_is_elaborated_at_the_declaration(tmp_path):
    # Lean elaborates `(k : Nat := "a")` when it checks `f`, whether or not a call uses it.
    src = 'def f (x : T #[2]) (k : Nat := "a") : T #[2] := x'
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col) == (3, src.index('"a"'))
    assert d.message == ("type mismatch: this term has type String but is expected to have "
                         "type Nat")


def test_a_default_may_use_earlier_binders_and_is_instantiated_at_the_call(tmp_path):
    src = ("def pad (n : Nat) (k : Nat := n + 1) (x : T #[k]) : T #[k] := x\n"
           "def f (x : T #[5]) : T #[5] := pad 4 (x := x)\n")
    assert check_src(tmp_path, src) == []
    d = one_error(tmp_path, src.replace("pad 4 (x := x)", "pad 3 (x := x)"))
    assert "argument 'x' of 'pad' has type T #[5]" in d.message


def test_an_unknown_name_in_a_default_is_reported_at_the_default(tmp_path):
    src = "def f (x : T #[2]) (eps : Float := epsilon) : T #[2] := x"
    d = one_error(tmp_path, src)
    assert d.message.startswith("unknown identifier 'epsilon'")
    assert d.pos.col == src.index("epsilon")


# ---- deriving needs instances -----------------------------------------------------------

BLOCK = ("structure C where\n  d : Nat\n  n : Nat\n"
         "structure Block (c : C) where\n  w : T #[c.d] := zeros\n{block_deriving}"
         "structure Net (c : C) where\n  blocks : Vector (Block c) c.n\n  deriving TensorStruct\n")


def test_deriving_through_a_vector_needs_the_element_instance(tmp_path):
    d = one_error(tmp_path, BLOCK.format(block_deriving=""))
    assert (d.pos.line, d.pos.col) == (10, 11)  # the class name in `deriving TensorStruct`
    assert d.message.startswith("failed to synthesize TensorStruct (Block c): deriving "
                                "TensorStruct for 'Net' needs an instance for field 'blocks'")
    ok = BLOCK.format(block_deriving="  deriving TensorStruct\n")
    assert check_src(tmp_path, ok) == []


@pytest.mark.parametrize("cls,field,ok", [
    ("Repr", "x : Float", True), ("BEq", "x : Nat", True), ("DecidableEq", "x : Float", False),
    ("Repr", "x : T #[2]", False), ("Inhabited", "x : T #[2]", True),
    ("TensorStruct", "x : Nat", True), ("TensorStruct", "x : Array Nat", False),
    ("TensorStruct", "x : T #[2] × IT #[3] 5", True), ("BEq", "x : Vector Nat 3", True),
    ("Repr", "x : Vector (T #[2]) 3", False),
])
def test_deriving_checks_every_field_type(tmp_path, cls, field, ok):
    src = f"structure S where\n  {field}\n  deriving {cls}\n"
    diags = check_src(tmp_path, src)
    if ok:
        assert diags == []
    else:
        assert len(diags) == 1 and diags[0].message.startswith(f"failed to synthesize {cls}")


def test_deriving_for_an_inductive_checks_constructor_arguments(tmp_path):
    assert check_src(tmp_path, "inductive K where\n  | a (x : Nat)\n  | b\n  deriving Repr\n") == []
    d = one_error(tmp_path, "inductive K where\n  | a (x : T #[2])\n  deriving Repr\n")
    assert d.message.startswith("failed to synthesize Repr (T #[2])")
    # `Inhabited` needs one constructor whose arguments all have instances.
    assert check_src(tmp_path, "inductive K where\n  | a (x : T #[2] → Nat)\n  | b\n"
                               "  deriving Inhabited\n") == []


def test_an_unbound_name_in_a_header_asks_for_its_binder(tmp_path):
    # `autoImplicit` (on by default, `src/Lean/Elab/AutoBound.lean`) would bind `n` as an
    # implicit argument; lakefile.lean turns it off, so Lean says `unknown identifier` too
    # (the probe *an unbound name in a signature is an error* of tests/test_lean_fidelity.py).
    src = "def f (x : T #[n]) : T #[n] := x"
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col) == (3, src.index("n"))
    assert d.message == ("unknown identifier 'n'; a name in a signature needs its binder "
                         "`{n : ...}`: `autoImplicit` is off, in Lean too (lakefile.lean)")
    d = one_error(tmp_path, "def f (x : T #[2]) : T #[2] := relu y")
    assert d.message == "unknown identifier 'y'"


# ---- `≠` is `Ne` ------------------------------------------------------------------------
# `Init/Core.lean`: `@[reducible] def Ne (a b : α) : Prop := ¬(a = b)` and
# `infix:50 " ≠ " => Ne`; the real Lean judges the same programs in tests/test_lean_fidelity.py.

NE = "def f (a b : Nat) (h : a ≠ b) : Nat := a\n"


def test_a_hypothesis_a_ne_b_proves_a_ne_b_up_to_defeq(tmp_path):
    ok = NE + "def g (x y : Nat) (h : x ≠ 3 * (y + 1)) : Nat := f x (3 * y + 3) h\n"
    assert check_src(tmp_path, ok) == []
    src = NE + "def g (x y : Nat) (h : x ≠ y) : Nat := f y x h\n"
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col) == (4, src.splitlines()[-1].rindex("h"))
    assert d.message == "argument 'h' of 'f' has type x ≠ y but is expected to have type y ≠ x"


def test_ne_is_neither_lt_nor_le(tmp_path):
    # `Ne a b` unfolds to `a = b → False`, not to `Nat.le`: no `<`/`≤` conversion applies.
    for rel in ("<", "≤"):
        d = one_error(tmp_path, NE + f"def g (x y : Nat) (h : x {rel} y) : Nat := f x y h\n")
        assert d.message == (f"argument 'h' of 'f' has type x {rel} y but is expected to have "
                             f"type x ≠ y")


def test_by_decide_evaluates_a_closed_ne(tmp_path):
    # `decide` evaluates `instDecidableNot (Nat.decEq a b)` (`Init/Prelude.lean`, `Init/Core.lean`).
    pick = "def pick (x : T #[2]) (k : Nat) (h : k ≠ 0 := by decide) : T #[2] := x\n"
    assert check_src(tmp_path, pick + "def g (x : T #[2]) : T #[2] := pick x 3\n") == []
    d = one_error(tmp_path, pick + "def g (x : T #[2]) : T #[2] := pick x 0\n")
    assert d.message == ("`by decide` failed for argument 'h' of 'pick': the proposition "
                         "0 ≠ 0 is false (0 = 0)")
    d = one_error(tmp_path, pick + "def g (x : T #[2]) (n : Nat) : T #[2] := pick x n\n")
    assert "the proposition n ≠ 0 mentions variables" in d.message


def test_ne_does_not_chain_and_is_nat_only(tmp_path):
    # `infix:50` is `notation:50 lhs:51 " ≠ " rhs:51`: `a ≠ b ≠ c` does not parse.
    src = "def f (a b c : Nat) (h : a ≠ b ≠ c) : Nat := a"
    d = one_error(tmp_path, src)
    assert (d.pos.col, d.message) == (src.rindex("≠"), "`≠` does not chain (`infix:50`); add "
                                                      "parentheses")
    d = one_error(tmp_path, "def f (a b : Float) (h : a ≠ b) : Nat := 0")
    assert d.message == "'≠' on Float is not in the Tyr subset of Lean (Nat only)"


def test_a_character_outside_the_subset_says_so(tmp_path):
    # `∣` is a token of Lean (`Init/Prelude.lean`'s `Dvd.dvd` notation), not of the subset's
    # lexer.
    src = "def f (a b : Nat) (h : a ∣ b) : Nat := 0"
    d = one_error(tmp_path, src)
    assert (d.pos.col, d.message) == (src.index("∣"), "expected token: the character '∣' "
                                      "(U+2223) does not begin any token of the Tyr subset of Lean")


# ---- `≥` and `>` ----------------------------------------------------------------------------
# `Init/Prelude.lean`: `a ≥ b` (also `a >= b`) is `GE.ge a b` and `a > b` is `GT.gt a b`, both
# `infix:50`, and `@[reducible] def GE.ge a b := LE.le b a`, `GT.gt a b := LT.lt b a`: the
# hypothesis `h : n ≥ 1` is definitionally `1 ≤ n` and proves what that proves.

@pytest.mark.parametrize("hyp", ["(h : c.n ≥ 1)", "(h : c.n >= 1)", "(h : c.n > 0)",
                                 "(h : c.n ≥ 3)"])
def test_a_hypothesis_with_ge_or_gt_is_the_flipped_le_or_lt(tmp_path, hyp):
    src = NET + f"def first (c : C) (p : Net c) {hyp} : T #[2] := p.layers[0]\n"
    assert check_src(tmp_path, src) == []


def test_ge_and_gt_decide_as_le_and_lt_flipped(tmp_path):
    pick = "def pick (x : T #[2]) (k : Nat) (h : k > 2 := by decide) : T #[2] := x\n"
    assert check_src(tmp_path, pick + "def g (x : T #[2]) : T #[2] := pick x 3\n") == []
    d = one_error(tmp_path, pick + "def g (x : T #[2]) : T #[2] := pick x 2\n")
    assert d.message.startswith("`by decide` failed for argument 'h' of 'pick': the "
                                "proposition 2 > 2 is false"), d.message
    ge = "def f (k : Nat) (h : k ≥ 2 := by decide) : Nat := k\ndef g : Nat := f 2\n"
    assert check_src(tmp_path, ge) == []


def test_ge_does_not_chain_and_says_it_as_written(tmp_path):
    d = one_error(tmp_path, "def f (a b c : Nat) (h : a ≥ b ≥ c) : Nat := 0")
    assert d.message == "`≥` does not chain (`infix:50`); add parentheses"
    # `n > 5` is `Nat.le 6 n`, not `Nat.le 2 n`: a mismatch, printed as the author wrote it;
    # `2 ≤ n` is `n ≥ 2` itself
    need = "def need (n : Nat) (h : n ≥ 2) : Nat := n\n"
    d = one_error(tmp_path, need + "def g (n : Nat) (h : n > 5) : Nat := need n h\n")
    assert d.message == "argument 'h' of 'need' has type n > 5 but is expected to have type n ≥ 2"
    assert check_src(tmp_path, need + "def g (n : Nat) (h : 2 ≤ n) : Nat := need n h\n") == []


# ---- `fun` and `λ` as arguments -----------------------------------------------------------
# `src/Lean/Parser/Term.lean`: `fun` is `leading_parser:maxPrec` (`λ` is its other spelling),
# so it is an argument without parentheses, and its body (`termParser`) extends as far as it
# can: `f fun x => x y` is `f (fun x => x y)`.

TWICE = "def twice (x : Nat) (f : Nat → Nat) : Nat := f (f x)\n"


@pytest.mark.parametrize("arg", ["fun k => k + 1", "λ k ↦ k + 1", "fun (k : Nat) => k",
                                 "(fun k => k + 1)"])
def test_a_fun_is_an_argument(tmp_path, arg):
    assert check_src(tmp_path, TWICE + f"def y : Nat := twice 3 {arg}\n") == []


def test_a_fun_argument_takes_the_rest_as_its_body(tmp_path):
    src = TWICE + "def y (n : Nat) : Nat := twice 3 fun k => k n\n"
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col) == (4, src.splitlines()[-1].rindex("k n"))
    assert d.message == "'k' is not a function; it has type Nat"
    two = "def two (f g : Nat → Nat) : Nat := f (g 0)\n"
    assert check_src(tmp_path, two + "def y : Nat := two (fun k => k) fun j => j\n") == []


# ---- `xs[i]` on a Vector: the bound as `get_elem_tactic` proves it --------------------------
# `src/Init/Tactics.lean`: `get_elem_tactic` is `first | done | assumption |
# get_elem_tactic_extensible | fail …`, the extensible one trying `trivial`, `simp +arith` and
# `omega`. The checker does `assumption` (a hypothesis in scope whose type is `i < n` up to
# definitional equality, innermost first) and proves `i < n` from a least value of `n` that
# numbers and the hypotheses `k ≤ x`, `k < x`, `x = k` give: linear arithmetic, which `omega`
# decides, so all it proves Lean proves; what needs more (upper bounds, subtraction, a
# contradiction) is an error that Lean may accept. The real Lean cannot judge these without
# `Init` (the `xs[i]` macro and the tactics are declared there), so Lean's source is the
# reference.

NET = ("structure C where\n  n : Nat\n"
       "structure Net (c : C) where\n  layers : Vector (T #[2]) c.n\n")


@pytest.mark.parametrize("hyp,idx", [("(h : 0 < c.n)", 0), ("(h : 1 ≤ c.n)", 0),
                                     ("(h : 0 + 1 ≤ c.n)", 0), ("(h : 2 ≤ c.n)", 0),
                                     ("(h : 2 ≤ c.n)", 1), ("(h : 2 < c.n)", 2),
                                     ("(h : c.n = 3)", 2), ("(h : 4 = c.n)", 3),
                                     ("(h : 1 ≤ c.n) (h2 : 3 ≤ c.n)", 2)])
def test_an_index_is_proved_by_a_hypothesis(tmp_path, hyp, idx):
    # `0 < c.n` is `Nat.lt 0 c.n := Nat.le (0 + 1) c.n`: `assumption` takes any of the first
    # three; `omega` proves the others from the least value the hypotheses give `c.n`
    src = NET + f"def first (c : C) (p : Net c) {hyp} : T #[2] := p.layers[{idx}]\n"
    assert check_src(tmp_path, src) == []


@pytest.mark.parametrize("size,hyp,idx", [
    ("n + 1", "", 0), ("2 * n + 1", "(h : 1 ≤ n)", 2), ("n / 2", "(h : 4 ≤ n)", 1),
    ("n + n", "(h : 2 ≤ n)", 3), ("3 * n", "(h : 2 ≤ n)", 5)])
def test_an_index_is_proved_below_a_sizes_least_value(tmp_path, size, hyp, idx):
    src = f"def f (n m : Nat) {hyp} (xs : Vector (T #[2]) ({size})) : T #[2] := xs[{idx}]\n"
    assert check_src(tmp_path, src) == []
    d = one_error(tmp_path, src.replace(f"xs[{idx}]", f"xs[{idx + 1}]"))
    assert d.message.startswith(f"cannot prove the index {idx + 1} < "), d.message


@pytest.mark.parametrize("hyp,idx", [("", 0), ("(h : 0 < c.n)", 1), ("(h : 0 ≤ c.n)", 0),
                                     ("(h : 2 ≤ c.n)", 2), ("(h : c.n = 3)", 3),
                                     ("(h : c.n ≤ 5)", 0)])
def test_an_index_without_its_hypothesis_is_an_error(tmp_path, hyp, idx):
    src = NET + f"def first (c : C) (p : Net c) {hyp} : T #[2] := p.layers[{idx}]\n"
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col) == (7, src.splitlines()[-1].rindex(str(idx)))
    assert d.message == (f"cannot prove the index {idx} < c.n; the Tyr subset indexes vectors "
                         f"with closed numbers, proved below the size by numbers and "
                         f"hypotheses `h : k ≤ x`, `k < x` or `x = k` in scope, or by "
                         f"`h : {idx} < c.n`")


def test_what_omega_proves_beyond_least_values_is_an_error_lean_accepts(tmp_path):
    # the subset's limit, stated: `3 ≤ n` gives `0 < n - 1` to `omega`, not to the checker
    src = "def f (n : Nat) (h : 3 ≤ n) (xs : Vector (T #[2]) (n - 1)) : T #[2] := xs[0]\n"
    assert one_error(tmp_path, src).message.startswith("cannot prove the index 0 < n - 1")


def test_a_product_of_two_terms_proves_nothing_as_in_omega(tmp_path):
    # `omega` is linear: `n * m` is an atom to it, so `2 ≤ n` and `3 ≤ m` do not give `5 <
    # n * m`; the checker must not accept what Lean rejects
    src = ("def f (n m : Nat) (h : 2 ≤ n) (k : 3 ≤ m) (xs : Vector (T #[2]) (n * m)) : T #[2] "
           ":= xs[0]\n")
    assert one_error(tmp_path, src).message.startswith("cannot prove the index 0 < n * m")


def test_a_closed_index_is_decided(tmp_path):
    vec = "def f (xs : Vector (T #[2]) 2) : T #[2] := xs[IDX]\n"
    assert check_src(tmp_path, vec.replace("IDX", "1")) == []
    d = one_error(tmp_path, vec.replace("IDX", "2"))
    assert d.message == "index 2 is out of bounds: the vector has 2 elements"
    # `assumption` comes first: a false hypothesis in scope proves anything, in Lean too.
    assert check_src(tmp_path, vec.replace("(xs", "(h : 2 < 2) (xs").replace("IDX", "2")) == []


# ---- tactic blocks run last ---------------------------------------------------------------
# `src/Lean/Elab/SyntheticMVars.lean`: a `by` block (an argument `(h := by decide)` or a
# binder's `:= by decide`) is a synthetic metavariable that `synthesizeSyntheticMVarsNoPostponing`
# runs after the rest of the declaration is elaborated; a type mismatch found meanwhile ends
# the declaration before any tactic runs. The probes *a failing `by` is not reported before …*
# of tests/test_lean_fidelity.py pin it against the real Lean.

PROOF = ("def f (x : T #[2]) (h : 2 = 3) (y : T #[3]) : T #[2] := x\n"
         "def pick (x : T #[2]) (k : Nat) (h : k < 3 := by decide) : T #[2] := x\n")


@pytest.mark.parametrize("use", ["f x (h := by decide) y", "pick x 5"])
def test_a_failing_by_decide_is_reported_after_the_rest_of_its_declaration(tmp_path, use):
    body = f"  let a := {use}\n  y\n"
    d = one_error(tmp_path, PROOF + "def g (x : T #[2]) (y : T #[3]) : T #[4] :=\n" + body)
    assert (d.pos.line, d.pos.col) == (7, 2)
    assert d.message == "type mismatch: 'y' has type T #[3] but is expected to have type T #[4]"
    d = one_error(tmp_path, PROOF + "def g (x : T #[2]) (y : T #[3]) : T #[3] :=\n" + body)
    assert d.message.startswith("`by decide` failed for argument 'h'")
    assert (d.pos.line, d.pos.col) == (6, 11 + (use.index("by") if "by" in use else 0))


def test_of_failing_tactics_the_earliest_is_reported(tmp_path):
    src = (PROOF + "def g (x : T #[2]) (y : T #[3]) : T #[2] :=\n"
           "  let a := f x (h := by decide) y\n  pick x 7\n")
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.message) == (6, "`by decide` failed for argument 'h' of 'f': the "
                                          "proposition 2 = 3 is false (2 ≠ 3)")


# ---- a mismatch stuck on a metavariable waits ---------------------------------------------
# `ensureHasType` (`src/Lean/Elab/Term.lean`) tries a coercion where `isDefEq` fails; with
# `Init/Coe.lean`'s `instance : CoeT α a α`, the search for `CoeT (T #[3]) x (T #[?a * 2])` is
# stuck while the types are (`Nat.mul` recurses on `?a`), so `mkCoe` postpones it to the end
# of the declaration. `?a + 2` is `succ (succ ?a)`: no value of `?a` mends `n =?= ?a + 2`, and
# that mismatch is reported at once. The probes *a stuck mismatch …* pin it against Lean.

GSTUCK = "def g {a : Nat} (x : T #[a * 2]) (y : T #[a]) (z : T #[5]) : Nat := a\n"


def test_a_stuck_mismatch_waits_for_a_later_argument(tmp_path):
    ok = GSTUCK + "def h (x : T #[14]) (y : T #[7]) (z : T #[5]) : Nat := g x y z\n"
    assert check_src(tmp_path, ok) == []
    src = GSTUCK + "def h (x : T #[3]) (y : T #[7]) (z : T #[5]) : Nat := g x y z\n"
    d = one_error(tmp_path, src)  # still a mismatch at the end: reported where it is
    assert (d.pos.line, d.pos.col) == (4, src.splitlines()[-1].rindex("x"))
    assert d.message.startswith("argument 'x' of 'g' has type T #[3] but is expected to have "
                                "type T #[14]")  # with what `y` solved


def test_a_stuck_mismatch_is_reported_after_the_declarations_hard_ones(tmp_path):
    src = GSTUCK + ("def h (x : T #[3]) (y : T #[7]) (z : T #[4]) : Nat := g x y z\n"
                    "def k (x : T #[3]) (y : T #[7]) (z : T #[5]) (w : T #[4]) : T #[5] :=\n"
                    "  let u := g x y z\n  w\n")
    diags = check_src(tmp_path, src)
    assert [(d.pos.line, d.pos.col) for d in diags] == [(4, src.splitlines()[1].rindex("z")),
                                                         (7, 2)]
    assert diags[1].message == ("type mismatch: 'w' has type T #[4] but is expected to have "
                                "type T #[5]")


def test_a_mismatch_no_metavariable_mends_is_reported_at_once(tmp_path):
    g = "def g {a : Nat} (x : T #[a + 2]) (y : T #[a]) (z : T #[5]) : Nat := a\n"
    src = g + "def h (n : Nat) (x : T #[n]) (y : T #[7]) (z : T #[4]) : Nat := g x y z\n"
    d = one_error(tmp_path, src)
    assert d.message.startswith("argument 'x' of 'g' has type T #[n] but is expected to have "
                                "type T #[?a + 2]")


# ---- numbered fields ------------------------------------------------------------------------
# `src/Lean/Elab/App.lean` (`LVal.fieldIdx`): `e.i`, `i` a numeral from 1, is the `i`-th field of
# `e`'s structure; an escaped name `e.«1»` is the field named `1`. The probes *`p.1` is
# `p.fst`* and the others of tests/test_lean_fidelity.py pin the rule against the real Lean.

DIGITS = ("structure P where\n  «0» : T #[2]\n  «1» : T #[3]\n"
          "def f (p : P) : T #[RESULT] := BODY\n")


@pytest.mark.parametrize("body,result", [("p.«1»", 3), ("p.1", 2), ("p.2", 3), ("p.«0»", 2)])
def test_a_numeral_is_a_numbered_field_and_an_escaped_name_a_name(tmp_path, body, result):
    src = DIGITS.replace("BODY", body).replace("RESULT", str(result))
    assert check_src(tmp_path, src) == []
    d = one_error(tmp_path, src.replace(f"#[{result}] :=", f"#[{5 - result}] :="))
    assert d.message.startswith(f"type mismatch: '{body}' has type T #[{result}]"), d.message


@pytest.mark.parametrize("body,col,message", [
    ("p.3", 0, "invalid projection: index 3 is invalid for P; it must be between 1 and 2"),
    ("p.0", 1, "invalid field notation: '.0' is no field; numbered fields count from 1 "
               "(`.1` is the first)"),
    ("(p).0", 3, "invalid field notation: '.0' is no field; numbered fields count from 1 "
                 "(`.1` is the first)"),
    ("(p).1.0", 5, "invalid field notation: '.0' is no field; numbered fields count from 1 "
                   "(`.1` is the first)"),
    ("p.2.0", 3, "invalid field notation: '.0' is no field; numbered fields count from 1 "
                 "(`.1` is the first)"),
])
def test_a_numbered_field_out_of_range_is_an_error_where_lean_puts_it(tmp_path, body, col,
                                                                      message):
    src = DIGITS.replace("BODY", body).replace("RESULT", "2")
    d = one_error(tmp_path, src)
    assert (d.pos.line, d.pos.col, d.message) == (6, src.splitlines()[-1].index(body) + col,
                                                  message)


def test_a_numbered_field_of_a_declaration_is_a_field_not_a_name(tmp_path):
    # `pair.2` is `pair`'s second field: a numeral never continues a declaration's name
    src = "def pair : Nat × Float := (1, 2.0)\ndef f : Float := pair.2\n"
    assert check_src(tmp_path, src) == []
    d = one_error(tmp_path, src.replace("pair.2\n", "pair.3\n"))
    assert d.message == ("invalid projection: index 3 is invalid for Nat × Float; it must be "
                         "between 1 and 2")
