"""Checker cases of the ops of Tyr/Shape.lean and Tyr/DiT.lean, in the format of `CASES` in
tests/test_lean_ops.py (which runs them): (name, accepted source, rejected source, fragments
of the error). Sums and products are written symbolically, as a model's config writes them:
unification does not invert `m + n` or `m * n` on a number."""
from __future__ import annotations

SHAPE_CASES = [
    ("splitLast",
     "def f (m n : Nat) (x : T #[2, m * n]) : T #[2, m, n] := splitLast x",
     "def f (m n : Nat) (x : T #[2, m * n]) : T #[2, n, m] := splitLast x",
     ["argument 'x' of 'splitLast'", "T #[2, m * n]", "T #[2, n * m]"]),
    ("splitLast3",
     "def f (b m n : Nat) (x : T #[b, 7, m * n]) : T #[b, 7, m, n] := splitLast3 x",
     "def f (b m n : Nat) (x : T #[b, 7, m + n]) : T #[b, 7, m, n] := splitLast3 x",
     ["argument 'x' of 'splitLast3'", "T #[b, 7, m + n]", "T #[b, 7, m * n]"]),
    ("mergeLast3",
     "def f (b : Nat) (x : T #[b, 4, 3]) : T #[b, 4 * 3] := mergeLast3 x",
     "def f (b : Nat) (x : T #[b, 4, 3]) : T #[b, 4, 3] := mergeLast3 x",
     ["mergeLast3", "T #[b, 12]", "T #[b, 4, 3]"]),
    ("mergeLast4",
     "def f (b t : Nat) (x : T #[b, t, 4, 8]) : T #[b, t, 32] := mergeLast4 x",
     "def f (b t : Nat) (x : T #[b, t, 4, 8]) : T #[b, 32] := mergeLast4 x",
     ["mergeLast4", "T #[b, t, 32]", "T #[b, 32]"]),
    ("mergeFirst3",
     "def f (b t : Nat) (x : T #[b, t, 65]) : T #[b * t, 65] := mergeFirst3 x",
     "def f (b t : Nat) (x : T #[b, t, 65]) : T #[t * b, 65] := mergeFirst3 x",
     ["argument 'x' of 'mergeFirst3'", "T #[b, t, 65]", "T #[t, b, 65]"]),
    ("flatten",
     "def f (b : Nat) (x : T #[b, 5]) : T #[b * 5] := flatten x",
     "def f (b : Nat) (x : T #[b, 5]) : T #[5 * b] := flatten x",
     ["argument 'x' of 'flatten'", "T #[b, 5]", "T #[5, b]"]),
    ("flatten3",
     "def f (b : Nat) (x : T #[b, 2, 3]) : T #[b * 2 * 3] := flatten3 x",
     "def f (b : Nat) (x : T #[b, 2, 3]) : T #[b * 6] := flatten3 x",
     ["flatten3", "T #[b * 2 * 3]", "T #[b * 6]"]),
    ("sumLast",
     "def f (b : Nat) (x : T #[b, 5]) : T #[b] := sumLast x",
     "def f (b : Nat) (x : T #[b, 5]) : T #[5] := sumLast x",
     ["argument 'x' of 'sumLast'", "T #[b, 5]", "T #[5, ?n]"]),
    ("meanLast",
     "def f (b : Nat) (x : T #[b, 5]) : T #[b] := meanLast x",
     "def f (b : Nat) (x : T #[b, 5, 2]) : T #[b] := meanLast x",
     ["argument 'x' of 'meanLast'", "T #[b, 5, 2]", "T #[b, ?n]"]),
    ("sumLast3",
     "def f (b t : Nat) (x : T #[b, t, 5]) : T #[b, t] := sumLast3 x",
     "def f (b t : Nat) (x : T #[b, t, 5]) : T #[b, 5] := sumLast3 x",
     ["argument 'x' of 'sumLast3'", "T #[b, t, 5]", "T #[b, 5, ?n]"]),
    ("meanLast3",
     "def f (b t : Nat) (x : T #[b, t, 5]) : T #[b, t] := meanLast3 x",
     "def f (b t : Nat) (x : T #[b, t, 5]) : T #[t, b] := meanLast3 x",
     ["argument 'x' of 'meanLast3'", "T #[b, t, 5]", "T #[t, b, ?n]"]),
    ("sumSeq3",
     "def f (b t : Nat) (x : T #[b, t, 5]) : T #[b, 5] := sumSeq3 x",
     "def f (b t : Nat) (x : T #[b, t, 5]) : T #[b, t] := sumSeq3 x",
     ["argument 'x' of 'sumSeq3'", "T #[b, t, 5]", "T #[b, ?t, t]"]),
    ("meanSeq3",
     "def f (b t : Nat) (x : T #[b, t, 5]) : T #[b, 5] := meanSeq3 x",
     "def f (b t : Nat) (x : T #[b, t, 5]) : T #[t, 5] := meanSeq3 x",
     ["argument 'x' of 'meanSeq3'", "T #[b, t, 5]", "T #[t, ?t, 5]"]),
    ("catLast",
     "def f (b : Nat) (x : T #[b, 3]) (y : T #[b, 4]) : T #[b, 3 + 4] := catLast x y",
     "def f (b : Nat) (x : T #[b, 3]) (y : T #[5, 4]) : T #[b, 7] := catLast x y",
     ["argument 'y' of 'catLast'", "T #[5, 4]", "T #[b, ?n]"]),
    ("catLast3",
     "def f (b t m n : Nat) (x : T #[b, t, m]) (y : T #[b, t, n]) : T #[b, t, m + n] := "
     "catLast3 x y",
     "def f (b t m n : Nat) (x : T #[b, t, m]) (y : T #[b, t, n]) : T #[b, t, n + m] := "
     "catLast3 x y",
     ["argument 'x' of 'catLast3'", "T #[b, t, m]", "T #[b, t, n]"]),
    ("catFirst",
     "def f (m n : Nat) (x : T #[m, 4]) (y : T #[n, 4]) : T #[m + n, 4] := catFirst x y",
     "def f (m n : Nat) (x : T #[m, 4]) (y : T #[n, 3]) : T #[m + n, 4] := catFirst x y",
     ["argument 'y' of 'catFirst'", "T #[n, 3]", "T #[n, 4]"]),
    ("catSeq3",
     "def f (b m n : Nat) (x : T #[b, m, 8]) (y : T #[b, n, 8]) : T #[b, m + n, 8] := catSeq3 x y",
     "def f (b m n : Nat) (x : T #[b, m, 8]) (y : T #[b, n, 6]) : T #[b, m + n, 8] := catSeq3 x y",
     ["argument 'y' of 'catSeq3'", "T #[b, n, 6]", "T #[b, n, 8]"]),
    ("catSeq4",
     "def f (m n : Nat) (x : T #[2, 4, m, 8]) (y : T #[2, 4, n, 8]) : T #[2, 4, m + n, 8] := "
     "catSeq4 x y",
     "def f (m n : Nat) (x : T #[2, 4, m, 8]) (y : T #[2, 3, n, 8]) : T #[2, 4, m + n, 8] := "
     "catSeq4 x y",
     ["argument 'y' of 'catSeq4'", "T #[2, 3, n, 8]", "T #[2, 4, n, 8]"]),
    ("frontLast",
     "def f (m n : Nat) (x : T #[2, m + n]) : T #[2, m] := frontLast x",
     "def f (m n : Nat) (x : T #[2, m + n]) : T #[2, n] := frontLast x",
     ["argument 'x' of 'frontLast'", "T #[2, m + n]", "T #[2, n + ?n]"]),
    ("backLast",
     "def f (m n : Nat) (x : T #[2, m + n]) : T #[2, n] := backLast x",
     "def f (m n : Nat) (x : T #[2, m + n]) : T #[2, m] := backLast x",
     ["argument 'x' of 'backLast'", "T #[2, m + n]", "T #[2, ?m + m]"]),
    ("frontLast3",
     "def f (d m : Nat) (x : T #[2, 5, 3 * d + m]) : T #[2, 5, 3 * d] := frontLast3 x",
     "def f (d m : Nat) (x : T #[2, 5, 3 * d * m]) : T #[2, 5, 3 * d] := frontLast3 x",
     ["argument 'x' of 'frontLast3'", "T #[2, 5, 3 * d * m]", "T #[2, 5, 3 * d + ?n]"]),
    ("backLast3",
     "def f (d m : Nat) (x : T #[2, 5, 3 * d + m]) : T #[2, 5, m] := backLast3 x",
     "def f (d m : Nat) (x : T #[2, 5, 3 * d + m]) : T #[2, 5, 3 * d] := backLast3 x",
     ["argument 'x' of 'backLast3'", "T #[2, 5, 3 * d + m]", "T #[2, 5, ?m + 3 * d]"]),
    ("frontSeq3",
     "def f (x : T #[2, 17, 8]) : T #[2, 1, 8] := frontSeq3 (m := 1) (n := 16) x",
     "def f (m n : Nat) (x : T #[2, m + n, 8]) : T #[2, n, 8] := frontSeq3 x",
     ["argument 'x' of 'frontSeq3'", "T #[2, m + n, 8]", "T #[2, n + ?n, 8]"]),
    ("backSeq3",
     "def f (m n : Nat) (x : T #[2, m + n, 8]) : T #[2, n, 8] := backSeq3 x",
     "def f (x : T #[2, 17, 8]) : T #[2, 18, 8] := backSeq3 x",
     ["argument 'x' of 'backSeq3'", "T #[2, 17, 8]", "T #[2, ?m + 18, 8]"]),
    ("frontSeq4",
     "def f (m n : Nat) (x : T #[2, 4, m + n, 8]) : T #[2, 4, m, 8] := frontSeq4 x",
     "def f (m n : Nat) (x : T #[2, 4, m * n, 8]) : T #[2, 4, m, 8] := frontSeq4 x",
     ["argument 'x' of 'frontSeq4'", "T #[2, 4, m * n, 8]", " + ?n, "]),
    ("backSeq4",
     "def f (m n : Nat) (x : T #[2, 4, m + n, 8]) : T #[2, 4, n, 8] := backSeq4 x",
     "def f (m n : Nat) (x : T #[2, 4, m + n, 8]) : T #[2, 4, m + n, 8] := backSeq4 x",
     ["argument 'x' of 'backSeq4'", "T #[2, 4, m + n, 8]", "T #[2, 4, ?m + (m + n), 8]"]),
    ("chunk",
     "def f (d : Nat) (x : T #[2, 6 * d]) : T #[2, d] := chunk x 5",
     "def f (d : Nat) (x : T #[2, 6 * d]) : T #[2, d] := chunk x 6",
     ["`by decide` failed", "6 < 6"]),
    ("chunk3",
     "def f (d : Nat) (x : T #[2, 7, 3 * d]) : T #[2, 7, d] := chunk3 x 1",
     "def f (d : Nat) (x : T #[2, 7, 3 * d]) : T #[2, 3, d] := chunk3 x 1",
     ["argument 'x' of 'chunk3'", "T #[2, 7, 3 * d]", "T #[2, 3, ?n * d]"]),
    ("bmm4",
     "def f (q : T #[2, 4, 8, 16]) (k : T #[2, 4, 16, 8]) : T #[2, 4, 8, 8] := bmm4 q k",
     "def f (q : T #[2, 4, 8, 16]) (k : T #[2, 4, 8, 16]) : T #[2, 4, 8, 8] := bmm4 q k",
     ["argument 'y' of 'bmm4'", "T #[2, 4, 8, 16]", "T #[2, 4, 16, 8]"]),
]

