import Tyr

/-!
# GPT-2 — Hugging Face's `GPT2LMHeadModel`, by its checkpoint's keys

The decoder of OpenAI's released checkpoints as transformers holds it: token and position
embeddings (`wte`, `wpe`), `n_layer` pre-LayerNorm blocks of causal multi-head
self-attention and an MLP of `inner` units, each around a residual, a final LayerNorm
(`ln_f`) and the language-model head tied to `wte`. Two models, by `activation_function`:

* `gpt2`: the MLP's activation is `gelu_new` (and `gelu_pytorch_tanh`), GELU's tanh
  approximation `0.5 x (1 + tanh (√(2/π) (x + 0.044715 x³)))`, the activation of every
  checkpoint OpenAI released (`gpt2`, `gpt2-medium`, `distilgpt2`, …);
* `gpt2Exact`: exact (erf) GELU (`gelu`), what `tyr export --format hf-gpt2` writes.

Parameter paths are the keys of transformers' `GPT2LMHeadModel.state_dict()`
(`transformer.h.0.attn.c_attn.weight`), so a checkpoint loads by name. GPT-2's projections are
`Conv1D`s: a weight stored input-major, `[in, out]`, applied as `x W + b` (`conv1d3`), so
`c_attn.weight` is `[n_embd, 3 · n_embd]`, the queries, keys and values side by side (`third`),
each head-major (`splitHeads`). `lm_head.weight` is `wte.weight` itself; a checkpoint that
carries it has it left out by name. The MLP's width `inner` is `n_inner` (null: 4 · n_embd),
the LayerNorms' epsilon `eps` is `layer_norm_epsilon`. The batch `b` and the length `t` are
implicit binders, `t ≤ block` a hypothesis decided on the values (positions are the first `t`
rows of `wpe`). Initialisation is transformers': normal(0, 0.02) weights and tables,
normal(0, 0.02/√(2·n_layer)) for the projections into the residual (`c_proj`), biases zero,
LayerNorm gains one. `config.json` beside this file holds a small model's sizes; `tyr run
--weights DIR` fills them from the checkpoint's own `config.json`.
-/

open torch

/-- Sizes and constants of a model (transformers' `GPT2Config`, the width by its factors). -/
structure GPT2Config where
  /-- Vocabulary size (`vocab_size`). -/
  vocab : Nat
  /-- Rows of the position table, the longest context (`n_positions`). -/
  block : Nat
  /-- Transformer blocks (`n_layer`). -/
  n_layer : Nat
  /-- Attention heads (`n_head`). -/
  n_head : Nat
  /-- Width of one head (`n_embd / n_head`). -/
  head_dim : Nat
  /-- Width of the MLP (`n_inner`, null: `4 * n_embd`). -/
  inner : Nat
  /-- The LayerNorms' epsilon (`layer_norm_epsilon`). -/
  eps : Float
  /-- Dropout while training, after the embeddings, of the attention weights and of every
  residual projection (`resid_pdrop`). -/
  dropout : Float

/-- The model width `n_embd`, `n_head * head_dim`. -/
def GPT2Config.n_embd (c : GPT2Config) : Nat := c.n_head * c.head_dim

/-- transformers scales the projections into the residual by `1/√(2·n_layer)`. -/
def GPT2Config.residStd (c : GPT2Config) : Float := 0.02 / Float.sqrt (2.0 * c.n_layer.toFloat)

/-- GPT-2's `Conv1D(o, i)`: a weight stored `[i, o]` and a bias. -/
structure Conv1D (i o : Nat) where
  weight : T #[i, o] := normal 0.02
  bias : T #[o] := zeros
  deriving TensorStruct

/-- A `Conv1D` that projects into the residual stream (its initialisation is smaller). -/
structure Proj (c : GPT2Config) (i : Nat) where
  weight : T #[i, c.n_embd] := normal c.residStd
  bias : T #[c.n_embd] := zeros
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

/-- `GPT2Attention`: the fused query, key and value projection and the output projection. -/
structure Attention (c : GPT2Config) where
  c_attn : Conv1D c.n_embd (3 * c.n_embd)
  c_proj : Proj c c.n_embd
  deriving TensorStruct

/-- `GPT2MLP`: `inner` units. -/
structure MLP (c : GPT2Config) where
  c_fc : Conv1D c.n_embd c.inner
  c_proj : Proj c c.inner
  deriving TensorStruct

/-- `GPT2Block`. -/
structure Block (c : GPT2Config) where
  ln_1 : Norm c.n_embd
  attn : Attention c
  ln_2 : Norm c.n_embd
  mlp : MLP c
  deriving TensorStruct

/-- `GPT2Model`: the embeddings, the blocks (a stack typed by their count), the final norm. -/
structure GPT2Model (c : GPT2Config) where
  wte : Embedding c.vocab c.n_embd
  wpe : Embedding c.block c.n_embd
  h : Vector (Block c) c.n_layer
  ln_f : Norm c.n_embd
  deriving TensorStruct

/-- `GPT2LMHeadModel`: its head is `transformer.wte`, so it has no parameter of its own. -/
structure GPT2Params (c : GPT2Config) where
  transformer : GPT2Model c
  deriving TensorStruct

/-- LayerNorm of every position, with the config's epsilon. -/
def norm (c : GPT2Config) {b t d : Nat} (n : Norm d) (x : T #[b, t, d]) : T #[b, t, d] :=
  layerNorm3 x n.weight n.bias c.eps

/-- Multi-head causal self-attention of the normalised stream. -/
def attention (c : GPT2Config) {b t : Nat} (p : Attention c) (x : T #[b, t, c.n_embd]) :
    T #[b, t, c.n_embd] :=
  let qkv := conv1d3 x p.c_attn.weight p.c_attn.bias
  let q := splitHeads (third qkv 0)
  let k := splitHeads (third qkv 1)
  let v := splitHeads (third qkv 2)
  let y := mergeHeads (causalAttention q k v c.dropout)
  dropout (conv1d3 y p.c_proj.weight p.c_proj.bias) c.dropout

/-- The MLP with its activation `act`. -/
def mlp (c : GPT2Config) {b t : Nat} (p : MLP c) (x : T #[b, t, c.n_embd])
    (act : T #[b, t, c.inner] → T #[b, t, c.inner]) : T #[b, t, c.n_embd] :=
  let h := act (conv1d3 x p.c_fc.weight p.c_fc.bias)
  dropout (conv1d3 h p.c_proj.weight p.c_proj.bias) c.dropout

/-- `x + attn (ln_1 x)`, then `x + mlp (ln_2 x)`. -/
def block (c : GPT2Config) {b t : Nat} (p : Block c) (x : T #[b, t, c.n_embd])
    (act : T #[b, t, c.inner] → T #[b, t, c.inner]) : T #[b, t, c.n_embd] :=
  let x := add x (attention c p.attn (norm c p.ln_1 x))
  add x (mlp c p.mlp (norm c p.ln_2 x) act)

/-- Next-token logits for every position of `b` sequences of `t ≤ block` tokens, the MLP's
activation `act`: the final normalised stream through the head, `wte`. -/
def logits (c : GPT2Config) {b t : Nat} (h : t ≤ c.block) (p : GPT2Model c)
    (input_ids : IT #[b, t] c.vocab) (act : T #[b, t, c.inner] → T #[b, t, c.inner]) :
    T #[b, t, c.vocab] :=
  let tok := embedding2 input_ids p.wte.weight
  let x := dropout (addRows tok (rows p.wpe.weight t h)) c.dropout
  let x := p.h.foldl (fun x blk => block c blk x act) x
  linear3 (norm c p.ln_f x) p.wte.weight

/-- GPT-2 as released: the MLP's activation is `gelu_new`, GELU's tanh approximation. -/
@[model]
def gpt2 (c : GPT2Config) {b t : Nat} (h : t ≤ c.block) (p : GPT2Params c)
    (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  logits c h p.transformer input_ids (fun y => geluTanh y)

/-- GPT-2 with exact (erf) GELU (`activation_function: gelu`). -/
@[model]
def gpt2Exact (c : GPT2Config) {b t : Nat} (h : t ≤ c.block) (p : GPT2Params c)
    (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  logits c h p.transformer input_ids (fun y => gelu y)

/-! ## Padded batches: the logits of sequences of different lengths

`…Masked` takes Hugging Face's `attention_mask : IT #[b, t] 2` beside `input_ids` (1 a token,
0 padding, on either side): no query attends to padding, positions are `0 … t-1` as
transformers gives them without `position_ids`, and a padding position's logits are not
meant to be read. `tyr run` picks it when the inputs hold an `attention_mask`. -/

