"""Definitional equality on `Nat`, as Lean decides it (`Nat.add`, `Nat.sub`, `Nat.mul` recurse on
their second argument, `src/Init/Prelude.lean`, so a literal or a successor there unfolds;
`Nat.lt n m := Nat.le (n + 1) m`), and a property test that the checker never calls two terms
equal that differ for some values: no unsoundness. `tests/test_lean_fidelity.py` checks the
rules against the real Lean."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.lean.arith import nat_eval
from pytyr.lean.defeq import Normalizer, unify
from pytyr.lean.terms import Lit, MetaCtx, NatOp, Var
from tests.lean.helpers import check_src, one_error

# Lean accepts each: `example (n : Nat) (x : T #[a]) : T #[b] := x`.
ACCEPT = [
    ("n - 0 is n", "n - 0", "n"),
    ("n * 0 is 0", "n * 0", "0"),
    ("n + 1 - 1 is n", "n + 1 - 1", "n"),
    ("n - 1 - 1 is n - 2", "n - 1 - 1", "n - 2"),
    ("n + 3 - 1 is n + 2", "n + 3 - 1", "n + 2"),
    ("n + 1 - 3 is n - 2", "n + 1 - 3", "n - 2"),
    ("(n - 2) + 1 - 3 is n - 4", "n - 2 + 1 - 3", "n - 4"),
    ("m * (n - n + 0) stays as written", "m * (n - n)", "m * (n - n + 0)"),
    # A successor in the second argument unfolds (`n + succ m = succ (n + m)`,
    # `n - succ m = pred (n - m)`, `n * succ m = n * m + n`), whatever the first argument.
    ("3 * (n + 1) is 3 * n + 3", "3 * (n + 1)", "3 * n + 3"),
    ("3 * (n + 1) - 3 is 3 * n", "3 * (n + 1) - 3", "3 * n"),
    ("m * (n + 1) is m * n + m", "m * (n + 1)", "m * n + m"),
    ("m * (n + 2) is m * n + m + m", "m * (n + 2)", "m * n + m + m"),
    ("(n + 1) * (m + 1) is (n + 1) * m + n + 1", "(n + 1) * (m + 1)", "(n + 1) * m + n + 1"),
    ("n * 1 is 0 + n", "n * 1", "0 + n"),
    ("n * 2 is 0 + n + n", "n * 2", "0 + n + n"),
    ("m + (n + 1) is m + n + 1", "m + (n + 1)", "m + n + 1"),
    ("m - (n + 2) is m - n - 2", "m - (n + 2)", "m - n - 2"),
]
# Lean rejects each: the reduction would need a recursion on a variable, or commutativity.
REJECT = [
    ("n - 1 + 1 is not n", "n - 1 + 1", "n"),
    ("n * 1 is not n", "n * 1", "n"),
    ("0 * n is not 0", "0 * n", "0"),
    ("0 + n is not n", "0 + n", "n"),
    ("n - n is not 0", "n - n", "0"),
    ("0 - n is not 0", "0 - n", "0"),
    ("n / 1 is not n", "n / 1", "n"),
    ("n % 1 is not 0", "n % 1", "0"),
    ("2 * n is not n * 2", "2 * n", "n * 2"),
    ("n * 2 is not n + n", "n * 2", "n + n"),
    ("n - 1 is not n", "n - 1", "n"),
    ("n - 2 is not n - 1 - 2", "n - 2", "n - 1 - 2"),
    ("(n + 1) * 3 is not 3 * n + 3", "(n + 1) * 3", "3 * n + 3"),
    ("2 * (n + 1) is not n * 2 + 2", "2 * (n + 1)", "n * 2 + 2"),
    ("m * (n + 1) is not m + m * n", "m * (n + 1)", "m + m * n"),
    ("3 * (n + 1) is not 3 * n + 2", "3 * (n + 1)", "3 * n + 2"),
    ("m - (n + 1) is not m - n", "m - (n + 1)", "m - n"),
]


@pytest.mark.parametrize("name,a,b", ACCEPT, ids=[c[0] for c in ACCEPT])
def test_lean_reduces(tmp_path, name, a, b):
    assert check_src(tmp_path, f"def f (n m : Nat) (x : T #[{a}]) : T #[{b}] := x") == []


@pytest.mark.parametrize("name,a,b", REJECT, ids=[c[0] for c in REJECT])
def test_lean_does_not_reduce(tmp_path, name, a, b):
    d = one_error(tmp_path, f"def f (n m : Nat) (x : T #[{a}]) : T #[{b}] := x")
    assert d.message.startswith("type mismatch: 'x' has type T #[")
    assert (d.pos.line, d.pos.col) == (3, 41 + len(a) + len(b))


def test_predecessors_unify_as_lean_unfolds_them(tmp_path):
    # `?m - 1 =?= n - 2`: Lean unfolds both `Nat.sub`s and solves `?m := n - 1`.
    ok = ("def g {m : Nat} (x : T #[m - 1]) (y : T #[m]) : T #[m] := y\n"
          "def f (n : Nat) (x : T #[n - 2]) (y : T #[n - 1]) : T #[n - 1] := g x y\n")
    assert check_src(tmp_path, ok) == []
    d = one_error(tmp_path, ok.replace("(y : T #[n - 1]) : T #[n - 1]", "(y : T #[n]) : T #[n]"))
    # The expected type solves `?m := n` first (propagateExpectedType): `x` is the mismatch.
    assert "argument 'x' of 'g' has type T #[n - 2] but is expected to have type T #[n - 1]; " \
        "?m := n comes from the expected type" == d.message


G = "def g {a : Nat} (n : Nat) (x : T #[G]) : Nat := n\n"


@pytest.mark.parametrize("g,arg,ok", [
    # `Nat.mul ?a (n + 1)` unfolds to `Nat.add (Nat.mul ?a n) ?a` (smart unfolding keeps the
    # recursive call folded), whose arguments then unify: `?a := 3`.
    ("a * (n + 1)", "3 * n + 3", True),
    ("a * n + a", "3 * n + 3", True),
    ("n * a + n", "n * 3", True),
    ("n * (a + 1)", "n * 2 + n", True),
    ("a * n + a", "3 * n + 4", False),
    ("a * 2", "n + n", False),
    # `?a := 2` from the first half does not survive the failure of the second
    # (Lean's `checkpointDefEq`): `2 * (n + 1) + 2` would be `2 * n + 4`.
    ("a * (n + 2)", "2 * n + 4", False),
])
def test_a_successor_unfolds_under_unification(tmp_path, g, arg, ok):
    # Each verdict is the real Lean's (the probes of tests/test_lean_fidelity.py); the
    # rule: `isDefEqOffsetNat` (src/Lean/Meta/Offset.lean) decides only numbers and offsets,
    # then `isDefEq` unfolds lazily (src/Lean/Meta/ExprDefEq.lean, `lazyDeltaReduction`).
    src = G.replace("G", g) + f"def h (n : Nat) (y : T #[{arg}]) : Nat := g n y\n"
    diags = check_src(tmp_path, src)
    if ok:
        assert diags == []
    else:
        assert len(diags) == 1 and diags[0].message.startswith(
            f"argument 'x' of 'g' has type T #[{arg}]"), diags


def test_a_product_unfolds_lazily(tmp_path):
    # Unfolded eagerly, `a * (b + 64) * (c + 64) * (d + 64)` is 64³ terms long; Lean unfolds
    # only as far as a comparison needs, and so does the checker: the mismatch is found at
    # once and shown as written.
    t = "a * (b + 64) * (c + 64) * (d + 64)"
    src = f"def f (a b c d : Nat) (x : T #[{t}]) : T #[{t[:-3]}63)] := x"
    d = one_error(tmp_path, src)
    assert d.message == (f"type mismatch: 'x' has type T #[{t}] but is expected to have type "
                         f"T #[{t[:-3]}63)]")
    assert check_src(tmp_path, f"def f (a b c d : Nat) (x : T #[{t}]) : T #[{t}] := x") == []


def test_lt_is_succ_le(tmp_path):
    # A proof of `a < b` is a proof of `a + 1 ≤ b` and back: the same proposition.
    src = ("def need {a b : Nat} (h : a + 1 ≤ b) (x : T #[b]) : T #[b] := x\n"
           "def f (t k : Nat) (h : t < k) (x : T #[k]) : T #[k] := need (a := t) h x\n"
           "def need2 {a b : Nat} (h : a < b) (x : T #[b]) : T #[b] := x\n"
           "def g (t k : Nat) (h : t + 1 ≤ k) (x : T #[k]) : T #[k] := need2 (a := t) h x\n")
    assert check_src(tmp_path, src) == []
    d = one_error(tmp_path, src.replace("(h : t < k)", "(h : t ≤ k)"))
    assert "argument 'h' of 'need'" in d.message


# ---- soundness: equal by the checker ⇒ equal for every value -------------------------------

VARS = {"n": Var("n", 1), "m": Var("m", 2)}


@st.composite
def nat_terms(draw, depth=0):
    if depth >= 3 or draw(st.booleans()):
        if draw(st.booleans()):
            return Lit(draw(st.integers(0, 5)))
        return VARS[draw(st.sampled_from(sorted(VARS)))]
    op = draw(st.sampled_from("+-*/%"))
    return NatOp(op, draw(nat_terms(depth + 1)), draw(nat_terms(depth + 1)))


def _value(t, env):
    if isinstance(t, Lit):
        return t.n
    if isinstance(t, Var):
        return env[t.name]
    return nat_eval(t.op, _value(t.a, env), _value(t.b, env))


ENVS = [{"n": n, "m": m} for n in range(7) for m in range(7)] + [{"n": 100, "m": 37}]


@settings(max_examples=600, deadline=None)
@given(a=nat_terms(), b=nat_terms())
def test_the_checker_never_equates_terms_that_differ(a, b):
    norm = Normalizer(MetaCtx(), lambda t: None)
    for env in ENVS:
        assert _value(norm(a), env) == _value(a, env), (a, norm(a), env)  # reduction keeps values
    if unify(a, b, norm):
        for env in ENVS:
            assert _value(a, env) == _value(b, env), (a, b, env)
