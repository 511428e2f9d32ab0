import Tyr
import examples.flux2.transformer.Transformer

/-!
# Digits — FLUX.2 [klein]'s layout at the size of scikit-learn's 8×8 digits, prompted in text

A text-to-image model trained from scratch by `tyr train` (the `image_flow` task with
`condition = "prompt"`): a small Qwen3-layout text encoder reads a prompt ("the digit 7", one
token a character), and FLUX.2's transformer (`examples/flux2/transformer/Transformer.lean`,
imported: its blocks, its `transformer`, its parameter structures) predicts the velocity of the
image tokens under the encoder's hidden states, as `Flux2KleinPipeline` joins Qwen3 and the
transformer:

* the image is its own latent: 8 × 8 pixels of one channel, packed as FLUX.2 packs latents
  (2 × 2 patches: 16 tokens of 4 features, in row-major order, at position ids
  `(0, row, column, 0)`); the task packs them as the pipeline does, so the transformer is
  diffusers' `Flux2Transformer2DModel` as it is (`patch_size` 1);
* the text tokens are the encoder's hidden states after `k1`, `k2` and all its layers, side by
  side (FLUX.2 [klein] reads Qwen3-4B's after layers 9, 18 and 27 of 36 and never runs the
  rest: an encoder trained with the transformer has no layers to spare, so it reads its last),
  at position ids `(0, 0, 0, l)`, padding included, as [klein] reads them;
* the encoder is Qwen3's decoder without its final norm and head, which FLUX.2 never runs:
  token embedding, pre-norm layers of causal grouped-query attention over the real tokens
  (`attention_mask`), with Qwen3's RMS norm over each head of the queries and keys before
  rotary, and a SwiGLU MLP.

