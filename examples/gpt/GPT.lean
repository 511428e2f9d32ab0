import Tyr

/-!
# GPT — a character-level transformer in the nanoGPT architecture

Token and position embeddings, `n_layer` pre-LayerNorm blocks of causal multi-head
self-attention and a 4× GELU MLP with residuals, a final LayerNorm and a language-model head
tied to the token embedding. Shapes in the comments of nanoGPT (`# (B, nh, T, hs)`) are
types here: the width is `n_head * head_dim` by construction, so a width that the heads do
not divide cannot even be written, and a wrong projection or residual does not type-check.
-/

open torch

/-- Sizes of the model (nanoGPT's `GPTConfig`, with the width given by its factors). -/
structure GPTConfig where
  /-- Vocabulary size. -/
  vocab : Nat
  /-- Longest context. -/
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
def GPTConfig.n_embd (c : GPTConfig) : Nat := c.n_head * c.head_dim

/-- GPT-2 scales residual projections by `1/√(2·n_layer)`. -/
def GPTConfig.residStd (c : GPTConfig) : Float := 0.02 / Float.sqrt (2.0 * c.n_layer.toFloat)

/-- Causal self-attention: a fused q, k, v projection and an output projection. -/
structure Attention (c : GPTConfig) where
  c_attn : T #[3 * c.n_embd, c.n_embd] := normal 0.02
  c_attn_bias : T #[3 * c.n_embd] := zeros
  c_proj : T #[c.n_embd, c.n_embd] := normal c.residStd
  c_proj_bias : T #[c.n_embd] := zeros
  deriving TensorStruct

/-- The 4× GELU MLP. -/
structure MLP (c : GPTConfig) where
  c_fc : T #[4 * c.n_embd, c.n_embd] := normal 0.02
  c_fc_bias : T #[4 * c.n_embd] := zeros
  c_proj : T #[c.n_embd, 4 * c.n_embd] := normal c.residStd
  c_proj_bias : T #[c.n_embd] := zeros
  deriving TensorStruct

/-- One pre-LayerNorm transformer block. -/
structure Block (c : GPTConfig) where
  ln_1 : T #[c.n_embd] := ones
  ln_1_bias : T #[c.n_embd] := zeros
  attn : Attention c
  ln_2 : T #[c.n_embd] := ones
  ln_2_bias : T #[c.n_embd] := zeros
  mlp : MLP c
  deriving TensorStruct

/-- All parameters; the blocks are a stack typed by the layer count. -/
structure GPTParams (c : GPTConfig) where
  wte : T #[c.vocab, c.n_embd] := normal 0.02
  wpe : T #[c.block, c.n_embd] := normal 0.02
  blocks : Vector (Block c) c.n_layer
  ln_f : T #[c.n_embd] := ones
  ln_f_bias : T #[c.n_embd] := zeros
  deriving TensorStruct

/-- Multi-head causal self-attention of a batch of `b` sequences of length `t`. -/
def attention (c : GPTConfig) {b t : Nat} (p : Attention c) (x : T #[b, t, c.n_embd]) :
    T #[b, t, c.n_embd] :=
  let qkv := linearBias3 x p.c_attn p.c_attn_bias
  let q := splitHeads (third qkv 0)
  let k := splitHeads (third qkv 1)
  let v := splitHeads (third qkv 2)
  let y := mergeHeads (causalAttention q k v c.dropout)
  dropout (linearBias3 y p.c_proj p.c_proj_bias) c.dropout

/-- The position-wise MLP. -/
def mlp (c : GPTConfig) {b t : Nat} (p : MLP c) (x : T #[b, t, c.n_embd]) :
    T #[b, t, c.n_embd] :=
  let h := gelu (linearBias3 x p.c_fc p.c_fc_bias)
  dropout (linearBias3 h p.c_proj p.c_proj_bias) c.dropout

/-- `x + attn(ln_1 x)`, then `x + mlp(ln_2 x)`. -/
def block (c : GPTConfig) {b t : Nat} (p : Block c) (x : T #[b, t, c.n_embd]) :
    T #[b, t, c.n_embd] :=
  let x := add x (attention c p.attn (layerNorm3 x p.ln_1 p.ln_1_bias))
  add x (mlp c p.mlp (layerNorm3 x p.ln_2 p.ln_2_bias))

/-- Next-token logits for every position of `b` sequences of `t ≤ block` tokens. -/
def logits (c : GPTConfig) {b t : Nat} (h : t ≤ c.block) (p : GPTParams c)
    (idx : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  let tok := embedding2 idx p.wte
  let x := dropout (addRows tok (rows p.wpe t h)) c.dropout
  let x := p.blocks.foldl (fun x blk => block c blk x) x
  linear3 (layerNorm3 x p.ln_f p.ln_f_bias) p.wte

/-- Sampling: logits for a context of `t` tokens. -/
@[model]
def gptLogits (c : GPTConfig) {b t : Nat} (h : t ≤ c.block) (p : GPTParams c)
    (idx : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  logits c h p idx

/-- Training: logits and the mean cross entropy against the next tokens. -/
@[model]
def gpt (c : GPTConfig) {b t : Nat} (h : t ≤ c.block) (p : GPTParams c)
    (idx : IT #[b, t] c.vocab) (targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let z := logits c h p idx
  (z, crossEntropy2 z targets)

/-! ## Sampling over key/value caches

`gptStep` takes the `t` new tokens `idx` at the positions `pos` (typed `< block`: the position
table's rows are the caches' positions) and the keys and values of every block, stacked
(`T #[n_layer, b, n_head, block, head_dim]`: each block reads the stacks' heads and pushes its
updated caches at the end), and returns the new tokens' logits and the updated caches: a
prompt's prefill, then one token a step, each step's work its own token's (`sample.step_model`).
Every head has its own keys (`hh : n_head % n_head = 0`, decided on the values). -/

/-- The key (or value) caches of every block, stacked. -/
abbrev Cache (c : GPTConfig) (b : Nat) : Type :=
  T #[c.n_layer, b, c.n_head, c.block, c.head_dim]

/-- The stream of a step and the stacks of caches. -/
abbrev Step (c : GPTConfig) (b t : Nat) : Type := T #[b, t, c.n_embd] × (Cache c b × Cache c b)

/-- `block` at a step: attention over the caches with this step's keys and values written at
`pos` (query `i` sees the cache positions `j ≤ pos[i]`), the caches pushed. -/
def blockStep (c : GPTConfig) {b t : Nat} (hl : 0 < c.n_layer) (hh : c.n_head % c.n_head = 0)
    (pos : IT #[t] c.block) (p : Block c) (s : Step c b t) : Step c b t :=
  let qkv := linearBias3 (layerNorm3 s.fst p.ln_1 p.ln_1_bias) p.attn.c_attn p.attn.c_attn_bias
  let k := cacheWrite (stackHead s.snd.fst hl) (splitHeads (third qkv 1)) pos
  let v := cacheWrite (stackHead s.snd.snd hl) (splitHeads (third qkv 2)) pos
  let y := mergeHeads (cachedAttention (splitHeads (third qkv 0)) k v pos hh)
  let x := add s.fst (linearBias3 y p.attn.c_proj p.attn.c_proj_bias)
  (add x (mlp c p.mlp (layerNorm3 x p.ln_2 p.ln_2_bias)),
    (stackPush s.snd.fst k, stackPush s.snd.snd v))

/-- One decoding step: the new tokens' logits and the updated caches. -/
@[model]
def gptStep (c : GPTConfig) {b t : Nat} (hl : 0 < c.n_layer) (hh : c.n_head % c.n_head = 0)
    (p : GPTParams c) (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block)
    (k_cache v_cache : Cache c b) : T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let x := addRows (embedding2 idx p.wte) (embedding pos p.wpe)
  let s := p.blocks.foldl (fun s blk => blockStep c hl hh pos blk s) (x, (k_cache, v_cache))
  (linear3 (layerNorm3 s.fst p.ln_f p.ln_f_bias) p.wte, s.snd)
