import Tyr

/-!
# Llama, Mistral, Qwen2 and Qwen3 — the decoders of Hugging Face's checkpoints, by their keys

Hugging Face's `LlamaForCausalLM` and the three families built on it, each a `@[model]` per
`model_type`: token embedding; `n_layer` pre-norm layers of causal grouped-query self-attention
with rotary embedding (`rope`: `rope_theta`, and Llama 3's frequency scaling where
`rope_type = "llama3"`) and a SwiGLU MLP `down (silu (gate x) · up x)`, each around a
residual; a final RMS norm with a learned gain and the language-model head. The families
differ in their attention alone:

* `llama`: no biases;
* `mistral`: Llama's layer with sliding-window attention, each query seeing itself and the
  `window - 1` positions before it (transformers' `sliding_window = window`; a window as long
  as the context is none, and `tyr run` reads a `null` window so);
* `qwen2`: biases on the query, key and value projections (not on the output);
* `qwen3`: no biases, and an RMS norm with a learned gain over each head of the queries and
  of the keys (`q_norm`, `k_norm`: as wide as a head, not as the model), before rotary.

Each has a `…Tied` twin for checkpoints whose head is the token embedding
(`tie_word_embeddings`: no `lm_head.weight` in the checkpoint). Parameter paths are the keys of
transformers' `state_dict()` (`model.layers.0.self_attn.q_proj.weight`), so a checkpoint loads
by name; the width of the heads `n_head * head_dim` need not be the model's `hidden` (Qwen3's
`head_dim` is its own), and `head_dim` is even (`hrot`: rotary turns pairs of halves), so the
types hold it as `2 * c.half`. Initialisation is transformers': normal(0, 0.02) matrices and
tables, norm gains one, biases zero. `config.json` beside this file holds a small model's
sizes; `tyr run --weights DIR` fills them from the checkpoint's own `config.json`.
-/

open torch

/-- Sizes and constants of a model (transformers' `LlamaConfig` and its kin). -/
structure LlamaConfig where
  /-- Vocabulary size (`vocab_size`). -/
  vocab : Nat
  /-- The longest context (`max_position_embeddings`). -/
  max_position : Nat
  /-- Decoder layers (`num_hidden_layers`). -/
  n_layer : Nat
  /-- The residual stream's width (`hidden_size`). -/
  hidden : Nat
  /-- The MLP's width (`intermediate_size`). -/
  intermediate : Nat
  /-- Query heads (`num_attention_heads`). -/
  n_head : Nat
  /-- Key/value heads (`num_key_value_heads`; the query heads share them in groups). -/
  n_kv_head : Nat
  /-- A head's width (`head_dim`, else `hidden_size / num_attention_heads`). -/
  head_dim : Nat
  /-- The RMS norms' epsilon (`rms_norm_eps`). -/
  eps : Float
  /-- Rotary base (`rope_theta`). -/
  rope_theta : Float
  /-- Llama 3's frequency scaling: the factor (`rope_scaling.factor`; 1 scales nothing). -/
  rope_factor : Float
  /-- Llama 3's `low_freq_factor`. -/
  rope_low : Float
  /-- Llama 3's `high_freq_factor`. -/
  rope_high : Float
  /-- Llama 3's `original_max_position_embeddings`. -/
  rope_original : Nat
  /-- Mistral's attention window in positions, the query's own included (`sliding_window`). -/
  window : Nat
  /-- Positions of a decoding step's key/value caches (the step models'; not in a checkpoint's
  config: the longest context `tyr` decodes, at most `max_position`). -/
  cache : Nat

/-- Half a head's width: rotary pairs the halves. -/
def LlamaConfig.half (c : LlamaConfig) : Nat := c.head_dim / 2

/-- A head's width, even by construction (`= head_dim` under `hrot`). -/
def LlamaConfig.hd (c : LlamaConfig) : Nat := 2 * c.half

/-- The width of the queries: `n_head` heads. -/
def LlamaConfig.q_dim (c : LlamaConfig) : Nat := c.n_head * c.hd

/-- The width of the keys (and of the values): `n_kv_head` heads. -/
def LlamaConfig.kv_dim (c : LlamaConfig) : Nat := c.n_kv_head * c.hd

/-- `nn.Linear(i, o, bias=False)` as transformers initialises it. -/
structure Linear (o i : Nat) where
  weight : T #[o, i] := normal 0.02
  deriving TensorStruct

/-- `nn.Linear(i, o)` with a bias. -/
structure LinearBias (o i : Nat) where
  weight : T #[o, i] := normal 0.02
  bias : T #[o] := zeros
  deriving TensorStruct