DIT_CASES = [
    ("silu",
     "def f (x : T #[2, 3]) : T #[2, 3] := silu x",
     "def f (x : IT #[2, 3] 4) : T #[2, 3] := silu x",
     ["argument 'x' of 'silu'", "IT #[2, 3] 4"]),
    ("geluTanh",
     "def f (x : T #[2, 3]) : T #[2, 3] := geluTanh x",
     "def f (x : T #[2, 3]) : T #[3] := geluTanh x",
     ["geluTanh", "T #[2, 3]", "T #[3]"]),
    ("layerNormNoAffine3",
     "def f (x : T #[2, 8, 4]) : T #[2, 8, 4] := layerNormNoAffine3 x (eps := 1e-5)",
     "def f (x : T #[8, 4]) : T #[8, 4] := layerNormNoAffine3 x",
     ["argument 'x' of 'layerNormNoAffine3'", "T #[8, 4]", "T #[?b, ?t, ?n]"]),
    ("rmsNormScale4",
     "def f (x : T #[2, 4, 8, 16]) (s : T #[16]) : T #[2, 4, 8, 16] := rmsNormScale4 x s",
     "def f (x : T #[2, 4, 8, 16]) (s : T #[8]) : T #[2, 4, 8, 16] := rmsNormScale4 x s",
     ["argument 'scale' of 'rmsNormScale4'", "T #[8]", "T #[16]"]),
    ("modulate",
     "def f (x : T #[2, 9, 8]) (a c : T #[2, 8]) : T #[2, 9, 8] := modulate x a c",
     "def f (x : T #[2, 9, 8]) (a : T #[2, 8]) (c : T #[9, 8]) : T #[2, 9, 8] := modulate x a c",
     ["argument 'scale' of 'modulate'", "T #[9, 8]", "T #[2, 8]"]),
    ("gate",
     "def f (x : T #[2, 9, 8]) (g : T #[2, 8]) : T #[2, 9, 8] := gate x g",
     "def f (x : T #[2, 9, 8]) (g : T #[2, 9, 8]) : T #[2, 9, 8] := gate x g",
     ["argument 'g' of 'gate'", "T #[2, 9, 8]", "T #[2, 8]"]),
    ("timestepEmbedding",
     "def f (t : T #[7]) : T #[7, 2 * 16] := timestepEmbedding 16 t (maxPeriod := 100.0)",
     "def f (t : T #[7]) : T #[7, 31] := timestepEmbedding 16 t",
     ["timestepEmbedding", "T #[7, 32]", "T #[7, 31]"]),
    ("ropeGrid",
     "def f (x : T #[2, 4, 11, 12]) : T #[2, 4, 11, 12] := ropeGrid 5 2 3 1 2 3 x",
     "def f (x : T #[2, 4, 11, 12]) : T #[2, 4, 11, 12] := ropeGrid 5 2 3 1 2 2 x",
     ["argument 'x' of 'ropeGrid'", "T #[2, 4, 11, 12]", "T #[?b, ?h, 11, 10]"]),
    # the four axes' pairs must sum to half the head width (2 * (1 + 2 + 1 + 1) = 10, not 12)
    ("ropeIds",
     "def f (t : Nat) (x : T #[2, 4, t, 10]) (ids : T #[t, 4]) : T #[2, 4, t, 10] := "
     "ropeIds 1 2 1 1 x ids",
     "def f (t : Nat) (x : T #[2, 4, t, 12]) (ids : T #[t, 4]) : T #[2, 4, t, 12] := "
     "ropeIds 1 2 1 1 x ids",
     ["argument 'x' of 'ropeIds'", "T #[2, 4, t, 12]", "T #[?b, ?h, ?t, 10]"]),
    ("patchify",
     "def f (h w : Nat) (x : T #[2, 3, h * 2, w * 2]) : T #[2, h * w, 3 * 2 * 2] := patchify x",
     "def f (x : T #[2, 3, 9, 9]) : T #[2, 16, 12] := patchify (h := 4) (w := 4) (p := 2) x",
     ["argument 'x' of 'patchify'", "T #[2, 3, 9, 9]", ", 8, 8]"]),
    ("unpatchify",
     "def f (h w p : Nat) (x : T #[2, h * w, 1 * p * p]) : T #[2, 1, h * p, w * p] := "
     "unpatchify x",
     "def f (h w p : Nat) (x : T #[2, h * w, 1 * p * p]) : T #[2, 1, w * p, h * p] := "
     "unpatchify x",
     ["argument 'x' of 'unpatchify'", "T #[2, h * w, 1 * p * p]", "T #[2, w * h, 1 * p * p]"]),
    ("mseLoss",
     "def f (x y : T #[2, 1, 8, 8]) : T #[] := mseLoss x y",
     "def f (x : T #[2, 1, 8, 8]) (y : T #[2, 8, 8]) : T #[] := mseLoss x y",
     ["argument 'y' of 'mseLoss'", "T #[2, 8, 8]", "T #[2, 1, 8, 8]"]),
]

