"""Numerals as Lean reads and computes them, for numbers of any size.

`Nat` literals are arbitrary precision (`0x1F`, `0b101`, `0o17`, `1_000` included), and a
scientific literal becomes a `Float` exactly as Lean's `Float.ofScientific` computes it
(`src/Init/Data/OfScientific.lean`): the decimal value truncated to a 64-bit mantissa, rounded
to a double, scaled by a power of two — overflow gives `inf`, underflow `0.0`, never an error.
Python's `int(str)` and `str(int)` refuse numbers over 4,300 digits (`sys.int_max_str_digits`),
so conversions here split long numbers instead of changing that process-wide limit.
"""
from __future__ import annotations

import math

_CHUNK = 4000  # digits per `int`/`str` call, under Python's limit of 4300
# Beyond these decimal exponents every finite mantissa is `inf` (or `0.0`), as Lean computes.
_EXP_LIMIT = 400


def nat_of_digits(digits: str, base: int = 10) -> int:
    """The value of a string of digits (no sign, no `_`) of any length."""
    if len(digits) <= _CHUNK:
        return int(digits, base)
    mid = len(digits) // 2
    hi, lo = digits[:mid], digits[mid:]
    return nat_of_digits(hi, base) * base ** len(lo) + nat_of_digits(lo, base)


def nat_str(n: int) -> str:
    """Decimal digits of a natural number of any size."""
    if n.bit_length() <= 3 * _CHUNK:  # ≤ 3,612 digits
        return str(n)
    k = len(str(1 << (n.bit_length() // 2))) if n.bit_length() < 24_000 else \
        int(n.bit_length() * 0.30103) // 2
    hi, lo = divmod(n, 10 ** k)
    return nat_str(hi) + nat_str(lo).rjust(k, "0")


def nat_literal(text: str) -> int:
    """A `num` token of Lean: decimal, `0x`, `0b`, `0o`, with `_` separators."""
    t = text.replace("_", "")
    if len(t) > 1 and t[0] == "0" and t[1] in "xXbBoO":
        return nat_of_digits(t[2:], {"x": 16, "b": 2, "o": 8}[t[1].lower()])
    return nat_of_digits(t)


def scientific_parts(text: str) -> tuple[int, bool, int]:
    """Lean's `decodeScientificLitVal?`: `(m, neg, e)` with value `m * 10^(-e if neg else e)`."""
    t = text.replace("_", "")
    mant, _, exp = t.lower().partition("e")
    whole, _, frac = mant.partition(".")
    m = nat_of_digits((whole + frac) or "0")
    e = len(frac)
    if not exp:
        return m, True, e
    x = nat_of_digits(exp.lstrip("+-") or "0")
    if exp.startswith("-"):
        return m, True, x + e
    return (m, False, x - e) if x >= e else (m, True, e - x)


def _log2(n: int) -> int:
    return n.bit_length() - 1 if n > 0 else 0  # `Nat.log2 0 = 0`


def _scale(x: float, e: int) -> float:
    """`Float.scaleB`: `x * 2^e`, `inf` on overflow (C's `scalbn`)."""
    e = max(-100_000, min(100_000, e))
    try:
        return math.ldexp(x, e)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def float_of_binary_scientific(m: int, e: int) -> float:
    """`Float.ofBinaryScientific m e = m * 2^e`, keeping 64 bits of `m` (truncated)."""
    s = max(_log2(m) - 63, 0)
    return _scale(float(m >> s), e + s)


def float_of_scientific(m: int, neg: bool, e: int) -> float:
    """`Float.ofScientific m neg e`, Lean's value of a scientific literal."""
    if m == 0:
        return 0.0
    # Without building 5^e, the results Lean's computation ends in for far-out exponents.
    if not neg and e > _EXP_LIMIT:
        return math.inf  # ≥ 10^401
    if neg and 10 * (_log2(m) + 1) - 33 * e < -11000:  # integers: `e` may have any size
        return 0.0  # < 2^-1100, below the least subnormal
    if neg:
        s = max(64 - _log2(m), 0)
        return float_of_binary_scientific((m << (3 * e + s)) // 5 ** e, -4 * e - s)
    return float_of_binary_scientific(m * 5 ** e, e)


def float_of_nat(n: int) -> float:
    """`Float.ofNat n` (`Nat.toFloat`, a `Nat` literal where a `Float` is expected)."""
    return float_of_scientific(n, False, 0)


def float_literal(text: str) -> float:
    """A `scientific` token of Lean as a `Float`."""
    return float_of_scientific(*scientific_parts(text))


# `Float.sqrt`, `Float.exp`, `Float.log` are C's: IEEE results, never an exception.
def float_sqrt(x: float) -> float:
    return math.sqrt(x) if x >= 0 else math.nan


def float_exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def float_log(x: float) -> float:
    if x > 0:
        return math.log(x)
    return -math.inf if x == 0 else math.nan
