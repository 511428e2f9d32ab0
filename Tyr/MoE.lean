import Tyr.Core

/-!
# Tyr.MoE — a typed mixture of experts, as Mixtral and Qwen3-MoE compute it

A sparse MoE block replaces a decoder layer's MLP by `e` expert MLPs and a router: the router
scores every position against the experts (`logits = x Wᵀ`, `W : T #[e, d]`, a
`linear3`), `routerTopK` picks the `k` experts of the largest `softmax(logits)` (float32, as
transformers computes it) and `routerWeights` gives their weights (renormalised to sum 1:
Mixtral always, Qwen3-MoE under `norm_topk_prob`); each position's output is the weighted sum
of its `k` experts' outputs, an expert being SwiGLU, `down (silu (gate x) · up x)`.

**The ids are typed by the experts.** The router's ids are an index tensor
`IT #[b, t, k] e`, every id below the `e` experts its logits score (the result of a `primI`
op, `Tyr.Core`). Every op that reads ids takes them with the bound of what they index, so
the ids of a router over another axis of the logits (`T #[b, e, t]` read as `[b, t, e]`: ids
below `t`), the ids of another router, and a table of experts of another count than the ids'
are type errors.

**Experts in a fold, grouped by expert.** A checkpoint holds each expert's weights under its
own keys (`…experts.3.w1.weight`), so a model's experts are a `Vector` of parameter
structures, and `routeExperts` folds over it: expert `i` adds, to the positions that chose
it, their weight times its output (`expertAdd`: the positions gathered, the expert run on
them alone, the results `index_add`ed back), then the ids are renumbered by one
(`rotateIds`: `i ↦ i - 1 mod e`), so that the expert whose turn it is always has id `0` and no
expert needs its index as a number. The table's length is the ids' bound in
`routeExperts`'s type, so a table of another count is a type error. This is transformers'
own loop over experts (`MixtralExperts.forward`), and a layer's work is that of its
positions' `k` experts, never `e` experts per position: per expert, the comparison and the
renumbering of the `b · t · k` ids and one out-of-place `index_add` of the stream (`b · t · d`
copied), so the cost is linear in `e`. The alternative, stacking the `e` experts' weights into
`T #[e, f, d]` once per forward with a stack push per expert (as `stackPush` does), copies the
stack at every push: about `e² / 2` expert matrices per forward, quadratic, and as many again
in the backward. Measured at 256 positions, 2 experts each, width 16, experts of 24
(`tests/test_hf_moe.py`, `test_a_blocks_work_grows_linearly_with_its_experts`): the elements a
block's forward and backward write are 470k at 4 experts, 2.0M at 32 and 7.4M at 128, 56k
more for each expert from 32 on: linear. Its forward and backward at 1024 positions of width
64 (4 CPU threads) take 21 ms at 4 experts and 273 ms at 128; transformers'
`MixtralSparseMoeBlock`, 22 ms and 680 ms.

