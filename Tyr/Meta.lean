import Tyr.Meta.Model
import Tyr.Meta.TensorStruct
import Tyr.Meta.Deriving
import Tyr.Meta.SafeTensors

/-!
# Tyr.Meta — Lean-only meta code

* `Tyr.Meta.Model`: the `@[model]` attribute that marks a definition as a model.
* `Tyr.Meta.TensorStruct`: the `TensorStruct` class (`map`, `mapM`, `zipWith`, `fold`,
  `mapPathM`, `mapWithPath`, `foldWithPath`) over every float tensor inside a value.
* `Tyr.Meta.Deriving`: the `deriving TensorStruct` handler for structures.
* `Tyr.Meta.SafeTensors`: `safetensors_type_provider "ckpt.safetensors" as Name`, structures
  typed by a checkpoint's header.

`Tyr.Meta.Test` and `Tyr.Meta.SafeTensorsTest` hold build-time checks; nothing imports them,
`lake build` compiles them.
See `docs/lean-meta.md`.
-/
