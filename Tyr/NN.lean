import Tyr.Core

/-!
# Tyr.NN — neural-network functions

Lookups, normalisation and losses; like `Tyr.Ops`, each is a typed `prim`.
-/

namespace torch

/-- Rows of `table` picked by the integer ids `idx`; the ids are typed by the table's rows. -/
def embedding {b v d : Nat} (idx : IT #[b] v) (table : T #[v, d]) : T #[b, d] :=
  prim "embedding" [idx.node, table.node]

/-- Rows of `table` picked by a batch of id sequences (ids `< v`, the table's rows). -/
def embedding2 {b t v d : Nat} (idx : IT #[b, t] v) (table : T #[v, d]) : T #[b, t, d] :=
  prim "embedding2" [idx.node, table.node]

/-- Layer normalisation over the last dimension, with gain `w` and bias `bias`. -/
def layerNorm {b n : Nat} (x : T #[b, n]) (w : T #[n]) (bias : T #[n])
    (eps : Float := 1e-5) : T #[b, n] :=
  prim "layer_norm" [x.node, w.node, bias.node] [.float "eps" eps]

/-- Layer normalisation of every position of a batch of sequences. -/
def layerNorm3 {b t n : Nat} (x : T #[b, t, n]) (w : T #[n]) (bias : T #[n])
    (eps : Float := 1e-5) : T #[b, t, n] :=
  prim "layer_norm3" [x.node, w.node, bias.node] [.float "eps" eps]

/-- RMS normalisation of every position of a batch of sequences over the last dimension,
without a gain (nanochat's `norm`): `x / √(mean (x²) + eps)`. -/
def rmsNorm3 {b t n : Nat} (x : T #[b, t, n]) (eps : Float := 1e-6) : T #[b, t, n] :=
  prim "rms_norm3" [x.node] [.float "eps" eps]

/-- RMS normalisation over the head dimension of a batch of heads, without a gain (QK-norm):
`x / √(mean (x²) + eps)` for each head and position. -/
def rmsNorm4 {b h t d : Nat} (x : T #[b, h, t, d]) (eps : Float := 1e-6) : T #[b, h, t, d] :=
  prim "rms_norm4" [x.node] [.float "eps" eps]

/-- Rotary position embedding over the head dimension, written `2 * k` so that its evenness is
part of the type (a head of odd width cannot be typed), at the positions `0 … t-1` of the
sequence axis `t` of the heads layout `[b, h, t, 2 * k]`. Position `p` and frequency
`ωᵢ = base ^ (-i / k)` (`i < k`) give the angle `θ = p ωᵢ`; the halves `x₁ = x[…, :k]` and
`x₂ = x[…, k:]` ("rotate half", as nanochat and GPT-NeoX pair them) are rotated as
`y₁ = x₁ cos θ + x₂ sin θ`, `y₂ = x₂ cos θ - x₁ sin θ` (nanochat's sign convention: each pair
`(x₁ᵢ, x₂ᵢ)` turned by `-θ`; the scores `q·k` depend only on the difference of positions either
way).

The positions are typed: like `rows` of a position table, rotary reads the first `t` rows of
cos/sin tables of `n` positions (a model's longest context), so the caller passes the
hypothesis `hT : t ≤ n` that its `t` tokens are a context of at most `n`, the model's own
(`hT : t ≤ c.block`). That ties the rotated axis to the model's sequence: in the `[b, t, h, d]`
layout the positions would be the heads, and the hypothesis about `t` does not fit
(`c.n_head ≤ ?n` is expected); a decoding step, whose new tokens sit at positions of their
own, has no such hypothesis and rotates with `rotaryAt x pos` (`Tyr.Decode`). As with
`splitHeads`, the width must be *written* as a product (a config's `2 * half_dim`); for a
literal width give the half, and the table, by name: `rotary (k := 8) (n := 8) x (by decide)`
on `T #[2, 4, 8, 16]`. -/
def rotary {b h t k n : Nat} (x : T #[b, h, t, 2 * k]) (hT : t ≤ n)
    (base : Float := 10000.0) : T #[b, h, t, 2 * k] :=
  prim "rotary" [x.node] [.float "base" base]

/-- Split the width `h * d` into `h` heads of size `d`. The width must be *written* as a
product (a config's `n_head * head_dim`), so a width not divisible by the heads cannot be
typed at all. -/
def splitHeads {b t h d : Nat} (x : T #[b, t, h * d]) : T #[b, h, t, d] :=
  prim "split_heads" [x.node]

/-- Concatenate the heads again: the inverse of `splitHeads`. -/
def mergeHeads {b h t d : Nat} (x : T #[b, h, t, d]) : T #[b, t, h * d] :=
  prim "merge_heads" [x.node]

/-- Causal scaled dot-product attention per head (`softmax(q kᵀ / √d + mask) v`), with
attention dropout `p` while training. -/
def causalAttention {b h t d : Nat} (q k v : T #[b, h, t, d]) (p : Float := 0.0) :
    T #[b, h, t, d] :=
  prim "causal_attention" [q.node, k.node, v.node] [.float "p" p]

/-- Bidirectional (non-causal) scaled dot-product attention per head: every position attends
to every position of its sequence, `softmax(q kᵀ / √d) v`, with attention dropout `p` while
training (the encoder attention of BERT and of masked diffusion language models). -/
def bidirectionalAttention {b h t d : Nat} (q k v : T #[b, h, t, d]) (p : Float := 0.0) :
    T #[b, h, t, d] :=
  prim "bidirectional_attention" [q.node, k.node, v.node] [.float "p" p]

/-- `bidirectionalAttention` over padded sequences. `keep : IT #[b, t] 2` marks the real tokens
of each sequence `1` and the padding `0` (Hugging Face's `attention_mask`; the IR has no
boolean dtype, so a mask is an index tensor of bound 2). No query attends to a padding key; a
sequence with no real key at all gets zeros. Padded positions are still queries with outputs:
give them zero loss weight. -/
def paddedAttention {b h t d : Nat} (q k v : T #[b, h, t, d]) (keep : IT #[b, t] 2)
    (p : Float := 0.0) : T #[b, h, t, d] :=
  prim "padded_attention" [q.node, k.node, v.node, keep.node] [.float "p" p]

/-- Mean of the real tokens of each sequence (mean pooling, as sentence encoders pool a BERT):
`Σₜ keep[i, t] · x[i, t] / Σₜ keep[i, t]`, with `keep : IT #[b, t] 2` the padding mask of
`paddedAttention`. A sequence with no real token gets zeros. -/
def maskedMeanSeq3 {b t d : Nat} (x : T #[b, t, d]) (keep : IT #[b, t] 2) : T #[b, d] :=
  prim "masked_mean_seq3" [x.node, keep.node]

/-- Mean cross entropy of class `logits` against integer `target` classes, of the same `c`. -/
def crossEntropy {b c : Nat} (logits : T #[b, c]) (target : IT #[b] c) : T #[] :=
  prim "cross_entropy" [logits.node, target.node]

/-- Mean cross entropy over every position of a batch of sequences; targets `< v`. -/
def crossEntropy2 {b t v : Nat} (logits : T #[b, t, v]) (target : IT #[b, t] v) : T #[] :=
  prim "cross_entropy2" [logits.node, target.node]

/-- Weighted cross entropy over every position of a batch of sequences:
`(Σᵢ weight[i] · CE(logits[i], target[i])) / (b · t)`, the weighted per-position losses summed
and divided by the number of positions (so weights all `1` give `crossEntropy2`). A position
of weight `0` adds nothing, but its target is still read and must be a class `< v`. Masked
diffusion's ELBO is this with weight `1/t` at the masked positions and `0` elsewhere. -/
def weightedCrossEntropy2 {b t v : Nat} (logits : T #[b, t, v]) (target : IT #[b, t] v)
    (weight : T #[b, t]) : T #[] :=
  prim "weighted_cross_entropy2" [logits.node, target.node, weight.node]

end torch
