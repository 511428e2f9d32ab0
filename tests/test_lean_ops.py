"""Every typed op of Tyr/Ops.lean and Tyr/NN.lean: a well-typed use is accepted, a shape
violation is rejected at the right line with both types in the message."""
from __future__ import annotations

import pytest

from tests.lean.helpers import check_src, one_error
from tests.lean.op_cases import (
    CONV_CASES,
    DIT_CASES,
    LM_CASES,
    MIX_CASES,
    MOE_CASES,
    SHAPE_CASES,
)

# (name, accepted source, rejected source, fragments the error must contain)
CASES = [
    ("linear",
     "def f (x : T #[32, 768]) (w : T #[512, 768]) : T #[32, 512] := linear x w",
     "def f (x : T #[32, 768]) (w : T #[768, 512]) : T #[32, 512] := linear x w",
     ["argument 'M' of 'linear'", "T #[768, 512]", "T #[512, 768]"]),
    ("linearBias",
     "def f (x : T #[4, 3]) (w : T #[5, 3]) (b : T #[5]) : T #[4, 5] := linearBias x w b",
     "def f (x : T #[4, 3]) (w : T #[5, 3]) (b : T #[3]) : T #[4, 5] := linearBias x w b",
     ["argument 'bias' of 'linearBias'", "T #[3]", "T #[5]"]),
    ("matmul",
     "def f (x : T #[2, 3]) (y : T #[3, 4]) : T #[2, 4] := matmul x y",
     "def f (x : T #[2, 3]) (y : T #[4, 3]) : T #[2, 3] := matmul x y",
     ["argument 'y' of 'matmul'", "T #[4, 3]", "T #[3, 3]"]),
    ("bmm",
     "def f (x : T #[8, 2, 3]) (y : T #[8, 3, 4]) : T #[8, 2, 4] := bmm x y",
     "def f (x : T #[8, 2, 3]) (y : T #[7, 3, 4]) : T #[8, 2, 4] := bmm x y",
     ["argument 'y' of 'bmm'", "T #[7, 3, 4]", "T #[8, 3, 4]"]),
    ("add",
     "def f (x y : T #[2, 3]) : T #[2, 3] := add x y",
     "def f (x : T #[2, 3]) (y : T #[3, 2]) : T #[2, 3] := add x y",
     ["argument 'y' of 'add'", "T #[3, 2]", "T #[2, 3]"]),
    ("sub",
     "def f (x y : T #[5]) : T #[5] := sub x y",
     "def f (x : T #[5]) (y : T #[6]) : T #[5] := sub x y",
     ["argument 'y' of 'sub'", "T #[6]"]),
    ("mul",
     "def f (x y : T #[5]) : T #[5] := mul x y",
     "def f (x : T #[5]) (y : T #[5, 1]) : T #[5] := mul x y",
     ["argument 'y' of 'mul'", "T #[5, 1]"]),
    ("scale",
     "def f (x : T #[5]) : T #[5] := scale x 0.5",
     "def f (x : T #[5]) : T #[5] := scale x x",
     ["argument 'alpha' of 'scale'", "Float"]),
    ("relu",
     "def f (x : T #[2, 2]) : T #[2, 2] := relu x",
     "def f (x : T #[2, 2]) : T #[4] := relu x",
     ["relu", "T #[2, 2]", "T #[4]"]),
    ("gelu",
     "def f (x : T #[3]) : T #[3] := gelu x",
     "def f (x : T #[3]) : T #[3, 1] := gelu x",
     ["gelu", "T #[3]", "T #[3, 1]"]),
    ("tanh",
     "def f (x : T #[3]) : T #[3] := tanh x",
     "def f (x : IT #[3] 5) : T #[3] := tanh x",
     ["argument 'x' of 'tanh'", "IT #[3] 5"]),
    ("softmax",
     "def f (x : T #[2, 7]) : T #[2, 7] := softmax x",
     "def f (x : T #[2, 7]) : T #[2] := softmax x",
     ["softmax", "T #[2, 7]", "T #[2]"]),
    ("sum",
     "def f (x : T #[2, 7]) : T #[] := sum x",
     "def f (x : T #[2, 7]) : T #[2] := sum x",
     ["sum", "T #[]", "T #[2]"]),
    ("mean",
     "def f (x : T #[2, 7]) : T #[] := mean x",
     "def f (x : T #[2, 7]) : T #[1] := mean x",
     ["mean", "T #[]", "T #[1]"]),
    # the graph's `reshape` op; `reshape` calls it (tests/test_lean_layouts.py)
    ("regroup",
     "def f (x : T #[2, 6]) : T #[3, 4] := regroup x #[3, 4]",
     "def f (x : T #[2, 6]) : T #[5, 2] := regroup x #[5, 2]",
     ["`by decide` failed", "numel #[2, 6] = numel #[5, 2]", "12 ≠ 10"]),
    ("transpose",
     "def f (x : T #[2, 3]) : T #[3, 2] := transpose x",
     "def f (x : T #[2, 3]) : T #[2, 3] := transpose x",
     ["transpose", "T #[3, 2]", "T #[2, 3]"]),
    ("transpose3",
     "def f (x : T #[4, 2, 3]) : T #[4, 3, 2] := transpose3 x",
     "def f (x : T #[2, 3]) : T #[3, 2] := transpose3 x",
     ["argument 'x' of 'transpose3'", "T #[2, 3]", "T #[?n, ?a, ?b]"]),
    ("embedding",
     "def f (i : IT #[8] 100) (e : T #[100, 16]) : T #[8, 16] := embedding i e",
     "def f (i : T #[8]) (e : T #[100, 16]) : T #[8, 16] := embedding i e",
     ["argument 'idx' of 'embedding'", "T #[8]", "IT #[8] ?v"]),
    ("layerNorm",
     "def f (x : T #[4, 8]) (g b : T #[8]) : T #[4, 8] := layerNorm x g b (eps := 1e-6)",
     "def f (x : T #[4, 8]) (g : T #[4]) (b : T #[8]) : T #[4, 8] := layerNorm x g b",
     ["argument 'w' of 'layerNorm'", "T #[4]", "T #[8]"]),
    ("crossEntropy",
     "def f (z : T #[4, 10]) (y : IT #[4] 10) : T #[] := crossEntropy z y",
     "def f (z : T #[4, 10]) (y : IT #[10] 10) : T #[] := crossEntropy z y",
     ["argument 'target' of 'crossEntropy'", "IT #[10] 10", "IT #[4] 10"]),
    ("linear3",
     "def f (x : T #[2, 8, 4]) (w : T #[6, 4]) : T #[2, 8, 6] := linear3 x w",
     "def f (x : T #[2, 8, 4]) (w : T #[4, 6]) : T #[2, 8, 6] := linear3 x w",
     ["argument 'M' of 'linear3'", "T #[4, 6]", "T #[6, 4]"]),
    ("linearBias3",
     "def f (x : T #[2, 8, 4]) (w : T #[6, 4]) (b : T #[6]) : T #[2, 8, 6] := linearBias3 x w b",
     "def f (x : T #[2, 8, 4]) (w : T #[6, 4]) (b : T #[4]) : T #[2, 8, 6] := linearBias3 x w b",
     ["argument 'bias' of 'linearBias3'", "T #[4]", "T #[6]"]),
    ("addRows",
     "def f (x : T #[2, 8, 4]) (p : T #[8, 4]) : T #[2, 8, 4] := addRows x p",
     "def f (x : T #[2, 8, 4]) (p : T #[9, 4]) : T #[2, 8, 4] := addRows x p",
     ["argument 'y' of 'addRows'", "T #[9, 4]", "T #[8, 4]"]),
    ("rows",
     "def f (w : T #[64, 4]) (t : Nat) (h : t ≤ 64) : T #[t, 4] := rows w t h",
     "def f (w : T #[64, 4]) (t : Nat) (h : t ≤ 32) : T #[t, 4] := rows w t h",
     ["argument 'h' of 'rows'", "t ≤ 32", "t ≤ 64"]),
    ("third",
     "def f (d : Nat) (x : T #[2, 8, 3 * d]) : T #[2, 8, d] := third x 2",
     "def f (d : Nat) (x : T #[2, 8, 3 * d]) : T #[2, 8, d] := third x 3",
     ["`by decide` failed", "3 < 3"]),
    ("dropout",
     "def f (x : T #[2, 8]) : T #[2, 8] := dropout x 0.1",
     "def f (x : T #[2, 8]) : T #[8, 2] := dropout x 0.1",
     ["dropout", "T #[2, 8]", "T #[8, 2]"]),
    ("embedding2",
     "def f (i : IT #[2, 8] 65) (e : T #[65, 16]) : T #[2, 8, 16] := embedding2 i e",
     "def f (i : IT #[2, 8] 65) (e : T #[65, 16]) : T #[2, 16] := embedding2 i e",
     ["embedding2", "T #[2, 8, 16]", "T #[2, 16]"]),
    ("layerNorm3",
     "def f (x : T #[2, 8, 4]) (g b : T #[4]) : T #[2, 8, 4] := layerNorm3 x g b",
     "def f (x : T #[2, 8, 4]) (g b : T #[8]) : T #[2, 8, 4] := layerNorm3 x g b",
     ["argument 'w' of 'layerNorm3'", "T #[8]", "T #[4]"]),
    ("splitHeads",
     "def f (h d : Nat) (x : T #[2, 8, h * d]) : T #[2, h, 8, d] := splitHeads x",
     "def f (h d : Nat) (x : T #[2, 8, d * h]) : T #[2, h, 8, d] := splitHeads x",
     ["argument 'x' of 'splitHeads'", "T #[2, 8, d * h]", "T #[2, 8, h * d]"]),
    ("mergeHeads",
     "def f (x : T #[2, 4, 8, 16]) : T #[2, 8, 4 * 16] := mergeHeads x",
     "def f (x : T #[2, 4, 8, 16]) : T #[2, 8, 16] := mergeHeads x",
     ["mergeHeads", "T #[2, 8, 64]", "T #[2, 8, 16]"]),
    ("causalAttention",
     "def f (q k v : T #[2, 4, 8, 16]) : T #[2, 4, 8, 16] := causalAttention q k v",
     "def f (q k : T #[2, 4, 8, 16]) (v : T #[2, 4, 9, 16]) : T #[2, 4, 8, 16] := causalAttention q k v",
     ["argument 'v' of 'causalAttention'", "T #[2, 4, 9, 16]", "T #[2, 4, 8, 16]"]),
    ("bidirectionalAttention",
     "def f (q k v : T #[2, 4, 8, 16]) : T #[2, 4, 8, 16] := bidirectionalAttention q k v 0.1",
     "def f (q v : T #[2, 4, 8, 6]) (k : T #[2, 4, 6, 8]) : T #[2, 4, 8, 6] :="
     " bidirectionalAttention q k v",
     ["argument 'k' of 'bidirectionalAttention'", "T #[2, 4, 6, 8]", "T #[2, 4, 8, 6]"]),
    ("paddedAttention",
     "def f (q k v : T #[2, 4, 8, 6]) (m : IT #[2, 8] 2) : T #[2, 4, 8, 6] :="
     " paddedAttention q k v m",
     "def f (q k v : T #[2, 4, 8, 6]) (m : T #[2, 8]) : T #[2, 4, 8, 6] := paddedAttention q k v m",
     ["argument 'keep' of 'paddedAttention'", "T #[2, 8]", "IT #[2, 8] 2"]),
    ("maskedMeanSeq3",
     "def f (b t : Nat) (x : T #[b, t, 6]) (m : IT #[b, t] 2) : T #[b, 6] := maskedMeanSeq3 x m",
     "def f (b t v : Nat) (x : T #[b, t, 6]) (m : IT #[b, t] v) : T #[b, 6] := maskedMeanSeq3 x m",
     ["argument 'keep' of 'maskedMeanSeq3'", "IT #[b, t] v", "IT #[b, t] 2"]),
    ("crossEntropy2",
     "def f (z : T #[2, 8, 65]) (y : IT #[2, 8] 65) : T #[] := crossEntropy2 z y",
     "def f (z : T #[2, 8, 65]) (y : IT #[8, 2] 65) : T #[] := crossEntropy2 z y",
     ["argument 'target' of 'crossEntropy2'", "IT #[8, 2] 65", "IT #[2, 8] 65"]),
    ("weightedCrossEntropy2",
     "def f (z : T #[2, 8, 5]) (y : IT #[2, 8] 5) (w : T #[2, 8]) : T #[] :="
     " weightedCrossEntropy2 z y w",
     "def f (z : T #[2, 8, 5]) (y : IT #[2, 8] 5) (w : T #[2, 8, 5]) : T #[] :="
     " weightedCrossEntropy2 z y w",
     ["argument 'weight' of 'weightedCrossEntropy2'", "T #[2, 8, 5]", "T #[2, 8]"]),
    ("relu2",
     "def f (x : T #[2, 3]) : T #[2, 3] := relu2 x",
     "def f (x : T #[2, 3]) : T #[3, 2] := relu2 x",
     ["relu2", "T #[2, 3]", "T #[3, 2]"]),
    ("softcap",
     "def f (x : T #[2, 3]) : T #[2, 3] := softcap x 15.0",
     "def f (x y : T #[2, 3]) : T #[2, 3] := softcap x y",
     ["argument 'cap' of 'softcap'", "T #[2, 3]", "Float"]),
    ("rmsNorm3",
     "def f (x : T #[2, 8, 4]) : T #[2, 8, 4] := rmsNorm3 x (eps := 1e-5)",
     "def f (x : T #[2, 8, 4]) : T #[2, 4, 8] := rmsNorm3 x",
     ["rmsNorm3", "T #[2, 8, 4]", "T #[2, 4, 8]"]),
    ("rmsNorm4",
     "def f (x : T #[2, 4, 8, 16]) : T #[2, 4, 8, 16] := rmsNorm4 x",
     "def f (x : T #[2, 8, 16]) : T #[2, 8, 16] := rmsNorm4 x",
     ["argument 'x' of 'rmsNorm4'", "T #[2, 8, 16]", "T #[?b, ?h, ?t, ?d]"]),
    ("rotary",
     "def f (k : Nat) (x : T #[2, 4, 8, 2 * k]) (h : 8 ≤ 64) : T #[2, 4, 8, 2 * k] := "
     "rotary x h (base := 500.0)",
     "def f (k : Nat) (x : T #[2, 4, 8, k]) (h : 8 ≤ 64) : T #[2, 4, 8, k] := rotary x h",
     # `k =?= 2 * ?k` is stuck on `?k`: the mismatch waits (Lean's postponed coercion) while
     # `h` solves `?t`, and is reported with what is solved by then
     ["argument 'x' of 'rotary'", "T #[2, 4, 8, k]", "T #[?b, ?h, 8, 2 * ?k]"]),
    ("gqaAttention",
     "def f (q : T #[2, 4, 8, 16]) (k v : T #[2, 2, 8, 16]) : T #[2, 4, 8, 16] := "
     "gqaAttention q k v (by decide)",
     "def f (q : T #[2, 4, 8, 16]) (k v : T #[2, 2, 9, 16]) : T #[2, 4, 8, 16] := "
     "gqaAttention q k v (by decide)",
     ["argument 'k' of 'gqaAttention'", "T #[2, 2, 9, 16]", "T #[2, ?g, 8, 16]"]),
    ("rotaryAt",
     "def f (x : T #[2, 4, 8, 16]) (p : IT #[8] 64) : T #[2, 4, 8, 16] := rotaryAt (k := 8) x p",
     "def f (x : T #[2, 4, 8, 16]) (p : IT #[3] 64) : T #[2, 4, 8, 16] := rotaryAt (k := 8) x p",
     ["argument 'pos' of 'rotaryAt'", "IT #[3] 64", "IT #[8] ?n"]),
    ("cacheWrite",
     "def f (c : T #[1, 2, 64, 16]) (x : T #[1, 2, 3, 16]) (p : IT #[3] 64) : T #[1, 2, 64, 16] :="
     " cacheWrite c x p",
     "def f (c : T #[1, 2, 64, 16]) (x : T #[1, 4, 3, 16]) (p : IT #[3] 64) : T #[1, 2, 64, 16] :="
     " cacheWrite c x p",
     ["argument 'x' of 'cacheWrite'", "T #[1, 4, 3, 16]", "T #[1, 2, ?t, 16]"]),
    ("cachedAttention",
     "def f (q : T #[1, 4, 3, 16]) (k v : T #[1, 2, 64, 16]) (p : IT #[3] 64) : T #[1, 4, 3, 16] :="
     " cachedAttention q k v p (by decide)",
     "def f (q : T #[1, 4, 3, 16]) (k v : T #[1, 2, 64, 16]) (p : IT #[1] 64) : T #[1, 4, 3, 16] :="
     " cachedAttention q k v p (by decide)",
     ["argument 'pos' of 'cachedAttention'", "IT #[1] 64", "IT #[3] 64"]),
    ("stackHead",
     "def f (s : T #[4, 1, 2, 64, 16]) : T #[1, 2, 64, 16] := stackHead s (by decide)",
     "def f (s : T #[4, 1, 2, 64, 16]) : T #[4, 1, 2, 64] := stackHead s (by decide)",
     ["argument 's' of 'stackHead'", "T #[4, 1, 2, 64, 16]", "T #[?l, 4, 1, 2, 64]"]),
    ("stackPush",
     "def f (s : T #[4, 1, 2, 8, 16]) (x : T #[1, 2, 8, 16]) : T #[4, 1, 2, 8, 16] := "
     "stackPush s x",
     "def f (s : T #[4, 1, 2, 8, 16]) (x : T #[1, 2, 9, 16]) : T #[4, 1, 2, 8, 16] := "
     "stackPush s x",
     ["argument 'x' of 'stackPush'", "T #[1, 2, 9, 16]", "T #[1, 2, 8, 16]"]),
]
# Tyr/{Shape,DiT,Mix,LM,MoE,Conv}.lean
CASES += SHAPE_CASES + DIT_CASES + MIX_CASES + LM_CASES + MOE_CASES + CONV_CASES


