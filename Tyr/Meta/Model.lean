import Lean

/-!
# Tyr.Meta.Model — the `@[model]` attribute

`@[model] def mlp ...` marks `mlp` as a model: a definition the harness may trace into a graph
and run (`tyr train examples/mlp/MLP.lean --model mlp`). The tag has no effect on the
definition itself; it records the name so tools can list and check the models of a file.

The attribute is registered here with `initialize`, so — as for every attribute defined in
Lean — it can be *used* only in modules that import this one (in practice `import Tyr`).
Only definitions (`def`, `abbrev`) may carry it.

This module is Lean-only meta code: the Python checker recognises `@[model]` natively (see
`docs/lean-meta.md`).
-/

namespace torch

open Lean

/-- The `model` tag attribute. `modelAttr.hasTag env n` says whether `n` was declared
`@[model]`, in the current module or in an imported one. -/
initialize modelAttr : TagAttribute ←
  registerTagAttribute `model "mark a definition as a Tyr model the harness can trace and run"
    (validate := fun declName => do
      match (← getConstInfo declName) with
      | .defnInfo _ => pure ()
      | _ => throwError "@[model] applies to definitions only, and '{declName}' is not one")

/-- Whether the constant `declName` carries `@[model]` in the environment `env`. -/
def isModel (env : Environment) (declName : Name) : Bool :=
  modelAttr.hasTag env declName

end torch
