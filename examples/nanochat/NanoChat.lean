import Tyr

/-!
# NanoChat — nanochat's GPT as it is today, and as it was in January 2026

The architecture of Karpathy's nanochat: a token embedding (no position embedding),
RMS-normalised right after the lookup; `depth` pre-norm blocks of causal self-attention with
rotary embeddings, QK-norm and grouped-query heads, and a ReLU² MLP, with residuals; a final
RMS norm, an untied language-model head and logit soft-capping. The norms have no learned
gain and no linear layer has a bias.

Today's nanochat (`nanochat`, `nanochatLogits`, `nanochatStep`; config `extras = 1`) adds, each
a structure or an op here:

* **value embeddings** (ResFormer): every other layer, counted from the last, adds to its
  values a second embedding of the tokens, `value_embed`, gated per key/value head by
  `3 σ(ve_gate(x[:12]))` (`gateHeads`); the tables are typed by the vocabulary;
* **per-layer residual and x0 scalars**: layer `i` reads `resid_lambdas[i] · x +
  x0_lambdas[i] · x0`, `x0` the normalised embedding (the vectors rotate through the fold over
  the layers: `stackHead1`, `stackPush1`);
* **smear**: each token's embedding gets its predecessor's added, gated by
  `smear_lambda · σ(smear_gate(x[:24]))` (`smear`);
* **backout**: the stream after layer `depth / 2` is subtracted, times `backout_lambda`, before
  the final norm (`basis` selects that layer in the fold);
* **q, k scaling**: the normalised queries and keys are multiplied by `qk_scale` (1.2);
* **sliding windows**: nanochat's pattern `SSSL` — three layers whose attention sees only the
  last `window + 1` positions, then one that sees the whole context, the last layer always
  whole (`windowAttention`, typed by `hw : window ≤ block`). The layers come in groups of four
  (`Quad`: short, short with value embedding, short, whole with value embedding) and, for a
  depth of `4 q + 2`, one pair (`Pair`: short, whole with value embedding), which is nanochat's
  layout for every even depth (`hev`). `window = block` is nanochat's pattern `L` (every layer
  whole);
* tables padded to a multiple of `pad_vocab_to` rows (64), of which the model reads the first
  `vocab` (`rows`).

The January layout (`nanochatJan`, `nanochatJanLogits`, `nanochatJanStep`; `extras = 0`) has
none of the parameterised features and attends over the whole context (`hfull`): it is the
model transformers implements as `NanoChatForCausalLM`, to which `tyr export` writes.

Today's parameter paths are nanochat's own keys but for the grouping of the layers:
`transformer.h.q.s.…` is nanochat's layer `4 q + s` (`transformer.tail.0.s.…` the layers after
the groups), and a layer's `value_embed` is nanochat's `value_embeds.i` (`pytyr.nanochat`
maps them when it loads a nanochat checkpoint).