# Tyr/Mix.lean: gates, learned scalars, smear, sliding windows
MIX_CASES = [
    ("sigmoid",
     "def f (x : T #[2, 3]) : T #[2, 3] := sigmoid x",
     "def f (x : T #[2, 3]) : T #[3, 2] := sigmoid x",
     ["sigmoid", "T #[2, 3]", "T #[3, 2]"]),
    ("scaleBy",
     "def f (x : T #[2, 3]) (a : T #[]) : T #[2, 3] := scaleBy x a",
     "def f (x : T #[2, 3]) (a : T #[1]) : T #[2, 3] := scaleBy x a",
     ["argument 'a' of 'scaleBy'", "T #[1]", "T #[]"]),
    ("narrowLast3",
     "def f (x : T #[2, 3, 32]) : T #[2, 3, 24] := narrowLast3 x 24 (by decide)",
     "def f (x : T #[2, 3, 16]) : T #[2, 3, 24] := narrowLast3 x 24 (by decide)",
     ["24 ≤ 16"]),
    ("lastSeq3",
     "def f {t : Nat} (h : 0 < t) (x : T #[2, t, 8]) : T #[2, 1, 8] := lastSeq3 x h",
     "def f {t : Nat} (h : 0 < t) (x : T #[2, t, 8]) : T #[2, t, 8] := lastSeq3 x h",
     ["lastSeq3", "T #[2, 1, 8]", "T #[2, t, 8]"]),
    ("smear",
     "def f (x : T #[2, 5, 8]) (g : T #[2, 5, 1]) : T #[2, 5, 8] := smear x g",
     "def f (x : T #[2, 5, 8]) (g : T #[2, 5, 8]) : T #[2, 5, 8] := smear x g",
     ["argument 'gate' of 'smear'", "T #[2, 5, 8]", "T #[2, 5, 1]"]),
    ("smearAfter",
     "def f (x : T #[2, 5, 8]) (g : T #[2, 5, 1]) (p : T #[2, 1, 8]) : T #[2, 5, 8] := "
     "smearAfter x g p",
     "def f (x : T #[2, 5, 8]) (g : T #[2, 5, 1]) (p : T #[2, 5, 8]) : T #[2, 5, 8] := "
     "smearAfter x g p",
     ["argument 'prev' of 'smearAfter'", "T #[2, 5, 8]", "T #[2, 1, 8]"]),
    ("gateHeads",
     "def f (v : T #[2, 3, 5, 8]) (g : T #[2, 5, 3]) : T #[2, 3, 5, 8] := gateHeads v g",
     "def f (v : T #[2, 3, 5, 8]) (g : T #[2, 3, 5]) : T #[2, 3, 5, 8] := gateHeads v g",
     ["argument 'gate' of 'gateHeads'", "T #[2, 3, 5]", "T #[2, 5, 3]"]),
    # the window is bounded by the context it slides over: w ≤ n, n the model's block
    ("windowAttention",
     "def f (q : T #[1, 4, 8, 16]) (k v : T #[1, 2, 8, 16]) (hw : 3 ≤ 64) (hT : 8 ≤ 64) : "
     "T #[1, 4, 8, 16] := windowAttention q k v 3 hw hT (by decide)",
     "def f (q : T #[1, 4, 8, 16]) (k v : T #[1, 2, 8, 16]) (hw : 3 ≤ 64) (hT : 8 ≤ 32) : "
     "T #[1, 4, 8, 16] := windowAttention q k v 3 hw hT (by decide)",
     ["argument 'hT' of 'windowAttention'", "8 ≤ 32", "8 ≤ 64"]),
    ("cachedWindowAttention",
     "def f (q : T #[1, 4, 1, 16]) (k v : T #[1, 2, 64, 16]) (p : IT #[1] 64) "
     "(hw : 8 ≤ 64) : T #[1, 4, 1, 16] := cachedWindowAttention q k v p 8 hw (by decide)",
     "def f (q : T #[1, 4, 1, 16]) (k v : T #[1, 2, 64, 16]) (p : IT #[1] 64) "
     "(hw : 8 ≤ 32) : T #[1, 4, 1, 16] := cachedWindowAttention q k v p 8 hw (by decide)",
     ["argument 'hw' of 'cachedWindowAttention'", "8 ≤ 32", "8 ≤ 64"]),
    ("stackHead1",
     "def f (s : T #[4]) : T #[] := stackHead1 s (by decide)",
     "def f (s : T #[4, 1]) : T #[] := stackHead1 s (by decide)",
     ["argument 's' of 'stackHead1'", "T #[4, 1]", "T #[?l]"]),
    ("stackPush1",
     "def f (s : T #[4]) (x : T #[]) : T #[4] := stackPush1 s x",
     "def f (s : T #[4]) (x : T #[1]) : T #[4] := stackPush1 s x",
     ["argument 'x' of 'stackPush1'", "T #[1]", "T #[]"]),
    ("basis",
     "def f (a : T #[1]) : T #[6] := basis a 3 (by decide)",
     "def f (a : T #[1]) : T #[6] := basis a 6 (by decide)",
     ["6 < 6"]),
]

