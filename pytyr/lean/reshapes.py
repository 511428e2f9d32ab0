"""The reshape rule: `reshape` merges and splits adjacent axes, nothing else.

A row-major reshape between shapes of one number of elements always runs, so a "view without
transpose" (`[b, h, t, d]` viewed as `[b, t, h * d]`) passes every shape check while mixing
the elements of different heads. `reshape`'s type therefore asks `mergesOrSplits s target =
true` (Tyr/Core.lean), proved `by decide`: the target must be the source with runs of adjacent
axes merged and single axes split, in order. The checker evaluates `mergesOrSplits` natively
(`merges_or_splits`, the Lean text step for step, which the fidelity probes hold against real
Lean) and says why it is false with the op that was likely meant (`misfit`); `regroup`
(Tyr/Ops.lean) is the op for a regrouping that is meant.
"""
from __future__ import annotations

from collections import Counter
from math import prod

# The Lean function the checker evaluates itself, and the op for any other regrouping.
RULE = "torch.mergesOrSplits"
HATCH = "regroup"


def merges_or_splits(s: list[int], t: list[int]) -> bool:
    """`mergesOrSplits s t` as Lean evaluates its definition in Tyr/Core.lean: as many
    elements, none or every axis of `s` (offsets `p` to `p * d`) lies within one axis of `t`
    or starts and ends at ends of axes of `t`."""
    ends, n = [1], 1
    for d in t:
        n *= d
        ends.append(n)

    def fits(p: int, q: int) -> bool:
        return all(e <= p or q <= e for e in ends) or (p in ends and q in ends)

    p, ok = 1, True
    for d in s:
        ok = ok and fits(p, p * d)
        p *= d
    return p == n and (n == 0 or ok)


def why_not(s: list[int], t: list[int]) -> str:
    """Why `mergesOrSplits s t` is false, with the op that was likely meant."""
    if prod(s) != prod(t):
        return f"{_dims(s)} has {prod(s)} elements, {_dims(t)} has {prod(t)}"
    why = misfit(s, t)
    assert why is not None, (s, t)  # they agree (tests/test_lean_layouts.py)
    return f"{why}; if this regrouping is meant, use `{HATCH}`"


def groups(s: list[int], t: list[int]) -> list[tuple[int, int, int, int]]:
    """The shortest runs `s[i:i2]` and `t[j:j2]` of equal products, left to right, that cover
    both shapes (of one number of elements, none 0)."""
    out = []
    i = j = 0
    while i < len(s) or j < len(t):
        i0, j0 = i, j
        ps = pt = 1
        if i < len(s):
            ps, i = s[i], i + 1
        if j < len(t):
            pt, j = t[j], j + 1
        while ps != pt:
            if ps < pt and i < len(s):
                ps, i = ps * s[i], i + 1
            elif j < len(t):
                pt, j = pt * t[j], j + 1
            else:
                break
        out.append((i0, i, j0, j))
    return out


def misfit(s: list[int], t: list[int]) -> str | None:
    """Why `t` is not a merge or split of adjacent axes of `s`, with the op that was likely
    meant; None when it is (or when a 0 makes every shape alike)."""
    if 0 in s or 0 in t:
        return None
    for i0, i1, j0, j1 in groups(s, t):
        a = [d for d in s[i0:i1] if d != 1]
        b = [d for d in t[j0:j1] if d != 1]
        if len(a) > 1 and len(b) > 1:
            axes = f"axis {i0}" if i1 - i0 == 1 else f"axes {i0}–{i1 - 1}"
            return (f"{axes} {_dims(s[i0:i1])} would become {_dims(t[j0:j1])}, which is not "
                    f"a merge or a split of adjacent axes: in row-major order it mixes the "
                    f"elements of different positions; {_meant(a, b)}")
    return None


def _meant(a: list[int], b: list[int]) -> str:
    if Counter(a) == Counter(b):
        return "the axes are permuted: that is a transpose (`transpose`, `transpose3`)"
    if len(a) == 3 and b == [a[1], a[0] * a[2]]:
        return ("that is `mergeHeads` ([b, h, t, d] → [b, t, h * d]): the heads move next to "
                "the width first")
    if len(b) == 3 and a == [b[1], b[0] * b[2]]:
        return "that is `splitHeads` ([b, t, h * d] → [b, h, t, d]), which transposes"
    return ("transpose the axes into place first (`transpose3`, `splitHeads`, `mergeHeads`), "
            "then merge or split them (Tyr.Shape)")


def _dims(ds: list[int]) -> str:
    return "[" + ", ".join(map(str, ds)) + "]"
