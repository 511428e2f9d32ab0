import Tyr.Core

/-!
# Tyr.DiT — the ops of diffusion transformers (DiT, Flux)

Activations, norms without a learned affine, adaLN modulation broadcast over the tokens, the
sinusoidal timestep embedding, rotary embedding over an image grid (FLUX.1) or from position
ids given as input (FLUX.2) (attention without a mask is `bidirectionalAttention` of
`Tyr.NN`), patchify and unpatchify, and the mean squared error of flow matching. Each is a
typed `prim`, as in `Tyr.Ops`; where Flux fixes a constant (`eps = 1e-6`, `theta = 10000`,
the time factor `1000`), it is the default.
-/

namespace torch

/-- SiLU (swish), `x · σ(x)`, elementwise. -/
def silu {s : Shape} (x : T s) : T s :=
  prim "silu" [x.node]

/-- GELU with the `tanh` approximation (PyTorch's `approximate="tanh"`, Flux's MLPs),
elementwise. -/
def geluTanh {s : Shape} (x : T s) : T s :=
  prim "gelu_tanh" [x.node]

/-- Layer normalisation over the last axis of a batch of sequences with no gain and no bias
(`nn.LayerNorm(n, elementwise_affine=False)`; adaLN supplies scale and shift). -/
def layerNormNoAffine3 {b t n : Nat} (x : T #[b, t, n]) (eps : Float := 1e-6) : T #[b, t, n] :=
  prim "layer_norm_no_affine3" [x.node] [.float "eps" eps]

/-- RMS normalisation over the head dimension with a learned gain (Flux's QK-norm `RMSNorm`,
whose gain is called `scale`): `x / √(mean (x²) + eps) · scale`. -/
def rmsNormScale4 {b h t d : Nat} (x : T #[b, h, t, d]) (scale : T #[d]) (eps : Float := 1e-6) :
    T #[b, h, t, d] :=
  prim "rms_norm_scale4" [x.node, scale.node] [.float "eps" eps]

/-- adaLN modulation, `x · (1 + scale) + shift`, with one `shift` and `scale` per sequence
broadcast over its tokens (`[b, d]` against `[b, t, d]`). -/
def modulate {b t d : Nat} (x : T #[b, t, d]) (shift scale : T #[b, d]) : T #[b, t, d] :=
  prim "modulate" [x.node, shift.node, scale.node]

/-- adaLN gating, `g · x`, one gate per sequence broadcast over its tokens. -/
def gate {b t d : Nat} (x : T #[b, t, d]) (g : T #[b, d]) : T #[b, t, d] :=
  prim "gate" [x.node, g.node]

/-- Sinusoidal embedding of `b` timesteps into `2 * half` features (Flux's
`timestep_embedding`): with `t' = timeFactor · t` and frequencies
`ωᵢ = exp (-log maxPeriod · i / half)` (`i < half`), the features are
`[cos (t' ω₀), …, cos (t' ωₕ₋₁), sin (t' ω₀), …, sin (t' ωₕ₋₁)]`. The width is written
`2 * half` so that it is even by its type. -/
def timestepEmbedding {b : Nat} (half : Nat) (t : T #[b]) (maxPeriod : Float := 10000.0)
    (timeFactor : Float := 1000.0) : T #[b, 2 * half] :=
  prim "timestep_embedding" [t.node] [.nat "half" half, .float "maxPeriod" maxPeriod,
    .float "timeFactor" timeFactor]

/-- Flux's rotary position embedding over `txt` conditioning tokens followed by the
`gh × gw` grid of image tokens, in the heads layout. Every token has three coordinates (Flux's
ids): an index (`0` for every token here), a row and a column; image token `r · gw + c` is at
`(0, r, c)`, the conditioning tokens at `(0, 0, 0)`. The head dimension is written
`2 * (k0 + k1 + k2)`: axis `j` rotates `kⱼ` pairs (Flux's `axes_dim` is
`[2 k0, 2 k1, 2 k2]`), so the per-axis widths sum to the head width by the type. Pair `p`
is `(x[2p], x[2p+1])` (interleaved, as Flux), its axis `j` the one whose pairs it falls in, its
frequency `ω = theta ^ (-i / kⱼ)` (`i` its place among that axis's pairs), and it is turned by
`+θ` with `θ = ω · coordinate`: `(x₀ cos θ - x₁ sin θ, x₀ sin θ + x₁ cos θ)`. -/
def ropeGrid {b h : Nat} (txt gh gw k0 k1 k2 : Nat)
    (x : T #[b, h, txt + gh * gw, 2 * (k0 + k1 + k2)]) (theta : Float := 10000.0) :
    T #[b, h, txt + gh * gw, 2 * (k0 + k1 + k2)] :=
  prim "rope_grid" [x.node] [.nat "txt" txt, .nat "gh" gh, .nat "gw" gw, .nat "k0" k0,
    .nat "k1" k1, .nat "k2" k2, .float "theta" theta]

/-- Rotary position embedding from position ids over four axes (FLUX.2's `Flux2PosEmbed`
and `apply_rotary_emb`), in the heads layout: token `n` is at the four coordinates `ids[n]`
(FLUX.2's `(t, h, w, l)`: image tokens at their latent row and column, text tokens at their
index in `l`), given as input rather than fixed by a grid. The head dimension is
`2 * (k0 + k1 + k2 + k3)`: axis `j` rotates `kⱼ` pairs (diffusers' `axes_dims_rope` is
`[2 k0, 2 k1, 2 k2, 2 k3]`), so the axes sum to the head width by the type, and the ids have
one row per token of `x` and one column per axis. Pair `p` is `(x[2p], x[2p+1])`, its axis
`j` the one whose pairs it falls in, its frequency `ω = theta ^ (-i / kⱼ)` (`i` its place
among that axis's pairs), and it is turned by `+θ`, `θ = ω · ids[n, j]` computed in float64
(as diffusers does): `(x₀ cos θ - x₁ sin θ, x₀ sin θ + x₁ cos θ)`. -/
def ropeIds {b h t : Nat} (k0 k1 k2 k3 : Nat) (x : T #[b, h, t, 2 * (k0 + k1 + k2 + k3)])
    (ids : T #[t, 4]) (theta : Float := 2000.0) : T #[b, h, t, 2 * (k0 + k1 + k2 + k3)] :=
  prim "rope_ids" [x.node, ids.node] [.nat "k0" k0, .nat "k1" k1, .nat "k2" k2,
    .nat "k3" k3, .float "theta" theta]

/-- Cut images into `p × p` patches, one token per patch in row-major order, its features
ordered (channel, patch row, patch column) as Flux packs latents:
`[b, c, h * p, w * p] → [b, h * w, c * p * p]`. An image size the patch does not divide has
no such type. -/
def patchify {b c h w p : Nat} (x : T #[b, c, h * p, w * p]) : T #[b, h * w, c * p * p] :=
  prim "patchify" [x.node]

/-- The inverse of `patchify`: `[b, h * w, c * p * p] → [b, c, h * p, w * p]`. -/
def unpatchify {b c h w p : Nat} (x : T #[b, h * w, c * p * p]) : T #[b, c, h * p, w * p] :=
  prim "unpatchify" [x.node]

/-- Mean squared error over every element, `mean ((x - y)²)` (the flow-matching loss). -/
def mseLoss {s : Shape} (x y : T s) : T #[] :=
  prim "mse_loss" [x.node, y.node]

end torch