/-- Multi-head causal self-attention over the real tokens (`hh`: every head its own keys). -/
def attentionMasked (c : GPT2Config) {b t : Nat} (hh : c.n_head % c.n_head = 0)
    (keep : IT #[b, t] 2) (p : Attention c) (x : T #[b, t, c.n_embd]) : T #[b, t, c.n_embd] :=
  let qkv := conv1d3 x p.c_attn.weight p.c_attn.bias
  let y := paddedCausalAttention (splitHeads (third qkv 0)) (splitHeads (third qkv 1))
    (splitHeads (third qkv 2)) keep hh
  conv1d3 (mergeHeads y) p.c_proj.weight p.c_proj.bias

/-- `block` over padded sequences. -/
def blockMasked (c : GPT2Config) {b t : Nat} (hh : c.n_head % c.n_head = 0)
    (keep : IT #[b, t] 2) (p : Block c) (x : T #[b, t, c.n_embd])
    (act : T #[b, t, c.inner] → T #[b, t, c.inner]) : T #[b, t, c.n_embd] :=
  let x := add x (attentionMasked c hh keep p.attn (norm c p.ln_1 x))
  add x (mlp c p.mlp (norm c p.ln_2 x) act)

/-- Next-token logits of padded sequences, the MLP's activation `act`. -/
def logitsMasked (c : GPT2Config) {b t : Nat} (h : t ≤ c.block) (hh : c.n_head % c.n_head = 0)
    (p : GPT2Model c) (input_ids : IT #[b, t] c.vocab) (keep : IT #[b, t] 2)
    (act : T #[b, t, c.inner] → T #[b, t, c.inner]) : T #[b, t, c.vocab] :=
  let x := addRows (embedding2 input_ids p.wte.weight) (rows p.wpe.weight t h)
  let x := p.h.foldl (fun x blk => blockMasked c hh keep blk x act) x
  linear3 (norm c p.ln_f x) p.wte.weight

/-- `gpt2` over padded sequences. -/
@[model]
def gpt2Masked (c : GPT2Config) {b t : Nat} (h : t ≤ c.block) (hh : c.n_head % c.n_head = 0)
    (p : GPT2Params c) (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) :
    T #[b, t, c.vocab] :=
  logitsMasked c h hh p.transformer input_ids attention_mask (fun y => geluTanh y)

/-- `gpt2Exact` over padded sequences. -/
@[model]
def gpt2ExactMasked (c : GPT2Config) {b t : Nat} (h : t ≤ c.block)
    (hh : c.n_head % c.n_head = 0) (p : GPT2Params c) (input_ids : IT #[b, t] c.vocab)
    (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  logitsMasked c h hh p.transformer input_ids attention_mask (fun y => gelu y)

/-! ## Decoding over key/value caches

A step model takes the `t` new tokens `idx` at the positions `pos` (typed `< block`: the
position table's rows are the caches' positions, so a position past `n_positions` is a type
error, not transformers' `IndexError`) and the keys and values of every block, stacked
(`T #[n_layer, b, n_head, block, head_dim]`: each block reads the stacks' heads and pushes its
updated caches at the end), and returns the new tokens' logits and the updated caches. Prefill
is a step at `0 … t-1`, then one token at a time. Every head has its own keys (`hh : n_head %
n_head = 0`, decided on the values as every hypothesis is). -/

/-- The key (or value) caches of every block, stacked. -/
abbrev Cache (c : GPT2Config) (b : Nat) : Type :=
  T #[c.n_layer, b, c.n_head, c.block, c.head_dim]

/-- One block's key and value caches. -/
abbrev LayerCache (c : GPT2Config) (b : Nat) : Type :=
  T #[b, c.n_head, c.block, c.head_dim] × T #[b, c.n_head, c.block, c.head_dim]

/-- The stream of a step and the stacks of caches. -/
abbrev Step (c : GPT2Config) (b t : Nat) : Type := T #[b, t, c.n_embd] × (Cache c b × Cache c b)

/-- A block's attention at a step: its output and its caches with the step's keys and values
written at `pos`, the queries attending to the cache positions `j ≤ pos[i]`. -/
def attentionStep (c : GPT2Config) {b t : Nat} (hl : 0 < c.n_layer)
    (hh : c.n_head % c.n_head = 0) (pos : IT #[t] c.block) (p : Attention c)
    (x : T #[b, t, c.n_embd]) (s : Step c b t) : T #[b, t, c.n_embd] × LayerCache c b :=
  let qkv := conv1d3 x p.c_attn.weight p.c_attn.bias
  let k := cacheWrite (stackHead s.snd.fst hl) (splitHeads (third qkv 1)) pos
  let v := cacheWrite (stackHead s.snd.snd hl) (splitHeads (third qkv 2)) pos
  let y := mergeHeads (cachedAttention (splitHeads (third qkv 0)) k v pos hh)
  (conv1d3 y p.c_proj.weight p.c_proj.bias, (k, v))

/-- `block` at a step, its caches pushed. -/
def blockStep (c : GPT2Config) {b t : Nat} (hl : 0 < c.n_layer) (hh : c.n_head % c.n_head = 0)
    (pos : IT #[t] c.block) (p : Block c) (act : T #[b, t, c.inner] → T #[b, t, c.inner])
    (s : Step c b t) : Step c b t :=
  let a := attentionStep c hl hh pos p.attn (norm c p.ln_1 s.fst) s
  let x := add s.fst a.fst
  (add x (mlp c p.mlp (norm c p.ln_2 x) act),
    (stackPush s.snd.fst a.snd.fst, stackPush s.snd.snd a.snd.snd))

/-- The new tokens' logits and the updated caches, the MLP's activation `act`. -/
def stepLogits (c : GPT2Config) {b t : Nat} (hl : 0 < c.n_layer)
    (hh : c.n_head % c.n_head = 0) (p : GPT2Model c) (idx : IT #[b, t] c.vocab)
    (pos : IT #[t] c.block) (k_cache v_cache : Cache c b)
    (act : T #[b, t, c.inner] → T #[b, t, c.inner]) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let x := addRows (embedding2 idx p.wte.weight) (embedding pos p.wpe.weight)
  let s := p.h.foldl (fun s blk => blockStep c hl hh pos blk act s) (x, (k_cache, v_cache))
  (linear3 (norm c p.ln_f s.fst) p.wte.weight, s.snd)

/-- One decoding step of `gpt2`: logits of the new tokens, the updated caches. -/
@[model]
def gpt2Step (c : GPT2Config) {b t : Nat} (hl : 0 < c.n_layer) (hh : c.n_head % c.n_head = 0)
    (p : GPT2Params c) (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block)
    (k_cache v_cache : Cache c b) : T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  stepLogits c hl hh p.transformer idx pos k_cache v_cache (fun y => geluTanh y)

/-- One decoding step of `gpt2Exact`. -/
@[model]
def gpt2ExactStep (c : GPT2Config) {b t : Nat} (hl : 0 < c.n_layer)
    (hh : c.n_head % c.n_head = 0) (p : GPT2Params c) (idx : IT #[b, t] c.vocab)
    (pos : IT #[t] c.block) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  stepLogits c hl hh p.transformer idx pos k_cache v_cache (fun y => gelu y)

/-! ## Training: the logits and the mean cross entropy against the next tokens

For `tyr train --weights DIR` (fine-tuning a checkpoint on a language-model task, which feeds
`idx` and `targets`): the models above with their loss. -/

/-- `gpt2`, trained: the embedding's gradient has the head's in it. -/
@[model]
def gpt2Train (c : GPT2Config) {b t : Nat} (h : t ≤ c.block) (p : GPT2Params c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let z := logits c h p.transformer idx (fun y => geluTanh y)
  (z, crossEntropy2 z targets)

/-- `gpt2Exact`, trained. -/
@[model]
def gpt2ExactTrain (c : GPT2Config) {b t : Nat} (h : t ≤ c.block) (p : GPT2Params c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let z := logits c h p.transformer idx (fun y => gelu y)
  (z, crossEntropy2 z targets)