/-- `nn.Embedding(n, d)`. -/
structure Embedding (n d : Nat) where
  weight : T #[n, d] := normal 0.02
  deriving TensorStruct

/-- `LlamaRMSNorm(d)`: its gain. -/
structure RMSNorm (d : Nat) where
  weight : T #[d] := ones
  deriving TensorStruct

/-- The SwiGLU MLP's projections. -/
structure MLP (c : LlamaConfig) where
  gate_proj : Linear c.intermediate c.hidden
  up_proj : Linear c.intermediate c.hidden
  down_proj : Linear c.hidden c.intermediate
  deriving TensorStruct

/-- Llama's (and Mistral's) attention: four projections without biases. -/
structure Attention (c : LlamaConfig) where
  q_proj : Linear c.q_dim c.hidden
  k_proj : Linear c.kv_dim c.hidden
  v_proj : Linear c.kv_dim c.hidden
  o_proj : Linear c.hidden c.q_dim
  deriving TensorStruct

/-- Qwen2's attention: biases on the query, key and value projections. -/
structure Qwen2Attention (c : LlamaConfig) where
  q_proj : LinearBias c.q_dim c.hidden
  k_proj : LinearBias c.kv_dim c.hidden
  v_proj : LinearBias c.kv_dim c.hidden
  o_proj : Linear c.hidden c.q_dim
  deriving TensorStruct

/-- Qwen3's attention: Llama's projections and a gain per head width for queries and keys. -/
structure Qwen3Attention (c : LlamaConfig) where
  q_proj : Linear c.q_dim c.hidden
  k_proj : Linear c.kv_dim c.hidden
  v_proj : Linear c.kv_dim c.hidden
  o_proj : Linear c.hidden c.q_dim
  q_norm : RMSNorm c.hd
  k_norm : RMSNorm c.hd
  deriving TensorStruct

/-- A decoder layer of Llama or Mistral. -/
structure Layer (c : LlamaConfig) where
  self_attn : Attention c
  mlp : MLP c
  input_layernorm : RMSNorm c.hidden
  post_attention_layernorm : RMSNorm c.hidden
  deriving TensorStruct

/-- A decoder layer of Qwen2. -/
structure Qwen2Layer (c : LlamaConfig) where
  self_attn : Qwen2Attention c
  mlp : MLP c
  input_layernorm : RMSNorm c.hidden
  post_attention_layernorm : RMSNorm c.hidden
  deriving TensorStruct

/-- A decoder layer of Qwen3. -/
structure Qwen3Layer (c : LlamaConfig) where
  self_attn : Qwen3Attention c
  mlp : MLP c
  input_layernorm : RMSNorm c.hidden
  post_attention_layernorm : RMSNorm c.hidden
  deriving TensorStruct

/-- `LlamaModel` (and `MistralModel`): the embedding, the layers and the final norm. -/
structure LlamaModel (c : LlamaConfig) where
  embed_tokens : Embedding c.vocab c.hidden
  layers : Vector (Layer c) c.n_layer
  norm : RMSNorm c.hidden
  deriving TensorStruct

/-- `Qwen2Model`. -/
structure Qwen2Model (c : LlamaConfig) where
  embed_tokens : Embedding c.vocab c.hidden
  layers : Vector (Qwen2Layer c) c.n_layer
  norm : RMSNorm c.hidden
  deriving TensorStruct

/-- `Qwen3Model`. -/
structure Qwen3Model (c : LlamaConfig) where
  embed_tokens : Embedding c.vocab c.hidden
  layers : Vector (Qwen3Layer c) c.n_layer
  norm : RMSNorm c.hidden
  deriving TensorStruct

/-- `LlamaForCausalLM` with its own head. -/
structure LlamaParams (c : LlamaConfig) where
  model : LlamaModel c
  lm_head : Linear c.vocab c.hidden
  deriving TensorStruct

/-- `LlamaForCausalLM` whose head is the embedding (`tie_word_embeddings`). -/
structure LlamaTiedParams (c : LlamaConfig) where
  model : LlamaModel c
  deriving TensorStruct

/-- `Qwen2ForCausalLM` with its own head. -/
structure Qwen2Params (c : LlamaConfig) where
  model : Qwen2Model c
  lm_head : Linear c.vocab c.hidden
  deriving TensorStruct

/-- `Qwen2ForCausalLM` whose head is the embedding. -/
structure Qwen2TiedParams (c : LlamaConfig) where
  model : Qwen2Model c
  deriving TensorStruct

