"""Numerals anywhere — Lean source, `--set` values, JSON configs — give a value or a located
`TyrError`, never a Python exception: Nat literals are arbitrary precision as in Lean, Float
literals overflow to `inf` as Lean's `Float.ofScientific` does, and a number that cannot be a
graph's 64-bit dimension is a configuration error naming the key."""
from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytyr.config import parse_set, read_json
from pytyr.errors import ConfigError, TyrError
from pytyr.lean import check_files, instantiate_model, load
from pytyr.lean.numerals import (
    float_literal,
    float_of_nat,
    nat_literal,
    nat_of_digits,
    nat_str,
    scientific_parts,
)
from tests.lean.helpers import check_src, one_error

ROOT_MLP = "examples/mlp/MLP.lean"

digits = st.text("0123456789", min_size=1, max_size=60)
numeral = st.one_of(
    digits, st.builds(lambda d, k: d * k, digits, st.integers(1, 200)),  # up to ~12k digits
    st.builds(lambda a, b: f"{a}.{b}", digits, digits),
    st.builds(lambda a, s, e: f"{a}e{s}{e}", digits, st.sampled_from(["", "+", "-"]), digits),
    st.builds(lambda p, d: f"0{p}{d}", st.sampled_from("xXbBoO"),
              st.text("0123456789abcdefABCDEF_", max_size=30)),
    st.text("0123456789_.eE+-xXbo", min_size=1, max_size=30),
    st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=5),  # ٣, ², ½ …
)


def test_nat_conversions_beyond_pythons_digit_limit():
    n = nat_of_digits("9" * 12_345)
    assert n == 10 ** 12_345 - 1 and nat_str(n) == "9" * 12_345
    assert nat_literal("0xff_ff") == 65535 and nat_literal("0b1_0") == 2
    assert nat_literal("0o7") == 7 and nat_literal("1__0") == 10
    assert scientific_parts("1.5e3") == (15, False, 2)
    assert scientific_parts("12.5e-3") == (125, True, 4)
    assert scientific_parts("2.50") == (250, True, 2) and scientific_parts("7") == (7, True, 0)


def test_exponents_of_any_size():
    assert float_literal("1e-" + "7" * 5000) == 0.0
    assert float_literal("1e" + "7" * 5000) == math.inf
    assert float_literal("0e" + "7" * 5000) == 0.0


def test_float_of_nat_is_leans():
    assert float_of_nat(10 ** 400) == math.inf
    assert float_of_nat(2 ** 53 + 1) == float(2 ** 53)
    assert float_literal("1" + "0" * 5000) == math.inf


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=numeral, where=st.sampled_from(["dim", "float", "nat"]))
def test_any_numeral_in_lean_source_is_a_value_or_a_located_error(tmp_path, text, where):
    src = {"dim": f"def f (x : T #[{text}]) : T #[{text}] := x\n",
           "float": f"def f (x : T #[2]) : T #[2] := scale x {text}\n",
           "nat": f"def n : Nat := {text} * 2 + {text}\n"}[where]
    (tmp_path / "N.lean").write_text("import Tyr\nopen torch\n" + src, encoding="utf-8")
    for d in check_files(tmp_path / "N.lean"):
        assert d.pos.line >= 3 and d.message


@settings(max_examples=60, deadline=None)
@given(text=numeral, key=st.sampled_from(["b", "c.hidden", "c.inputs"]))
def test_any_numeral_given_with_set_is_a_value_or_a_config_error(mlp, text, key):
    values = {"c": {"inputs": 2, "hidden": 4, "classes": 3}, "b": 8}
    try:
        over = parse_set([f"{key}={text}"])
    except TyrError:
        return
    head, _, rest = key.partition(".")
    if rest:
        values[head] = dict(values[head], **over[head])
    else:
        values.update(over)
    try:
        instantiate_model(mlp, "mlp", values)
    except TyrError:
        pass


@pytest.fixture(scope="module")
def mlp():
    return load(ROOT_MLP)


@pytest.mark.parametrize("raw", ["1" * 5000, "-1", "1e999", "NaN", "1.5", "true",
                                 "9223372036854775808"])
def test_config_json_numbers_are_config_errors(tmp_path, mlp, raw):
    f = tmp_path / "c.json"
    f.write_text('{"model": {"c": {"inputs": 2, "hidden": 4, "classes": 3}, "b": ' + raw + "}}")
    values = read_json(f, "config")["model"]
    with pytest.raises(ConfigError, match="'b'"):
        instantiate_model(mlp, "mlp", values)


def test_a_huge_dimension_names_the_key_and_the_limit(mlp):
    with pytest.raises(ConfigError, match=r"'b' = a 5000-digit number does not fit"):
        instantiate_model(mlp, "mlp", {"c": {"inputs": 2, "hidden": 4, "classes": 3},
                                       "b": 10 ** 4999})


def test_float_overflow_in_lean_is_inf_and_caught_at_the_graph(tmp_path):
    # Lean: `1e400 : Float` is `inf`; as an op's attribute it cannot become a graph.
    f = tmp_path / "F.lean"
    f.write_text("import Tyr\nopen torch\n"
                 "@[model] def m (x : T #[2]) : T #[2] := scale x 1e400\n")
    assert check_files(f) == []
    with pytest.raises(TyrError, match="attribute 'alpha' of 'torch.scale' evaluates to inf"):
        instantiate_model(load(f), "m", {})


def test_float_functions_follow_ieee_not_python(tmp_path):
    src = ("def big : Float := Float.exp 1000.0\ndef lz : Float := Float.log 0.0\n"
           "def huge : Float := Nat.toFloat (10 * 1" + "0" * 400 + ")\n")
    assert check_src(tmp_path, src) == []


def test_a_huge_nat_literal_as_a_float_is_inf_not_an_exception(tmp_path):
    # Lean: `OfNat Float n` is `Float.ofNat n`, `inf` beyond the range of a double.
    d = one_error(tmp_path, "def f (x : T #[2]) : T #[3] := scale x 1" + "0" * 400)
    assert d.message.startswith("argument 'x' of 'scale' has type T #[2]")


@pytest.mark.parametrize("num", ["1", "25", "5e3", "0"])
def test_a_number_with_no_digit_before_its_point_says_what_to_write(tmp_path, num):
    # Lean reads `.1` as `·` notation and then a stray `1`; the checker says what is meant
    d = one_error(tmp_path, f"def x : Float := .{num}\n", prelude=False)
    assert (d.pos.line, d.pos.col) == (1, 17)
    assert d.message == (f"'.{num}' is not a number in Lean 4, so not in the Tyr subset "
                         f"either; write '0.{num}'")
    assert check_src(tmp_path, f"def x : Float := 0.{num}\n", prelude=False) == []


def test_real_lean_rejects_a_number_with_no_digit_before_its_point_there_too(tmp_path):
    from tests.lean.real import lean_messages, real_lean

    msgs = lean_messages(real_lean(), tmp_path, "def x : Float := .1\n")
    assert (msgs[0].line, msgs[0].col) == (1, 17) and "`·` notation" in msgs[0].first_line
