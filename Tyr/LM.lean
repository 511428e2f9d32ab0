import Tyr.Core

/-!
# Tyr.LM — the ops of the decoder families people run (Llama, Mistral, Qwen, GPT-2)

What Hugging Face's `LlamaForCausalLM`, `MistralForCausalLM`, `Qwen2ForCausalLM`,
`Qwen3ForCausalLM` and `GPT2LMHeadModel` compute that the other modules do not: the RMS norm
with a learned gain (`weight`) over a sequence (the per-head gain of Qwen3's q/k norm is
`rmsNormScale4` of `Tyr.DiT`), rotary embedding in Hugging Face's convention with `rope_theta`
and Llama 3's frequency scaling, GPT-2's `Conv1D` (a weight stored input-major) and attention
of `s` queries over `t` keys of another sequence, and causal attention over padded
sequences. The gated MLPs compose from `silu`/`gelu`,
`mul` and `linear3`; grouped-query and sliding-window attention are `gqaAttention` and
`windowAttention`. Each op is a typed `prim`.
-/

namespace torch

/-- RMS normalisation of every position of a batch of sequences with a learned gain (Llama's
`RMSNorm`, whose gain is its `weight`): `x / √(mean (x²) + eps) · weight` over the last
dimension, the gain as wide as that dimension. -/
def rmsNormGain3 {b t n : Nat} (x : T #[b, t, n]) (weight : T #[n]) (eps : Float := 1e-6) :
    T #[b, t, n] :=
  prim "rms_norm_gain3" [x.node, weight.node] [.float "eps" eps]

/-- Rotary position embedding as Hugging Face's decoders apply it (`apply_rotary_pos_emb`),
over the head dimension `2 * k` of the heads layout `[b, h, t, 2 * k]` at the positions
`0 … t-1` of a context of at most `n` (`hT : t ≤ n`, as `rotary`). Frequency `i < k` is
`ωᵢ = theta ^ (-i / k)` (`rope_theta`), then scaled as Llama 3 scales it
(`rope_type = "llama3"`): with the wavelength `λᵢ = 2π / ωᵢ` and the `original` context,
`ωᵢ / factor` where `λᵢ > original / low_freq`, `ωᵢ` where `λᵢ < original / high_freq`, and in
between the blend `(1 - s) ωᵢ / factor + s ωᵢ` with `s = (original / λᵢ - low_freq) /
(high_freq - low_freq)`; `factor = 1` scales nothing (`rope_type = "default"`). With the angle
`θ = p ωᵢ` at position `p`, the halves `x₁ = x[…, :k]`, `x₂ = x[…, k:]` become
`y₁ = x₁ cos θ - x₂ sin θ`, `y₂ = x₂ cos θ + x₁ sin θ` (`x cos + rotate_half(x) sin`: each
pair turned by `+θ`, the opposite of `rotary`'s nanochat convention). -/
def rope {b h t k n : Nat} (x : T #[b, h, t, 2 * k]) (hT : t ≤ n) (theta : Float)
    (factor : Float := 1.0) (low_freq : Float := 1.0) (high_freq : Float := 4.0)
    (original : Nat := 8192) : T #[b, h, t, 2 * k] :=
  prim "rope" [x.node] [.float "theta" theta, .float "factor" factor,
    .float "low_freq" low_freq, .float "high_freq" high_freq, .nat "original" original]

/-- `rope` at the positions `pos` of a context of `n` (a decoding step's tokens, typed by the
cache they are written to), as `rotaryAt` is `rotary` at given positions. -/
def ropeAt {b h t k n : Nat} (x : T #[b, h, t, 2 * k]) (pos : IT #[t] n) (theta : Float)
    (factor : Float := 1.0) (low_freq : Float := 1.0) (high_freq : Float := 4.0)
    (original : Nat := 8192) : T #[b, h, t, 2 * k] :=
  prim "rope_at" [x.node, pos.node] [.float "theta" theta, .float "factor" factor,
    .float "low_freq" low_freq, .float "high_freq" high_freq, .nat "original" original]

/-- GPT-2's `Conv1D` over every position: `x W + bias` with the weight stored input-major,
`[m, n]` (the transpose of `linearBias3`'s), as GPT-2's checkpoints hold it. -/
def conv1d3 {b t m n : Nat} (x : T #[b, t, m]) (weight : T #[m, n]) (bias : T #[n]) :
    T #[b, t, n] :=
  prim "conv1d3" [x.node, weight.node, bias.node]

/-- Attention of `s` queries over `t` keys and values of another sequence (cross-attention:
an encoder's states, an image's tokens), per head, without a mask:
`softmax(q kᵀ / √d) v`. The result has the queries' length; keys and values share theirs, so
queries and keys passed the other way round are a type error wherever `s ≠ t`. -/
def crossAttention {b h s t d : Nat} (q : T #[b, h, s, d]) (k v : T #[b, h, t, d]) :
    T #[b, h, s, d] :=
  prim "cross_attention" [q.node, k.node, v.node]

/-- Causal grouped-query attention over padded sequences (Hugging Face's `attention_mask`):
query `i` of sequence `s` sees the keys `j ≤ i` with `keep[s, j] = 1`, as transformers masks
them (positions `0 … t-1`): real positions are as without the padding, a padding position
after a token sees the tokens before it (FLUX.2 reads those too), and one that sees no key
(padding before every token) is zeros, as torch's attention gives a row with nothing to see.
Head `i` of `h` reads key/value head `i / (h / g)` of `g` (`hg : h % g = 0`). -/
def paddedCausalAttention {b h g t d : Nat} (q : T #[b, h, t, d]) (k v : T #[b, g, t, d])
    (keep : IT #[b, t] 2) (hg : h % g = 0) : T #[b, h, t, d] :=
  prim "padded_causal_attention" [q.node, k.node, v.node, keep.node]

/-- `paddedCausalAttention` over a sliding window (Mistral's and Mixtral's over padded
sequences): query `i` sees the keys `i - w ≤ j ≤ i` with `keep[s, j] = 1`.
The window is bounded as `windowAttention`'s (`hw : w ≤ n`, `hT : t ≤ n`). -/
def paddedWindowAttention {b h g t d n : Nat} (q : T #[b, h, t, d]) (k v : T #[b, g, t, d])
    (keep : IT #[b, t] 2) (w : Nat) (hw : w ≤ n) (hT : t ≤ n) (hg : h % g = 0) :
    T #[b, h, t, d] :=
  prim "padded_window_attention" [q.node, k.node, v.node, keep.node] [.nat "w" w]

end torch
