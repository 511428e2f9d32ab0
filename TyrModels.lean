import Tyr.Export
import examples.mlp.MLP

/-!
# TyrModels — the models a compiled library serves through the C ABI

Lean-only (it registers models with `initialize`); `lake build TyrModels` links it with
`cc/tyr.c` into the shared library that `tyr run --lib` loads. See `docs/abi.md`.
-/

open torch torch.Export

/-- The MLP example: config `{"c": {"inputs", "hidden", "classes"}, "b": batch}`. -/
def mlpEntry : ModelEntry where
  name := "mlp"
  graph := fun text => do
    let cfg ← parseConfig text
    let c ← objField cfg "c"
    let mc : MLPConfig :=
      { inputs := ← natField c "inputs", hidden := ← natField c "hidden",
        classes := ← natField c "classes" }
    let b ← natField cfg "b"
    let (p, leaves) := bindParams ({} : MLPParams mc)
    let x : T #[b, mc.inputs] := input "x"
    let y : IT #[b] mc.classes := inputI "y"
    let (z, loss) := mlp mc p x y
    graphJson "mlp" cfg [x.node, y.node] leaves [z.node, loss.node]

initialize registerModel mlpEntry
