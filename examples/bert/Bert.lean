import Tyr

/-!
# BERT — a bidirectional transformer encoder, with batch and length left symbolic

Hugging Face's `BertModel` without its pooler: word, position and token-type embeddings
summed and layer-normalised, then `n_layer` post-norm layers of bidirectional multi-head
self-attention over a key-padding mask and an exact (erf) GELU MLP, each sub-layer
`LayerNorm (x + dropout (dense y))`. The result is the last hidden state (`bert`), or its
mean over the real tokens, a sentence embedding (`bertMeanPooled`).

The batch `b` and the sequence length `t` are implicit binders, never numbers: every op used
types each dimension on its own (`embedding2`, `addRows`, `splitHeads`, `paddedAttention`, …),
so no `reshape` needs a `by decide` proof about closed shapes, and one source serves every
`(b, t)`; the values come from the inputs. Positions `0 … t-1` are the first `t` rows of the
position table (`rows`), which needs the hypothesis `h : t ≤ c.max_position`, decided on the
values at instantiation. The width is `n_head * head_dim`, so heads divide it by construction.
The padding mask is `IT #[b, t] 2` (1 = token, 0 = padding, HF's `attention_mask`) and the
token types `IT #[b, t] c.type_vocab`: ids in either place are a type error.

Parameter paths are the keys of HF's `BertModel.state_dict()` (`embeddings.LayerNorm.weight`,
`encoder.layer.0.attention.self.query.weight`, `…output.LayerNorm.bias`), so an HF checkpoint
loads by name (`self` and `LayerNorm` are ordinary field names: Lean 4.35 accepts a field
`self` and the projection `p.self`). Initialisation is HF's: normal(0, 0.02) matrices and tables, zero biases,
LayerNorm gain one and bias zero. `config.json` beside this file holds bert-base's sizes.
-/

open torch