**The load-balancing loss** of the routers is transformers' `load_balancing_loss_func`
(Switch Transformer's): `routerLoad` adds one router's statistics to a `T #[2, e]` (the
fraction of positions choosing each expert, the mean probability of each), a fold over the
layers sums them from `noLoad`, and `balanceLoss` is `e · Σⱼ fⱼ Pⱼ` of their means over the
layers. Its gradient reaches the routers through the probabilities, as transformers'.
-/

namespace torch

/-- The router's choice at every position: the ids of the `k` largest of `softmax(logits)`
(float32), largest first, as `torch.topk` orders them. Each id is below the `e` experts the
logits score: ids meant for another number of experts are a type error. `hk : k ≤ e`. -/
def routerTopK {b t e : Nat} (logits : T #[b, t, e]) (k : Nat) (hk : k ≤ e) :
    IT #[b, t, k] e :=
  primI "router_top_k" [logits.node] [.nat "k" k]

/-- The weights of the chosen experts: `softmax(logits)` (float32) at the ids, divided by their
sum where `renorm = 1` (Mixtral always; Qwen3-MoE where `norm_topk_prob`), as they are where
`renorm = 0`. The ids index the logits' experts. -/
def routerWeights {b t e k : Nat} (logits : T #[b, t, e]) (ids : IT #[b, t, k] e)
    (renorm : Nat) (hr : renorm ≤ 1) : T #[b, t, k] :=
  prim "router_weights" [logits.node, ids.node] [.nat "renorm" renorm]

/-- The expert whose id is `0` added to `acc` at the positions that chose it: where `ids` holds
`0` in slot `j`, `acc + weights[j] · down (silu (gate x) · up x)` (SwiGLU of width `f`), and
`acc` elsewhere. It runs on those positions only (gathered, then `index_add`ed back). -/
def expertAdd {b t d f k e : Nat} (acc x : T #[b, t, d]) (ids : IT #[b, t, k] e)
    (weights : T #[b, t, k]) (gate up : T #[f, d]) (down : T #[d, f]) : T #[b, t, d] :=
  prim "expert_add" [acc.node, x.node, ids.node, weights.node, gate.node, up.node, down.node]

/-- The ids renumbered by one, `i ↦ i - 1` and `0 ↦ e - 1`: after `e` renumberings they are
what they were. In a fold over the experts, the next expert's id becomes `0`. -/
def rotateIds {s : Shape} {e : Nat} (ids : IT s e) : IT s e :=
  primI "rotate_ids" [ids.node]

/-- An expert's SwiGLU weights: `gate`, `up` (`[f, d]`) and `down` (`[d, f]`). -/
abbrev SwiGLU (f d : Nat) : Type := T #[f, d] × (T #[f, d] × T #[d, f])

/-- One expert's step of `routeExperts`: its positions added, the ids renumbered. -/
def expertStep {b t d f k e : Nat} (w : SwiGLU f d) (x : T #[b, t, d]) (weights : T #[b, t, k])
    (s : T #[b, t, d] × IT #[b, t, k] e) : T #[b, t, d] × IT #[b, t, k] e :=
  (expertAdd s.fst x s.snd weights w.fst w.snd.fst w.snd.snd, rotateIds s.snd)

/-- The routed experts of `x` added to `acc` (the residual stream): at every position, the sum
over its `k` chosen experts of their weight times their output, the experts' weights read off
the table `experts` by `swiglu`. The table has the ids' `e` experts: a table of another count,
or ids of another router, is a type error. -/
def routeExperts {α : Type} {b t d f k e : Nat} (experts : Vector α e)
    (swiglu : α → SwiGLU f d) (acc x : T #[b, t, d]) (ids : IT #[b, t, k] e)
    (weights : T #[b, t, k]) : T #[b, t, d] :=
  (experts.foldl (fun s ex => expertStep (swiglu ex) x weights s) (acc, ids)).fst

/-- No router's statistics yet: `[2, e]` zeros (where a fold over the layers starts summing
them; made on `x`'s device, `x`'s values are not read). -/
def noLoad {b t d : Nat} (x : T #[b, t, d]) (e : Nat) : T #[2, e] :=
  prim "no_load" [x.node] [.nat "e" e]

/-- `load` with one router's statistics added: row 0 the fraction of the `b · t` positions
that chose each expert (the row sums to `k`), row 1 the mean over the positions of
`softmax(logits)` (float32). The ids are this router's (`routerTopK logits k`). -/
def routerLoad {b t e k : Nat} (load : T #[2, e]) (logits : T #[b, t, e])
    (ids : IT #[b, t, k] e) : T #[2, e] :=
  prim "router_load" [load.node, logits.node, ids.node]

/-- The load-balancing loss of the statistics of `layers` routers summed by `routerLoad`:
`e · Σⱼ (load[0, j] / layers) · (load[1, j] / layers)`, transformers'
`load_balancing_loss_func`. Its gradient reaches the routers through row 1 alone. -/
def balanceLoss {e : Nat} (load : T #[2, e]) (layers : Nat) (hl : 0 < layers) : T #[] :=
  prim "balance_loss" [load.node] [.nat "layers" layers]

end torch
