import Tyr

/-!
# Mixtral and Qwen3-MoE — the mixture-of-experts decoders of Hugging Face's checkpoints

Hugging Face's `MixtralForCausalLM` and `Qwen3MoeForCausalLM`: Llama's decoder (token
embedding; pre-norm layers of causal grouped-query attention with rotary embedding, `rope`;
a final RMS norm and the language-model head) whose every MLP is a sparse mixture of experts
(`Tyr.MoE`): a router `gate` (`[n_experts, hidden]`) scores each position, its `top_k`
experts run on it, and their SwiGLU outputs are summed with the router's weights.

* `mixtral`: Mistral's attention (a sliding window of `sliding_window` positions, none where
  it is as long as the context) and experts `w2 (silu (w1 x) · w3 x)`; the top-k weights are
  always renormalised to sum 1.
* `qwen3Moe`: Qwen3's attention (an RMS norm with a learned gain over each head of the
  queries and keys, `head_dim` its own), experts `down_proj (silu (gate_proj x) · up_proj x)`
  of width `moe_intermediate_size`, and the top-k weights renormalised where
  `norm_topk_prob` (`c.norm_topk = 1`), the probabilities themselves where not. Every layer is
  sparse: `decoder_sparse_step = 1`, no `mlp_only_layers` (`tyr run` refuses others).

