import Tyr.Meta.Model
import Tyr.Meta.TensorStruct
import Tyr.Meta.Deriving

/-!
# Tyr.Meta — Lean-only meta code

* `Tyr.Meta.Model`: the `@[model]` attribute that marks a definition as a model.
* `Tyr.Meta.TensorStruct`: the `TensorStruct` class (`map`, `mapM`, `zipWith`, `fold`,
  `mapPathM`, `mapWithPath`, `foldWithPath`) over every float tensor inside a value.
* `Tyr.Meta.Deriving`: the `deriving TensorStruct` handler for structures.

`Tyr.Meta.Test` holds build-time checks; nothing imports it, `lake build` compiles it.
See `docs/lean-meta.md`.
-/
