import Tyr.Core
import Tyr.Meta
import Tyr.Ops
import Tyr.NN
import Tyr.Shape
import Tyr.DiT
import Tyr.Decode
import Tyr.Mix
import Tyr.LM
import Tyr.MoE
import Tyr.Conv

/-!
# Tyr — shape-typed tensors and models in Lean 4

`import Tyr` then `open torch` brings `T`, the typed ops and the nn functions into scope.
-/