The Lean file `examples/llama/Llama.lean` cannot be imported from here (the checker resolves
an import against the importing file's directory), so the shared pieces are restated. The
experts of a layer are a `Vector` of parameter structures at the checkpoints' per-expert keys
(`model.layers.0.block_sparse_moe.experts.3.w1.weight`, `model.layers.0.mlp.experts.3.
gate_proj.weight`), folded over by `routeExperts`: their count is the router's ids' bound, so
a table of another count is a type error. Each family has a `…Tied` twin for
`tie_word_embeddings`, an `…Aux` model returning the logits and the routers' load-balancing
loss (transformers' `aux_loss`, `load_balancing_loss_func`), and `…Train` models for
`tyr train --weights DIR`: the logits and the next-token cross entropy plus `aux_coef`
(`router_aux_loss_coef`) times that loss, and `…Step` models that decode over key/value
caches (`tyr sample --weights DIR`). Initialisation is transformers': normal(0, 0.02)
matrices, norm gains one. `config.json` beside this file holds a small model's sizes.
-/

open torch

/-- Sizes and constants of a model (transformers' `MixtralConfig`, `Qwen3MoeConfig`). -/
structure MoEConfig where
  /-- Vocabulary size (`vocab_size`). -/
  vocab : Nat
  /-- The longest context (`max_position_embeddings`). -/
  max_position : Nat
  /-- Decoder layers (`num_hidden_layers`). -/
  n_layer : Nat
  /-- The residual stream's width (`hidden_size`). -/
  hidden : Nat
  /-- An expert's width (Mixtral's `intermediate_size`, Qwen3-MoE's `moe_intermediate_size`). -/
  intermediate : Nat
  /-- Query heads (`num_attention_heads`). -/
  n_head : Nat
  /-- Key/value heads (`num_key_value_heads`). -/
  n_kv_head : Nat
  /-- A head's width (`head_dim`, else `hidden_size / num_attention_heads`). -/
  head_dim : Nat
  /-- The RMS norms' epsilon (`rms_norm_eps`). -/
  eps : Float
  /-- Rotary base (`rope_theta`). -/
  rope_theta : Float
  /-- Llama 3's frequency scaling: the factor (1 scales nothing). -/
  rope_factor : Float
  /-- Llama 3's `low_freq_factor`. -/
  rope_low : Float
  /-- Llama 3's `high_freq_factor`. -/
  rope_high : Float
  /-- Llama 3's `original_max_position_embeddings`. -/
  rope_original : Nat
  /-- Mixtral's attention window in positions, the query's own included (`sliding_window`). -/
  window : Nat
  /-- Experts per layer (`num_local_experts`, Qwen3-MoE's `num_experts`). -/
  n_experts : Nat
  /-- Experts per position (`num_experts_per_tok`). -/
  top_k : Nat
  /-- Qwen3-MoE's `norm_topk_prob`: 1 renormalises the top-k weights, 0 does not. -/
  norm_topk : Nat
  /-- The load-balancing loss's weight in a training loss (`router_aux_loss_coef`). -/
  aux_coef : Float
  /-- Positions of a decoding step's key/value caches (the step models'; not in a checkpoint's
  config: the longest context `tyr` decodes, at most `max_position`). -/
  cache : Nat

/-- Half a head's width: rotary pairs the halves. -/
def MoEConfig.half (c : MoEConfig) : Nat := c.head_dim / 2

/-- A head's width, even by construction (`= head_dim` under `hrot`). -/
def MoEConfig.hd (c : MoEConfig) : Nat := 2 * c.half

/-- The width of the queries: `n_head` heads. -/
def MoEConfig.q_dim (c : MoEConfig) : Nat := c.n_head * c.hd

/-- The width of the keys (and of the values): `n_kv_head` heads. -/
def MoEConfig.kv_dim (c : MoEConfig) : Nat := c.n_kv_head * c.hd

/-- `nn.Linear(i, o, bias=False)` as transformers initialises it. -/
structure Linear (o i : Nat) where
  weight : T #[o, i] := normal 0.02
  deriving TensorStruct

/-- `nn.Embedding(n, d)`. -/
structure Embedding (n d : Nat) where
  weight : T #[n, d] := normal 0.02
  deriving TensorStruct

/-- An RMS norm's gain. -/
structure RMSNorm (d : Nat) where
  weight : T #[d] := ones
  deriving TensorStruct

/-- Mixtral's attention: four projections without biases. -/
structure Attention (c : MoEConfig) where
  q_proj : Linear c.q_dim c.hidden
  k_proj : Linear c.kv_dim c.hidden
  v_proj : Linear c.kv_dim c.hidden
  o_proj : Linear c.hidden c.q_dim
  deriving TensorStruct

/-- Qwen3-MoE's attention: Mixtral's projections and a gain per head for queries and keys. -/
structure Qwen3MoeAttention (c : MoEConfig) where
  q_proj : Linear c.q_dim c.hidden
  k_proj : Linear c.kv_dim c.hidden
  v_proj : Linear c.kv_dim c.hidden
  o_proj : Linear c.hidden c.q_dim
  q_norm : RMSNorm c.hd
  k_norm : RMSNorm c.hd
  deriving TensorStruct

/-- A Mixtral expert: `w2 (silu (w1 x) · w3 x)`. -/
structure MixtralExpert (c : MoEConfig) where
  w1 : Linear c.intermediate c.hidden
  w2 : Linear c.hidden c.intermediate
  w3 : Linear c.intermediate c.hidden
  deriving TensorStruct

/-- Mixtral's sparse MoE block: the router and the experts. -/
structure MixtralSparseMoe (c : MoEConfig) where
  gate : Linear c.n_experts c.hidden
  experts : Vector (MixtralExpert c) c.n_experts
  deriving TensorStruct

/-- A Qwen3-MoE expert: `down_proj (silu (gate_proj x) · up_proj x)`. -/
structure Qwen3MoeExpert (c : MoEConfig) where
  gate_proj : Linear c.intermediate c.hidden
  up_proj : Linear c.intermediate c.hidden
  down_proj : Linear c.hidden c.intermediate
  deriving TensorStruct

/-- Qwen3-MoE's sparse MoE block. -/
structure Qwen3MoeSparseMoe (c : MoEConfig) where
  gate : Linear c.n_experts c.hidden
  experts : Vector (Qwen3MoeExpert c) c.n_experts
  deriving TensorStruct

/-- A decoder layer of Mixtral. -/
structure MixtralLayer (c : MoEConfig) where
  self_attn : Attention c
  block_sparse_moe : MixtralSparseMoe c
  input_layernorm : RMSNorm c.hidden
  post_attention_layernorm : RMSNorm c.hidden
  deriving TensorStruct

/-- A decoder layer of Qwen3-MoE. -/
structure Qwen3MoeLayer (c : MoEConfig) where
  self_attn : Qwen3MoeAttention c
  mlp : Qwen3MoeSparseMoe c
  input_layernorm : RMSNorm c.hidden
  post_attention_layernorm : RMSNorm c.hidden
  deriving TensorStruct

/-- `MixtralModel`. -/
structure MixtralModel (c : MoEConfig) where
  embed_tokens : Embedding c.vocab c.hidden
  layers : Vector (MixtralLayer c) c.n_layer
  norm : RMSNorm c.hidden
  deriving TensorStruct

/-- `Qwen3MoeModel`. -/
structure Qwen3MoeModel (c : MoEConfig) where
  embed_tokens : Embedding c.vocab c.hidden
  layers : Vector (Qwen3MoeLayer c) c.n_layer
  norm : RMSNorm c.hidden
  deriving TensorStruct

/-- `MixtralForCausalLM` with its own head. -/
structure MixtralParams (c : MoEConfig) where
  model : MixtralModel c
  lm_head : Linear c.vocab c.hidden
  deriving TensorStruct

/-- `MixtralForCausalLM` whose head is the embedding (`tie_word_embeddings`). -/
structure MixtralTiedParams (c : MoEConfig) where
  model : MixtralModel c
  deriving TensorStruct

/-- `Qwen3MoeForCausalLM` with its own head. -/
structure Qwen3MoeParams (c : MoEConfig) where
  model : Qwen3MoeModel c
  lm_head : Linear c.vocab c.hidden
  deriving TensorStruct

/-- `Qwen3MoeForCausalLM` whose head is the embedding. -/
structure Qwen3MoeTiedParams (c : MoEConfig) where
  model : Qwen3MoeModel c
  deriving TensorStruct

/-! ## The shared pieces -/

/-- The RMS norm of every position, with its gain. -/
def rms (c : MoEConfig) {b t d : Nat} (n : RMSNorm d) (x : T #[b, t, d]) : T #[b, t, d] :=
  rmsNormGain3 x n.weight c.eps

/-- A projection of every position without a bias. -/
def proj {o i b t : Nat} (l : Linear o i) (x : T #[b, t, i]) : T #[b, t, o] :=
  linear3 x l.weight

/-- Queries or keys turned by rotary at the positions `0 … t-1`. -/
def turn (c : MoEConfig) {b h t : Nat} (hT : t ≤ c.max_position) (x : T #[b, h, t, c.hd]) :
    T #[b, h, t, c.hd] :=
  rope x hT c.rope_theta c.rope_factor c.rope_low c.rope_high c.rope_original

/-- Next-token logits of the final normalised stream through a head `w`. -/
def head (c : MoEConfig) {b t : Nat} (n : RMSNorm c.hidden) (w : T #[c.vocab, c.hidden])
    (x : T #[b, t, c.hidden]) : T #[b, t, c.vocab] :=
  linear3 (rms c n x) w

/-- A router's choice at every position: its `top_k` experts' ids and their weights. -/
abbrev Routed (c : MoEConfig) (b t : Nat) : Type :=
  IT #[b, t, c.top_k] c.n_experts × T #[b, t, c.top_k]

/-- The choice of the router `gate` for the normalised stream `h`, its weights renormalised
where `renorm = 1`; with the router's logits. -/
def route (c : MoEConfig) {b t : Nat} (hk : c.top_k ≤ c.n_experts) (renorm : Nat)
    (hr : renorm ≤ 1) (logits : T #[b, t, c.n_experts]) : Routed c b t :=
  let ids := routerTopK logits c.top_k hk
  (ids, routerWeights logits ids renorm hr)

/-- The stream and the routers' load statistics summed over the layers so far. -/
abbrev Loaded (c : MoEConfig) (b t : Nat) : Type := T #[b, t, c.hidden] × T #[2, c.n_experts]

/-- The logits and `aux_coef` times the load-balancing loss added to their cross entropy. -/
def trainLoss (c : MoEConfig) {b t : Nat} (hl : 0 < c.n_layer) (z : T #[b, t, c.vocab])
    (load : T #[2, c.n_experts]) (targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  (z, add (crossEntropy2 z targets) (scale (balanceLoss load c.n_layer hl) c.aux_coef))

/-! ## Mixtral -/

/-- Mixtral's self-attention of the normalised stream: Mistral's sliding window, each query
seeing itself and the `window - 1` keys before it. -/
def mixtralAttention (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position) (p : Attention c)
    (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let q := turn c hT (splitHeads (proj p.q_proj x))
  let k := turn c hT (splitHeads (proj p.k_proj x))
  let y := windowAttention q k (splitHeads (proj p.v_proj x)) (c.window - 1) hw hT hkv
  proj p.o_proj (mergeHeads y)

/-- The routed experts of the normalised stream `h` added to `x`. -/
def mixtralExperts (c : MoEConfig) {b t : Nat} (p : MixtralSparseMoe c)
    (x h : T #[b, t, c.hidden]) (r : Routed c b t) : T #[b, t, c.hidden] :=
  routeExperts p.experts (fun e => (e.w1.weight, (e.w3.weight, e.w2.weight))) x h r.fst r.snd

/-- A Mixtral layer's stream after its attention, around the residual. -/
def mixtralAttended (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position) (p : MixtralLayer c)
    (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  add x (mixtralAttention c hT hkv hw p.self_attn (rms c p.input_layernorm x))

/-- A Mixtral layer: attention, then the sparse MoE block, each pre-normed around a residual.
-/
def mixtralLayer (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position)
    (hk : c.top_k ≤ c.n_experts) (p : MixtralLayer c) (x : T #[b, t, c.hidden]) :
    T #[b, t, c.hidden] :=
  let x := mixtralAttended c hT hkv hw p x
  let h := rms c p.post_attention_layernorm x
  mixtralExperts c p.block_sparse_moe x h
    (route c hk 1 (by decide) (proj p.block_sparse_moe.gate h))

/-- A Mixtral layer with its router's statistics added to the load. -/
def mixtralLayerLoad (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position)
    (hk : c.top_k ≤ c.n_experts) (p : MixtralLayer c) (s : Loaded c b t) : Loaded c b t :=
  let x := mixtralAttended c hT hkv hw p s.fst
  let h := rms c p.post_attention_layernorm x
  let logits := proj p.block_sparse_moe.gate h
  let r := route c hk 1 (by decide) logits
  (mixtralExperts c p.block_sparse_moe x h r, routerLoad s.snd logits r.fst)

/-- The stream after every Mixtral layer, before the final norm. -/
def mixtralStream (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position)
    (hk : c.top_k ≤ c.n_experts) (p : MixtralModel c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => mixtralLayer c hT hkv hw hk l x)
    (embedding2 input_ids p.embed_tokens.weight)

/-- The stream after every Mixtral layer and the routers' summed load. -/
def mixtralLoaded (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position)
    (hk : c.top_k ≤ c.n_experts) (p : MixtralModel c) (input_ids : IT #[b, t] c.vocab) :
    Loaded c b t :=
  let x := embedding2 input_ids p.embed_tokens.weight
  p.layers.foldl (fun s l => mixtralLayerLoad c hT hkv hw hk l s) (x, noLoad x c.n_experts)

/-- Mixtral's next-token logits for every position of `b` sequences of `t` tokens. -/
@[model]
def mixtral (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position) (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position)
    (hk : c.top_k ≤ c.n_experts) (p : MixtralParams c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (mixtralStream c hT hkv hw hk p.model input_ids)

/-- `mixtral` with the head tied to the embedding. -/
@[model]
def mixtralTied (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (hk : c.top_k ≤ c.n_experts) (p : MixtralTiedParams c)
    (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (mixtralStream c hT hkv hw hk p.model input_ids)

/-- Mixtral's logits and the routers' load-balancing loss (transformers' `aux_loss`). -/
@[model]
def mixtralAux (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (hk : c.top_k ≤ c.n_experts) (hl : 0 < c.n_layer)
    (p : MixtralParams c) (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let s := mixtralLoaded c hT hkv hw hk p.model input_ids
  (head c p.model.norm p.lm_head.weight s.fst, balanceLoss s.snd c.n_layer hl)

/-- `mixtral`, trained: the cross entropy against `targets` plus `aux_coef` times the
load-balancing loss. -/
@[model]
def mixtralTrain (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (hk : c.top_k ≤ c.n_experts) (hl : 0 < c.n_layer)
    (p : MixtralParams c) (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let s := mixtralLoaded c hT hkv hw hk p.model idx
  trainLoss c hl (head c p.model.norm p.lm_head.weight s.fst) s.snd targets

/-- `mixtralTied`, trained. -/
@[model]
def mixtralTiedTrain (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (hk : c.top_k ≤ c.n_experts) (hl : 0 < c.n_layer)
    (p : MixtralTiedParams c) (idx targets : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] × T #[] :=
  let s := mixtralLoaded c hT hkv hw hk p.model idx
  trainLoss c hl (head c p.model.norm p.model.embed_tokens.weight s.fst) s.snd targets

/-! ## Qwen3-MoE -/

/-- Qwen3-MoE's self-attention: the queries and keys normalised per head, then rotated. -/
def qwen3MoeAttention (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3MoeAttention c) (x : T #[b, t, c.hidden]) :
    T #[b, t, c.hidden] :=
  let q := rmsNormScale4 (splitHeads (proj p.q_proj x)) p.q_norm.weight c.eps
  let k := rmsNormScale4 (splitHeads (proj p.k_proj x)) p.k_norm.weight c.eps
  let y := gqaAttention (turn c hT q) (turn c hT k) (splitHeads (proj p.v_proj x)) hkv
  proj p.o_proj (mergeHeads y)

/-- The routed experts of the normalised stream `h` added to `x`. -/
def qwen3MoeExperts (c : MoEConfig) {b t : Nat} (p : Qwen3MoeSparseMoe c)
    (x h : T #[b, t, c.hidden]) (r : Routed c b t) : T #[b, t, c.hidden] :=
  routeExperts p.experts (fun e => (e.gate_proj.weight, (e.up_proj.weight, e.down_proj.weight)))
    x h r.fst r.snd

/-- A Qwen3-MoE layer's stream after its attention, around the residual. -/
def qwen3MoeAttended (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Qwen3MoeLayer c) (x : T #[b, t, c.hidden]) :
    T #[b, t, c.hidden] :=
  add x (qwen3MoeAttention c hT hkv p.self_attn (rms c p.input_layernorm x))

/-- A Qwen3-MoE layer: attention, then the sparse MoE block. -/
def qwen3MoeLayer (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (p : Qwen3MoeLayer c) (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let x := qwen3MoeAttended c hT hkv p x
  let h := rms c p.post_attention_layernorm x
  qwen3MoeExperts c p.mlp x h (route c hk c.norm_topk hn (proj p.mlp.gate h))

/-- A Qwen3-MoE layer with its router's statistics added to the load. -/
def qwen3MoeLayerLoad (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (p : Qwen3MoeLayer c) (s : Loaded c b t) : Loaded c b t :=
  let x := qwen3MoeAttended c hT hkv p s.fst
  let h := rms c p.post_attention_layernorm x
  let logits := proj p.mlp.gate h
  let r := route c hk c.norm_topk hn logits
  (qwen3MoeExperts c p.mlp x h r, routerLoad s.snd logits r.fst)

/-- The stream after every Qwen3-MoE layer. -/
def qwen3MoeStream (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (p : Qwen3MoeModel c) (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => qwen3MoeLayer c hT hkv hk hn l x)
    (embedding2 input_ids p.embed_tokens.weight)

/-- The stream after every Qwen3-MoE layer and the routers' summed load. -/
def qwen3MoeLoaded (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (p : Qwen3MoeModel c) (input_ids : IT #[b, t] c.vocab) : Loaded c b t :=
  let x := embedding2 input_ids p.embed_tokens.weight
  p.layers.foldl (fun s l => qwen3MoeLayerLoad c hT hkv hk hn l s) (x, noLoad x c.n_experts)

/-- Qwen3-MoE's next-token logits. -/
@[model]
def qwen3Moe (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position) (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (p : Qwen3MoeParams c) (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight (qwen3MoeStream c hT hkv hk hn p.model input_ids)

/-- `qwen3Moe` with the head tied to the embedding. -/
@[model]
def qwen3MoeTied (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts)
    (hn : c.norm_topk ≤ 1) (p : Qwen3MoeTiedParams c) (input_ids : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight (qwen3MoeStream c hT hkv hk hn p.model input_ids)

/-- Qwen3-MoE's logits and the routers' load-balancing loss. -/
@[model]
def qwen3MoeAux (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts)
    (hn : c.norm_topk ≤ 1) (hl : 0 < c.n_layer) (p : Qwen3MoeParams c)
    (input_ids : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let s := qwen3MoeLoaded c hT hkv hk hn p.model input_ids
  (head c p.model.norm p.lm_head.weight s.fst, balanceLoss s.snd c.n_layer hl)

/-- `qwen3Moe`, trained: the cross entropy plus `aux_coef` times the load-balancing loss. -/
@[model]
def qwen3MoeTrain (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts)
    (hn : c.norm_topk ≤ 1) (hl : 0 < c.n_layer) (p : Qwen3MoeParams c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let s := qwen3MoeLoaded c hT hkv hk hn p.model idx
  trainLoss c hl (head c p.model.norm p.lm_head.weight s.fst) s.snd targets

/-- `qwen3MoeTied`, trained. -/
@[model]
def qwen3MoeTiedTrain (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts)
    (hn : c.norm_topk ≤ 1) (hl : 0 < c.n_layer) (p : Qwen3MoeTiedParams c)
    (idx targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let s := qwen3MoeLoaded c hT hkv hk hn p.model idx
  trainLoss c hl (head c p.model.norm p.model.embed_tokens.weight s.fst) s.snd targets

/-! ## Decoding over key/value caches

A step model takes the `t` new tokens `idx` at the positions `pos` (typed `< cache`, the
caches' length) and the caches of every layer, stacked (`T #[n_layer, b, n_kv_head, cache,
hd]`: each layer reads the stacks' heads and pushes its updated caches at the end), and returns
their logits and the updated caches. Prefill is a step at `0 … t-1`, then one token at a time;
the keys are cached rotated, as transformers caches them. The experts are routed per token as
in the models above, so a step's logits are theirs. -/

/-- The key (or value) caches of every layer, stacked. -/
abbrev Cache (c : MoEConfig) (b : Nat) : Type :=
  T #[c.n_layer, b, c.n_kv_head, c.cache, c.hd]

/-- One layer's key and value caches. -/
abbrev LayerCache (c : MoEConfig) (b : Nat) : Type :=
  T #[b, c.n_kv_head, c.cache, c.hd] × T #[b, c.n_kv_head, c.cache, c.hd]

/-- The stream of a step and the stacks of caches. -/
abbrev Step (c : MoEConfig) (b t : Nat) : Type := T #[b, t, c.hidden] × (Cache c b × Cache c b)

/-- Queries or keys turned by rotary at the positions `pos`. -/
def turnAt (c : MoEConfig) {b h t : Nat} (pos : IT #[t] c.cache) (x : T #[b, h, t, c.hd]) :
    T #[b, h, t, c.hd] :=
  ropeAt x pos c.rope_theta c.rope_factor c.rope_low c.rope_high c.rope_original

/-- This layer's caches (the stacks' heads) with the step's keys `k`, rotated, and its values
`v` written at `pos`. -/
def written (c : MoEConfig) {b t : Nat} (hl : 0 < c.n_layer) (pos : IT #[t] c.cache)
    (k v : T #[b, c.n_kv_head, t, c.hd]) (s : Step c b t) : LayerCache c b :=
  (cacheWrite (stackHead s.snd.fst hl) (turnAt c pos k) pos,
    cacheWrite (stackHead s.snd.snd hl) v pos)

/-- The stream `x` of the step after a layer, this layer's caches `kv` pushed. -/
def pushed (c : MoEConfig) {b t : Nat} (kv : LayerCache c b) (s : Step c b t)
    (x : T #[b, t, c.hidden]) : Step c b t :=
  (x, (stackPush s.snd.fst kv.fst, stackPush s.snd.snd kv.snd))

/-- A Mixtral layer at a decoding step, over the window of the cache (`hw`: the window fits
the cache; a window as long as the cache is none). -/
def mixtralLayerStep (c : MoEConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.cache)
    (hk : c.top_k ≤ c.n_experts) (pos : IT #[t] c.cache) (p : MixtralLayer c)
    (s : Step c b t) : Step c b t :=
  let a := p.self_attn
  let x := rms c p.input_layernorm s.fst
  let kv := written c hl pos (splitHeads (proj a.k_proj x)) (splitHeads (proj a.v_proj x)) s
  let y := cachedWindowAttention (turnAt c pos (splitHeads (proj a.q_proj x))) kv.fst kv.snd
    pos (c.window - 1) hw hkv
  let x := add s.fst (proj a.o_proj (mergeHeads y))
  let h := rms c p.post_attention_layernorm x
  pushed c kv s (mixtralExperts c p.block_sparse_moe x h
    (route c hk 1 (by decide) (proj p.block_sparse_moe.gate h)))

/-- The step's stream after every Mixtral layer, and the updated caches. -/
def mixtralSteps (c : MoEConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.cache)
    (hk : c.top_k ≤ c.n_experts) (p : MixtralModel c) (idx : IT #[b, t] c.vocab)
    (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) : Step c b t :=
  p.layers.foldl (fun s l => mixtralLayerStep c hl hkv hw hk pos l s)
    (embedding2 idx p.embed_tokens.weight, (k_cache, v_cache))

/-- One decoding step of `mixtral`: logits of the new tokens, the updated caches. -/
@[model]
def mixtralStep (c : MoEConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.cache)
    (hk : c.top_k ≤ c.n_experts) (hl : 0 < c.n_layer) (p : MixtralParams c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := mixtralSteps c hl hkv hw hk p.model idx pos k_cache v_cache
  (head c p.model.norm p.lm_head.weight s.fst, s.snd)

/-- One decoding step of `mixtralTied`. -/
@[model]
def mixtralTiedStep (c : MoEConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.cache)
    (hk : c.top_k ≤ c.n_experts) (hl : 0 < c.n_layer) (p : MixtralTiedParams c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := mixtralSteps c hl hkv hw hk p.model idx pos k_cache v_cache
  (head c p.model.norm p.model.embed_tokens.weight s.fst, s.snd)

/-- A Qwen3-MoE layer at a decoding step: the queries and keys normalised per head, the keys
cached rotated. -/
def qwen3MoeLayerStep (c : MoEConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (pos : IT #[t] c.cache) (p : Qwen3MoeLayer c) (s : Step c b t) : Step c b t :=
  let a := p.self_attn
  let x := rms c p.input_layernorm s.fst
  let q := rmsNormScale4 (splitHeads (proj a.q_proj x)) a.q_norm.weight c.eps
  let k := rmsNormScale4 (splitHeads (proj a.k_proj x)) a.k_norm.weight c.eps
  let kv := written c hl pos k (splitHeads (proj a.v_proj x)) s
  let y := cachedAttention (turnAt c pos q) kv.fst kv.snd pos hkv
  let x := add s.fst (proj a.o_proj (mergeHeads y))
  let h := rms c p.post_attention_layernorm x
  pushed c kv s (qwen3MoeExperts c p.mlp x h (route c hk c.norm_topk hn (proj p.mlp.gate h)))

/-- The step's stream after every Qwen3-MoE layer, and the updated caches. -/
def qwen3MoeSteps (c : MoEConfig) {b t : Nat} (hl : 0 < c.n_layer)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (p : Qwen3MoeModel c) (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.cache)
    (k_cache v_cache : Cache c b) : Step c b t :=
  p.layers.foldl (fun s l => qwen3MoeLayerStep c hl hkv hk hn pos l s)
    (embedding2 idx p.embed_tokens.weight, (k_cache, v_cache))

/-- One decoding step of `qwen3Moe`. -/
@[model]
def qwen3MoeStep (c : MoEConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (hl : 0 < c.n_layer) (p : Qwen3MoeParams c) (idx : IT #[b, t] c.vocab)
    (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := qwen3MoeSteps c hl hkv hk hn p.model idx pos k_cache v_cache
  (head c p.model.norm p.lm_head.weight s.fst, s.snd)

/-- One decoding step of `qwen3MoeTied`. -/
@[model]
def qwen3MoeTiedStep (c : MoEConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (hl : 0 < c.n_layer) (p : Qwen3MoeTiedParams c) (idx : IT #[b, t] c.vocab)
    (pos : IT #[t] c.cache) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let s := qwen3MoeSteps c hl hkv hk hn p.model idx pos k_cache v_cache
  (head c p.model.norm p.model.embed_tokens.weight s.fst, s.snd)

/-! ## Padded batches: the logits of sequences of different lengths

`…Masked` takes Hugging Face's `attention_mask : IT #[b, t] 2` beside `input_ids` (1 a token,
0 padding, on either side): no query attends to padding, positions are `0 … t-1` as
transformers gives them without `position_ids`, every position is routed on its own (so a
real token's experts are those without the padding), and a padding position's logits are not
meant to be read. `tyr run` picks it when the inputs hold an `attention_mask`. -/

/-- Mixtral's self-attention over the real tokens within its window. -/
def mixtralAttentionMasked (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position)
    (keep : IT #[b, t] 2) (p : Attention c) (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let q := turn c hT (splitHeads (proj p.q_proj x))
  let k := turn c hT (splitHeads (proj p.k_proj x))
  let y := paddedWindowAttention q k (splitHeads (proj p.v_proj x)) keep (c.window - 1) hw hT hkv
  proj p.o_proj (mergeHeads y)

/-- A Mixtral layer over padded sequences. -/
def mixtralLayerMasked (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position)
    (hk : c.top_k ≤ c.n_experts) (keep : IT #[b, t] 2) (p : MixtralLayer c)
    (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let x := add x (mixtralAttentionMasked c hT hkv hw keep p.self_attn (rms c p.input_layernorm x))
  let h := rms c p.post_attention_layernorm x
  mixtralExperts c p.block_sparse_moe x h
    (route c hk 1 (by decide) (proj p.block_sparse_moe.gate h))

/-- The stream after every Mixtral layer over padded sequences. -/
def mixtralMaskedStream (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hw : c.window - 1 ≤ c.max_position)
    (hk : c.top_k ≤ c.n_experts) (p : MixtralModel c) (input_ids : IT #[b, t] c.vocab)
    (keep : IT #[b, t] 2) : T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => mixtralLayerMasked c hT hkv hw hk keep l x)
    (embedding2 input_ids p.embed_tokens.weight)

/-- `mixtral` over padded sequences. -/
@[model]
def mixtralMasked (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (hk : c.top_k ≤ c.n_experts) (p : MixtralParams c)
    (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight
    (mixtralMaskedStream c hT hkv hw hk p.model input_ids attention_mask)

/-- `mixtralTied` over padded sequences. -/
@[model]
def mixtralTiedMasked (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0)
    (hw : c.window - 1 ≤ c.max_position) (hk : c.top_k ≤ c.n_experts)
    (p : MixtralTiedParams c) (input_ids : IT #[b, t] c.vocab) (attention_mask : IT #[b, t] 2) :
    T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight
    (mixtralMaskedStream c hT hkv hw hk p.model input_ids attention_mask)

/-- Qwen3-MoE's self-attention over the real tokens. -/
def qwen3MoeAttentionMasked (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (keep : IT #[b, t] 2) (p : Qwen3MoeAttention c)
    (x : T #[b, t, c.hidden]) : T #[b, t, c.hidden] :=
  let q := rmsNormScale4 (splitHeads (proj p.q_proj x)) p.q_norm.weight c.eps
  let k := rmsNormScale4 (splitHeads (proj p.k_proj x)) p.k_norm.weight c.eps
  let y := paddedCausalAttention (turn c hT q) (turn c hT k) (splitHeads (proj p.v_proj x)) keep
    hkv
  proj p.o_proj (mergeHeads y)

/-- A Qwen3-MoE layer over padded sequences. -/
def qwen3MoeLayerMasked (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (keep : IT #[b, t] 2) (p : Qwen3MoeLayer c) (x : T #[b, t, c.hidden]) :
    T #[b, t, c.hidden] :=
  let x := add x (qwen3MoeAttentionMasked c hT hkv keep p.self_attn (rms c p.input_layernorm x))
  let h := rms c p.post_attention_layernorm x
  qwen3MoeExperts c p.mlp x h (route c hk c.norm_topk hn (proj p.mlp.gate h))

/-- The stream after every Qwen3-MoE layer over padded sequences. -/
def qwen3MoeMaskedStream (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts) (hn : c.norm_topk ≤ 1)
    (p : Qwen3MoeModel c) (input_ids : IT #[b, t] c.vocab) (keep : IT #[b, t] 2) :
    T #[b, t, c.hidden] :=
  p.layers.foldl (fun x l => qwen3MoeLayerMasked c hT hkv hk hn keep l x)
    (embedding2 input_ids p.embed_tokens.weight)

/-- `qwen3Moe` over padded sequences. -/
@[model]
def qwen3MoeMasked (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts)
    (hn : c.norm_topk ≤ 1) (p : Qwen3MoeParams c) (input_ids : IT #[b, t] c.vocab)
    (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.lm_head.weight
    (qwen3MoeMaskedStream c hT hkv hk hn p.model input_ids attention_mask)

/-- `qwen3MoeTied` over padded sequences. -/
@[model]
def qwen3MoeTiedMasked (c : MoEConfig) {b t : Nat} (hT : t ≤ c.max_position)
    (hrot : c.head_dim % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (hk : c.top_k ≤ c.n_experts)
    (hn : c.norm_topk ≤ 1) (p : Qwen3MoeTiedParams c) (input_ids : IT #[b, t] c.vocab)
    (attention_mask : IT #[b, t] 2) : T #[b, t, c.vocab] :=
  head c p.model.norm p.model.embed_tokens.weight
    (qwen3MoeMaskedStream c hT hkv hk hn p.model input_ids attention_mask)
