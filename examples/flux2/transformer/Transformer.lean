import Tyr

/-!
# The FLUX.2 transformer — diffusers' `Flux2Transformer2DModel`, by its checkpoint's keys

The denoiser of FLUX.2 [klein] and [dev]: the velocity of `img` latent tokens
(`hidden_states`, already packed: `in_channels` features a token) under `txt` text tokens
(`encoder_hidden_states`, `joint_attention_dim` features a token: FLUX.2 [klein] stacks three
of Qwen3's hidden layers) at the times `timestep` (1 is noise, 0 data), the tokens' places
given by their position ids (`img_ids`, `txt_ids`: one row of four coordinates `(t, h, w, l)`
a token, as the pipelines make them). What differs from FLUX.1 (`examples/flux/Flux.lean`):

* one modulation for all double-stream blocks (`double_stream_modulation_img`, `_txt`: shift,
  scale and gate of the attention, then of the MLP) and one for all single-stream blocks
  (`single_stream_modulation`), each `linear (silu temb)`, computed once;
* no biases anywhere; the MLPs are gated SiLU (SwiGLU): `linear_in` makes the gate and the
  value side by side, `linear_out` takes `silu gate · value`; the single-stream blocks fuse
  q, k, v and the MLP's input into one projection and the attention's and MLP's outputs into
  another, as FLUX.1's do;
* rotary over four axes from the position ids (`ropeIds`), text tokens first in the joint
  sequence, as diffusers' `Flux2PosEmbed` computes it (`rope_theta`, 2000 in FLUX.2);
* the embedding `temb` of the time (and, where `guidance_embeds`, of the distilled guidance
  scale: FLUX.2 [dev]'s layout, `flux2GuidedVelocity`) alone modulates: there is no pooled
  text vector; the final norm takes its scale before its shift (`AdaLayerNormContinuous`).

The config's fields are diffusers' (`Flux2Transformer2DModel.config`); the types use the widths
they derive, even by construction: a head is `2 * (rope_t + rope_h + rope_w + rope_l)` wide,
the rotary axes' pairs, and the hypotheses `hrope`, `heven` tie that to `attention_head_dim`
and `axes_dims_rope` (every axis even, the axes summing to the head), `htime` the time
features' width `2 * time_half` to `timestep_guidance_channels`: a config that breaks one is
refused, naming it. So the rotary axes always fit the heads, text features of another width
than `joint_attention_dim` and ids of another length than their tokens are type errors.
`mlp_ratio` is an integer here (FLUX.2's 3.0). Parameter paths are the keys of
`Flux2Transformer2DModel.state_dict()` (`transformer_blocks.0.attn.to_out.0.weight`,
`single_transformer_blocks.1.attn.to_qkv_mlp_proj.weight`), initialised as PyTorch's
`nn.Linear` (uniform in `±1/√fan_in`) and `nn.RMSNorm` (ones); `config.json` beside this file
holds a small model's sizes.
-/

open torch

/-- A `Flux2Transformer2DModel`'s config (diffusers' names; `out_channels` given, not `null`). -/
structure Flux2Config where
  /-- Side of a latent patch (`patch_size`; FLUX.2's tokens are packed: 1). -/
  patch_size : Nat
  /-- Features of a latent token (`in_channels`: 128 in FLUX.2). -/
  in_channels : Nat
  /-- Features out, a patch's (`out_channels`; diffusers' `null` is `in_channels`). -/
  out_channels : Nat
  /-- Double-stream blocks (`num_layers`). -/
  num_layers : Nat
  /-- Single-stream blocks (`num_single_layers`). -/
  num_single_layers : Nat
  /-- A head's width (`attention_head_dim`: `hrope` ties it to the rotary axes). -/
  attention_head_dim : Nat
  /-- Attention heads (`num_attention_heads`). -/
  num_attention_heads : Nat
  /-- Features of a text token (`joint_attention_dim`). -/
  joint_attention_dim : Nat
  /-- Sinusoidal features of the time and the guidance (`timestep_guidance_channels`). -/
  timestep_guidance_channels : Nat
  /-- MLP width over model width (`mlp_ratio`, an integer here). -/
  mlp_ratio : Nat
  /-- Rotary width of the time axis `t` (`axes_dims_rope[0]`). -/
  axes_dims_rope_t : Nat
  /-- Rotary width of the row axis `h` (`axes_dims_rope[1]`). -/
  axes_dims_rope_h : Nat
  /-- Rotary width of the column axis `w` (`axes_dims_rope[2]`). -/
  axes_dims_rope_w : Nat
  /-- Rotary width of the sequence axis `l` (`axes_dims_rope[3]`). -/
  axes_dims_rope_l : Nat
  /-- Rotary base (`rope_theta`). -/
  rope_theta : Float
  /-- The layer and RMS norms' epsilon (`eps`). -/
  eps : Float
  /-- Whether the guidance scale is embedded (`guidance_embeds`): 1 is FLUX.2 [dev]'s layout
  (`flux2GuidedVelocity`), 0 [klein]'s (`flux2Velocity`); each model's hypothesis holds it. -/
  guidance_embeds : Nat

/-- Rotary pairs of the time axis. -/
def Flux2Config.rope_t (c : Flux2Config) : Nat := c.axes_dims_rope_t / 2

/-- Rotary pairs of the row axis. -/
def Flux2Config.rope_h (c : Flux2Config) : Nat := c.axes_dims_rope_h / 2

/-- Rotary pairs of the column axis. -/
def Flux2Config.rope_w (c : Flux2Config) : Nat := c.axes_dims_rope_w / 2

/-- Rotary pairs of the sequence axis. -/
def Flux2Config.rope_l (c : Flux2Config) : Nat := c.axes_dims_rope_l / 2

/-- A head's width, the rotary axes' by construction (`= attention_head_dim` under `hrope`,
`heven`). -/
def Flux2Config.head_dim (c : Flux2Config) : Nat := 2 * (c.rope_t + c.rope_h + c.rope_w + c.rope_l)

/-- The model's width (diffusers' `inner_dim`). -/
def Flux2Config.inner_dim (c : Flux2Config) : Nat := c.num_attention_heads * c.head_dim

/-- The MLPs' width (`mlp_hidden_dim`). -/
def Flux2Config.mlp_hidden_dim (c : Flux2Config) : Nat := c.mlp_ratio * c.inner_dim

/-- Frequencies of the sinusoidal time features. -/
def Flux2Config.time_half (c : Flux2Config) : Nat := c.timestep_guidance_channels / 2

/-- Width of the sinusoidal time features, even by construction (`= timestep_guidance_channels`
under `htime`). -/
def Flux2Config.time_dim (c : Flux2Config) : Nat := 2 * c.time_half

/-- Features out of a token: a patch of `out_channels`. -/
def Flux2Config.out_dim (c : Flux2Config) : Nat := c.patch_size * c.patch_size * c.out_channels

/-- `nn.Linear(i, o, bias=False)` with PyTorch's initialisation, uniform in `±1/√i`. -/
structure Linear (o i : Nat) where
  weight : T #[o, i] := uniform (1.0 / Float.sqrt i.toFloat)
  deriving TensorStruct

/-- `nn.RMSNorm(d)`: its gain. -/
structure RMSNorm (d : Nat) where
  weight : T #[d] := ones
  deriving TensorStruct

/-- diffusers' `TimestepEmbedding` without biases: `linear_2 (silu (linear_1 x))`. -/
structure TimestepEmbedding (i d : Nat) where
  linear_1 : Linear d i
  linear_2 : Linear d d
  deriving TensorStruct

/-- `Flux2TimestepGuidanceEmbeddings` without a guidance embedder (`guidance_embeds = 0`). -/
structure TimeEmbeddings (c : Flux2Config) where
  timestep_embedder : TimestepEmbedding c.time_dim c.inner_dim
  deriving TensorStruct

/-- `Flux2TimestepGuidanceEmbeddings` with one (`guidance_embeds = 1`). -/
structure TimeGuidanceEmbeddings (c : Flux2Config) where
  timestep_embedder : TimestepEmbedding c.time_dim c.inner_dim
  guidance_embedder : TimestepEmbedding c.time_dim c.inner_dim
  deriving TensorStruct

/-- `Flux2Modulation`: `linear (silu temb)`, `n` vectors of width `d` (shift, scale, gate, …). -/
structure Modulation (n d : Nat) where
  linear : Linear (n * d) d
  deriving TensorStruct

/-- `Flux2FeedForward`: the gate and the value in one projection, the SwiGLU, the output. -/
structure FeedForward (c : Flux2Config) where
  linear_in : Linear (2 * c.mlp_hidden_dim) c.inner_dim
  linear_out : Linear c.inner_dim c.mlp_hidden_dim
  deriving TensorStruct

/-- `to_out`: a `ModuleList` of the projection and a dropout (layer 1, no parameters). -/
structure AttnOut (d : Nat) where
  «0» : Linear d d
  deriving TensorStruct

/-- `Flux2Attention` of a double-stream block: the image stream's projections and QK-norms,
then the text stream's (`add_…`, `norm_added_…`). -/
structure Attention (c : Flux2Config) where
  to_q : Linear c.inner_dim c.inner_dim
  to_k : Linear c.inner_dim c.inner_dim
  to_v : Linear c.inner_dim c.inner_dim
  norm_q : RMSNorm c.head_dim
  norm_k : RMSNorm c.head_dim
  to_out : AttnOut c.inner_dim
  norm_added_q : RMSNorm c.head_dim
  norm_added_k : RMSNorm c.head_dim
  add_q_proj : Linear c.inner_dim c.inner_dim
  add_k_proj : Linear c.inner_dim c.inner_dim
  add_v_proj : Linear c.inner_dim c.inner_dim
  to_add_out : Linear c.inner_dim c.inner_dim
  deriving TensorStruct

/-- `Flux2TransformerBlock`: joint attention, an MLP per stream. -/
structure TransformerBlock (c : Flux2Config) where
  attn : Attention c
  ff : FeedForward c
  ff_context : FeedForward c
  deriving TensorStruct

/-- `Flux2ParallelSelfAttention`: q, k, v and the MLP's gate and value in one projection, the
attention's and the MLP's outputs out of one. -/
structure ParallelSelfAttention (c : Flux2Config) where
  to_qkv_mlp_proj : Linear (3 * c.inner_dim + 2 * c.mlp_hidden_dim) c.inner_dim
  norm_q : RMSNorm c.head_dim
  norm_k : RMSNorm c.head_dim
  to_out : Linear c.inner_dim (c.inner_dim + c.mlp_hidden_dim)
  deriving TensorStruct

/-- `Flux2SingleTransformerBlock`. -/
structure SingleTransformerBlock (c : Flux2Config) where
  attn : ParallelSelfAttention c
  deriving TensorStruct

/-- `AdaLayerNormContinuous` without biases: scale and shift of `linear (silu temb)`. -/
structure NormOut (c : Flux2Config) where
  linear : Linear (2 * c.inner_dim) c.inner_dim
  deriving TensorStruct

/-- All parameters without a guidance embedder: FLUX.2 [klein]'s layout. -/
structure Flux2Params (c : Flux2Config) where
  time_guidance_embed : TimeEmbeddings c
  double_stream_modulation_img : Modulation 6 c.inner_dim
  double_stream_modulation_txt : Modulation 6 c.inner_dim
  single_stream_modulation : Modulation 3 c.inner_dim
  x_embedder : Linear c.inner_dim c.in_channels
  context_embedder : Linear c.inner_dim c.joint_attention_dim
  transformer_blocks : Vector (TransformerBlock c) c.num_layers
  single_transformer_blocks : Vector (SingleTransformerBlock c) c.num_single_layers
  norm_out : NormOut c
  proj_out : Linear c.out_dim c.inner_dim
  deriving TensorStruct

/-- All parameters with the guidance embedder: FLUX.2 [dev]'s layout. -/
structure Flux2GuidedParams (c : Flux2Config) where
  time_guidance_embed : TimeGuidanceEmbeddings c
  double_stream_modulation_img : Modulation 6 c.inner_dim
  double_stream_modulation_txt : Modulation 6 c.inner_dim
  single_stream_modulation : Modulation 3 c.inner_dim
  x_embedder : Linear c.inner_dim c.in_channels
  context_embedder : Linear c.inner_dim c.joint_attention_dim
  transformer_blocks : Vector (TransformerBlock c) c.num_layers
  single_transformer_blocks : Vector (SingleTransformerBlock c) c.num_single_layers
  norm_out : NormOut c
  proj_out : Linear c.out_dim c.inner_dim
  deriving TensorStruct

/-- A linear layer over a batch of vectors. -/
def lin {o i b : Nat} (l : Linear o i) (x : T #[b, i]) : T #[b, o] :=
  linear x l.weight

/-- A linear layer over every token of a batch of sequences. -/
def lin3 {o i b t : Nat} (l : Linear o i) (x : T #[b, t, i]) : T #[b, t, o] :=
  linear3 x l.weight

/-- `linear_2 (silu (linear_1 x))`. -/
def embed {i d b : Nat} (p : TimestepEmbedding i d) (x : T #[b, i]) : T #[b, d] :=
  lin p.linear_2 (silu (lin p.linear_1 x))

/-- The embedding of the times: their sinusoidal features (the time scaled by 1000, cosines
first) through the timestep embedder. -/
def timeEmbedding (c : Flux2Config) {b : Nat} (p : TimestepEmbedding c.time_dim c.inner_dim)
    (t : T #[b]) : T #[b, c.inner_dim] :=
  embed p (timestepEmbedding c.time_half t)

/-- `linear (silu temb)`: the `n` modulation vectors side by side (`chunk` takes them apart). -/
def modulation {n d b : Nat} (p : Modulation n d) (temb : T #[b, d]) : T #[b, n * d] :=
  lin p.linear (silu temb)

/-- `Flux2SwiGLU`: `silu` of the first half times the second. -/
def swiglu {b t f : Nat} (x : T #[b, t, 2 * f]) : T #[b, t, f] :=
  mul (silu (chunk3 x 0)) (chunk3 x 1)

/-- `linear_out (swiglu (linear_in x))`. -/
def feedForward (c : Flux2Config) {b t : Nat} (p : FeedForward c) (x : T #[b, t, c.inner_dim]) :
    T #[b, t, c.inner_dim] :=
  lin3 p.linear_out (swiglu (lin3 p.linear_in x))

/-- The layer norm without affine, modulated by a shift and a scale. -/
def modulated (c : Flux2Config) {b t : Nat} (x : T #[b, t, c.inner_dim])
    (shift scale : T #[b, c.inner_dim]) : T #[b, t, c.inner_dim] :=
  modulate (layerNormNoAffine3 x c.eps) shift scale

/-- RMS-normalised heads of a projection (queries or keys). -/
def normedHeads (c : Flux2Config) {b t : Nat} (n : RMSNorm c.head_dim)
    (x : T #[b, t, c.inner_dim]) : T #[b, c.num_attention_heads, t, c.head_dim] :=
  rmsNormScale4 (splitHeads x) n.weight c.eps

/-- FLUX.2's rotary embedding at the tokens' position ids. -/
def Flux2Config.rope (c : Flux2Config) {b t : Nat} (ids : T #[t, 4])
    (x : T #[b, c.num_attention_heads, t, c.head_dim]) :
    T #[b, c.num_attention_heads, t, c.head_dim] :=
  ropeIds c.rope_t c.rope_h c.rope_w c.rope_l x ids c.rope_theta

/-- Rotary-embedded attention over a sequence at `ids`, heads merged again. -/
def attend (c : Flux2Config) {b t : Nat} (ids : T #[t, 4])
    (q k v : T #[b, c.num_attention_heads, t, c.head_dim]) : T #[b, t, c.inner_dim] :=
  mergeHeads (bidirectionalAttention (c.rope ids q) (c.rope ids k) v)

/-- One stream after the joint attention: `x + gate₂ · a`, then
`x + gate₅ · ff (modulated x)`, with the stream's six modulation vectors `m`. -/
def streamUpdate (c : Flux2Config) {b t : Nat} (ff : FeedForward c)
    (m : T #[b, 6 * c.inner_dim]) (x a : T #[b, t, c.inner_dim]) : T #[b, t, c.inner_dim] :=
  let x := add x (gate a (chunk m 2))
  add x (gate (feedForward c ff (modulated c x (chunk m 3) (chunk m 4))) (chunk m 5))

/-- A double-stream block over the joint sequence `x` (text tokens, then image tokens), at
the joint position ids: each stream its own projections, one attention over both. -/
def doubleBlock (c : Flux2Config) {b txt img : Nat} (ids : T #[txt + img, 4])
    (mi mt : T #[b, 6 * c.inner_dim]) (p : TransformerBlock c)
    (x : T #[b, txt + img, c.inner_dim]) : T #[b, txt + img, c.inner_dim] :=
  let a := p.attn
  let ht := frontSeq3 x
  let hi := backSeq3 x
  let nt := modulated c ht (chunk mt 0) (chunk mt 1)
  let ni := modulated c hi (chunk mi 0) (chunk mi 1)
  let q := catSeq4 (normedHeads c a.norm_added_q (lin3 a.add_q_proj nt))
    (normedHeads c a.norm_q (lin3 a.to_q ni))
  let k := catSeq4 (normedHeads c a.norm_added_k (lin3 a.add_k_proj nt))
    (normedHeads c a.norm_k (lin3 a.to_k ni))
  let v := catSeq4 (splitHeads (lin3 a.add_v_proj nt)) (splitHeads (lin3 a.to_v ni))
  let o := attend c ids q k v
  catSeq3 (streamUpdate c p.ff_context mt ht (lin3 a.to_add_out (frontSeq3 o)))
    (streamUpdate c p.ff mi hi (lin3 a.to_out.«0» (backSeq3 o)))

/-- A single-stream block: one projection in to q, k, v and the MLP's gate and value, one out
of the attention and the SwiGLU, one gate. -/
def singleBlock (c : Flux2Config) {b t : Nat} (ids : T #[t, 4]) (m : T #[b, 3 * c.inner_dim])
    (p : SingleTransformerBlock c) (x : T #[b, t, c.inner_dim]) : T #[b, t, c.inner_dim] :=
  let a := p.attn
  let h := lin3 a.to_qkv_mlp_proj (modulated c x (chunk m 0) (chunk m 1))
  let qkv := frontLast3 h
  let o := attend c ids (normedHeads c a.norm_q (third qkv 0))
    (normedHeads c a.norm_k (third qkv 1)) (splitHeads (third qkv 2))
  add x (gate (lin3 a.to_out (catLast3 o (swiglu (backLast3 h)))) (chunk m 2))

/-- `norm_out`: the layer norm scaled by the first half of `linear (silu temb)` and shifted by
the second. -/
def normOut (c : Flux2Config) {b t : Nat} (p : NormOut c) (temb : T #[b, c.inner_dim])
    (x : T #[b, t, c.inner_dim]) : T #[b, t, c.inner_dim] :=
  let m := lin p.linear (silu temb)
  modulated c x (chunk m 1) (chunk m 0)

/-- The transformer after `temb`: both layouts share it. Text and image tokens in (text first
in the joint sequence, and in its position ids), the double-stream then the single-stream
blocks under their shared modulations, the final norm and projection of the image tokens.
The text tokens are `j` features wide, whatever the context embedder takes (the models here:
`joint_attention_dim`; `examples/flux2/digits`: its own text encoder's three states). -/
def transformer (c : Flux2Config) {b img txt j : Nat}
    (double_stream_modulation_img double_stream_modulation_txt : Modulation 6 c.inner_dim)
    (single_stream_modulation : Modulation 3 c.inner_dim)
    (x_embedder : Linear c.inner_dim c.in_channels)
    (context_embedder : Linear c.inner_dim j)
    (transformer_blocks : Vector (TransformerBlock c) c.num_layers)
    (single_transformer_blocks : Vector (SingleTransformerBlock c) c.num_single_layers)
    (norm_out : NormOut c) (proj_out : Linear c.out_dim c.inner_dim) (temb : T #[b, c.inner_dim])
    (hidden_states : T #[b, img, c.in_channels])
    (encoder_hidden_states : T #[b, txt, j]) (img_ids : T #[img, 4])
    (txt_ids : T #[txt, 4]) : T #[b, img, c.out_dim] :=
  let ids := catFirst txt_ids img_ids
  let mi := modulation double_stream_modulation_img temb
  let mt := modulation double_stream_modulation_txt temb
  let ms := modulation single_stream_modulation temb
  let x := catSeq3 (lin3 context_embedder encoder_hidden_states) (lin3 x_embedder hidden_states)
  let x := transformer_blocks.foldl (fun x blk => doubleBlock c ids mi mt blk x) x
  let x := single_transformer_blocks.foldl (fun x blk => singleBlock c ids ms blk x) x
  lin3 proj_out (normOut c norm_out temb (backSeq3 x))

/-- The velocity of the latent tokens `hidden_states` at the times `timestep` under the text
tokens `encoder_hidden_states`, at the position ids `img_ids` and `txt_ids` (diffusers'
forward with those arguments; ids of one sequence, the pipelines' `[b, n, 4]` ids' first):
FLUX.2 [klein]'s layout, no guidance. -/
@[model]
def flux2Velocity (c : Flux2Config) {b img txt : Nat}
    (hrope : c.axes_dims_rope_t + c.axes_dims_rope_h + c.axes_dims_rope_w + c.axes_dims_rope_l
      = c.attention_head_dim)
    (heven : c.axes_dims_rope_t % 2 + c.axes_dims_rope_h % 2 + c.axes_dims_rope_w % 2
      + c.axes_dims_rope_l % 2 = 0)
    (htime : c.timestep_guidance_channels % 2 = 0) (hg : c.guidance_embeds = 0)
    (p : Flux2Params c) (hidden_states : T #[b, img, c.in_channels])
    (encoder_hidden_states : T #[b, txt, c.joint_attention_dim]) (timestep : T #[b])
    (img_ids : T #[img, 4]) (txt_ids : T #[txt, 4]) : T #[b, img, c.out_dim] :=
  let temb := timeEmbedding c p.time_guidance_embed.timestep_embedder timestep
  transformer c p.double_stream_modulation_img p.double_stream_modulation_txt
    p.single_stream_modulation p.x_embedder p.context_embedder p.transformer_blocks
    p.single_transformer_blocks p.norm_out p.proj_out temb hidden_states encoder_hidden_states
    img_ids txt_ids

/-- The velocity in FLUX.2 [dev]'s layout: as `flux2Velocity`, with the embedded guidance
scale `guidance` (one per sequence) added to the time's embedding. -/
@[model]
def flux2GuidedVelocity (c : Flux2Config) {b img txt : Nat}
    (hrope : c.axes_dims_rope_t + c.axes_dims_rope_h + c.axes_dims_rope_w + c.axes_dims_rope_l
      = c.attention_head_dim)
    (heven : c.axes_dims_rope_t % 2 + c.axes_dims_rope_h % 2 + c.axes_dims_rope_w % 2
      + c.axes_dims_rope_l % 2 = 0)
    (htime : c.timestep_guidance_channels % 2 = 0) (hg : c.guidance_embeds = 1)
    (p : Flux2GuidedParams c) (hidden_states : T #[b, img, c.in_channels])
    (encoder_hidden_states : T #[b, txt, c.joint_attention_dim]) (timestep : T #[b])
    (img_ids : T #[img, 4]) (txt_ids : T #[txt, 4]) (guidance : T #[b]) :
    T #[b, img, c.out_dim] :=
  let e := p.time_guidance_embed
  let temb := add (timeEmbedding c e.timestep_embedder timestep)
    (timeEmbedding c e.guidance_embedder guidance)
  transformer c p.double_stream_modulation_img p.double_stream_modulation_txt
    p.single_stream_modulation p.x_embedder p.context_embedder p.transformer_blocks
    p.single_transformer_blocks p.norm_out p.proj_out temb hidden_states encoder_hidden_states
    img_ids txt_ids