# Tyr/LM.lean: the gained RMS norm, Hugging Face's rotary, GPT-2's Conv1D, cross-attention
LM_CASES = [
    # a gain of another width
    ("rmsNormGain3",
     "def f (x : T #[2, 5, 8]) (w : T #[8]) : T #[2, 5, 8] := rmsNormGain3 x w",
     "def f (x : T #[2, 5, 8]) (w : T #[5]) : T #[2, 5, 8] := rmsNormGain3 x w",
     ["argument 'weight' of 'rmsNormGain3'", "T #[5]", "T #[8]"]),
    # positions bounded by the context: the rotated axis must be the sequence's
    ("rope",
     "def f (x : T #[1, 4, 8, 16]) (h : 8 ≤ 64) : T #[1, 4, 8, 16] := "
     "rope (k := 8) (n := 64) x h 500000.0",
     "def f (x : T #[1, 8, 4, 16]) (h : 8 ≤ 64) : T #[1, 8, 4, 16] := "
     "rope (k := 8) (n := 64) x h 500000.0",
     ["argument 'hT' of 'rope'", "8 ≤ 64", "4 ≤ 64"]),
    ("ropeAt",
     "def f (x : T #[1, 4, 1, 16]) (p : IT #[1] 64) : T #[1, 4, 1, 16] := "
     "ropeAt (k := 8) x p 10000.0 8.0 1.0 4.0 8192",
     "def f (x : T #[1, 4, 1, 16]) (p : IT #[4] 64) : T #[1, 4, 1, 16] := "
     "ropeAt (k := 8) x p 10000.0",
     ["argument 'pos' of 'ropeAt'", "IT #[4] 64", "IT #[1] ?n"]),
    # GPT-2's weight is input-major: ours ([out, in]) is refused
    ("conv1d3",
     "def f (x : T #[2, 5, 8]) (w : T #[8, 24]) (b : T #[24]) : T #[2, 5, 24] := conv1d3 x w b",
     "def f (x : T #[2, 5, 8]) (w : T #[24, 8]) (b : T #[24]) : T #[2, 5, 24] := conv1d3 x w b",
     ["argument 'weight' of 'conv1d3'", "T #[24, 8]", "T #[8, 24]"]),
    # queries and keys of different lengths, swapped
    ("crossAttention",
     "def f (q : T #[2, 4, 3, 8]) (k v : T #[2, 4, 7, 8]) : T #[2, 4, 3, 8] := "
     "crossAttention q k v",
     "def f (q : T #[2, 4, 3, 8]) (k v : T #[2, 4, 7, 8]) : T #[2, 4, 3, 8] := "
     "crossAttention k q v",
     ["crossAttention", "T #[2, 4, 7, 8]", "T #[2, 4, 3, 8]"]),
    # the mask is the sequences' own: [b, t] of bound 2, not of the vocabulary
    ("paddedCausalAttention",
     "def f (q : T #[2, 4, 5, 8]) (k v : T #[2, 2, 5, 8]) (m : IT #[2, 5] 2) : "
     "T #[2, 4, 5, 8] := paddedCausalAttention q k v m (by decide)",
     "def f (q : T #[2, 4, 5, 8]) (k v : T #[2, 2, 5, 8]) (m : IT #[2, 5] 64) : "
     "T #[2, 4, 5, 8] := paddedCausalAttention q k v m (by decide)",
     ["argument 'keep' of 'paddedCausalAttention'", "IT #[2, 5] 64", "IT #[2, 5] 2"]),
    # the window's bound and the context's must be one: `n` is fixed by `hw` first
    ("paddedWindowAttention",
     "def f (q : T #[2, 4, 5, 8]) (k v : T #[2, 2, 5, 8]) (m : IT #[2, 5] 2) (hw : 3 ≤ 64) "
     "(hT : 5 ≤ 64) : T #[2, 4, 5, 8] := paddedWindowAttention q k v m 3 hw hT (by decide)",
     "def f (q : T #[2, 4, 5, 8]) (k v : T #[2, 2, 5, 8]) (m : IT #[2, 5] 2) (hw : 3 ≤ 64) "
     "(hT : 5 ≤ 32) : T #[2, 4, 5, 8] := paddedWindowAttention q k v m 3 hw hT (by decide)",
     ["argument 'hT' of 'paddedWindowAttention'", "5 ≤ 32", "5 ≤ 64"]),
]

