import Tyr

/-!
# NanoChat — a nanochat-style transformer

The architecture of Karpathy's nanochat: a token embedding (no position embedding),
RMS-normalised right after the lookup; `depth` pre-norm blocks of causal self-attention with
rotary embeddings, QK-norm and grouped-query heads, and a ReLU² MLP, with residuals; a final
RMS norm, an untied language-model head and logit soft-capping. The norms have no learned
gain and no linear layer has a bias.

`depth` is the one dial: the width is `depth * aspect_ratio`, the number of heads is the width
over the target head width `head_dim`, rounded up, and a head is the width over the heads
(nanochat's derivation). Three hypotheses of the models say what that derivation needs, so a
config that breaks one cannot be instantiated and the error names it with the values:
`hdiv` (the heads divide the width), `hrot` (a head's width is even: rotary turns pairs of
halves) and `hkv` (the key/value heads divide the query heads). The types then hold the head
width as `2 * c.half` and the width as `c.n_head * c.hd`, so `splitHeads` and `rotary` apply.

`nanochat` is trained; `nanochatLogits` gives the logits of a context (sampling without a
cache); `nanochatStep` is one decoding step over key/value caches of `block` positions: it
takes the tokens `idx` at the positions `pos` and the caches of every layer, stacked, and
returns the logits and the updated caches. Prefill is a step with `pos = 0 … t-1`, then one
token at a time; its logits equal the uncached model's.
-/

open torch

/-- The sizes of a model (nanochat's `GPTConfig`, with the width derived from `depth`). -/
structure NanoChatConfig where
  /-- Vocabulary size. -/
  vocab : Nat
  /-- Longest context, and the positions of a key/value cache. -/
  block : Nat
  /-- Number of blocks: the dial the width and the heads follow. -/
  depth : Nat
  /-- Width per block of depth (nanochat: 64). -/
  aspect_ratio : Nat
  /-- Target width of a head (nanochat: 128); the heads are the width over it, rounded up. -/
  head_dim : Nat
  /-- Key/value heads of grouped-query attention (the query heads when equal). -/
  n_kv_head : Nat
  /-- Rotary base θ. -/
  rope_base : Float
  /-- Logits are soft-capped to `(-softcap, softcap)`. -/
  softcap : Float

/-- The model width nanochat derives from the depth. -/
def NanoChatConfig.n_embd (c : NanoChatConfig) : Nat := c.depth * c.aspect_ratio

/-- Query heads: the width over the target head width, rounded up. -/
def NanoChatConfig.n_head (c : NanoChatConfig) : Nat :=
  (c.n_embd + c.head_dim - 1) / c.head_dim

/-- Half a head's width: rotary pairs the two halves of a head. -/
def NanoChatConfig.half (c : NanoChatConfig) : Nat := c.n_embd / c.n_head / 2

/-- A head's width, even by construction (`= n_embd / n_head` under `hdiv` and `hrot`). -/
def NanoChatConfig.hd (c : NanoChatConfig) : Nat := 2 * c.half

/-- The residual stream's width as a product (`= n_embd` under `hdiv` and `hrot`). -/
def NanoChatConfig.width (c : NanoChatConfig) : Nat := c.n_head * c.hd

/-- The width of the keys (and of the values): `n_kv_head` heads. -/
def NanoChatConfig.kv_width (c : NanoChatConfig) : Nat := c.n_kv_head * c.hd

/-- nanochat's initialisation of the input matrices: uniform with the standard deviation
`1/√n_embd` (the bound is `√3` times it). -/
def NanoChatConfig.bound (c : NanoChatConfig) : Float :=
  Float.sqrt 3.0 / Float.sqrt c.n_embd.toFloat

/-- Attention: separate query, key and value projections and the output projection,
which starts at zero (so a block starts as the identity). -/
structure Attention (c : NanoChatConfig) where
  c_q : T #[c.width, c.width] := uniform c.bound
  c_k : T #[c.kv_width, c.width] := uniform c.bound
  c_v : T #[c.kv_width, c.width] := uniform c.bound
  c_proj : T #[c.width, c.width] := zeros
  deriving TensorStruct

/-- The 4× ReLU² MLP; its output projection starts at zero. -/
structure MLP (c : NanoChatConfig) where
  c_fc : T #[4 * c.width, c.width] := uniform c.bound
  c_proj : T #[c.width, 4 * c.width] := zeros
  deriving TensorStruct

/-- One block: no norm gains, so attention and MLP are all it holds. -/
structure Block (c : NanoChatConfig) where
  attn : Attention c
  mlp : MLP c
  deriving TensorStruct

/-- All parameters: embedding, blocks, and the untied head (nanochat's init scales). -/
structure NanoChatParams (c : NanoChatConfig) where
  wte : T #[c.vocab, c.width] := normal 1.0
  blocks : Vector (Block c) c.depth
  lm_head : T #[c.vocab, c.width] := normal 0.001
  deriving TensorStruct

/-- The key/value caches of every layer, stacked: `depth` caches of `block` positions. -/
abbrev Cache (c : NanoChatConfig) (b : Nat) : Type :=
  T #[c.depth, b, c.n_kv_head, c.block, c.hd]

/-- Queries of `b` sequences of `t` positions, split into heads. -/
def queries (c : NanoChatConfig) {b t : Nat} (p : Attention c) (x : T #[b, t, c.width]) :
    T #[b, c.n_head, t, c.hd] :=
  splitHeads (linear3 x p.c_q)

/-- Keys, in `n_kv_head` heads. -/
def keys (c : NanoChatConfig) {b t : Nat} (p : Attention c) (x : T #[b, t, c.width]) :
    T #[b, c.n_kv_head, t, c.hd] :=
  splitHeads (linear3 x p.c_k)

/-- Values, in `n_kv_head` heads. -/
def values (c : NanoChatConfig) {b t : Nat} (p : Attention c) (x : T #[b, t, c.width]) :
    T #[b, c.n_kv_head, t, c.hd] :=
  splitHeads (linear3 x p.c_v)

/-- Causal self-attention: rotary at the positions `0 … t-1` of a context of `t ≤ block`
tokens (`hT`), then QK-norm, then grouped-query attention. -/
def attention (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.n_head % c.n_kv_head = 0) (p : Attention c) (x : T #[b, t, c.width]) :
    T #[b, t, c.width] :=
  let q := rmsNorm4 (rotary (queries c p x) hT c.rope_base)
  let k := rmsNorm4 (rotary (keys c p x) hT c.rope_base)
  linear3 (mergeHeads (gqaAttention q k (values c p x) hkv)) p.c_proj

/-- The position-wise MLP, `relu(x W₁ᵀ)² W₂ᵀ`. -/
def mlp (c : NanoChatConfig) {b t : Nat} (p : MLP c) (x : T #[b, t, c.width]) :
    T #[b, t, c.width] :=
  linear3 (relu2 (linear3 x p.c_fc)) p.c_proj

/-- `x + attn(norm x)`, then `x + mlp(norm x)`. -/
def block (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block) (hkv : c.n_head % c.n_kv_head = 0)
    (p : Block c) (x : T #[b, t, c.width]) : T #[b, t, c.width] :=
  let x := add x (attention c hT hkv p.attn (rmsNorm3 x))
  add x (mlp c p.mlp (rmsNorm3 x))

/-- Soft-capped logits of the final normalised stream. -/
def head (c : NanoChatConfig) {b t : Nat} (p : NanoChatParams c) (x : T #[b, t, c.width]) :
    T #[b, t, c.vocab] :=
  softcap (linear3 (rmsNorm3 x) p.lm_head) c.softcap

/-- Next-token logits for every position of `b` sequences of `t` tokens. -/
def logits (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.n_head % c.n_kv_head = 0) (p : NanoChatParams c) (idx : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] :=
  let x := rmsNorm3 (embedding2 idx p.wte)
  head c p (p.blocks.foldl (fun x blk => block c hT hkv blk x) x)

/-- One block of a decoding step: the state is the stream and the two stacks of caches; the
block reads its caches from the front of the stacks and pushes the updated ones at the end.
The new tokens sit at the positions `pos`, so they are rotated with `rotaryAt` (a step has no
hypothesis that its tokens are a context from position 0, which `rotary` asks for). -/
def blockStep (c : NanoChatConfig) {b t : Nat} (hkv : c.n_head % c.n_kv_head = 0)
    (hl : 0 < c.depth) (pos : IT #[t] c.block) (p : Block c)
    (s : T #[b, t, c.width] × (Cache c b × Cache c b)) :
    T #[b, t, c.width] × (Cache c b × Cache c b) :=
  let x := s.fst
  let h := rmsNorm3 x
  let q := rmsNorm4 (rotaryAt (queries c p.attn h) pos c.rope_base)
  let k := rmsNorm4 (rotaryAt (keys c p.attn h) pos c.rope_base)
  let kl := cacheWrite (stackHead s.snd.fst hl) k pos
  let vl := cacheWrite (stackHead s.snd.snd hl) (values c p.attn h) pos
  let x := add x (linear3 (mergeHeads (cachedAttention q kl vl pos hkv)) p.attn.c_proj)
  let x := add x (mlp c p.mlp (rmsNorm3 x))
  (x, (stackPush s.snd.fst kl, stackPush s.snd.snd vl))

/-- Training: the logits and the mean cross entropy against the next tokens. -/
@[model]
def nanochat (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hdiv : c.n_embd % c.n_head = 0) (hrot : c.n_embd / c.n_head % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (p : NanoChatParams c) (idx : IT #[b, t] c.vocab)
    (targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let z := logits c hT hkv p idx
  (z, crossEntropy2 z targets)

/-- Sampling without a cache: the logits of a context of `t` tokens. -/
@[model]
def nanochatLogits (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hdiv : c.n_embd % c.n_head = 0) (hrot : c.n_embd / c.n_head % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (p : NanoChatParams c) (idx : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] :=
  logits c hT hkv p idx

/-- One decoding step: `t` new tokens at the positions `pos` (all `< block`), the caches of
every layer in, their logits and the updated caches out. Unlike the context of `nanochat`,
the new tokens need not start at position 0: the step states no `t ≤ block` (its positions
are typed `< block`), so it cannot rotate them as a context with `rotary`. -/
@[model]
def nanochatStep (c : NanoChatConfig) {b t : Nat} (hdiv : c.n_embd % c.n_head = 0)
    (hrot : c.n_embd / c.n_head % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (hl : 0 < c.depth)
    (p : NanoChatParams c)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block) (k_cache v_cache : Cache c b) :
    T #[b, t, c.vocab] × (Cache c b × Cache c b) :=
  let x := rmsNorm3 (embedding2 idx p.wte)
  let s := p.blocks.foldl (fun s blk => blockStep c hkv hl pos blk s) (x, (k_cache, v_cache))
  (head c p s.fst, s.snd)
