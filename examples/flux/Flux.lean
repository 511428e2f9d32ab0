import Tyr

/-!
# Flux — a rectified-flow transformer in the architecture of FLUX.1, at small scale

The image is cut into `patch × patch` patches, one token each; conditioning tokens (Flux: T5's
text embeddings; here a class) go in front of them. `depth` double-stream blocks keep separate
weights for the two streams and attend jointly over both; `depth_single_blocks`
single-stream blocks then run over the joint sequence, with attention and MLP fused into one
projection in and one out. Every block is modulated (adaLN) by a vector `vec`, the sum of a
timestep embedding and a pooled conditioning vector `y`. Attention uses Flux's rotary embedding
over the image grid and RMS-normalised queries and keys; a modulated final layer projects the
image tokens back to patches. The model predicts the velocity `noise - x₀` of the straight path
`x_t = (1 - t) x₀ + t · noise`.

Types make the usual mistakes unwritable: the image side is `grid * patch`, so a patch that does
not divide the image cannot be written; the head width is `2 * (rope_idx + rope_row +
rope_col)`, so the rotary axes sum to it by construction; both streams have width `hidden`, and
joint attention concatenates only sequences of equal heads and head widths.

Parameter paths are the key names of Flux's checkpoints (`double_blocks.0.img_attn.qkv.weight`,
`single_blocks.1.norm.key_norm.scale`, `final_layer.adaLN_modulation.1.bias`, …), so a
Flux-format checkpoint loads by name and a type provider's header types the same tensors.
Both of Flux's layouts are here, chosen by the config's `guidance_embed` as in Flux's
`FluxParams`: FLUX.1-schnell's (`FluxParams`, the models `flux` and `fluxVelocity`) and
FLUX.1-dev's (`FluxDevParams`, `fluxDev` and `fluxDevVelocity`), which adds `guidance_in`, an
MLP embedding of the distilled guidance scale, an input `guidance` added to `vec`. The
transformer after `vec` is shared.
Flux's `nn.Sequential` layers are numbered: the MLP's GELU is layer 1 and has no parameters,
so its linear layers are the fields `«0»` and `«2»`; the final modulation's SiLU is layer 0.
Modulations and the final projection start at zero (DiT's adaLN-Zero), so every block starts
as the identity and the first prediction is zero; the other linear layers have PyTorch's
default initialisation.
-/

open torch

/-- Sizes of the model (Flux's `FluxParams`, with every derived width given by its factors). -/
structure FluxConfig where
  /-- Image channels (1 for grayscale). -/
  in_channels : Nat
  /-- Side of a square patch; one token per patch. -/
  patch : Nat
  /-- Image height in patches. -/
  grid_h : Nat
  /-- Image width in patches. -/
  grid_w : Nat
  /-- Conditioning tokens in front of the image tokens. -/
  txt_len : Nat
  /-- Width of a conditioning token (Flux: T5's 4096). -/
  context_in_dim : Nat
  /-- Width of the pooled conditioning vector `y` (Flux: CLIP's 768). -/
  vec_in_dim : Nat
  /-- Frequencies of the timestep embedding, which is twice as wide (Flux: 128). -/
  time_freqs : Nat
  /-- Attention heads. -/
  num_heads : Nat
  /-- Rotary pairs of the index axis (Flux's `axes_dim[0]` is twice this: 16). -/
  rope_idx : Nat
  /-- Rotary pairs of the row axis (Flux: 56 / 2). -/
  rope_row : Nat
  /-- Rotary pairs of the column axis (Flux: 56 / 2). -/
  rope_col : Nat
  /-- MLP width over model width (Flux: 4). -/
  mlp_ratio : Nat
  /-- Double-stream blocks (Flux: 19). -/
  depth : Nat
  /-- Single-stream blocks (Flux: 38). -/
  depth_single_blocks : Nat
  /-- Rotary base (Flux: 10000). -/
  theta : Float
  /-- Whether the guidance scale is an input (Flux's `guidance_embed`): 1 is FLUX.1-dev's
  layout, with `guidance_in` (the models `fluxDev`, `fluxDevVelocity`), 0 FLUX.1-schnell's
  (`flux`, `fluxVelocity`). Each model's hypothesis holds it to its layout, so a config and
  a model of different layouts are refused, naming it. -/
  guidance_embed : Nat

/-- Width of a head: the rotary axes' widths summed, so they fit it by construction. -/
def FluxConfig.head_dim (c : FluxConfig) : Nat := 2 * (c.rope_idx + c.rope_row + c.rope_col)

/-- Model width, `num_heads * head_dim` (Flux's `hidden_size`). -/
def FluxConfig.hidden (c : FluxConfig) : Nat := c.num_heads * c.head_dim

/-- Width of the MLPs. -/
def FluxConfig.mlp_hidden (c : FluxConfig) : Nat := c.mlp_ratio * c.hidden

/-- Image tokens, one per patch. -/
def FluxConfig.img_tokens (c : FluxConfig) : Nat := c.grid_h * c.grid_w

/-- The joint sequence: conditioning tokens, then image tokens. -/
def FluxConfig.seq (c : FluxConfig) : Nat := c.txt_len + c.img_tokens

/-- Width of a patch token (Flux's `in_channels`, 64 = 16 latent channels × 2 × 2). -/
def FluxConfig.patch_dim (c : FluxConfig) : Nat := c.in_channels * c.patch * c.patch

/-- Width of the timestep embedding (Flux: 256). -/
def FluxConfig.time_dim (c : FluxConfig) : Nat := 2 * c.time_freqs

/-- `nn.Linear(i, o)` with PyTorch's default initialisation, uniform in `±1/√i`. -/
structure Linear (o i : Nat) where
  weight : T #[o, i] := uniform (1.0 / Float.sqrt i.toFloat)
  bias : T #[o] := uniform (1.0 / Float.sqrt i.toFloat)
  deriving TensorStruct

/-- A linear layer that starts at zero (adaLN-Zero). -/
structure ZeroLinear (o i : Nat) where
  weight : T #[o, i] := zeros
  bias : T #[o] := zeros
  deriving TensorStruct

/-- Flux's `MLPEmbedder`: `out_layer (silu (in_layer x))`. -/
structure MLPEmbedder (i h : Nat) where
  in_layer : Linear h i
  out_layer : Linear h h
  deriving TensorStruct

/-- Flux's `Modulation`: `lin (silu vec)`, `n` vectors of width `d` (shift, scale, gate, …). -/
structure Modulation (n d : Nat) where
  lin : ZeroLinear (n * d) d
  deriving TensorStruct

/-- Flux's `RMSNorm`, whose gain is called `scale`. -/
structure RMSNorm (d : Nat) where
  scale : T #[d] := ones
  deriving TensorStruct

/-- Flux's `QKNorm`: one RMS norm for the queries, one for the keys. -/
structure QKNorm (d : Nat) where
  query_norm : RMSNorm d
  key_norm : RMSNorm d
  deriving TensorStruct

/-- Flux's `SelfAttention` weights: fused q, k, v in, QK-norm, projection out. -/
structure SelfAttention (c : FluxConfig) where
  qkv : Linear (3 * c.hidden) c.hidden
  norm : QKNorm c.head_dim
  proj : Linear c.hidden c.hidden
  deriving TensorStruct

/-- Flux's `nn.Sequential(Linear, GELU(tanh), Linear)`: the GELU is layer 1. -/
structure MLP (c : FluxConfig) where
  «0» : Linear c.mlp_hidden c.hidden
  «2» : Linear c.hidden c.mlp_hidden
  deriving TensorStruct

/-- Flux's `DoubleStreamBlock`: the same layers for the image and the text stream. -/
structure DoubleStreamBlock (c : FluxConfig) where
  img_mod : Modulation 6 c.hidden
  img_attn : SelfAttention c
  img_mlp : MLP c
  txt_mod : Modulation 6 c.hidden
  txt_attn : SelfAttention c
  txt_mlp : MLP c
  deriving TensorStruct

/-- Flux's `SingleStreamBlock`: `linear1` makes q, k, v and the MLP's input at once,
`linear2` takes the attention and the MLP's activation at once. -/
structure SingleStreamBlock (c : FluxConfig) where
  linear1 : Linear (3 * c.hidden + c.mlp_hidden) c.hidden
  linear2 : Linear c.hidden (c.hidden + c.mlp_hidden)
  norm : QKNorm c.head_dim
  modulation : Modulation 3 c.hidden
  deriving TensorStruct

/-- Flux's `nn.Sequential(SiLU, Linear)` of the final layer: the SiLU is layer 0. -/
structure FinalModulation (d : Nat) where
  «1» : ZeroLinear (2 * d) d
  deriving TensorStruct

/-- Flux's `LastLayer`: modulated LayerNorm, then a projection to patches. -/
structure LastLayer (c : FluxConfig) where
  linear : ZeroLinear c.patch_dim c.hidden
  adaLN_modulation : FinalModulation c.hidden
  deriving TensorStruct

/-- All parameters, at Flux's checkpoint paths, without `guidance_in`: FLUX.1-schnell's
layout (Flux's `guidance_embed = False`). -/
structure FluxParams (c : FluxConfig) where
  img_in : Linear c.hidden c.patch_dim
  time_in : MLPEmbedder c.time_dim c.hidden
  vector_in : MLPEmbedder c.vec_in_dim c.hidden
  txt_in : Linear c.hidden c.context_in_dim
  double_blocks : Vector (DoubleStreamBlock c) c.depth
  single_blocks : Vector (SingleStreamBlock c) c.depth_single_blocks
  final_layer : LastLayer c
  deriving TensorStruct

/-- All parameters of FLUX.1-dev's layout (Flux's `guidance_embed = True`): FLUX.1-schnell's,
and `guidance_in`, which embeds the distilled guidance scale as `time_in` embeds the time
(the same sinusoidal features, its own MLP), in Flux's order of fields. -/
structure FluxDevParams (c : FluxConfig) where
  img_in : Linear c.hidden c.patch_dim
  time_in : MLPEmbedder c.time_dim c.hidden
  vector_in : MLPEmbedder c.vec_in_dim c.hidden
  guidance_in : MLPEmbedder c.time_dim c.hidden
  txt_in : Linear c.hidden c.context_in_dim
  double_blocks : Vector (DoubleStreamBlock c) c.depth
  single_blocks : Vector (SingleStreamBlock c) c.depth_single_blocks
  final_layer : LastLayer c
  deriving TensorStruct

/-- A linear layer over a batch of vectors. -/
def lin {o i b : Nat} (l : Linear o i) (x : T #[b, i]) : T #[b, o] :=
  linearBias x l.weight l.bias

/-- A linear layer over every token of a batch of sequences. -/
def lin3 {o i b t : Nat} (l : Linear o i) (x : T #[b, t, i]) : T #[b, t, o] :=
  linearBias3 x l.weight l.bias

/-- A zero-initialised linear layer over every token of a batch of sequences. -/
def zlin3 {o i b t : Nat} (l : ZeroLinear o i) (x : T #[b, t, i]) : T #[b, t, o] :=
  linearBias3 x l.weight l.bias

/-- `out_layer (silu (in_layer x))`. -/
def mlpEmbedder {i h b : Nat} (p : MLPEmbedder i h) (x : T #[b, i]) : T #[b, h] :=
  lin p.out_layer (silu (lin p.in_layer x))

/-- `lin (silu vec)`: the `n` modulation vectors, side by side (`chunk` takes them apart). -/
def modulation {n d b : Nat} (p : Modulation n d) (vec : T #[b, d]) : T #[b, n * d] :=
  linearBias (silu vec) p.lin.weight p.lin.bias

/-- Flux's rotary embedding over the joint sequence (conditioning tokens at the origin, image
tokens at their grid row and column). -/
def FluxConfig.rope (c : FluxConfig) {b : Nat} (x : T #[b, c.num_heads, c.seq, c.head_dim]) :
    T #[b, c.num_heads, c.seq, c.head_dim] :=
  ropeGrid c.txt_len c.grid_h c.grid_w c.rope_idx c.rope_row c.rope_col x c.theta

/-- RMS-normalised queries of a fused q, k, v projection, in the heads layout. -/
def queries (c : FluxConfig) {b t : Nat} (n : QKNorm c.head_dim)
    (qkv : T #[b, t, 3 * c.hidden]) : T #[b, c.num_heads, t, c.head_dim] :=
  rmsNormScale4 (splitHeads (third qkv 0)) n.query_norm.scale

/-- RMS-normalised keys of a fused q, k, v projection, in the heads layout. -/
def keys (c : FluxConfig) {b t : Nat} (n : QKNorm c.head_dim)
    (qkv : T #[b, t, 3 * c.hidden]) : T #[b, c.num_heads, t, c.head_dim] :=
  rmsNormScale4 (splitHeads (third qkv 1)) n.key_norm.scale

/-- Values of a fused q, k, v projection, in the heads layout. -/
def values (c : FluxConfig) {b t : Nat} (qkv : T #[b, t, 3 * c.hidden]) :
    T #[b, c.num_heads, t, c.head_dim] :=
  splitHeads (third qkv 2)

/-- Rotary-embedded attention over the joint sequence, heads merged again. -/
def attend (c : FluxConfig) {b : Nat} (q k v : T #[b, c.num_heads, c.seq, c.head_dim]) :
    T #[b, c.seq, c.hidden] :=
  mergeHeads (bidirectionalAttention (c.rope q) (c.rope k) v)

/-- One stream's fused q, k, v of its modulated LayerNorm (modulation vectors 0, 1). -/
def streamQKV (c : FluxConfig) {b t : Nat} (p : SelfAttention c) (m : T #[b, 6 * c.hidden])
    (x : T #[b, t, c.hidden]) : T #[b, t, 3 * c.hidden] :=
  lin3 p.qkv (modulate (layerNormNoAffine3 x) (chunk m 0) (chunk m 1))

/-- `lin₂ (gelu (lin₀ x))`, Flux's `img_mlp` / `txt_mlp`. -/
def mlp (c : FluxConfig) {b t : Nat} (p : MLP c) (x : T #[b, t, c.hidden]) :
    T #[b, t, c.hidden] :=
  lin3 p.«2» (geluTanh (lin3 p.«0» x))

/-- One stream after attention: `x + gate₂ · proj a`, then `x + gate₅ · mlp (modulated x)`. -/
def streamUpdate (c : FluxConfig) {b t : Nat} (attn : SelfAttention c) (ff : MLP c)
    (m : T #[b, 6 * c.hidden]) (x a : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let x := add x (gate (lin3 attn.proj a) (chunk m 2))
  add x (gate (mlp c ff (modulate (layerNormNoAffine3 x) (chunk m 3) (chunk m 4))) (chunk m 5))

/-- A double-stream block over the joint sequence `x` (conditioning tokens, then image tokens):
each stream its own weights, one attention over both. -/
def doubleBlock (c : FluxConfig) {b : Nat} (vec : T #[b, c.hidden]) (p : DoubleStreamBlock c)
    (x : T #[b, c.seq, c.hidden]) : T #[b, c.seq, c.hidden] :=
  let txt := frontSeq3 x
  let img := backSeq3 x
  let tm := modulation p.txt_mod vec
  let im := modulation p.img_mod vec
  let tqkv := streamQKV c p.txt_attn tm txt
  let iqkv := streamQKV c p.img_attn im img
  let q := catSeq4 (queries c p.txt_attn.norm tqkv) (queries c p.img_attn.norm iqkv)
  let k := catSeq4 (keys c p.txt_attn.norm tqkv) (keys c p.img_attn.norm iqkv)
  let v := catSeq4 (values c tqkv) (values c iqkv)
  let a := attend c q k v
  catSeq3 (streamUpdate c p.txt_attn p.txt_mlp tm txt (frontSeq3 a))
    (streamUpdate c p.img_attn p.img_mlp im img (backSeq3 a))

/-- A single-stream block: one projection in to q, k, v and the MLP's input, one out of the
attention and the MLP's activation, one gate. -/
def singleBlock (c : FluxConfig) {b : Nat} (vec : T #[b, c.hidden]) (p : SingleStreamBlock c)
    (x : T #[b, c.seq, c.hidden]) : T #[b, c.seq, c.hidden] :=
  let m := modulation p.modulation vec
  let h := lin3 p.linear1 (modulate (layerNormNoAffine3 x) (chunk m 0) (chunk m 1))
  let qkv := frontLast3 h
  let a := attend c (queries c p.norm qkv) (keys c p.norm qkv) (values c qkv)
  add x (gate (lin3 p.linear2 (catLast3 a (geluTanh (backLast3 h)))) (chunk m 2))

/-- The modulated final layer: image tokens back to patch values. -/
def finalLayer (c : FluxConfig) {b : Nat} (p : LastLayer c) (vec : T #[b, c.hidden])
    (x : T #[b, c.img_tokens, c.hidden]) : T #[b, c.img_tokens, c.patch_dim] :=
  let l := p.adaLN_modulation.«1»
  let m := linearBias (silu vec) l.weight l.bias
  zlin3 p.linear (modulate (layerNormNoAffine3 x) (chunk m 0) (chunk m 1))

/-- The transformer after the conditioning vector: image and conditioning tokens in, the
double-stream then the single-stream blocks, the final layer, image patches out. Both layouts
share it; they differ only in how `vec` is made. -/
def transformer (c : FluxConfig) {b : Nat} (img_in : Linear c.hidden c.patch_dim)
    (txt_in : Linear c.hidden c.context_in_dim)
    (double_blocks : Vector (DoubleStreamBlock c) c.depth)
    (single_blocks : Vector (SingleStreamBlock c) c.depth_single_blocks)
    (final_layer : LastLayer c) (vec : T #[b, c.hidden])
    (img : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch])
    (txt : T #[b, c.txt_len, c.context_in_dim]) :
    T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch] :=
  let x := catSeq3 (lin3 txt_in txt) (lin3 img_in (patchify img))
  let x := double_blocks.foldl (fun x blk => doubleBlock c vec blk x) x
  let x := single_blocks.foldl (fun x blk => singleBlock c vec blk x) x
  unpatchify (finalLayer c final_layer vec (backSeq3 x))

/-- The velocity predicted for images `img` at times `timesteps` (1 is noise, 0 data) under
conditioning tokens `txt` and the pooled conditioning `y` (FLUX.1-schnell's layout). -/
def velocity (c : FluxConfig) {b : Nat} (p : FluxParams c)
    (img : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch]) (timesteps : T #[b])
    (txt : T #[b, c.txt_len, c.context_in_dim]) (y : T #[b, c.vec_in_dim]) :
    T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch] :=
  let vec := add (mlpEmbedder p.time_in (timestepEmbedding c.time_freqs timesteps))
    (mlpEmbedder p.vector_in y)
  transformer c p.img_in p.txt_in p.double_blocks p.single_blocks p.final_layer vec img txt

/-- The velocity in FLUX.1-dev's layout: as `velocity`, with the embedded guidance scale
`guidance` (one per image) added to `vec` after the time's embedding, as Flux does. -/
def devVelocity (c : FluxConfig) {b : Nat} (p : FluxDevParams c)
    (img : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch]) (timesteps : T #[b])
    (txt : T #[b, c.txt_len, c.context_in_dim]) (y : T #[b, c.vec_in_dim])
    (guidance : T #[b]) : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch] :=
  let vec := add (mlpEmbedder p.time_in (timestepEmbedding c.time_freqs timesteps))
    (mlpEmbedder p.guidance_in (timestepEmbedding c.time_freqs guidance))
  let vec := add vec (mlpEmbedder p.vector_in y)
  transformer c p.img_in p.txt_in p.double_blocks p.single_blocks p.final_layer vec img txt

/-- Sampling: the velocity alone. -/
@[model]
def fluxVelocity (c : FluxConfig) {b : Nat} (hs : c.guidance_embed = 0) (p : FluxParams c)
    (img : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch]) (timesteps : T #[b])
    (txt : T #[b, c.txt_len, c.context_in_dim]) (y : T #[b, c.vec_in_dim]) :
    T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch] :=
  velocity c p img timesteps txt y

/-- Training: the velocity and its mean squared error against the target `noise - x₀`. -/
@[model]
def flux (c : FluxConfig) {b : Nat} (hs : c.guidance_embed = 0) (p : FluxParams c)
    (img : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch]) (timesteps : T #[b])
    (txt : T #[b, c.txt_len, c.context_in_dim]) (y : T #[b, c.vec_in_dim])
    (target : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch]) :
    T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch] × T #[] :=
  let v := velocity c p img timesteps txt y
  (v, mseLoss v target)

/-- Sampling in FLUX.1-dev's layout: the velocity under the guidance scale `guidance`. -/
@[model]
def fluxDevVelocity (c : FluxConfig) {b : Nat} (hd : c.guidance_embed = 1)
    (p : FluxDevParams c)
    (img : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch]) (timesteps : T #[b])
    (txt : T #[b, c.txt_len, c.context_in_dim]) (y : T #[b, c.vec_in_dim])
    (guidance : T #[b]) : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch] :=
  devVelocity c p img timesteps txt y guidance

/-- Training in FLUX.1-dev's layout: the velocity under `guidance` and its mean squared error
against the target. -/
@[model]
def fluxDev (c : FluxConfig) {b : Nat} (hd : c.guidance_embed = 1)
    (p : FluxDevParams c)
    (img : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch]) (timesteps : T #[b])
    (txt : T #[b, c.txt_len, c.context_in_dim]) (y : T #[b, c.vec_in_dim])
    (guidance : T #[b])
    (target : T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch]) :
    T #[b, c.in_channels, c.grid_h * c.patch, c.grid_w * c.patch] × T #[] :=
  let v := devVelocity c p img timesteps txt y guidance
  (v, mseLoss v target)