# Tyr/MoE.lean: the router, the experts, the load-balancing loss. The ids are typed by the
# experts they index: a router over the wrong axis, ids of another count, a transposed expert.
MOE_CASES = [
    # the logits' axes swapped: ids below the length, not below the experts
    ("routerTopK",
     "def f (b t e : Nat) (z : T #[b, t, e]) (h : 2 ≤ e) : IT #[b, t, 2] e := routerTopK z 2 h",
     "def f (b t e : Nat) (z : T #[b, e, t]) (h : 2 ≤ t) : IT #[b, t, 2] e := routerTopK z 2 h",
     ["routerTopK", "IT #[b, e, 2] t", "IT #[b, t, 2] e"]),
    ("routerWeights",
     "def f (z : T #[2, 5, 4]) (i : IT #[2, 5, 2] 4) : T #[2, 5, 2] := "
     "routerWeights z i 1 (by decide)",
     "def f (z : T #[2, 5, 4]) (i : IT #[2, 5, 2] 6) : T #[2, 5, 2] := "
     "routerWeights z i 1 (by decide)",
     ["argument 'ids' of 'routerWeights'", "IT #[2, 5, 2] 6", "IT #[2, 5, 2] 4"]),
    ("expertAdd",
     "def f (a x : T #[2, 5, 8]) (i : IT #[2, 5, 2] 4) (w : T #[2, 5, 2]) (g u : T #[3, 8]) "
     "(d : T #[8, 3]) : T #[2, 5, 8] := expertAdd a x i w g u d",
     "def f (a x : T #[2, 5, 8]) (i : IT #[2, 5, 2] 4) (w : T #[2, 5, 2]) (g u : T #[3, 8]) "
     "(d : T #[3, 8]) : T #[2, 5, 8] := expertAdd a x i w g u d",
     ["argument 'down' of 'expertAdd'", "T #[3, 8]", "T #[8, 3]"]),
    ("rotateIds",
     "def f (i : IT #[2, 5, 2] 4) : IT #[2, 5, 2] 4 := rotateIds i",
     "def f (i : IT #[2, 5, 2] 4) : IT #[2, 5, 2] 5 := rotateIds i",
     ["argument 'ids' of 'rotateIds'", "IT #[2, 5, 2] 4", "IT #[2, 5, 2] 5"]),
    ("noLoad",
     "def f (x : T #[2, 5, 8]) : T #[2, 4] := noLoad x 4",
     "def f (x : T #[2, 5, 8]) : T #[4, 2] := noLoad x 4",
     ["noLoad", "T #[2, 4]", "T #[4, 2]"]),
    ("routerLoad",
     "def f (l : T #[2, 4]) (z : T #[2, 5, 4]) (i : IT #[2, 5, 2] 4) : T #[2, 4] := "
     "routerLoad l z i",
     "def f (l : T #[2, 4]) (z : T #[2, 5, 4]) (i : IT #[2, 5, 2] 6) : T #[2, 4] := "
     "routerLoad l z i",
     ["argument 'ids' of 'routerLoad'", "IT #[2, 5, 2] 6", "IT #[2, 5, ?k] 4"]),
    ("balanceLoss",
     "def f (l : T #[2, 4]) : T #[] := balanceLoss l 3 (by decide)",
     "def f (l : T #[2, 4]) : T #[] := balanceLoss l 0 (by decide)",
     ["`by decide` failed", "0 < 0"]),
]

