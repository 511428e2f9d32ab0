/-!
# Tyr.NN — neural-network functions

Lookups, normalisation and losses; like `Tyr.Ops`, each is a typed `prim`.
-/
import Tyr.Core

namespace torch

/-- Rows of `table` picked by the integer ids `idx`. -/
def embedding {b v d : Nat} (idx : IT #[b]) (table : T #[v, d]) : T #[b, d] :=
  prim "embedding" [idx.node, table.node]

/-- Layer normalisation over the last dimension, with gain `w` and bias `bias`. -/
def layerNorm {b n : Nat} (x : T #[b, n]) (w : T #[n]) (bias : T #[n])
    (eps : Float := 1e-5) : T #[b, n] :=
  prim "layer_norm" [x.node, w.node, bias.node] [.float "eps" eps]

/-- Mean cross entropy of class `logits` against integer `target` classes. -/
def crossEntropy {b c : Nat} (logits : T #[b, c]) (target : IT #[b]) : T #[] :=
  prim "cross_entropy" [logits.node, target.node]

end torch