/-- `Qwen3ForCausalLM` with its own head. -/
structure Qwen3Params (c : LlamaConfig) where
  model : Qwen3Model c
  lm_head : Linear c.vocab c.hidden
  deriving TensorStruct

/-- `Qwen3ForCausalLM` whose head is the embedding. -/
structure Qwen3TiedParams (c : LlamaConfig) where
  model : Qwen3Model c
  deriving TensorStruct

/-! ## The shared pieces -/

/-- The RMS norm of every position, with its gain. -/
def rms (c : LlamaConfig) {b t d : Nat} (n : RMSNorm d) (x : T #[b, t, d]) : T #[b, t, d] :=
  rmsNormGain3 x n.weight c.eps

/-- A projection of every position without a bias. -/
def proj {o i b t : Nat} (l : Linear o i) (x : T #[b, t, i]) : T #[b, t, o] :=
  linear3 x l.weight

/-- A projection of every position with its bias. -/
def projBias {o i b t : Nat} (l : LinearBias o i) (x : T #[b, t, i]) : T #[b, t, o] :=
  linearBias3 x l.weight l.bias

/-- `x + down (silu (gate (norm x)) · up (norm x))`: the MLP around its residual. -/
def withMLP (c : LlamaConfig) {b t : Nat} (p : MLP c) (n : RMSNorm c.hidden)
    (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let h := rms c n x
  add x (proj p.down_proj (mul (silu (proj p.gate_proj h)) (proj p.up_proj h)))

/-- Queries, keys and values of `t` positions, in heads (before rotary). -/
abbrev QKV (c : LlamaConfig) (b t : Nat) : Type :=
  T #[b, c.n_head, t, c.hd] × (T #[b, c.n_kv_head, t, c.hd] × T #[b, c.n_kv_head, t, c.hd])

/-- Queries or keys turned by rotary at the positions `0 … t-1` of a context of at most
`max_position` (`hT`), with the config's frequencies. -/
def turn (c : LlamaConfig) {b h t : Nat} (hT : t ≤ c.max_position)
    (x : T #[b, h, t, c.hd]) : T #[b, h, t, c.hd] :=
  rope x hT c.rope_theta c.rope_factor c.rope_low c.rope_high c.rope_original

/-- Causal grouped-query attention of rotated queries and keys, the heads merged again. -/
def attend (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (a : QKV c b t) : T #[b, t, c.q_dim] :=
  mergeHeads (gqaAttention (turn c hT a.fst) (turn c hT a.snd.fst) a.snd.snd hkv)

/-- Next-token logits of the final normalised stream through a head `w`. -/
def head (c : LlamaConfig) {b t : Nat} (n : RMSNorm c.hidden) (w : T #[c.vocab, c.hidden])
    (x : T #[b, t, c.hidden]) : T #[b, t, c.vocab] :=
  linear3 (rms c n x) w

/-! ### Decoding over key/value caches

A step model takes the `t` new tokens `idx` at the positions `pos` (typed `< cache`, the
caches' length) and the caches of every layer, stacked (`T #[n_layer, b, n_kv_head, cache,
hd]`: each layer reads the stacks' heads and pushes its updated caches at the end), and returns
their logits and the updated caches. Prefill is a step at `0 … t-1`, then one token at a time;
the keys are cached rotated, as transformers caches them. -/

/-- The key (or value) caches of every layer, stacked. -/
abbrev Cache (c : LlamaConfig) (b : Nat) : Type :=
  T #[c.n_layer, b, c.n_kv_head, c.cache, c.hd]

/-- One layer's key and value caches. -/
abbrev LayerCache (c : LlamaConfig) (b : Nat) : Type :=
  T #[b, c.n_kv_head, c.cache, c.hd] × T #[b, c.n_kv_head, c.cache, c.hd]

/-- The stream of a step and the stacks of caches. -/
abbrev Step (c : LlamaConfig) (b t : Nat) : Type := T #[b, t, c.hidden] × (Cache c b × Cache c b)

/-- Queries or keys turned by rotary at the positions `pos`. -/
def turnAt (c : LlamaConfig) {b h t : Nat} (pos : IT #[t] c.cache) (x : T #[b, h, t, c.hd]) :
    T #[b, h, t, c.hd] :=
  ropeAt x pos c.rope_theta c.rope_factor c.rope_low c.rope_high c.rope_original

/-- This layer's caches (the stacks' heads) with the step's rotated keys and its values
written at `pos`. -/
def written (c : LlamaConfig) {b t : Nat} (hl : 0 < c.n_layer) (pos : IT #[t] c.cache)
    (a : QKV c b t) (s : Step c b t) : LayerCache c b :=
  (cacheWrite (stackHead s.snd.fst hl) (turnAt c pos a.snd.fst) pos,
    cacheWrite (stackHead s.snd.snd hl) a.snd.snd pos)

/-- The step after a layer's attention `y`: the output projection and the MLP around their
residuals, this layer's caches pushed. -/
def stepOn (c : LlamaConfig) {b t : Nat} (o : Linear c.hidden c.q_dim) (m : MLP c)
    (n : RMSNorm c.hidden) (y : T #[b, c.n_head, t, c.hd]) (kv : LayerCache c b)
    (s : Step c b t) : Step c b t :=
  (withMLP c m n (add s.fst (proj o (mergeHeads y))),
    (stackPush s.snd.fst kv.fst, stackPush s.snd.snd kv.snd))

/-- A layer's step with attention over the whole cache (`j ≤ pos[i]`). -/
def cachedLayer (c : LlamaConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (pos : IT #[t] c.cache) (o : Linear c.hidden c.q_dim)
    (m : MLP c) (n : RMSNorm c.hidden) (a : QKV c b t) (s : Step c b t) : Step c b t :=
  let kv := written c hl pos a s
  stepOn c o m n (cachedAttention (turnAt c pos a.fst) kv.fst kv.snd pos hkv) kv s

/-! ## Llama -/

/-- Llama's queries, keys and values of the normalised stream. -/
def llamaQKV (c : LlamaConfig) {b t : Nat} (p : Attention c) (x : T #[b, t, c.hidden]) :
    QKV c b t :=
  (splitHeads (proj p.q_proj x), (splitHeads (proj p.k_proj x), splitHeads (proj p.v_proj x)))

/-- A Llama layer: attention, then the MLP, each pre-normed around a residual. -/
def llamaLayer (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Layer c) (x : T #[b, t, c.hidden]) :
    T #[b, t, c.hidden] :=
  let a := llamaQKV c p.self_attn (rms c p.input_layernorm x)
  withMLP c p.mlp p.post_attention_layernorm (add x (proj p.self_attn.o_proj (attend c hT hkv a)))

/-- The stream after every Llama layer, before the final norm. -/
def llamaStream (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : LlamaModel c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => llamaLayer c hT hkv l x) (embedding2 input_ids p.embed_tokens.weight)

/-- A Llama layer at a decoding step. -/
def llamaLayerStep (c : LlamaConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (pos : IT #[t] c.cache) (p : Layer c) (s : Step c b t) :
    Step c b t :=
  cachedLayer c hl hkv pos p.self_attn.o_proj p.mlp p.post_attention_layernorm
    (llamaQKV c p.self_attn (rms c p.input_layernorm s.fst)) s

/-- The step's stream after every Llama layer, and the updated caches. -/
def llamaSteps (c : LlamaConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (p : LlamaModel c) (idx : IT #[b, t] c.vocab)
    (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) : Step c b t :=
  p.layers.foldl (fun s l => llamaLayerStep c hl hkv pos l s)
    (embedding2 idx p.embed_tokens.weight, (k_cache, v_cache))

/-- Llama's next-token logits for every position of `b` sequences of `t` tokens. -/
@[model]
def llama (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position) (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (p : LlamaParams c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (llamaStream c hT hkv p.model input_ids)

/-- `llama` with the head tied to the embedding. -/
@[model]
def llamaTied (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : LlamaTiedParams c)
    (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (llamaStream c hT hkv p.model input_ids)

/-- One decoding step of `llama`: logits of the new tokens, the updated caches. -/
@[model]
def llamaStep (c : LlamaConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hl : 0 < c.n_layer) (p : LlamaParams c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := llamaSteps c hl hkv p.model idx pos k_cache v_cache
  (head c p.model.norm p.lm_head.weight s.fst, s.snd)

/-- One decoding step of `llamaTied`. -/
@[model]
def llamaTiedStep (c : LlamaConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hl : 0 < c.n_layer) (p : LlamaTiedParams c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := llamaSteps c hl hkv p.model idx pos k_cache v_cache
  (head c p.model.norm p.model.embed_tokens.weight s.fst, s.snd)

/-! ## Mistral: Llama's layers over a sliding window -/

/-- A Mistral layer: each query sees itself and the `window - 1` keys before it. -/
def mistralLayer (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position) (p : Layer c)
    (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let a := llamaQKV c p.self_attn (rms c p.input_layernorm x)
  let y := windowAttention (turn c hT a.fst) (turn c hT a.snd.fst) a.snd.snd (c.window - 1) hw
    hT hkv
  withMLP c p.mlp p.post_attention_layernorm (add x (proj p.self_attn.o_proj (mergeHeads y)))

/-- The stream after every Mistral layer. -/
def mistralStream (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position) (p : LlamaModel c)
    (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => mistralLayer c hT hkv hw l x)
    (embedding2 input_ids p.embed_tokens.weight)

/-- A Mistral layer at a decoding step, over the window of the cache (`hw`: the window fits
the cache; a window as long as the cache is none). -/
def mistralLayerStep (c : LlamaConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.cache) (pos : IT #[t] c.cache)
    (p : Layer c) (s : Step c b t) : Step c b t :=
  let a := llamaQKV c p.self_attn (rms c p.input_layernorm s.fst)
  let kv := written c hl pos a s
  let y := cachedWindowAttention (turnAt c pos a.fst) kv.fst kv.snd pos (c.window - 1) hw hkv
  stepOn c p.self_attn.o_proj p.mlp p.post_attention_layernorm y kv s

/-- The step's stream after every Mistral layer, and the updated caches. -/
def mistralSteps (c : LlamaConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.cache) (p : LlamaModel c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    Step c b t :=
  p.layers.foldl (fun s l => mistralLayerStep c hl hkv hw pos l s)
    (embedding2 idx p.embed_tokens.weight, (k_cache, v_cache))

/-- Mistral's next-token logits. -/
@[model]
def mistral (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (p : LlamaParams c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (mistralStream c hT hkv hw p.model input_ids)

/-- `mistral` with the head tied to the embedding. -/
@[model]
def mistralTied (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (p : LlamaTiedParams c)
    (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (mistralStream c hT hkv hw p.model input_ids)

/-- One decoding step of `mistral`. -/
@[model]
def mistralStep (c : LlamaConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hl : 0 < c.n_layer) (hw : c.window - 1 ≤ c.cache)
    (p : LlamaParams c) (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache)
    (k_cache v_cache : Cache c b) : T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := mistralSteps c hl hkv hw p.model idx pos k_cache v_cache
  (head c p.model.norm p.lm_head.weight s.fst, s.snd)

/-- One decoding step of `mistralTied`. -/
@[model]
def mistralTiedStep (c : LlamaConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hl : 0 < c.n_layer) (hw : c.window - 1 ≤ c.cache)
    (p : LlamaTiedParams c) (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache)
    (k_cache v_cache : Cache c b) : T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := mistralSteps c hl hkv hw p.model idx pos k_cache v_cache
  (head c p.model.norm p.model.embed_tokens.weight s.fst, s.snd)

/-! ## Qwen2: biases on queries, keys and values -/

/-- Qwen2's queries, keys and values, each with its bias. -/
def qwen2QKV (c : LlamaConfig) {b t : Nat} (p : Qwen2Attention c) (x : T #[b, t, c.hidden]) :
    QKV c b t :=
  (splitHeads (projBias p.q_proj x),
    (splitHeads (projBias p.k_proj x), splitHeads (projBias p.v_proj x)))

/-- A Qwen2 layer. -/
def qwen2Layer (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2Layer c) (x : T #[b, t, c.hidden]) :
    T #[b, t, c.hidden] :=
  let a := qwen2QKV c p.self_attn (rms c p.input_layernorm x)
  withMLP c p.mlp p.post_attention_layernorm (add x (proj p.self_attn.o_proj (attend c hT hkv a)))

/-- The stream after every Qwen2 layer. -/
def qwen2Stream (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2Model c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => qwen2Layer c hT hkv l x) (embedding2 input_ids p.embed_tokens.weight)

/-- The step's stream after every Qwen2 layer, and the updated caches. -/
def qwen2Steps (c : LlamaConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2Model c) (idx : IT #[b, t] c.vocab)
    (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) : Step c b t :=
  p.layers.foldl (fun s l => cachedLayer c hl hkv pos l.self_attn.o_proj l.mlp
      l.post_attention_layernorm (qwen2QKV c l.self_attn (rms c l.input_layernorm s.fst)) s)
    (embedding2 idx p.embed_tokens.weight, (k_cache, v_cache))

/-- Qwen2's next-token logits. -/
@[model]
def qwen2 (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position) (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2Params c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (qwen2Stream c hT hkv p.model input_ids)

/-- `qwen2` with the head tied to the embedding. -/
@[model]
def qwen2Tied (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2TiedParams c)
    (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (qwen2Stream c hT hkv p.model input_ids)

/-- One decoding step of `qwen2`. -/
@[model]
def qwen2Step (c : LlamaConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hl : 0 < c.n_layer) (p : Qwen2Params c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := qwen2Steps c hl hkv p.model idx pos k_cache v_cache
  (head c p.model.norm p.lm_head.weight s.fst, s.snd)

/-- One decoding step of `qwen2Tied`. -/
@[model]
def qwen2TiedStep (c : LlamaConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hl : 0 < c.n_layer) (p : Qwen2TiedParams c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := qwen2Steps c hl hkv p.model idx pos k_cache v_cache
  (head c p.model.norm p.model.embed_tokens.weight s.fst, s.snd)

/-! ## Qwen3: a norm over each head of the queries and keys -/

/-- Qwen3's queries, keys and values: the queries and keys normalised per head (a gain as wide
as a head, not as the model), before rotary. -/
def qwen3QKV (c : LlamaConfig) {b t : Nat} (p : Qwen3Attention c) (x : T #[b, t, c.hidden]) :
    QKV c b t :=
  (rmsNormScale4 (splitHeads (proj p.q_proj x)) p.q_norm.weight c.eps,
    (rmsNormScale4 (splitHeads (proj p.k_proj x)) p.k_norm.weight c.eps,
      splitHeads (proj p.v_proj x)))

/-- A Qwen3 layer. -/
def qwen3Layer (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3Layer c) (x : T #[b, t, c.hidden]) :
    T #[b, t, c.hidden] :=
  let a := qwen3QKV c p.self_attn (rms c p.input_layernorm x)
  withMLP c p.mlp p.post_attention_layernorm (add x (proj p.self_attn.o_proj (attend c hT hkv a)))

/-- The stream after every Qwen3 layer. -/
def qwen3Stream (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3Model c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => qwen3Layer c hT hkv l x) (embedding2 input_ids p.embed_tokens.weight)

/-- The step's stream after every Qwen3 layer, and the updated caches. -/
def qwen3Steps (c : LlamaConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3Model c) (idx : IT #[b, t] c.vocab)
    (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) : Step c b t :=
  p.layers.foldl (fun s l => cachedLayer c hl hkv pos l.self_attn.o_proj l.mlp
      l.post_attention_layernorm (qwen3QKV c l.self_attn (rms c l.input_layernorm s.fst)) s)
    (embedding2 idx p.embed_tokens.weight, (k_cache, v_cache))

/-- Qwen3's next-token logits. -/
@[model]
def qwen3 (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position) (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3Params c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (qwen3Stream c hT hkv p.model input_ids)

/-- `qwen3` with the head tied to the embedding. -/
@[model]
def qwen3Tied (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3TiedParams c)
    (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (qwen3Stream c hT hkv p.model input_ids)

/-- One decoding step of `qwen3`. -/
@[model]
def qwen3Step (c : LlamaConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hl : 0 < c.n_layer) (p : Qwen3Params c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := qwen3Steps c hl hkv p.model idx pos k_cache v_cache
  (head c p.model.norm p.lm_head.weight s.fst, s.snd)

/-- One decoding step of `qwen3Tied`. -/
@[model]
def qwen3TiedStep (c : LlamaConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hl : 0 < c.n_layer) (p : Qwen3TiedParams c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := qwen3Steps c hl hkv p.model idx pos k_cache v_cache
  (head c p.model.norm p.model.embed_tokens.weight s.fst, s.snd)

/-! ## Training: the logits and the mean cross entropy against the next tokens

For `tyr train --weights DIR` (fine-tuning a checkpoint, `shard_lm` on your own data): the
models above with a language-model task's `idx` and `targets`. -/

/-- The logits and their mean cross entropy against `targets`. -/
def withLoss {b t v : Nat} (z : T #[b, t, v]) (targets : IT #[b, t] v) : T #[b, t, v] × T #[] :=
  (z, crossEntropy2 z targets)

/-- `llama`, trained. -/
@[model]
def llamaTrain (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : LlamaParams c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  withLoss (head c p.model.norm p.lm_head.weight (llamaStream c hT hkv p.model idx)) targets

/-- `llamaTied`, trained: the embedding's gradient has the head's in it. -/
@[model]
def llamaTiedTrain (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : LlamaTiedParams c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  withLoss (head c p.model.norm p.model.embed_tokens.weight (llamaStream c hT hkv p.model idx))
    targets

/-- `mistral`, trained. -/
@[model]
def mistralTrain (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (p : LlamaParams c) (idx targets : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] × T #[] :=
  withLoss (head c p.model.norm p.lm_head.weight (mistralStream c hT hkv hw p.model idx)) targets

/-- `mistralTied`, trained. -/
@[model]
def mistralTiedTrain (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (p : LlamaTiedParams c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  withLoss (head c p.model.norm p.model.embed_tokens.weight
    (mistralStream c hT hkv hw p.model idx)) targets

/-- `qwen2`, trained. -/
@[model]
def qwen2Train (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2Params c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  withLoss (head c p.model.norm p.lm_head.weight (qwen2Stream c hT hkv p.model idx)) targets

/-- `qwen2Tied`, trained. -/
@[model]
def qwen2TiedTrain (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2TiedParams c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  withLoss (head c p.model.norm p.model.embed_tokens.weight (qwen2Stream c hT hkv p.model idx))
    targets

/-- `qwen3`, trained. -/
@[model]
def qwen3Train (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3Params c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  withLoss (head c p.model.norm p.lm_head.weight (qwen3Stream c hT hkv p.model idx)) targets

/-- `qwen3Tied`, trained. -/
@[model]
def qwen3TiedTrain (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3TiedParams c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  withLoss (head c p.model.norm p.model.embed_tokens.weight (qwen3Stream c hT hkv p.model idx))
    targets

/-! ## Padded batches: the logits of sequences of different lengths

`…Masked` takes Hugging Face's `attention_mask : IT #[b, t] 2` beside `input_ids` (1 a token,
0 padding, on either side): no query attends to padding, positions are `0 … t-1` as
transformers gives them without `position_ids`, and a padding position's logits are not
meant to be read. `tyr run` picks it when the inputs hold an `attention_mask`. -/

/-- Attention of rotated queries and keys over the real tokens, the heads merged again. -/
def attendMasked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (keep : IT #[b, t] 2) (a : QKV c b t) :
    T #[b, t, c.q_dim] :=
  mergeHeads (paddedCausalAttention (turn c hT a.fst) (turn c hT a.snd.fst) a.snd.snd keep hkv)

/-- The stream after every Llama layer over padded sequences. -/
def llamaMaskedStream (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : LlamaModel c) (input_ids : IT #[b, t] c.vocab)
    (keep : IT #[b, t] 2) : T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => withMLP c l.mlp l.post_attention_layernorm (add x
      (proj l.self_attn.o_proj
        (attendMasked c hT hkv keep (llamaQKV c l.self_attn (rms c l.input_layernorm x))))))
    (embedding2 input_ids p.embed_tokens.weight)

/-- The stream after every Qwen2 layer over padded sequences. -/
def qwen2MaskedStream (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2Model c) (input_ids : IT #[b, t] c.vocab)
    (keep : IT #[b, t] 2) : T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => withMLP c l.mlp l.post_attention_layernorm (add x
      (proj l.self_attn.o_proj
        (attendMasked c hT hkv keep (qwen2QKV c l.self_attn (rms c l.input_layernorm x))))))
    (embedding2 input_ids p.embed_tokens.weight)

/-- The stream after a run of Qwen3 layers over padded sequences. -/
def qwen3MaskedLayers (c : LlamaConfig) {b t n : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (layers : Vector (Qwen3Layer c) n)
    (keep : IT #[b, t] 2) (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  layers.foldl (fun x l => withMLP c l.mlp l.post_attention_layernorm (add x
      (proj l.self_attn.o_proj
        (attendMasked c hT hkv keep (qwen3QKV c l.self_attn (rms c l.input_layernorm x))))))
    x

/-- The stream after every Qwen3 layer over padded sequences. -/
def qwen3MaskedStream (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3Model c) (input_ids : IT #[b, t] c.vocab)
    (keep : IT #[b, t] 2) : T #[b, t, c.hidden] :=
  qwen3MaskedLayers c hT hkv p.layers keep (embedding2 input_ids p.embed_tokens.weight)

/-- `llama` over padded sequences. -/
@[model]
def llamaMasked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : LlamaParams c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (llamaMaskedStream c hT hkv p.model input_ids
    attention_mask)

/-- `llamaTied` over padded sequences. -/
@[model]
def llamaTiedMasked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : LlamaTiedParams c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (llamaMaskedStream c hT hkv p.model input_ids
    attention_mask)

/-- `qwen2` over padded sequences. -/
@[model]
def qwen2Masked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2Params c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (qwen2MaskedStream c hT hkv p.model input_ids
    attention_mask)

/-- `qwen2Tied` over padded sequences. -/
@[model]
def qwen2TiedMasked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen2TiedParams c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (qwen2MaskedStream c hT hkv p.model input_ids
    attention_mask)

/-- `qwen3` over padded sequences. -/
@[model]
def qwen3Masked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3Params c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (qwen3MaskedStream c hT hkv p.model input_ids
    attention_mask)

/-- `qwen3Tied` over padded sequences. -/
@[model]
def qwen3TiedMasked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3TiedParams c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (qwen3MaskedStream c hT hkv p.model input_ids
    attention_mask)

/-- Attention within Mistral's window over the real tokens, the heads merged again. -/
def attendWindowMasked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position)
    (keep : IT #[b, t] 2) (a : QKV c b t) : T #[b, t, c.q_dim] :=
  mergeHeads (paddedWindowAttention (turn c hT a.fst) (turn c hT a.snd.fst) a.snd.snd keep
    (c.window - 1) hw hT hkv)

/-- The stream after every Mistral layer over padded sequences. -/
def mistralMaskedStream (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position) (p : LlamaModel c)
    (input_ids : IT #[b, t] c.vocab) (keep : IT #[b, t] 2) : T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => withMLP c l.mlp l.post_attention_layernorm (add x
      (proj l.self_attn.o_proj
        (attendWindowMasked c hT hkv hw keep (llamaQKV c l.self_attn
          (rms c l.input_layernorm x))))))
    (embedding2 input_ids p.embed_tokens.weight)

/-- `mistral` over padded sequences. -/
@[model]
def mistralMasked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (p : LlamaParams c) (input_ids : IT #[b, t] c.vocab)
    (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (mistralMaskedStream c hT hkv hw p.model input_ids
    attention_mask)

/-- `mistralTied` over padded sequences. -/
@[model]
def mistralTiedMasked (c : LlamaConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (p : LlamaTiedParams c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (mistralMaskedStream c hT hkv hw p.model
    input_ids attention_mask)

/-! ## FLUX.2 [klein]'s prompt features

`Flux2KleinPipeline` reads a prompt through Qwen3 and keeps three of its hidden states
(`hidden_states[k]`: the stream after `k` layers; FLUX.2 [klein] takes 9, 18 and 27), side by
side: a text token's features are `3 × hidden` wide, the transformer's `joint_attention_dim`.
The layers after the last one kept, the final norm and the head are not run. `k1 ≤ k2 ≤ k3 <
n_layer` is decided when the model is instantiated (transformers' `hidden_states[n_layer]` is
the final norm's output, not a layer's stream). -/

/-- Qwen3's hidden states after `k1`, `k2` and `k3` layers, side by side, over padded prompts. -/
def qwen3Features (c : LlamaConfig) {b t : Nat} (k1 k2 k3 : Nat) (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3Model c) (input_ids : IT #[b, t] c.vocab)
    (attention_mask : IT #[b, t] 2) : T #[b, t, c.hidden + c.hidden + c.hidden] :=
  let h1 := qwen3MaskedLayers c hT hkv (p.layers.extract 0 k1) attention_mask
    (embedding2 input_ids p.embed_tokens.weight)
  let h2 := qwen3MaskedLayers c hT hkv (p.layers.extract k1 k2) attention_mask h1
  let h3 := qwen3MaskedLayers c hT hkv (p.layers.extract k2 k3) attention_mask h2
  catLast3 (catLast3 h1 h2) h3

/-- FLUX.2 [klein]'s prompt features from a `Qwen3ForCausalLM` with its own head. -/
@[model]
def qwen3PromptFeatures (c : LlamaConfig) {b t : Nat} (k1 k2 k3 : Nat) (h12 : k1 ≤ k2)
    (h23 : k2 ≤ k3) (h3 : k3 < c.n_layer) (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3Params c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) :
    T #[b, t, c.hidden + c.hidden + c.hidden] :=
  qwen3Features c k1 k2 k3 hT hkv p.model input_ids attention_mask

/-- `qwen3PromptFeatures` of a Qwen3 whose head is its embedding (Qwen3-4B's, FLUX.2
[klein] 4B's encoder). -/
@[model]
def qwen3TiedPromptFeatures (c : LlamaConfig) {b t : Nat} (k1 k2 k3 : Nat) (h12 : k1 ≤ k2)
    (h23 : k2 ≤ k3) (h3 : k3 < c.n_layer) (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3TiedParams c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) :
    T #[b, t, c.hidden + c.hidden + c.hidden] :=
  qwen3Features c k1 k2 k3 hT hkv p.model input_ids attention_mask