@pytest.mark.parametrize("name,good,bad,frags", CASES, ids=[c[0] for c in CASES])
def test_op_accepts_well_typed_use(tmp_path, name, good, bad, frags):
    assert check_src(tmp_path, good) == []


@pytest.mark.parametrize("name,good,bad,frags", CASES, ids=[c[0] for c in CASES])
def test_op_rejects_shape_violation_at_its_line(tmp_path, name, good, bad, frags):
    d = one_error(tmp_path, bad)
    assert d.pos.line == 3, d  # the snippet's line, after the two-line prelude
    assert d.pos.file.endswith("M.lean")
    for frag in frags:
        assert frag in d.message, (frag, d.message)
    assert str(d).startswith(f"{d.pos.file}:3:{d.pos.col}: error: ")


def test_every_op_of_the_library_has_a_case():
    from pytyr.lean import library
    declared = {info.name.removeprefix("torch.") for info in library().ops().values()}
    assert declared == {c[0] for c in CASES}


@pytest.mark.parametrize("src,ok", [
    # the head width is written `2 * k`: a literal width needs its half given, as for `third`
    ("def f (x : T #[2, 4, 8, 16]) : T #[2, 4, 8, 16] := rotary (k := 8) (n := 8) x (by decide)",
     True),
    ("def f (x : T #[2, 4, 8, 16]) : T #[2, 4, 8, 16] := rotary (n := 8) x (by decide)", False),
    # the nanochat pattern: split heads of width `2 * k`, rotate, merge
    ("def f (h k t : Nat) (ht : t ≤ 64) (x : T #[2, t, h * (2 * k)]) : T #[2, t, h * (2 * k)] := "
     "  mergeHeads (rotary (rmsNorm4 (splitHeads x)) ht)", True),
])
def test_rotary_evenness_is_in_the_type(tmp_path, src, ok):
    diags = check_src(tmp_path, src)
    assert (diags == []) == ok, diags


@pytest.mark.parametrize("src,frags", [
    # positions over the heads: the [b, t, h, d] layout rotates axis 2, which is `h`
    ("def f {t : Nat} (hT : t ≤ 64) (x : T #[2, t, 4, 16]) : T #[2, t, 4, 16] := "
     "rotary (k := 8) x hT", ["argument 'hT' of 'rotary'", "t ≤ 64", "4 ≤ ?n"]),
    # no hypothesis about the tokens: not a context from position 0
    ("def f {t : Nat} (x : T #[2, 4, t, 16]) : T #[2, 4, t, 16] := rotary (k := 8) x 500.0",
     ["argument 'hT' of 'rotary' has type Float but is expected to have type t ≤ ?n"]),
])
def test_rotary_positions_are_the_context_axis(tmp_path, src, frags):
    d = one_error(tmp_path, src)
    assert d.pos.line == 3 and all(f in d.message for f in frags), d