/-- Sizes of the model (HF's `BertConfig`, with the width given by its factors). -/
structure BertConfig where
  /-- Vocabulary size (`vocab_size`). -/
  vocab : Nat
  /-- Rows of the position table, the longest sequence (`max_position_embeddings`). -/
  max_position : Nat
  /-- Token types, 2 for sentence pairs (`type_vocab_size`). -/
  type_vocab : Nat
  /-- Encoder layers (`num_hidden_layers`). -/
  n_layer : Nat
  /-- Attention heads (`num_attention_heads`). -/
  n_head : Nat
  /-- Width of one head (`hidden_size / num_attention_heads`). -/
  head_dim : Nat
  /-- Width of the MLP (`intermediate_size`). -/
  intermediate : Nat
  /-- LayerNorm epsilon (`layer_norm_eps`, 1e-12 in HF). -/
  eps : Float
  /-- Dropout after embeddings and sub-layers while training (`hidden_dropout_prob`). -/
  hidden_dropout : Float
  /-- Dropout of the attention weights while training (`attention_probs_dropout_prob`). -/
  attn_dropout : Float

/-- The model width `hidden_size`, `n_head * head_dim`. -/
def BertConfig.hidden (c : BertConfig) : Nat := c.n_head * c.head_dim

/-- `nn.Linear(i, o)` as HF initialises it. -/
structure Linear (o i : Nat) where
  weight : T #[o, i] := normal 0.02
  bias : T #[o] := zeros
  deriving TensorStruct

/-- `nn.Embedding(n, d)`. -/
structure Embedding (n d : Nat) where
  weight : T #[n, d] := normal 0.02
  deriving TensorStruct

/-- `nn.LayerNorm(d)`. -/
structure Norm (d : Nat) where
  weight : T #[d] := ones
  bias : T #[d] := zeros
  deriving TensorStruct

/-- HF's `BertEmbeddings`. -/
structure BertEmbeddings (c : BertConfig) where
  word_embeddings : Embedding c.vocab c.hidden
  position_embeddings : Embedding c.max_position c.hidden
  token_type_embeddings : Embedding c.type_vocab c.hidden
  LayerNorm : Norm c.hidden
  deriving TensorStruct

/-- HF's `BertSelfAttention`: the query, key and value projections. -/
structure BertSelfAttention (c : BertConfig) where
  query : Linear c.hidden c.hidden
  key : Linear c.hidden c.hidden
  value : Linear c.hidden c.hidden
  deriving TensorStruct

/-- HF's `BertSelfOutput`: the attention's projection and its post-norm. -/
structure BertSelfOutput (c : BertConfig) where
  dense : Linear c.hidden c.hidden
  LayerNorm : Norm c.hidden
  deriving TensorStruct

/-- HF's `BertAttention`. -/
structure BertAttention (c : BertConfig) where
  self : BertSelfAttention c
  output : BertSelfOutput c
  deriving TensorStruct

/-- HF's `BertIntermediate`: the MLP's first layer (GELU follows). -/
structure BertIntermediate (c : BertConfig) where
  dense : Linear c.intermediate c.hidden
  deriving TensorStruct

/-- HF's `BertOutput`: the MLP's second layer and its post-norm. -/
structure BertOutput (c : BertConfig) where
  dense : Linear c.hidden c.intermediate
  LayerNorm : Norm c.hidden
  deriving TensorStruct

/-- HF's `BertLayer`. -/
structure BertLayer (c : BertConfig) where
  attention : BertAttention c
  intermediate : BertIntermediate c
  output : BertOutput c
  deriving TensorStruct

/-- HF's `BertEncoder`: the layers, a stack typed by their count. -/
structure BertEncoder (c : BertConfig) where
  layer : Vector (BertLayer c) c.n_layer
  deriving TensorStruct

/-- HF's `BertModel` without the pooler (`add_pooling_layer=False`). -/
structure BertParams (c : BertConfig) where
  embeddings : BertEmbeddings c
  encoder : BertEncoder c
  deriving TensorStruct

/-- A linear layer over every token of a batch of sequences. -/
def lin3 {o i b t : Nat} (l : Linear o i) (x : T #[b, t, i]) : T #[b, t, o] :=
  linearBias3 x l.weight l.bias

/-- LayerNorm of every token, with the config's epsilon. -/
def norm3 (c : BertConfig) {b t d : Nat} (n : Norm d) (x : T #[b, t, d]) : T #[b, t, d] :=
  layerNorm3 x n.weight n.bias c.eps

/-- `LayerNorm (words + token types + positions 0 … t-1)`, HF's order of the sums. -/
def embed (c : BertConfig) {b t : Nat} (h : t ≤ c.max_position) (p : BertEmbeddings c)
    (input_ids : IT #[b, t] c.vocab) (token_type_ids : IT #[b, t] c.type_vocab) :
    T #[b, t, c.hidden] :=
  let x := add (embedding2 input_ids p.word_embeddings.weight)
    (embedding2 token_type_ids p.token_type_embeddings.weight)
  let x := addRows x (rows p.position_embeddings.weight t h)
  dropout (norm3 c p.LayerNorm x) c.hidden_dropout

/-- Multi-head self-attention in which no token attends to padding, heads merged again. -/
def selfAttention (c : BertConfig) {b t : Nat} (p : BertSelfAttention c)
    (mask : IT #[b, t] 2) (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let q := splitHeads (lin3 p.query x)
  let k := splitHeads (lin3 p.key x)
  let v := splitHeads (lin3 p.value x)
  mergeHeads (paddedAttention q k v mask c.attn_dropout)

/-- `LayerNorm (x + dropout (dense y))`: HF's `BertSelfOutput` and `BertOutput`. -/
def residualNorm (c : BertConfig) {b t i : Nat} (dense : Linear c.hidden i) (n : Norm c.hidden)
    (y : T #[b, t, i]) (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  norm3 c n (add (dropout (lin3 dense y) c.hidden_dropout) x)

/-- One post-norm encoder layer: attention, then the GELU MLP, each around a residual. -/
def layer (c : BertConfig) {b t : Nat} (mask : IT #[b, t] 2) (p : BertLayer c)
    (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let a := selfAttention c p.attention.self mask x
  let x := residualNorm c p.attention.output.dense p.attention.output.LayerNorm a x
  let h := gelu (lin3 p.intermediate.dense x)
  residualNorm c p.output.dense p.output.LayerNorm h x

/-- The last hidden state of `b` sequences of `t ≤ max_position` tokens (HF's
`BertModel(...).last_hidden_state`); padding positions have outputs too, from real keys only. -/
@[model]
def bert (c : BertConfig) {b t : Nat} (h : t ≤ c.max_position) (p : BertParams c)
    (input_ids : IT #[b, t] c.vocab) (token_type_ids : IT #[b, t] c.type_vocab)
    (attention_mask : IT #[b, t] 2) : T #[b, t, c.hidden] :=
  let x := embed c h p.embeddings input_ids token_type_ids
  p.encoder.layer.foldl (fun x l => layer c attention_mask l x) x

/-- A sentence embedding per sequence: the mean of `bert`'s last hidden state over the real
tokens (`maskedMeanSeq3`), the pooling of sentence encoders built on BERT. -/
@[model]
def bertMeanPooled (c : BertConfig) {b t : Nat} (h : t ≤ c.max_position) (p : BertParams c)
    (input_ids : IT #[b, t] c.vocab) (token_type_ids : IT #[b, t] c.type_vocab)
    (attention_mask : IT #[b, t] 2) : T #[b, c.hidden] :=
  maskedMeanSeq3 (bert c h p input_ids token_type_ids attention_mask) attention_mask
