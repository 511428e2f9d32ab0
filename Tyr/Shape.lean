import Tyr.Core

/-!
# Tyr.Shape — structural ops typed dimension by dimension

Reshapes, reductions over one axis, concatenation and slicing along one axis, chunks and a
4-D batched matrix product. Each type says what happens to every dimension, so none needs a
`by decide` proof and batch and sequence length may stay symbolic (`reshape` needs closed
shapes). As in `Tyr.Ops`, typing depends on the rank, so each rank has its own name:

* a digit suffix is the rank of the input (`catSeq3` takes `T #[b, t, d]`); none means 2;
* `Last` is the last axis; `Seq` the sequence axis: axis 1 of `[b, t, d]`, axis 2 of the
  heads layout `[b, h, t, d]`;
* a split of `m + n` or `m * n` must be *written* as that sum or product (a config's
  `txt_len + img_tokens`), as for `splitHeads`: unification does not invert `+` or `*` on a
  number. With literal shapes give the second summand by name, `frontSeq3 (n := 16) x` on
  `T #[2, 17, 8]`: `?m + 16` unifies with `17` by its offset, `1 + ?n` does not (`+` recurses
  on its second argument), so `(m := 1)` is no help; a product needs both factors by name,
  `splitLast (m := 2) (n := 4) x` on `T #[3, 8]`.
-/

namespace torch