# Tyr/Conv.lean: channels first, the output size in the type; channels-last input, a wrong
# padding or stride, groups that do not divide, a latent width that is not 4 × the channels
CONV_CASES = [
    # a 3 × 3 kernel at stride 2, padding 1: 8 → 4; declared 8 (the padding of a same conv)
    ("conv2d",
     "def f (x : T #[2, 3, 8, 8]) (w : T #[4, 3, 3, 3]) (b : T #[4]) : T #[2, 4, 4, 4] := "
     "conv2d x w b 2 1 1",
     "def f (x : T #[2, 3, 8, 8]) (w : T #[4, 3, 3, 3]) (b : T #[4]) : T #[2, 4, 8, 8] := "
     "conv2d x w b 2 1 1",
     ["conv2d", "T #[2, 4, 4, 4]", "T #[2, 4, 8, 8]"]),
    # 6 channels in groups of 3: groups 2; the weight of 4 input channels needs 8
    ("conv2dGroups",
     "def f (x : T #[2, 6, 5, 5]) (w : T #[4, 3, 3, 3]) (b : T #[4]) : T #[2, 4, 5, 5] := "
     "conv2dGroups x w b 1 1 1 2",
     "def f (x : T #[2, 6, 5, 5]) (w : T #[4, 4, 3, 3]) (b : T #[4]) : T #[2, 4, 5, 5] := "
     "conv2dGroups x w b 1 1 1 2",
     ["hc", "6 = 2 * 4"]),
    # channels-last input: the channels are not where the weight takes them
    ("conv2dSame",
     "def f (x : T #[2, 3, 8, 8]) (w : T #[4, 3, 3, 3]) (b : T #[4]) : T #[2, 4, 8, 8] := "
     "conv2dSame x 1 w b",
     "def f (x : T #[2, 8, 8, 3]) (w : T #[4, 3, 3, 3]) (b : T #[4]) : T #[2, 4, 8, 8] := "
     "conv2dSame x 1 w b",
     ["argument 'x' of 'conv2dSame'", "T #[2, 8, 8, 3]", "T #[2, ?i, 8, 8]"]),
    ("conv2dDown",
     "def f (h w : Nat) (x : T #[2, 3, 2 * h, 2 * w]) (k : T #[4, 3, 3, 3]) (b : T #[4]) : "
     "T #[2, 4, h, w] := conv2dDown x k b",
     "def f (h w : Nat) (x : T #[2, 3, 2 * h, 2 * w]) (k : T #[4, 3, 3, 3]) (b : T #[4]) : "
     "T #[2, 4, 2 * h, 2 * w] := conv2dDown x k b",
     ["argument 'x' of 'conv2dDown'", "T #[2, 3, 2 * h, 2 * w]", "2 * (2 * h)"]),
    ("conv1d",
     "def f (x : T #[2, 3, 10]) (w : T #[4, 3, 3]) (b : T #[4]) : T #[2, 4, 4] := "
     "conv1d x w b 2 0 1",
     "def f (x : T #[2, 3, 10]) (w : T #[4, 3, 3]) (b : T #[4]) : T #[2, 4, 5] := "
     "conv1d x w b 2 0 1",
     ["conv1d", "T #[2, 4, 4]", "T #[2, 4, 5]"]),
    # 32 groups do not divide 48 channels
    ("groupNorm",
     "def f (x : T #[2, 64, 4, 4]) (w b : T #[64]) : T #[2, 64, 4, 4] := groupNorm x w b 32",
     "def f (x : T #[2, 48, 4, 4]) (w b : T #[48]) : T #[2, 48, 4, 4] := groupNorm x w b 32",
     ["hg", "48 % 32 = 0"]),
    ("batchNormEval",
     "def f (x : T #[2, 8, 4, 4]) (m v : T #[8]) : T #[2, 8, 4, 4] := batchNormEval x m v",
     "def f (x : T #[2, 8, 4, 4]) (m v : T #[4]) : T #[2, 8, 4, 4] := batchNormEval x m v",
     ["argument 'mean' of 'batchNormEval'", "T #[4]", "T #[8]"]),
    ("batchNormInverse",
     "def f (x : T #[2, 8, 4, 4]) (m v : T #[8]) : T #[2, 8, 4, 4] := batchNormInverse x m v",
     "def f (x : T #[2, 8, 4, 4]) (m v : T #[4]) : T #[2, 8, 4, 4] := batchNormInverse x m v",
     ["argument 'mean' of 'batchNormInverse'", "T #[4]", "T #[8]"]),
    ("upsampleNearest",
     "def f (h w : Nat) (x : T #[2, 3, h, w]) : T #[2, 3, 2 * h, 2 * w] := upsampleNearest x 2",
     "def f (h w : Nat) (x : T #[2, 3, h, w]) : T #[2, 3, 2 * h, 2 * w] := upsampleNearest x 3",
     ["upsampleNearest", "T #[2, 3, 3 * h, 3 * w]", "T #[2, 3, 2 * h, 2 * w]"]),
    # FLUX.2's latents: 32 VAE channels unshuffled 2 × 2 are 128, not 32 * 2
    ("pixelUnshuffle",
     "def f (h w : Nat) (x : T #[1, 32, 2 * h, 2 * w]) : T #[1, 32 * (2 * 2), h, w] := "
     "pixelUnshuffle 2 x",
     "def f (h w : Nat) (x : T #[1, 32, 2 * h, 2 * w]) : T #[1, 32 * 2, h, w] := "
     "pixelUnshuffle 2 x",
     ["pixelUnshuffle", "T #[1, 128, h, w]", "T #[1, 64, h, w]"]),
    ("pixelShuffle",
     "def f (h w : Nat) (x : T #[1, 32 * (2 * 2), h, w]) : T #[1, 32, 2 * h, 2 * w] := "
     "pixelShuffle 2 x",
     "def f (h w : Nat) (x : T #[1, 32 * (2 * 2), h, w]) : T #[1, 32, 4 * h, 4 * w] := "
     "pixelShuffle 2 x",
     # `x` gives `?c := 32`, as written (`?c * (2 * 2) =?= 32 * (2 * 2)`): the result differs
     ["type mismatch: 'pixelShuffle ...' has type T #[1, 32, 2 * h, 2 * w]",
      "T #[1, 32, 4 * h, 4 * w]"]),
    # a 1 × 1 kernel's weight is not a Linear's
    ("linearChannels",
     "def f (x : T #[2, 8, 4, 4]) (w : T #[16, 8]) (b : T #[16]) : T #[2, 16, 4, 4] := "
     "linearChannels x w b",
     "def f (x : T #[2, 8, 4, 4]) (w : T #[8, 16]) (b : T #[16]) : T #[2, 16, 4, 4] := "
     "linearChannels x w b",
     ["argument 'weight' of 'linearChannels'", "T #[8, 16]", "T #[16, 8]"]),
    ("imageAttention",
     "def f (q k v : T #[2, 8, 4, 4]) : T #[2, 8, 4, 4] := imageAttention q k v",
     "def f (q k : T #[2, 8, 4, 4]) (v : T #[2, 8, 4, 2]) : T #[2, 8, 4, 4] := "
     "imageAttention q k v",
     ["argument 'v' of 'imageAttention'", "T #[2, 8, 4, 2]", "T #[2, 8, 4, 4]"]),
]
