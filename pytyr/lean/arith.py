"""Closed arithmetic as Lean computes it: `Nat` with truncated `-`, `x / 0 = 0`, `x % 0 = x`
and arbitrary precision (to a limit the checker states), and `Float`'s IEEE operations."""
from __future__ import annotations


class TooLarge(Exception):
    """Closed arithmetic whose result the checker will not compute (a located error)."""


NAT_BITS_LIMIT = 1 << 22  # ~1.26 million decimal digits: far past any shape, still fast


def nat_eval(op: str, a: int, b: int) -> int:
    """Lean's `Nat` operations: truncated subtraction, `x / 0 = 0`, `x % 0 = x`."""
    if op == "+":
        return a + b
    if op == "-":
        return max(a - b, 0)
    if op == "*":
        if a.bit_length() + b.bit_length() > NAT_BITS_LIMIT:
            raise TooLarge(f"the product of a {a.bit_length()}-bit and a {b.bit_length()}-bit "
                           f"number is over the checker's limit of {NAT_BITS_LIMIT} bits")
        return a * b
    if op == "/":
        return a // b if b else 0
    if op == "%":
        return a % b if b else a
    if op == "min":
        return min(a, b)
    raise ValueError(op)


def float_eval(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b if b else (float("inf") if a > 0 else float("-inf") if a < 0 else float("nan"))
    raise ValueError(op)
