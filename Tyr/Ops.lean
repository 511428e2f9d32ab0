import Tyr.Core

/-!
# Tyr.Ops — typed tensor operations

Each op is a `prim`: its signature is its typing rule (the Python checker and the IR
validator read it from here), its body emits the graph node. Ops whose typing depends on the
rank have one name per rank (`transpose`, `transpose3`): Lean cannot unify `s.push n` against
a literal shape, so a rank-polymorphic signature would not infer its dims.
-/

namespace torch

/-- `x Mᵀ`: a batch of `b` rows of width `m` through an `n × m` weight. -/
def linear {m n b : Nat} (x : T #[b, m]) (M : T #[n, m]) : T #[b, n] :=
  prim "linear" [x.node, M.node]

/-- `x Mᵀ + bias`. -/
def linearBias {m n b : Nat} (x : T #[b, m]) (M : T #[n, m]) (bias : T #[n]) : T #[b, n] :=
  prim "linear_bias" [x.node, M.node, bias.node]

/-- `x Mᵀ` for a batch of `b` sequences of `t` rows. -/
def linear3 {b t m n : Nat} (x : T #[b, t, m]) (M : T #[n, m]) : T #[b, t, n] :=
  prim "linear3" [x.node, M.node]

/-- `x Mᵀ + bias` for a batch of sequences. -/
def linearBias3 {b t m n : Nat} (x : T #[b, t, m]) (M : T #[n, m]) (bias : T #[n]) :
    T #[b, t, n] :=
  prim "linear_bias3" [x.node, M.node, bias.node]

/-- Matrix product. -/
def matmul {a b c : Nat} (x : T #[a, b]) (y : T #[b, c]) : T #[a, c] :=
  prim "matmul" [x.node, y.node]

/-- Batched matrix product over a leading dimension `n`. -/
def bmm {n a b c : Nat} (x : T #[n, a, b]) (y : T #[n, b, c]) : T #[n, a, c] :=
  prim "bmm" [x.node, y.node]

/-- Elementwise sum of two tensors of the same shape. -/
def add {s : Shape} (x y : T s) : T s :=
  prim "add" [x.node, y.node]

/-- Add the same `t` rows to every sequence of the batch (position embeddings). -/
def addRows {b t d : Nat} (x : T #[b, t, d]) (y : T #[t, d]) : T #[b, t, d] :=
  prim "add_rows" [x.node, y.node]

/-- Elementwise difference. -/
def sub {s : Shape} (x y : T s) : T s :=
  prim "sub" [x.node, y.node]

/-- Elementwise product. -/
def mul {s : Shape} (x y : T s) : T s :=
  prim "mul" [x.node, y.node]

/-- Multiply every element by the constant `alpha`. -/
def scale {s : Shape} (x : T s) (alpha : Float) : T s :=
  prim "scale" [x.node] [.float "alpha" alpha]

/-- `max x 0`, elementwise. -/
def relu {s : Shape} (x : T s) : T s :=
  prim "relu" [x.node]

/-- GELU (exact, with `erf`), elementwise. -/
def gelu {s : Shape} (x : T s) : T s :=
  prim "gelu" [x.node]

/-- Hyperbolic tangent, elementwise. -/
def tanh {s : Shape} (x : T s) : T s :=
  prim "tanh" [x.node]

/-- ReLU squared, `(max x 0)²`, elementwise (the MLP activation of nanochat and
modded-nanogpt). -/
def relu2 {s : Shape} (x : T s) : T s :=
  prim "relu2" [x.node]

/-- Soft-capping `cap * tanh (x / cap)`, elementwise: squashes `x` smoothly into
`(-cap, cap)` (logit soft-capping). `cap` must be positive. -/
def softcap {s : Shape} (x : T s) (cap : Float) : T s :=
  prim "softcap" [x.node] [.float "cap" cap]

/-- Softmax over the last dimension. -/
def softmax {s : Shape} (x : T s) : T s :=
  prim "softmax" [x.node]

/-- Sum of all elements. -/
def sum {s : Shape} (x : T s) : T #[] :=
  prim "sum" [x.node]

/-- Mean of all elements. -/
def mean {s : Shape} (x : T s) : T #[] :=
  prim "mean" [x.node]

/-- `x` read in another shape of the same number of elements: the elements in row-major order,
whatever axes that mixes (a flat buffer read as a grid). The graph's `reshape` op; for a
regrouping of adjacent axes write `reshape`, which says so in its type. -/
def regroup {s : Shape} (x : T s) (target : Shape)
    (h : numel s = numel target := by decide) : T target :=
  prim "reshape" [x.node] [.shape "target" target]

/-- View `x` with `target`, the shape `s` with runs of adjacent axes merged and single axes
split, in order (`#[2, 6]` to `#[12]` or `#[2, 2, 3]`); `decide` checks both on closed shapes
(`mergesOrSplits` in `Tyr.Core`). Any other regrouping reads elements of different positions
as one, as a view without a transpose does (`[b, h, t, d]` as `[b, t, h * d]`), and is
rejected: write the transpose or structural op (`Tyr.Shape`) that was meant, or `regroup`.
Prefer those ops: they type each axis and keep batch and length symbolic. -/
def reshape {s : Shape} (x : T s) (target : Shape)
    (hn : numel s = numel target := by decide)
    (h : mergesOrSplits s target = true := by decide) : T target :=
  regroup x target hn

/-- The first `t` rows of `x`; the caller proves there are that many. -/
def rows {n d : Nat} (x : T #[n, d]) (t : Nat) (h : t ≤ n) : T #[t, d] :=
  prim "rows" [x.node] [.nat "t" t]

/-- The `i`-th of three equal slices of the last dimension (a fused q, k, v projection). -/
def third {b t d : Nat} (x : T #[b, t, 3 * d]) (i : Nat) (h : i < 3 := by decide) :
    T #[b, t, d] :=
  prim "third" [x.node] [.nat "i" i]

/-- Zero each element with probability `p` while training (scaling the rest by `1/(1-p)`);
the identity in evaluation. -/
def dropout {s : Shape} (x : T s) (p : Float) : T s :=
  prim "dropout" [x.node] [.float "p" p]

/-- Transpose of a matrix. -/
def transpose {a b : Nat} (x : T #[a, b]) : T #[b, a] :=
  prim "transpose" [x.node]

/-- Transpose of the last two dimensions of a batch of matrices. -/
def transpose3 {n a b : Nat} (x : T #[n, a, b]) : T #[n, b, a] :=
  prim "transpose3" [x.node]

end torch