`depth` is the one dial: the width is `depth * aspect_ratio`, the number of heads is the width
over the target head width `head_dim`, rounded up, and a head is the width over the heads
(nanochat's derivation). Hypotheses of the models say what that derivation needs, so a config
that breaks one cannot be instantiated and the error names it with the values: `hdiv` (the
heads divide the width), `hrot` (a head's width is even: rotary turns pairs of halves) and
`hkv` (the key/value heads divide the query heads). The types then hold the head width as
`2 * c.half` and the width as `c.n_head * c.hd`, so `splitHeads` and `rotary` apply.

`…Logits` gives the logits of a context (sampling without a cache); `…Step` is one decoding
step over key/value caches of `block` positions: it takes the tokens `idx` at the positions
`pos` and the caches of every layer, stacked (today's also the last position's embedding, for
the smear), and returns the logits and the updated caches. Prefill is a step with
`pos = 0 … t-1`, then one token at a time; its logits equal the uncached model's.
-/

open torch

/-- The sizes and options of a model (nanochat's `GPTConfig`, with the width derived from
`depth`). -/
structure NanoChatConfig where
  /-- Vocabulary size. -/
  vocab : Nat
  /-- The embedding, value-embedding and head tables have their rows padded to a multiple of
  this (nanochat: 64; 1 pads nothing). -/
  pad_vocab_to : Nat
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
  /-- The short layers' attention window: each position sees itself and the `window`
  positions before it (nanochat's `S`, a quarter of the context rounded up to 128, at most
  `block`); `block` makes every layer see the whole context (nanochat's pattern `L`). -/
  window : Nat
  /-- Rotary base θ (nanochat: 100000; 10000 in January). -/
  rope_base : Float
  /-- Queries and keys are multiplied by this after QK-norm (nanochat: 1.2; 1 is none). -/
  qk_scale : Float
  /-- Logits are soft-capped to `(-softcap, softcap)`. -/
  softcap : Float
  /-- 1: today's value embeddings, per-layer scalars, smear and backout (the models
  `nanochat…`); 0: none of them, January's layout (`nanochatJan…`). Each model's hypothesis
  `hx` holds it to its layout. -/
  extras : Nat

/-- Query heads today: the width `depth * aspect_ratio` over the head width `head_dim`,
rounded up (nanochat nudges the width up to a multiple of the head). -/
def NanoChatConfig.heads (c : NanoChatConfig) : Nat :=
  (c.depth * c.aspect_ratio + c.head_dim - 1) / c.head_dim

/-- Half a head's width today. -/
def NanoChatConfig.hw (c : NanoChatConfig) : Nat := c.head_dim / 2

/-- A head's width today, even by construction (`= head_dim` under `hrot`). -/
def NanoChatConfig.head (c : NanoChatConfig) : Nat := 2 * c.hw

/-- The width today: whole heads (`depth * aspect_ratio` rounded up to a multiple of the
head). -/
def NanoChatConfig.dim (c : NanoChatConfig) : Nat := c.heads * c.head

/-- The width of the keys (and of the values) today: `n_kv_head` heads. -/
def NanoChatConfig.kv_dim (c : NanoChatConfig) : Nat := c.n_kv_head * c.head

/-- nanochat's initialisation of the input matrices: uniform with the standard deviation
`1/√dim` (the bound is `√3` times it). -/
def NanoChatConfig.scale (c : NanoChatConfig) : Float :=
  Float.sqrt 3.0 / Float.sqrt c.dim.toFloat

/-- January's width: `depth * aspect_ratio`, as it is. -/
def NanoChatConfig.n_embd (c : NanoChatConfig) : Nat := c.depth * c.aspect_ratio

/-- January's query heads: the width over the target head width, rounded up. -/
def NanoChatConfig.n_head (c : NanoChatConfig) : Nat :=
  (c.n_embd + c.head_dim - 1) / c.head_dim

/-- Half a head's width in January: rotary pairs the two halves of a head. -/
def NanoChatConfig.half (c : NanoChatConfig) : Nat := c.n_embd / c.n_head / 2

/-- January's head width, even by construction (`= n_embd / n_head` under `hdiv` and `hrot`). -/
def NanoChatConfig.hd (c : NanoChatConfig) : Nat := 2 * c.half

/-- January's residual stream width as a product (`= n_embd` under `hdiv` and `hrot`). -/
def NanoChatConfig.width (c : NanoChatConfig) : Nat := c.n_head * c.hd

/-- January's key (and value) width: `n_kv_head` heads. -/
def NanoChatConfig.kv_width (c : NanoChatConfig) : Nat := c.n_kv_head * c.hd

/-- Rows of the token tables: the vocabulary rounded up to a multiple of `pad_vocab_to`. -/
def NanoChatConfig.rows (c : NanoChatConfig) : Nat :=
  (c.vocab + c.pad_vocab_to - 1) / c.pad_vocab_to * c.pad_vocab_to

/-- Groups of four layers (`SSSL`). -/
def NanoChatConfig.quads (c : NanoChatConfig) : Nat := c.depth / 4

/-- A pair of layers after the groups, for a depth of `4 q + 2`. -/
def NanoChatConfig.pairs (c : NanoChatConfig) : Nat := c.depth % 4 / 2

/-- January's initialisation of the input matrices: uniform with the standard deviation
`1/√n_embd` (the bound is `√3` times it). -/
def NanoChatConfig.bound (c : NanoChatConfig) : Float :=
  Float.sqrt 3.0 / Float.sqrt c.n_embd.toFloat

/-! ## Today's layout: nanochat's modules and key names -/

/-- nanochat's `Linear` (no bias), drawn uniformly from `±bound`. -/
structure Linear (o i : Nat) (bound : Float) where
  weight : T #[o, i] := uniform bound
  deriving TensorStruct

/-- A projection that starts at zero (a block starts as the identity). -/
structure ZeroLinear (o i : Nat) where
  weight : T #[o, i] := zeros
  deriving TensorStruct

/-- A gate's projection, drawn from `[0, 0.02]` (the gate starts slightly open). -/
structure GateLinear (o i : Nat) where
  weight : T #[o, i] := interval 0.0 0.02
  deriving TensorStruct

/-- A table of `n` rows drawn from `N(0, std²)` (the embedding; the head's weight). -/
structure Table (n d : Nat) (std : Float) where
  weight : T #[n, d] := normal std
  deriving TensorStruct

/-- A table of `n` rows drawn uniformly from `±bound` (a value embedding, as `c_v`). -/
structure UniformTable (n d : Nat) (bound : Float) where
  weight : T #[n, d] := uniform bound
  deriving TensorStruct

/-- Attention's projections: query, key, value and the output, which starts at zero. -/
structure Attention (c : NanoChatConfig) where
  c_q : Linear c.dim c.dim c.scale
  c_k : Linear c.kv_dim c.dim c.scale
  c_v : Linear c.kv_dim c.dim c.scale
  c_proj : ZeroLinear c.dim c.dim
  deriving TensorStruct

/-- Attention of a layer with a value embedding: also its gate, one per key/value head, from
the stream's first 12 channels. -/
structure VEAttention (c : NanoChatConfig) where
  c_q : Linear c.dim c.dim c.scale
  c_k : Linear c.kv_dim c.dim c.scale
  c_v : Linear c.kv_dim c.dim c.scale
  c_proj : ZeroLinear c.dim c.dim
  ve_gate : GateLinear c.n_kv_head 12
  deriving TensorStruct

/-- The 4× ReLU² MLP; the input at 0.4 × nanochat's bound, the output projection at zero. -/
structure MLP (c : NanoChatConfig) where
  c_fc : Linear (4 * c.dim) c.dim (0.4 * c.scale)
  c_proj : ZeroLinear c.dim (4 * c.dim)
  deriving TensorStruct

/-- A layer without a value embedding. -/
structure Block (c : NanoChatConfig) where
  attn : Attention c
  mlp : MLP c
  deriving TensorStruct

/-- A layer with a value embedding: its table (nanochat's `value_embeds.i`) beside its
weights, rows typed by the padded vocabulary. -/
structure VEBlock (c : NanoChatConfig) where
  attn : VEAttention c
  mlp : MLP c
  value_embed : UniformTable c.rows c.kv_dim c.scale
  deriving TensorStruct

/-- Four layers of the pattern `SSSL`: windowed, windowed with a value embedding, windowed,
whole with a value embedding. -/
structure Quad (c : NanoChatConfig) where
  «0» : Block c
  «1» : VEBlock c
  «2» : Block c
  «3» : VEBlock c
  deriving TensorStruct

/-- The last two layers of a depth `4 q + 2`: windowed, then whole with a value embedding. -/
structure Pair (c : NanoChatConfig) where
  «0» : Block c
  «1» : VEBlock c
  deriving TensorStruct

/-- nanochat's `transformer`: the embedding and the layers. -/
structure Transformer (c : NanoChatConfig) where
  wte : Table c.rows c.dim 0.8
  h : Vector (Quad c) c.quads
  tail : Vector (Pair c) c.pairs
  deriving TensorStruct

/-- All parameters of today's layout, at nanochat's key names (see the module doc). -/
structure NanoChatParams (c : NanoChatConfig) where
  transformer : Transformer c
  lm_head : Table c.rows c.dim 0.001
  /-- The residual stream's scale at each layer, 1.15 at the first to 1.05 at the last. -/
  resid_lambdas : T #[c.depth] := ramp 1.15 1.05
  /-- How much of `x0` each layer mixes back in, 0.2 at the first to 0.05 at the last. -/
  x0_lambdas : T #[c.depth] := ramp 0.2 0.05
  smear_gate : GateLinear 1 24
  smear_lambda : T #[1] := zeros
  backout_lambda : T #[1] := fill 0.2
  deriving TensorStruct

/-- The stream, `x0`, the per-layer scalars still to come (residual, x0, backout: each
vector's head is this layer's) and the backout's sum. -/
abbrev Flow (c : NanoChatConfig) (b t : Nat) : Type :=
  T #[b, t, c.dim] × (T #[b, t, c.dim] ×
    ((T #[c.depth] × (T #[c.depth] × T #[c.depth])) × T #[b, t, c.dim]))

/-- The key/value caches of every layer, stacked: `depth` caches of `block` positions. -/
abbrev Cache (c : NanoChatConfig) (b : Nat) : Type :=
  T #[c.depth, b, c.n_kv_head, c.block, c.head]

/-- A flow and the two stacks of caches (a decoding step). -/
abbrev StepFlow (c : NanoChatConfig) (b t : Nat) : Type := Flow c b t × (Cache c b × Cache c b)

/-- A vector with its head moved to the end: the next layer's scalar first. -/
def rotate {l : Nat} (hl : 0 < l) (s : T #[l]) : T #[l] :=
  stackPush1 s (stackHead1 s hl)

/-- A layer's input: `resid_lambdas[i] · x + x0_lambdas[i] · x0`. -/
def enter (c : NanoChatConfig) {b t : Nat} (hl : 0 < c.depth) (s : Flow c b t) :
    T #[b, t, c.dim] :=
  let l := s.snd.snd.fst
  add (scaleBy s.fst (stackHead1 l.fst hl)) (scaleBy s.snd.fst (stackHead1 l.snd.fst hl))

/-- The flow after a layer whose output is `x`: the scalars rotated, and `x` added to the
backout's sum with this layer's backout weight (`backout_lambda` at layer `depth / 2`, else 0). -/
def leave (c : NanoChatConfig) {b t : Nat} (hl : 0 < c.depth) (s : Flow c b t)
    (x : T #[b, t, c.dim]) : Flow c b t :=
  let l := s.snd.snd.fst
  let xb := add s.snd.snd.snd (scaleBy x (stackHead1 l.snd.snd hl))
  (x, (s.snd.fst, ((rotate hl l.fst, (rotate hl l.snd.fst, rotate hl l.snd.snd)), xb)))

/-- A projection of every position. -/
def project {o i b t : Nat} {bound : Float} (l : Linear o i bound) (x : T #[b, t, i]) :
    T #[b, t, o] :=
  linear3 x l.weight

/-- Queries or keys after rotary at the positions `0 … t-1` (`hT : t ≤ block`): QK-norm, then
nanochat's sharpening by `qk_scale`. -/
def sharpen (c : NanoChatConfig) {b h t k : Nat} (hT : t ≤ c.block)
    (x : T #[b, h, t, 2 * k]) : T #[b, h, t, 2 * k] :=
  scale (rmsNorm4 (rotary x hT c.rope_base)) c.qk_scale

/-- The values with the value embedding of the tokens added, gated per key/value head by
`3 σ(ve_gate(x[:12]))` (the gate reads the first 12 of the stream's first 24 channels). -/
def embedValues (c : NanoChatConfig) {b t : Nat} (hpad : c.vocab ≤ c.rows)
    (hg : 24 ≤ c.dim) (p : VEBlock c) (idx : IT #[b, t] c.vocab) (x : T #[b, t, c.dim])
    (v : T #[b, c.n_kv_head, t, c.head]) : T #[b, c.n_kv_head, t, c.head] :=
  let g := linear3 (narrowLast3 (narrowLast3 x 24 hg) 12 (by decide)) p.attn.ve_gate.weight
  let ve := splitHeads (embedding2 idx (rows p.value_embed.weight c.vocab hpad))
  add v (gateHeads ve (scale (sigmoid g) 3.0))

/-- Attention of a layer without a value embedding over the window `w`. -/
def attnShort (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.heads % c.n_kv_head = 0) (hw : c.window ≤ c.block) (p : Attention c)
    (x : T #[b, t, c.dim]) : T #[b, t, c.dim] :=
  let q := sharpen c hT (splitHeads (project p.c_q x))
  let k := sharpen c hT (splitHeads (project p.c_k x))
  let v := splitHeads (project p.c_v x)
  linear3 (mergeHeads (windowAttention q k v c.window hw hT hkv)) p.c_proj.weight

/-- Queries, keys and embedded values of a layer with a value embedding. -/
def qkvVE (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block) (hpad : c.vocab ≤ c.rows)
    (hg : 24 ≤ c.dim) (p : VEBlock c) (idx : IT #[b, t] c.vocab) (x : T #[b, t, c.dim]) :
    T #[b, c.heads, t, c.head] ×
      (T #[b, c.n_kv_head, t, c.head] × T #[b, c.n_kv_head, t, c.head]) :=
  let q := sharpen c hT (splitHeads (project p.attn.c_q x))
  let k := sharpen c hT (splitHeads (project p.attn.c_k x))
  (q, (k, embedValues c hpad hg p idx x (splitHeads (project p.attn.c_v x))))

/-- `x + mlp(norm x)` with the 4× ReLU² MLP. -/
def withMLP (c : NanoChatConfig) {b t : Nat} (p : MLP c) (x : T #[b, t, c.dim]) :
    T #[b, t, c.dim] :=
  add x (linear3 (relu2 (project p.c_fc (rmsNorm3 x))) p.c_proj.weight)

/-- A windowed layer without a value embedding. -/
def shortLayer (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.heads % c.n_kv_head = 0) (hw : c.window ≤ c.block) (hl : 0 < c.depth)
    (p : Block c) (s : Flow c b t) : Flow c b t :=
  let x := enter c hl s
  let x := add x (attnShort c hT hkv hw p.attn (rmsNorm3 x))
  leave c hl s (withMLP c p.mlp x)

/-- A windowed layer with a value embedding. -/
def shortVELayer (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.heads % c.n_kv_head = 0) (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows)
    (hg : 24 ≤ c.dim) (hl : 0 < c.depth) (idx : IT #[b, t] c.vocab) (p : VEBlock c)
    (s : Flow c b t) : Flow c b t :=
  let x := enter c hl s
  let a := qkvVE c hT hpad hg p idx (rmsNorm3 x)
  let y := windowAttention a.fst a.snd.fst a.snd.snd c.window hw hT hkv
  let x := add x (linear3 (mergeHeads y) p.attn.c_proj.weight)
  leave c hl s (withMLP c p.mlp x)

/-- A layer with a value embedding that attends over the whole context. -/
def longVELayer (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.heads % c.n_kv_head = 0) (hpad : c.vocab ≤ c.rows) (hg : 24 ≤ c.dim)
    (hl : 0 < c.depth) (idx : IT #[b, t] c.vocab) (p : VEBlock c) (s : Flow c b t) :
    Flow c b t :=
  let x := enter c hl s
  let a := qkvVE c hT hpad hg p idx (rmsNorm3 x)
  let x := add x (linear3 (mergeHeads (gqaAttention a.fst a.snd.fst a.snd.snd hkv))
    p.attn.c_proj.weight)
  leave c hl s (withMLP c p.mlp x)

/-- The four layers of a group. -/
def quad (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.heads % c.n_kv_head = 0) (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows)
    (hg : 24 ≤ c.dim) (hl : 0 < c.depth) (idx : IT #[b, t] c.vocab) (p : Quad c)
    (s : Flow c b t) : Flow c b t :=
  let s := shortLayer c hT hkv hw hl p.«0» s
  let s := shortVELayer c hT hkv hw hpad hg hl idx p.«1» s
  let s := shortLayer c hT hkv hw hl p.«2» s
  longVELayer c hT hkv hpad hg hl idx p.«3» s

/-- The two layers of the last pair. -/
def pair (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.heads % c.n_kv_head = 0) (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows)
    (hg : 24 ≤ c.dim) (hl : 0 < c.depth) (idx : IT #[b, t] c.vocab) (p : Pair c)
    (s : Flow c b t) : Flow c b t :=
  longVELayer c hT hkv hpad hg hl idx p.«1» (shortLayer c hT hkv hw hl p.«0» s)

/-- The smear's gate per position: `smear_lambda · σ(smear_gate(x[:24]))`. -/
def smearGate (c : NanoChatConfig) {b t : Nat} (hg : 24 ≤ c.dim) (p : NanoChatParams c)
    (x : T #[b, t, c.dim]) : T #[b, t, 1] :=
  scaleBy (sigmoid (linear3 (narrowLast3 x 24 hg) p.smear_gate.weight))
    (stackHead1 p.smear_lambda (by decide))

/-- The normalised embedding of the tokens, before the smear. -/
def embed (c : NanoChatConfig) {b t : Nat} (hpad : c.vocab ≤ c.rows) (p : NanoChatParams c)
    (idx : IT #[b, t] c.vocab) : T #[b, t, c.dim] :=
  rmsNorm3 (embedding2 idx (rows p.transformer.wte.weight c.vocab hpad))

/-- The flow into the first layer from `x0` (the smeared embedding): the scalars and a
backout sum of zeros. -/
def start (c : NanoChatConfig) {b t : Nat} (hb : c.depth / 2 < c.depth) (p : NanoChatParams c)
    (x0 : T #[b, t, c.dim]) : Flow c b t :=
  (x0, (x0, ((p.resid_lambdas, (p.x0_lambdas, basis p.backout_lambda (c.depth / 2) hb)),
    scale x0 0.0)))

/-- Soft-capped logits of the final normalised stream, the backout subtracted first; the
head's padding rows are not read. -/
def finish (c : NanoChatConfig) {b t : Nat} (hpad : c.vocab ≤ c.rows) (p : NanoChatParams c)
    (s : Flow c b t) : T #[b, t, c.vocab] :=
  let x := rmsNorm3 (sub s.fst s.snd.snd.snd)
  softcap (linear3 x (rows p.lm_head.weight c.vocab hpad)) c.softcap

/-- Next-token logits for every position of `b` sequences of `t` tokens. -/
def logits (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.heads % c.n_kv_head = 0) (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows)
    (hl : 0 < c.depth) (hb : c.depth / 2 < c.depth) (hg : 24 ≤ c.dim)
    (p : NanoChatParams c) (idx : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  let x := embed c hpad p idx
  let s := start c hb p (smear x (smearGate c hg p x))
  let s := p.transformer.h.foldl (fun s q => quad c hT hkv hw hpad hg hl idx q s) s
  finish c hpad p (p.transformer.tail.foldl (fun s q => pair c hT hkv hw hpad hg hl idx q s) s)

/-- Training: the logits and the mean cross entropy against the next tokens. -/
@[model]
def nanochat (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hrot : c.head_dim % 2 = 0)
    (hkv : c.heads % c.n_kv_head = 0) (hx : c.extras = 1) (hev : c.depth % 2 = 0)
    (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows) (hl : 0 < c.depth)
    (hb : c.depth / 2 < c.depth) (hg : 24 ≤ c.dim) (p : NanoChatParams c)
    (idx : IT #[b, t] c.vocab) (targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let z := logits c hT hkv hw hpad hl hb hg p idx
  (z, crossEntropy2 z targets)

/-- Sampling without a cache: the logits of a context of `t` tokens. -/
@[model]
def nanochatLogits (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hrot : c.head_dim % 2 = 0)
    (hkv : c.heads % c.n_kv_head = 0) (hx : c.extras = 1) (hev : c.depth % 2 = 0)
    (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows) (hl : 0 < c.depth)
    (hb : c.depth / 2 < c.depth) (hg : 24 ≤ c.dim) (p : NanoChatParams c)
    (idx : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  logits c hT hkv hw hpad hl hb hg p idx

/-! ### Decoding over caches -/

/-- Queries and keys at the positions `pos` (`rotaryAt`: a step's tokens are no context from
position 0), normalised and sharpened. -/
def sharpenAt (c : NanoChatConfig) {b h t k : Nat} (pos : IT #[t] c.block)
    (x : T #[b, h, t, 2 * k]) : T #[b, h, t, 2 * k] :=
  scale (rmsNorm4 (rotaryAt x pos c.rope_base)) c.qk_scale

/-- Queries, keys and values at a step: with this layer's caches (the stacks' heads) the keys
and values written in at `pos`. -/
abbrev StepQKV (c : NanoChatConfig) (b t : Nat) : Type :=
  T #[b, c.heads, t, c.head] × (T #[b, c.n_kv_head, c.block, c.head] ×
    T #[b, c.n_kv_head, c.block, c.head])

/-- This layer's queries and its caches with the new keys and values written in. -/
def toCaches (c : NanoChatConfig) {b t : Nat} (hl : 0 < c.depth) (pos : IT #[t] c.block)
    (q : T #[b, c.heads, t, c.head]) (k v : T #[b, c.n_kv_head, t, c.head]) (s : StepFlow c b t) :
    StepQKV c b t :=
  (q, (cacheWrite (stackHead s.snd.fst hl) k pos, cacheWrite (stackHead s.snd.snd hl) v pos))

/-- The step's layer after its attention `y`: the output projection and the MLP, the flow on,
the updated caches pushed. -/
def afterAttention (c : NanoChatConfig) {b t : Nat} (hl : 0 < c.depth)
    (proj : ZeroLinear c.dim c.dim) (mlp : MLP c) (x : T #[b, t, c.dim])
    (y : T #[b, c.heads, t, c.head]) (a : StepQKV c b t) (s : StepFlow c b t) : StepFlow c b t :=
  let x := add x (linear3 (mergeHeads y) proj.weight)
  (leave c hl s.fst (withMLP c mlp x),
    (stackPush s.snd.fst a.snd.fst, stackPush s.snd.snd a.snd.snd))

/-- A layer without a value embedding, one step, over the window. -/
def plainStep (c : NanoChatConfig) {b t : Nat} (hkv : c.heads % c.n_kv_head = 0)
    (hw : c.window ≤ c.block) (hl : 0 < c.depth) (pos : IT #[t] c.block) (p : Block c)
    (s : StepFlow c b t) : StepFlow c b t :=
  let x := enter c hl s.fst
  let h := rmsNorm3 x
  let q := sharpenAt c pos (splitHeads (project p.attn.c_q h))
  let k := sharpenAt c pos (splitHeads (project p.attn.c_k h))
  let a := toCaches c hl pos q k (splitHeads (project p.attn.c_v h)) s
  let y := cachedWindowAttention a.fst a.snd.fst a.snd.snd pos c.window hw hkv
  afterAttention c hl p.attn.c_proj p.mlp x y a s

/-- The queries and the caches of a layer with a value embedding at a step. -/
def veToCaches (c : NanoChatConfig) {b t : Nat} (hpad : c.vocab ≤ c.rows) (hg : 24 ≤ c.dim)
    (hl : 0 < c.depth) (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block) (p : VEBlock c)
    (h : T #[b, t, c.dim]) (s : StepFlow c b t) : StepQKV c b t :=
  let q := sharpenAt c pos (splitHeads (project p.attn.c_q h))
  let k := sharpenAt c pos (splitHeads (project p.attn.c_k h))
  toCaches c hl pos q k (embedValues c hpad hg p idx h (splitHeads (project p.attn.c_v h))) s

/-- A layer with a value embedding, one step, over the window. -/
def veShortStep (c : NanoChatConfig) {b t : Nat} (hkv : c.heads % c.n_kv_head = 0)
    (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows) (hg : 24 ≤ c.dim) (hl : 0 < c.depth)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block) (p : VEBlock c) (s : StepFlow c b t) :
    StepFlow c b t :=
  let x := enter c hl s.fst
  let a := veToCaches c hpad hg hl idx pos p (rmsNorm3 x) s
  let y := cachedWindowAttention a.fst a.snd.fst a.snd.snd pos c.window hw hkv
  afterAttention c hl p.attn.c_proj p.mlp x y a s

/-- A layer with a value embedding, one step, over the whole cache. -/
def veLongStep (c : NanoChatConfig) {b t : Nat} (hkv : c.heads % c.n_kv_head = 0)
    (hpad : c.vocab ≤ c.rows) (hg : 24 ≤ c.dim) (hl : 0 < c.depth)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block) (p : VEBlock c) (s : StepFlow c b t) :
    StepFlow c b t :=
  let x := enter c hl s.fst
  let a := veToCaches c hpad hg hl idx pos p (rmsNorm3 x) s
  let y := cachedAttention a.fst a.snd.fst a.snd.snd pos hkv
  afterAttention c hl p.attn.c_proj p.mlp x y a s

/-- A group of four layers, one step. -/
def quadStep (c : NanoChatConfig) {b t : Nat} (hkv : c.heads % c.n_kv_head = 0)
    (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows) (hg : 24 ≤ c.dim) (hl : 0 < c.depth)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block) (p : Quad c) (s : StepFlow c b t) :
    StepFlow c b t :=
  let s := plainStep c hkv hw hl pos p.«0» s
  let s := veShortStep c hkv hw hpad hg hl idx pos p.«1» s
  let s := plainStep c hkv hw hl pos p.«2» s
  veLongStep c hkv hpad hg hl idx pos p.«3» s

/-- The last pair of layers, one step. -/
def pairStep (c : NanoChatConfig) {b t : Nat} (hkv : c.heads % c.n_kv_head = 0)
    (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows) (hg : 24 ≤ c.dim) (hl : 0 < c.depth)
    (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block) (p : Pair c) (s : StepFlow c b t) :
    StepFlow c b t :=
  veLongStep c hkv hpad hg hl idx pos p.«1» (plainStep c hkv hw hl pos p.«0» s)

/-- One decoding step: `t` new tokens at the positions `pos` (all `< block`), the caches of
every layer and the embedding of the token before them (`prev`, zeros before a first step) in;
their logits, the updated caches and the embedding of the last of them out. Unlike the
context of `nanochat`, the new tokens need not start at position 0: the step states no
`t ≤ block` (its positions are typed `< block`), so it cannot rotate them as a context with
`rotary`. -/
@[model]
def nanochatStep (c : NanoChatConfig) {b t : Nat} (hrot : c.head_dim % 2 = 0)
    (hkv : c.heads % c.n_kv_head = 0) (hx : c.extras = 1)
    (hev : c.depth % 2 = 0) (hw : c.window ≤ c.block) (hpad : c.vocab ≤ c.rows)
    (hl : 0 < c.depth) (hb : c.depth / 2 < c.depth) (hg : 24 ≤ c.dim) (ht : 0 < t)
    (p : NanoChatParams c) (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block)
    (k_cache v_cache : Cache c b) (prev : T #[b, 1, c.dim]) :
    T #[b, t, c.vocab] × (Cache c b × (Cache c b × T #[b, 1, c.dim])) :=
  let x := embed c hpad p idx
  let s := (start c hb p (smearAfter x (smearGate c hg p x) prev), (k_cache, v_cache))
  let s := p.transformer.h.foldl (fun s q => quadStep c hkv hw hpad hg hl idx pos q s) s
  let s := p.transformer.tail.foldl (fun s q => pairStep c hkv hw hpad hg hl idx pos q s) s
  (finish c hpad p s.fst, (s.snd.fst, (s.snd.snd, lastSeq3 x ht)))

/-! ## January 2026's layout (transformers' `NanoChatForCausalLM`) -/

/-- January's key/value caches of every layer, stacked. -/
abbrev JanCache (c : NanoChatConfig) (b : Nat) : Type :=
  T #[c.depth, b, c.n_kv_head, c.block, c.hd]

/-- Attention: separate query, key and value projections and the output projection,
which starts at zero (so a block starts as the identity). -/
structure JanAttention (c : NanoChatConfig) where
  c_q : T #[c.width, c.width] := uniform c.bound
  c_k : T #[c.kv_width, c.width] := uniform c.bound
  c_v : T #[c.kv_width, c.width] := uniform c.bound
  c_proj : T #[c.width, c.width] := zeros
  deriving TensorStruct

/-- The 4× ReLU² MLP; its output projection starts at zero. -/
structure JanMLP (c : NanoChatConfig) where
  c_fc : T #[4 * c.width, c.width] := uniform c.bound
  c_proj : T #[c.width, 4 * c.width] := zeros
  deriving TensorStruct

/-- One block: no norm gains, so attention and MLP are all it holds. -/
structure JanBlock (c : NanoChatConfig) where
  attn : JanAttention c
  mlp : JanMLP c
  deriving TensorStruct

/-- All parameters: embedding, blocks, and the untied head (nanochat's init scales then). -/
structure JanParams (c : NanoChatConfig) where
  wte : T #[c.rows, c.width] := normal 1.0
  blocks : Vector (JanBlock c) c.depth
  lm_head : T #[c.rows, c.width] := normal 0.001
  deriving TensorStruct

/-- Queries of `b` sequences of `t` positions, split into heads. -/
def queries (c : NanoChatConfig) {b t : Nat} (p : JanAttention c) (x : T #[b, t, c.width]) :
    T #[b, c.n_head, t, c.hd] :=
  splitHeads (linear3 x p.c_q)

/-- Keys, in `n_kv_head` heads. -/
def keys (c : NanoChatConfig) {b t : Nat} (p : JanAttention c) (x : T #[b, t, c.width]) :
    T #[b, c.n_kv_head, t, c.hd] :=
  splitHeads (linear3 x p.c_k)

/-- Values, in `n_kv_head` heads. -/
def values (c : NanoChatConfig) {b t : Nat} (p : JanAttention c) (x : T #[b, t, c.width]) :
    T #[b, c.n_kv_head, t, c.hd] :=
  splitHeads (linear3 x p.c_v)

/-- Causal self-attention: rotary at the positions `0 … t-1` of a context of `t ≤ block`
tokens (`hT`), then QK-norm (and `qk_scale`), then grouped-query attention. -/
def attention (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.n_head % c.n_kv_head = 0) (p : JanAttention c) (x : T #[b, t, c.width]) :
    T #[b, t, c.width] :=
  let q := sharpen c hT (queries c p x)
  let k := sharpen c hT (keys c p x)
  linear3 (mergeHeads (gqaAttention q k (values c p x) hkv)) p.c_proj

/-- The position-wise MLP, `relu(x W₁ᵀ)² W₂ᵀ`. -/
def mlp (c : NanoChatConfig) {b t : Nat} (p : JanMLP c) (x : T #[b, t, c.width]) :
    T #[b, t, c.width] :=
  linear3 (relu2 (linear3 x p.c_fc)) p.c_proj

/-- `x + attn(norm x)`, then `x + mlp(norm x)`. -/
def block (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.n_head % c.n_kv_head = 0) (p : JanBlock c) (x : T #[b, t, c.width]) :
    T #[b, t, c.width] :=
  let x := add x (attention c hT hkv p.attn (rmsNorm3 x))
  add x (mlp c p.mlp (rmsNorm3 x))

/-- Soft-capped logits of the final normalised stream. -/
def janHead (c : NanoChatConfig) {b t : Nat} (hpad : c.vocab ≤ c.rows) (p : JanParams c)
    (x : T #[b, t, c.width]) : T #[b, t, c.vocab] :=
  softcap (linear3 (rmsNorm3 x) (rows p.lm_head c.vocab hpad)) c.softcap

/-- Next-token logits for every position of `b` sequences of `t` tokens. -/
def janLogits (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hkv : c.n_head % c.n_kv_head = 0) (hpad : c.vocab ≤ c.rows) (p : JanParams c)
    (idx : IT #[b, t] c.vocab) : T #[b, t, c.vocab] :=
  let x := rmsNorm3 (embedding2 idx (rows p.wte c.vocab hpad))
  janHead c hpad p (p.blocks.foldl (fun x blk => block c hT hkv blk x) x)

/-- One block of a decoding step: the state is the stream and the two stacks of caches; the
block reads its caches from the front of the stacks and pushes the updated ones at the end.
The new tokens sit at the positions `pos`, so they are rotated with `rotaryAt` (a step has no
hypothesis that its tokens are a context from position 0, which `rotary` asks for). -/
def blockStep (c : NanoChatConfig) {b t : Nat} (hkv : c.n_head % c.n_kv_head = 0)
    (hl : 0 < c.depth) (pos : IT #[t] c.block) (p : JanBlock c)
    (s : T #[b, t, c.width] × (JanCache c b × JanCache c b)) :
    T #[b, t, c.width] × (JanCache c b × JanCache c b) :=
  let x := s.fst
  let h := rmsNorm3 x
  let q := sharpenAt c pos (queries c p.attn h)
  let k := sharpenAt c pos (keys c p.attn h)
  let kl := cacheWrite (stackHead s.snd.fst hl) k pos
  let vl := cacheWrite (stackHead s.snd.snd hl) (values c p.attn h) pos
  let x := add x (linear3 (mergeHeads (cachedAttention q kl vl pos hkv)) p.attn.c_proj)
  let x := add x (mlp c p.mlp (rmsNorm3 x))
  (x, (stackPush s.snd.fst kl, stackPush s.snd.snd vl))

/-- Training in January's layout: the logits and the mean cross entropy. `hfull`: every layer
attends over the whole context (January had no sliding windows). -/
@[model]
def nanochatJan (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hdiv : c.n_embd % c.n_head = 0) (hrot : c.n_embd / c.n_head % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hx : c.extras = 0) (hfull : c.window = c.block)
    (hpad : c.vocab ≤ c.rows) (p : JanParams c) (idx : IT #[b, t] c.vocab)
    (targets : IT #[b, t] c.vocab) : T #[b, t, c.vocab] × T #[] :=
  let z := janLogits c hT hkv hpad p idx
  (z, crossEntropy2 z targets)

/-- Sampling without a cache in January's layout. -/
@[model]
def nanochatJanLogits (c : NanoChatConfig) {b t : Nat} (hT : t ≤ c.block)
    (hdiv : c.n_embd % c.n_head = 0) (hrot : c.n_embd / c.n_head % 2 = 0)
    (hkv : c.n_head % c.n_kv_head = 0) (hx : c.extras = 0) (hfull : c.window = c.block)
    (hpad : c.vocab ≤ c.rows) (p : JanParams c) (idx : IT #[b, t] c.vocab) :
    T #[b, t, c.vocab] :=
  janLogits c hT hkv hpad p idx

/-- One decoding step in January's layout (as `nanochatStep`, without the smear's `prev`). -/
@[model]
def nanochatJanStep (c : NanoChatConfig) {b t : Nat} (hdiv : c.n_embd % c.n_head = 0)
    (hrot : c.n_embd / c.n_head % 2 = 0) (hkv : c.n_head % c.n_kv_head = 0) (hx : c.extras = 0)
    (hfull : c.window = c.block) (hpad : c.vocab ≤ c.rows) (hl : 0 < c.depth)
    (p : JanParams c) (idx : IT #[b, t] c.vocab) (pos : IT #[t] c.block)
    (k_cache v_cache : JanCache c b) : T #[b, t, c.vocab] × (JanCache c b × JanCache c b) :=
  let x := rmsNorm3 (embedding2 idx (rows p.wte c.vocab hpad))
  let s := p.blocks.foldl (fun s blk => blockStep c hkv hl pos blk s) (x, (k_cache, v_cache))
  (janHead c hpad p s.fst, s.snd)