The two models have two configs, as the pipeline's two folders do: `c` is the transformer's
(`Flux2Config`, diffusers' names), `e` the encoder's (`TextConfig`, transformers' `Qwen3Config`
names as `examples/llama/Llama.lean` spells them). The transformer's context embedder is typed
by the encoder's width, three states side by side, so an encoder of another width cannot be
joined to it; `hj` holds the transformer's `joint_attention_dim` to that width, as the pipeline
requires of its folders. The parameter paths are the pipeline's folders' keys under
`text_encoder.` and `transformer.` (`text_encoder.model.layers.0.self_attn.q_norm.weight`,
`transformer.single_transformer_blocks.1.attn.to_qkv_mlp_proj.weight`). The training model
`digits` returns the velocity and its mean squared error against the target; `digitsVelocity`
the velocity alone, for sampling and `tyr generate RUN --prompt "the digit 7"`.
-/

open torch

/-- The text encoder's sizes: a small Qwen3 (`Qwen3Config`'s fields, Llama.lean's names). -/
structure TextConfig where
  /-- Vocabulary size: the prompts' characters (the task fills it). -/
  vocab : Nat
  /-- The longest prompt (`max_position_embeddings`). -/
  max_position : Nat
  /-- Decoder layers (`num_hidden_layers`). -/
  n_layer : Nat
  /-- The residual stream's width (`hidden_size`). -/
  hidden : Nat
  /-- The MLP's width (`intermediate_size`). -/
  intermediate : Nat
  /-- Query heads (`num_attention_heads`). -/
  n_head : Nat
  /-- Key/value heads (`num_key_value_heads`). -/
  n_kv_head : Nat
  /-- A head's width (`head_dim`; even: `hrot`). -/
  head_dim : Nat
  /-- The RMS norms' epsilon (`rms_norm_eps`). -/
  eps : Float
  /-- Rotary base (`rope_theta`). -/
  rope_theta : Float
  /-- The first hidden state read: after `k1` layers (`hk1 : k1 ≤ k2`). -/
  k1 : Nat
  /-- The second: after `k2` layers (`hk2 : k2 ≤ n_layer`); the third is after all of them. -/
  k2 : Nat

/-- Half a head's width: rotary pairs the halves. -/
def TextConfig.half (e : TextConfig) : Nat := e.head_dim / 2

/-- A head's width, even by construction (`= head_dim` under `hrot`). -/
def TextConfig.hd (e : TextConfig) : Nat := 2 * e.half

/-- The width of the queries: `n_head` heads. -/
def TextConfig.q_dim (e : TextConfig) : Nat := e.n_head * e.hd

/-- The width of the keys and of the values: `n_kv_head` heads. -/
def TextConfig.kv_dim (e : TextConfig) : Nat := e.n_kv_head * e.hd

/-- The text tokens' width: three of the encoder's hidden states side by side. -/
def TextConfig.features (e : TextConfig) : Nat := e.hidden + e.hidden + e.hidden

/-- `nn.Embedding(n, d)`. -/
structure Embedding (n d : Nat) where
  weight : T #[n, d] := normal 0.02
  deriving TensorStruct

/-- Qwen3's attention: four projections without biases, a gain per head width for the
queries and the keys. -/
structure TextAttention (e : TextConfig) where
  q_proj : Linear e.q_dim e.hidden
  k_proj : Linear e.kv_dim e.hidden
  v_proj : Linear e.kv_dim e.hidden
  o_proj : Linear e.hidden e.q_dim
  q_norm : RMSNorm e.hd
  k_norm : RMSNorm e.hd
  deriving TensorStruct

/-- Qwen3's SwiGLU MLP. -/
structure TextMLP (e : TextConfig) where
  gate_proj : Linear e.intermediate e.hidden
  up_proj : Linear e.intermediate e.hidden
  down_proj : Linear e.hidden e.intermediate
  deriving TensorStruct

/-- A Qwen3 decoder layer. -/
structure TextLayer (e : TextConfig) where
  self_attn : TextAttention e
  mlp : TextMLP e
  input_layernorm : RMSNorm e.hidden
  post_attention_layernorm : RMSNorm e.hidden
  deriving TensorStruct

/-- `Qwen3Model` without its final norm: the embedding and the layers. -/
structure TextModel (e : TextConfig) where
  embed_tokens : Embedding e.vocab e.hidden
  layers : Vector (TextLayer e) e.n_layer
  deriving TensorStruct

/-- The pipeline's `text_encoder` folder: `Qwen3ForCausalLM`'s `model`, without the head. -/
structure TextEncoder (e : TextConfig) where
  model : TextModel e
  deriving TensorStruct

/-- `Flux2Params` (FLUX.2 [klein]'s layout) with the context embedder typed by the encoder's
three hidden states (`joint_attention_dim`, held to it by `hj`). -/
structure DigitsTransformer (c : Flux2Config) (e : TextConfig) where
  time_guidance_embed : TimeEmbeddings c
  double_stream_modulation_img : Modulation 6 c.inner_dim
  double_stream_modulation_txt : Modulation 6 c.inner_dim
  single_stream_modulation : Modulation 3 c.inner_dim
  x_embedder : Linear c.inner_dim c.in_channels
  context_embedder : Linear c.inner_dim e.features
  transformer_blocks : Vector (TransformerBlock c) c.num_layers
  single_transformer_blocks : Vector (SingleTransformerBlock c) c.num_single_layers
  norm_out : NormOut c
  proj_out : Linear c.out_dim c.inner_dim
  deriving TensorStruct

/-- Both models, under the pipeline's folder names. -/
structure DigitsParams (c : Flux2Config) (e : TextConfig) where
  text_encoder : TextEncoder e
  transformer : DigitsTransformer c e
  deriving TensorStruct

/-- The RMS norm of every position, with its gain. -/
def textNorm (e : TextConfig) {b t d : Nat} (n : RMSNorm d) (x : T #[b, t, d]) : T #[b, t, d] :=
  rmsNormGain3 x n.weight e.eps

/-- Queries or keys in heads, RMS-normalised per head and turned by rotary at `0 … t-1`. -/
def textHeads (e : TextConfig) {b t h : Nat} (hT : t ≤ e.max_position) (n : RMSNorm e.hd)
    (x : T #[b, t, h * e.hd]) : T #[b, h, t, e.hd] :=
  rope (rmsNormScale4 (splitHeads x) n.weight e.eps) hT e.rope_theta

/-- A Qwen3 layer over padded prompts: attention over the real tokens (`keep`), then the MLP,
each around its residual. -/
def textLayer (e : TextConfig) {b t : Nat} (hT : t ≤ e.max_position)
    (hkv : e.n_head % e.n_kv_head = 0) (keep : IT #[b, t] 2) (p : TextLayer e)
    (x : T #[b, t, e.hidden]) : T #[b, t, e.hidden] :=
  let a := p.self_attn
  let h := textNorm e p.input_layernorm x
  let o := paddedCausalAttention (textHeads e hT a.q_norm (lin3 a.q_proj h))
    (textHeads e hT a.k_norm (lin3 a.k_proj h)) (splitHeads (lin3 a.v_proj h)) keep hkv
  let x := add x (lin3 a.o_proj (mergeHeads o))
  let m := textNorm e p.post_attention_layernorm x
  add x (lin3 p.mlp.down_proj (mul (silu (lin3 p.mlp.gate_proj m)) (lin3 p.mlp.up_proj m)))

/-- The stream after a run of layers. -/
def textLayers (e : TextConfig) {b t n : Nat} (hT : t ≤ e.max_position)
    (hkv : e.n_head % e.n_kv_head = 0) (layers : Vector (TextLayer e) n) (keep : IT #[b, t] 2)
    (x : T #[b, t, e.hidden]) : T #[b, t, e.hidden] :=
  layers.foldl (fun x l => textLayer e hT hkv keep l x) x

/-- The text tokens: the hidden states after `k1`, `k2` and all layers, side by side. -/
def textFeatures (e : TextConfig) {b t : Nat} (hT : t ≤ e.max_position)
    (hkv : e.n_head % e.n_kv_head = 0) (p : TextModel e) (input_ids : IT #[b, t] e.vocab)
    (attention_mask : IT #[b, t] 2) : T #[b, t, e.features] :=
  let h1 := textLayers e hT hkv (p.layers.extract 0 e.k1) attention_mask
    (embedding2 input_ids p.embed_tokens.weight)
  let h2 := textLayers e hT hkv (p.layers.extract e.k1 e.k2) attention_mask h1
  let h3 := textLayers e hT hkv (p.layers.extract e.k2 e.n_layer) attention_mask h2
  catLast3 (catLast3 h1 h2) h3

/-- The velocity of the packed image tokens at the times `timestep` under the prompt
`input_ids` (its real tokens `attention_mask`), at the position ids `img_ids`, `txt_ids`. -/
def velocity (c : Flux2Config) (e : TextConfig) {b img t : Nat} (hT : t ≤ e.max_position)
    (hkv : e.n_head % e.n_kv_head = 0) (p : DigitsParams c e)
    (hidden_states : T #[b, img, c.in_channels]) (timestep : T #[b])
    (input_ids : IT #[b, t] e.vocab) (attention_mask : IT #[b, t] 2) (img_ids : T #[img, 4])
    (txt_ids : T #[t, 4]) : T #[b, img, c.out_dim] :=
  let q := p.transformer
  let temb := timeEmbedding c q.time_guidance_embed.timestep_embedder timestep
  let text := textFeatures e hT hkv p.text_encoder.model input_ids attention_mask
  transformer c q.double_stream_modulation_img q.double_stream_modulation_txt
    q.single_stream_modulation q.x_embedder q.context_embedder q.transformer_blocks
    q.single_transformer_blocks q.norm_out q.proj_out temb hidden_states text img_ids txt_ids

/-- Sampling: the velocity alone (FLUX.2 [klein]'s layout: no guidance embedding, `hg`). -/
@[model]
def digitsVelocity (c : Flux2Config) (e : TextConfig) {b img t : Nat}
    (hrope : c.axes_dims_rope_t + c.axes_dims_rope_h + c.axes_dims_rope_w + c.axes_dims_rope_l
      = c.attention_head_dim)
    (heven : c.axes_dims_rope_t % 2 + c.axes_dims_rope_h % 2 + c.axes_dims_rope_w % 2
      + c.axes_dims_rope_l % 2 = 0)
    (htime : c.timestep_guidance_channels % 2 = 0) (hg : c.guidance_embeds = 0)
    (hj : c.joint_attention_dim = e.features) (hT : t ≤ e.max_position)
    (hrot : e.head_dim % 2 = 0) (hkv : e.n_head % e.n_kv_head = 0) (hk1 : e.k1 ≤ e.k2)
    (hk2 : e.k2 ≤ e.n_layer) (p : DigitsParams c e) (hidden_states : T #[b, img, c.in_channels])
    (timestep : T #[b]) (input_ids : IT #[b, t] e.vocab) (attention_mask : IT #[b, t] 2)
    (img_ids : T #[img, 4]) (txt_ids : T #[t, 4]) : T #[b, img, c.out_dim] :=
  velocity c e hT hkv p hidden_states timestep input_ids attention_mask img_ids txt_ids

/-- Training: the velocity and its mean squared error against the target `noise - x₀`. -/
@[model]
def digits (c : Flux2Config) (e : TextConfig) {b img t : Nat}
    (hrope : c.axes_dims_rope_t + c.axes_dims_rope_h + c.axes_dims_rope_w + c.axes_dims_rope_l
      = c.attention_head_dim)
    (heven : c.axes_dims_rope_t % 2 + c.axes_dims_rope_h % 2 + c.axes_dims_rope_w % 2
      + c.axes_dims_rope_l % 2 = 0)
    (htime : c.timestep_guidance_channels % 2 = 0) (hg : c.guidance_embeds = 0)
    (hj : c.joint_attention_dim = e.features) (hT : t ≤ e.max_position)
    (hrot : e.head_dim % 2 = 0) (hkv : e.n_head % e.n_kv_head = 0) (hk1 : e.k1 ≤ e.k2)
    (hk2 : e.k2 ≤ e.n_layer) (p : DigitsParams c e) (hidden_states : T #[b, img, c.in_channels])
    (timestep : T #[b]) (input_ids : IT #[b, t] e.vocab) (attention_mask : IT #[b, t] 2)
    (img_ids : T #[img, 4]) (txt_ids : T #[t, 4]) (target : T #[b, img, c.out_dim]) :
    T #[b, img, c.out_dim] × T #[] :=
  let v := velocity c e hT hkv p hidden_states timestep input_ids attention_mask img_ids txt_ids
  (v, mseLoss v target)
