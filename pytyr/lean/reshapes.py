"""The reshape discipline: `reshape` merges and splits adjacent axes, nothing else.

A row-major reshape between shapes of one number of elements always runs, so a "view without
transpose" (`[b, h, t, d]` viewed as `[b, t, h * d]`) passes every shape check while mixing
the elements of different heads. The checker therefore accepts a `reshape` with closed shapes
only when the target is the source with runs of adjacent axes merged and single axes split, in
order; any other regrouping is an error that names the transpose or structural op that was
likely meant, and `regroup` (Tyr/Ops.lean) is the escape hatch for a regrouping that is meant.
"""
from __future__ import annotations

from collections import Counter

# Ops whose calls the discipline checks, with the escape hatch it names.
DISCIPLINED = {"torch.reshape": "regroup"}


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
