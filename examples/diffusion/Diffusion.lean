import Tyr

/-!
# Diffusion — a masked diffusion language model (MDLM) over characters

A bidirectional transformer: token and position embeddings, `n_layer` pre-LayerNorm blocks of
non-causal multi-head self-attention and a 4× GELU MLP, a final LayerNorm and an output head.
It reads a sequence in which some characters are replaced by `[MASK]` and predicts, at every
position, the original character.

The `[MASK]` token is the id `c.vocab`, one past the characters: the token embedding has
`c.vocab + 1` rows and the head `c.vocab` outputs. So a mask id outside the embedding cannot
be configured, and the model cannot predict `[MASK]` (MDLM's "zero masking probabilities").
The model is not conditioned on the masking rate: for absorbing-state diffusion the clean-data
posterior at a masked position does not depend on it (Ou et al. 2024, "Your absorbing discrete
diffusion secretly models the conditional distributions of clean data"; MDLM reports the
same), so the noise level only enters the loss weights.

Training (`diffusion`) takes the masked ids, the original characters and per-position loss
weights, and returns the logits and `weightedCrossEntropy2` of them: with MDLM's linear
schedule the weights are `1/t` at the masked positions and `0` elsewhere, and the loss is the
negative ELBO in nats per character (the `mdlm` task, `pytyr/train/tasks/mdlm/`, draws `t`,
the masks and the weights). Sampling (`diffusionLogits`) returns the logits only.
-/

open torch

/-- Sizes of the model. -/
structure DiffusionConfig where
  /-- Number of characters; `[MASK]` is one more token, the id `vocab`. -/
  vocab : Nat
  /-- Longest sequence. -/
  block : Nat
  /-- Number of transformer blocks. -/
  n_layer : Nat
  /-- Attention heads per block. -/
  n_head : Nat
  /-- Width of one head. -/
  head_dim : Nat
  /-- Dropout probability while training. -/
  dropout : Float

/-- The model width, `n_head * head_dim`. -/
def DiffusionConfig.n_embd (c : DiffusionConfig) : Nat := c.n_head * c.head_dim

/-- The id of `[MASK]`: one past the characters. -/
def DiffusionConfig.mask (c : DiffusionConfig) : Nat := c.vocab

/-- GPT-2 scales residual projections by `1/√(2·n_layer)`. -/
def DiffusionConfig.residStd (c : DiffusionConfig) : Float :=
  0.02 / Float.sqrt (2.0 * c.n_layer.toFloat)

/-- Self-attention: a fused q, k, v projection and an output projection. -/
structure Attention (c : DiffusionConfig) where
  c_attn : T #[3 * c.n_embd, c.n_embd] := normal 0.02
  c_attn_bias : T #[3 * c.n_embd] := zeros
  c_proj : T #[c.n_embd, c.n_embd] := normal c.residStd
  c_proj_bias : T #[c.n_embd] := zeros
  deriving TensorStruct

/-- The 4× GELU MLP. -/
structure MLP (c : DiffusionConfig) where
  c_fc : T #[4 * c.n_embd, c.n_embd] := normal 0.02
  c_fc_bias : T #[4 * c.n_embd] := zeros
  c_proj : T #[c.n_embd, 4 * c.n_embd] := normal c.residStd
  c_proj_bias : T #[c.n_embd] := zeros
  deriving TensorStruct

/-- One pre-LayerNorm transformer block. -/
structure Block (c : DiffusionConfig) where
  ln_1 : T #[c.n_embd] := ones
  ln_1_bias : T #[c.n_embd] := zeros
  attn : Attention c
  ln_2 : T #[c.n_embd] := ones
  ln_2_bias : T #[c.n_embd] := zeros
  mlp : MLP c
  deriving TensorStruct

/-- All parameters. The token embedding covers the characters and `[MASK]`; the head, only the
characters: it is not tied to the embedding. -/
structure DiffusionParams (c : DiffusionConfig) where
  /-- Token embedding, `[MASK]` (id `c.mask`) last. -/
  wte : T #[c.mask + 1, c.n_embd] := normal 0.02
  /-- Position embedding. -/
  wpe : T #[c.block, c.n_embd] := normal 0.02
  blocks : Vector (Block c) c.n_layer
  ln_f : T #[c.n_embd] := ones
  ln_f_bias : T #[c.n_embd] := zeros
  /-- Output head over the characters only. -/
  head : T #[c.vocab, c.n_embd] := normal 0.02
  deriving TensorStruct

/-- Multi-head self-attention in which every position sees every position. -/
def attention (c : DiffusionConfig) {b t : Nat} (p : Attention c) (x : T #[b, t, c.n_embd]) :
    T #[b, t, c.n_embd] :=
  let qkv := linearBias3 x p.c_attn p.c_attn_bias
  let q := splitHeads (third qkv 0)
  let k := splitHeads (third qkv 1)
  let v := splitHeads (third qkv 2)
  let y := mergeHeads (bidirectionalAttention q k v c.dropout)
  dropout (linearBias3 y p.c_proj p.c_proj_bias) c.dropout

/-- The position-wise MLP. -/
def mlp (c : DiffusionConfig) {b t : Nat} (p : MLP c) (x : T #[b, t, c.n_embd]) :
    T #[b, t, c.n_embd] :=
  let h := gelu (linearBias3 x p.c_fc p.c_fc_bias)
  dropout (linearBias3 h p.c_proj p.c_proj_bias) c.dropout

/-- `x + attn(ln_1 x)`, then `x + mlp(ln_2 x)`. -/
def block (c : DiffusionConfig) {b t : Nat} (p : Block c) (x : T #[b, t, c.n_embd]) :
    T #[b, t, c.n_embd] :=
  let x := add x (attention c p.attn (layerNorm3 x p.ln_1 p.ln_1_bias))
  add x (mlp c p.mlp (layerNorm3 x p.ln_2 p.ln_2_bias))

/-- Logits of the original character at every position of `b` partly masked sequences of
`t ≤ block` tokens. -/
def logits (c : DiffusionConfig) {b t : Nat} (h : t ≤ c.block) (p : DiffusionParams c)
    (ids : IT #[b, t] (c.mask + 1)) : T #[b, t, c.vocab] :=
  let tok := embedding2 ids p.wte
  let x := dropout (addRows tok (rows p.wpe t h)) c.dropout
  let x := p.blocks.foldl (fun x blk => block c blk x) x
  linear3 (layerNorm3 x p.ln_f p.ln_f_bias) p.head

/-- Sampling: logits for `b` partly masked sequences of `t` tokens. -/
@[model]
def diffusionLogits (c : DiffusionConfig) {b t : Nat} (h : t ≤ c.block)
    (p : DiffusionParams c) (ids : IT #[b, t] (c.mask + 1)) :
    T #[b, t, c.vocab] :=
  logits c h p ids

/-- Training: logits of the masked sequences `ids` and the negative ELBO, the cross entropy
against the original characters `targets` weighted per position by `weights` (nats per
character). -/
@[model]
def diffusion (c : DiffusionConfig) {b t : Nat} (h : t ≤ c.block) (p : DiffusionParams c)
    (ids : IT #[b, t] (c.mask + 1)) (targets : IT #[b, t] c.vocab)
    (weights : T #[b, t]) :
    T #[b, t, c.vocab] × T #[] :=
  let z := logits c h p ids
  (z, weightedCrossEntropy2 z targets weights)
