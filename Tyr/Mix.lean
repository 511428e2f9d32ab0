import Tyr.Core

/-!
# Tyr.Mix — gates, learned scalars, token smearing and sliding windows

The ops of today's nanochat (and of modded-nanogpt, where it took them from): sigmoid gates,
learned scalars that scale a whole tensor, the smear of each token's embedding into the next
one's, the value-embedding gate per key/value head, and causal attention restricted to a
sliding window of keys. Per-layer scalars travel through a fold over the layers as a vector
that is read at its front and rotated (`stackHead1`, `stackPush1`), as the key/value caches of
`Tyr.Decode` do. As everywhere in Tyr, each op is a typed `prim`; a window's length is bounded
by a hypothesis `w ≤ n` against the context `n` it slides over.
-/

namespace torch

/-- Logistic sigmoid `1 / (1 + exp (-x))`, elementwise. -/
def sigmoid {s : Shape} (x : T s) : T s :=
  prim "sigmoid" [x.node]

/-- Every element of `x` times the scalar tensor `a` (a learned scalar: gradients reach `a`). -/
def scaleBy {s : Shape} (x : T s) (a : T #[]) : T s :=
  prim "scale_by" [x.node, a.node]

/-- The first `k` of the `d` channels of every position: `[b, t, d] → [b, t, k]` (a view);
the caller proves `k ≤ d` (a gate that reads a few channels of the stream). -/
def narrowLast3 {b t d : Nat} (x : T #[b, t, d]) (k : Nat) (h : k ≤ d) : T #[b, t, k] :=
  prim "narrow_last3" [x.node] [.nat "k" k]

/-- The last position of every sequence, `[b, t, d] → [b, 1, d]`; there is one (`0 < t`). -/
def lastSeq3 {b t d : Nat} (x : T #[b, t, d]) (h : 0 < t) : T #[b, 1, d] :=
  prim "last_seq3" [x.node]

/-- The smear of a sequence: position `i > 0` gets its predecessor times its gate added,
`y₀ = x₀`, `yᵢ = xᵢ + gateᵢ · xᵢ₋₁` (one gate per position; `gate₀` is not read). -/
def smear {b t d : Nat} (x : T #[b, t, d]) (gate : T #[b, t, 1]) : T #[b, t, d] :=
  prim "smear" [x.node, gate.node]

/-- `smear` of `t` new positions after the position `prev`: `y₀ = x₀ + gate₀ · prev`, then as
`smear` (a decoding step continues the smear of what came before; zeros for a first step). -/
def smearAfter {b t d : Nat} (x : T #[b, t, d]) (gate : T #[b, t, 1]) (prev : T #[b, 1, d]) :
    T #[b, t, d] :=
  prim "smear_after" [x.node, gate.node, prev.node]

/-- Each of the `g` heads of `v`, at each position, times its gate:
`y[i, j, p, :] = v[i, j, p, :] · gate[i, p, j]` (the gate per head and position, laid out as a
projection of the stream gives it). -/
def gateHeads {b g t d : Nat} (v : T #[b, g, t, d]) (gate : T #[b, t, g]) : T #[b, g, t, d] :=
  prim "gate_heads" [v.node, gate.node]

/-- Causal grouped-query attention over a sliding window: query `i` sees the keys `j` with
`i - w ≤ j ≤ i` (the last `w + 1` positions: FlashAttention's `window_size = (w, 0)`), head `i`
of `h` reading key/value head `i / (h / g)` of `g`. The window and the sequence are bounded by
the same context `n`, `hw : w ≤ n` and `hT : t ≤ n` (a model's `window ≤ block` and
`t ≤ block`: a window bounded by another length is a type error); `w ≥ t - 1` is
`gqaAttention`. -/
def windowAttention {b h g t d n : Nat} (q : T #[b, h, t, d]) (k v : T #[b, g, t, d]) (w : Nat)
    (hw : w ≤ n) (hT : t ≤ n) (hg : h % g = 0) : T #[b, h, t, d] :=
  prim "window_attention" [q.node, k.node, v.node] [.nat "w" w]

/-- `cachedAttention` over a sliding window: query `i`, at position `pos[i]`, sees the cache
positions `j` with `pos[i] - w ≤ j ≤ pos[i]`; the window is bounded by the cache, `w ≤ n`. -/
def cachedWindowAttention {b h g t n d : Nat} (q : T #[b, h, t, d]) (k v : T #[b, g, n, d])
    (pos : IT #[t] n) (w : Nat) (hw : w ≤ n) (hg : h % g = 0) : T #[b, h, t, d] :=
  prim "cached_window_attention" [q.node, k.node, v.node, pos.node] [.nat "w" w]

/-- The first element of a non-empty vector, a scalar (this layer's of per-layer scalars). -/
def stackHead1 {l : Nat} (s : T #[l]) (hl : 0 < l) : T #[] :=
  prim "stack_head1" [s.node]

/-- The vector without its first element and with `x` appended at the end (pushing the head
read by `stackHead1` rotates the vector: the next layer reads the next scalar). -/
def stackPush1 {l : Nat} (s : T #[l]) (x : T #[]) : T #[l] :=
  prim "stack_push1" [s.node, x.node]

/-- A vector of `l` zeros but `a` at index `i` (the one layer a scalar applies to, selected in
a fold over the layers without an `if`). -/
def basis {l : Nat} (a : T #[1]) (i : Nat) (hi : i < l) : T #[l] :=
  prim "basis" [a.node] [.nat "i" i]

end torch
