import Tyr.Core

/-!
# Tyr.Decode — grouped-query attention and key/value caches

Ops for nanochat-style models: attention whose `h` query heads share `g` key/value heads
(grouped-query attention), and the pieces of a typed key/value cache for decoding one token
at a time. A cache of `n` positions is an ordinary tensor `T #[b, g, n, d]` that a step model
takes and returns; the positions of the new tokens are an input `pos : IT #[t] n`, typed by
the cache's length, so one graph serves every step, positions meant for a cache of another
length are a type error, and a position `≥ n` fed at run time is an error naming `pos`.
Per-layer caches travel as a stack `T #[l, b, g, n, d]` through a fold over the blocks: each
block reads the stack's first element and pushes its updated cache at the end (`stackHead`,
`stackPush`), so after `l` blocks the stack holds the `l` updated caches in order.

The heads must divide (`h % g = 0`): a hypothesis the caller passes (a model states it as
its own hypothesis, decided on the config's values when it is instantiated).
-/

namespace torch

/-- Causal attention with grouped-query heads: query head `i` of `h` attends with key/value
head `i / (h / g)` of `g` (`softmax(q kᵀ / √d + causal mask) v`); `g = h` is multi-head
attention. The heads must divide: `hg : h % g = 0`. -/
def gqaAttention {b h g t d : Nat} (q : T #[b, h, t, d]) (k v : T #[b, g, t, d])
    (hg : h % g = 0) : T #[b, h, t, d] :=
  prim "gqa_attention" [q.node, k.node, v.node]

/-- Rotary embedding at the positions `pos`: row `i` is turned by the angles of position
`pos[i]`, with the tables of `rotary` (which is `rotaryAt` at positions `0 … t-1`). For the
`t` new tokens of a decoding step, at positions `p … p+t-1` of a context of `n` (the tables'
positions, as for `rotary`; a cache's length). The positions' length is the sequence axis of
the heads layout, so positions for another axis are a type error. -/
def rotaryAt {b h t k n : Nat} (x : T #[b, h, t, 2 * k]) (pos : IT #[t] n)
    (base : Float := 10000.0) : T #[b, h, t, 2 * k] :=
  prim "rotary_at" [x.node, pos.node] [.float "base" base]

/-- `cache` with its rows `pos[i]` (along the `n` positions) replaced by the rows of `x`: the
keys or values of `t` new tokens written into a cache; the positions are typed `< n`. -/
def cacheWrite {b g n t d : Nat} (cache : T #[b, g, n, d]) (x : T #[b, g, t, d])
    (pos : IT #[t] n) : T #[b, g, n, d] :=
  prim "cache_write" [cache.node, x.node, pos.node]

/-- Attention of `t` queries at the positions `pos` over a cache of `n` positions, grouped as
in `gqaAttention`: query `i` sees the cache positions `j ≤ pos[i]` (the causal mask of the
whole sequence, so a step's logits equal those of the uncached model). -/
def cachedAttention {b h g t n d : Nat} (q : T #[b, h, t, d]) (k v : T #[b, g, n, d])
    (pos : IT #[t] n) (hg : h % g = 0) : T #[b, h, t, d] :=
  prim "cached_attention" [q.node, k.node, v.node, pos.node]

/-- The first element of a non-empty stack of `l` tensors (layer 0 of per-layer caches). -/
def stackHead {l b g n d : Nat} (s : T #[l, b, g, n, d]) (hl : 0 < l) : T #[b, g, n, d] :=
  prim "stack_head" [s.node]

/-- The stack without its first element and with `x` appended at the end. -/
def stackPush {l b g n d : Nat} (s : T #[l, b, g, n, d]) (x : T #[b, g, n, d]) :
    T #[l, b, g, n, d] :=
  prim "stack_push" [s.node, x.node]

end torch