/-- Split the last axis `m * n` into `m` rows of `n`: `[a, m * n] → [a, m, n]` (a view). -/
def splitLast {a m n : Nat} (x : T #[a, m * n]) : T #[a, m, n] :=
  prim "split_last" [x.node]

/-- Split the last axis of a rank-3 tensor: `[a, b, m * n] → [a, b, m, n]` (a view). -/
def splitLast3 {a b m n : Nat} (x : T #[a, b, m * n]) : T #[a, b, m, n] :=
  prim "split_last3" [x.node]

/-- Merge the last two axes: `[a, m, n] → [a, m * n]`, the inverse of `splitLast`. -/
def mergeLast3 {a m n : Nat} (x : T #[a, m, n]) : T #[a, m * n] :=
  prim "merge_last3" [x.node]

/-- Merge the last two axes of a rank-4 tensor: `[a, b, m, n] → [a, b, m * n]`. -/
def mergeLast4 {a b m n : Nat} (x : T #[a, b, m, n]) : T #[a, b, m * n] :=
  prim "merge_last4" [x.node]

/-- Merge the first two axes: `[a, b, c] → [a * b, c]` (every token of a batch as one row). -/
def mergeFirst3 {a b c : Nat} (x : T #[a, b, c]) : T #[a * b, c] :=
  prim "merge_first3" [x.node]

/-- All elements in row-major order: `[a, b] → [a * b]`. -/
def flatten {a b : Nat} (x : T #[a, b]) : T #[a * b] :=
  prim "flatten" [x.node]

/-- All elements in row-major order: `[a, b, c] → [a * b * c]`. -/
def flatten3 {a b c : Nat} (x : T #[a, b, c]) : T #[a * b * c] :=
  prim "flatten3" [x.node]

/-- Sum over the last axis: `[a, n] → [a]`. -/
def sumLast {a n : Nat} (x : T #[a, n]) : T #[a] :=
  prim "sum_last" [x.node]

/-- Mean over the last axis: `[a, n] → [a]`. -/
def meanLast {a n : Nat} (x : T #[a, n]) : T #[a] :=
  prim "mean_last" [x.node]

/-- Sum over the last axis of a rank-3 tensor: `[a, b, n] → [a, b]`. -/
def sumLast3 {a b n : Nat} (x : T #[a, b, n]) : T #[a, b] :=
  prim "sum_last3" [x.node]

/-- Mean over the last axis of a rank-3 tensor: `[a, b, n] → [a, b]`. -/
def meanLast3 {a b n : Nat} (x : T #[a, b, n]) : T #[a, b] :=
  prim "mean_last3" [x.node]

/-- Sum over the sequence axis: `[b, t, d] → [b, d]`. -/
def sumSeq3 {b t d : Nat} (x : T #[b, t, d]) : T #[b, d] :=
  prim "sum_seq3" [x.node]

/-- Mean over the sequence axis (mean pooling of the tokens): `[b, t, d] → [b, d]`. -/
def meanSeq3 {b t d : Nat} (x : T #[b, t, d]) : T #[b, d] :=
  prim "mean_seq3" [x.node]

/-- Concatenate along the last axis: `[a, m] ++ [a, n] → [a, m + n]`. -/
def catLast {a m n : Nat} (x : T #[a, m]) (y : T #[a, n]) : T #[a, m + n] :=
  prim "cat_last" [x.node, y.node]

/-- Concatenate along the last axis of rank-3 tensors: `[a, b, m] ++ [a, b, n]`. -/
def catLast3 {a b m n : Nat} (x : T #[a, b, m]) (y : T #[a, b, n]) : T #[a, b, m + n] :=
  prim "cat_last3" [x.node, y.node]

/-- Concatenate along the first axis: `[m, d] ++ [n, d] → [m + n, d]` (rows of a table: the
text then the image position ids of FLUX.2's joint sequence). -/
def catFirst {m n d : Nat} (x : T #[m, d]) (y : T #[n, d]) : T #[m + n, d] :=
  prim "cat_first" [x.node, y.node]

/-- Concatenate two token sequences: `[b, m, d] ++ [b, n, d] → [b, m + n, d]`. -/
def catSeq3 {b m n d : Nat} (x : T #[b, m, d]) (y : T #[b, n, d]) : T #[b, m + n, d] :=
  prim "cat_seq3" [x.node, y.node]

/-- Concatenate two sequences in the heads layout: `[b, h, m, d] ++ [b, h, n, d]`. -/
def catSeq4 {b h m n d : Nat} (x : T #[b, h, m, d]) (y : T #[b, h, n, d]) :
    T #[b, h, m + n, d] :=
  prim "cat_seq4" [x.node, y.node]

/-- The first `m` of `m + n` along the last axis: `[a, m + n] → [a, m]` (a view). -/
def frontLast {a m n : Nat} (x : T #[a, m + n]) : T #[a, m] :=
  prim "front_last" [x.node]

/-- The last `n` of `m + n` along the last axis: `[a, m + n] → [a, n]` (a view). -/
def backLast {a m n : Nat} (x : T #[a, m + n]) : T #[a, n] :=
  prim "back_last" [x.node]

/-- The first `m` of `m + n` along the last axis: `[a, b, m + n] → [a, b, m]` (a view). -/
def frontLast3 {a b m n : Nat} (x : T #[a, b, m + n]) : T #[a, b, m] :=
  prim "front_last3" [x.node]

/-- The last `n` of `m + n` along the last axis: `[a, b, m + n] → [a, b, n]` (a view). -/
def backLast3 {a b m n : Nat} (x : T #[a, b, m + n]) : T #[a, b, n] :=
  prim "back_last3" [x.node]

/-- The first `m` tokens of `m + n`: `[b, m + n, d] → [b, m, d]` (a view). -/
def frontSeq3 {b m n d : Nat} (x : T #[b, m + n, d]) : T #[b, m, d] :=
  prim "front_seq3" [x.node]

/-- The last `n` tokens of `m + n`: `[b, m + n, d] → [b, n, d]` (a view). -/
def backSeq3 {b m n d : Nat} (x : T #[b, m + n, d]) : T #[b, n, d] :=
  prim "back_seq3" [x.node]

/-- The first `m` positions in the heads layout: `[b, h, m + n, d] → [b, h, m, d]`. -/
def frontSeq4 {b h m n d : Nat} (x : T #[b, h, m + n, d]) : T #[b, h, m, d] :=
  prim "front_seq4" [x.node]

/-- The last `n` positions in the heads layout: `[b, h, m + n, d] → [b, h, n, d]`. -/
def backSeq4 {b h m n d : Nat} (x : T #[b, h, m + n, d]) : T #[b, h, n, d] :=
  prim "back_seq4" [x.node]

/-- The `i`-th of `n` equal chunks of the last axis: `[a, n * d] → [a, d]` (a view; adaLN's
shift, scale and gate from one projection). -/
def chunk {a n d : Nat} (x : T #[a, n * d]) (i : Nat) (h : i < n := by decide) : T #[a, d] :=
  prim "chunk" [x.node] [.nat "i" i]

/-- The `i`-th of `n` equal chunks of the last axis: `[a, b, n * d] → [a, b, d]` (a view). -/
def chunk3 {a b n d : Nat} (x : T #[a, b, n * d]) (i : Nat) (h : i < n := by decide) :
    T #[a, b, d] :=
  prim "chunk3" [x.node] [.nat "i" i]

/-- Batched matrix product over two leading axes (heads of a batch):
`[b, h, m, k] × [b, h, k, n] → [b, h, m, n]`. -/
def bmm4 {b h m k n : Nat} (x : T #[b, h, m, k]) (y : T #[b, h, k, n]) : T #[b, h, m, n] :=
  prim "bmm4" [x.node, y.node]

end torch
