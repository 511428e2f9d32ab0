import Tyr.Meta.TensorStruct
import Tyr.Meta.Deriving
import Tyr.Meta.Model

/-!
# Tyr.Meta.Test — build-time checks of the meta modules

Nothing imports this module; `lake build` compiles it (the `Tyr` library globs `Tyr.*`), so a
broken `deriving TensorStruct` handler, a wrong path scheme or a missing instance fails the
build. The `#guard`s run the generated code with Lean's evaluator.
-/

namespace torch.MetaTest

/-- A tiny configuration: width `d` and depth `n`. -/
structure Config where
  /-- Width. -/
  d : Nat
  /-- Number of blocks. -/
  n : Nat

/-- One block: two parameters. -/
structure Block (c : Config) where
  /-- Weight. -/
  w : T #[c.d, c.d]
  /-- Bias. -/
  b : T #[c.d]
  deriving TensorStruct

/-- Two fields, one of them a vector of derived sub-structures. -/
structure Params (c : Config) where
  /-- Embedding. -/
  embed : T #[c.n, c.d]
  /-- The blocks, indexed `0 … n-1`. -/
  blocks : Vector (Block c) c.n
  deriving TensorStruct

/-- A structure with a type parameter: the derived instance needs `[TensorStruct α]`. -/
structure Pair (α : Type) where
  /-- Left. -/
  left : α
  /-- Right, with a non-tensor field next to it. -/
  right : α
  /-- A plain number: its instance is the identity. -/
  tag : Nat
  deriving TensorStruct

-- The derived instance is generic in the configuration.
example (c : Config) : TensorStruct (Params c) := inferInstance

-- The type parameter's instance is required and used.
example : TensorStruct (Pair (T #[3])) := inferInstance

/-- A concrete configuration: `d = 2`, `n = 2`. -/
def cfg : Config := { d := 2, n := 2 }

/-- Parameters for `cfg`, every leaf a fresh parameter. -/
def params : Params cfg :=
  { embed := normal 0.02, blocks := Vector.ofFn fun _ => { w := normal 0.02, b := zeros } }

/-- The `input` names of the leaves of `x`, in traversal order. -/
def inputNames {α : Type} [TensorStruct α] (x : α) : List String :=
  TensorStruct.fold (fun {_s} (acc : List String) t =>
    match t.node with
    | .input name _ _ => acc ++ [name]
    | _ => acc) [] x

/-- Replace every leaf by a model input named after its path. -/
def named {α : Type} [TensorStruct α] (x : α) : α :=
  TensorStruct.mapWithPath (fun path {s} _ => ⟨.input path s .f32⟩) x

-- Field paths: dotted field names, vector indices as numbers.
#guard TensorStruct.paths params ==
  ["embed", "blocks.0.w", "blocks.0.b", "blocks.1.w", "blocks.1.b"]

-- `mapWithPath` sees the same paths as `fold` visits, in the same order.
#guard inputNames (named params) == TensorStruct.paths params

-- `fold`: 2·2 + 2 · (2·2 + 2) = 16 scalars.
#guard TensorStruct.paramCount params == 16

-- `zipWith` lines the two structures up tensor by tensor.
#guard inputNames (TensorStruct.zipWith (fun a _ => a) (named params) params) ==
  TensorStruct.paths params

-- `mapM` visits every tensor once, in field order.
#guard (Id.run (StateT.run (TensorStruct.mapM (m := StateM Nat)
    (fun {_s} t => do modify (· + 1); pure t) params) 0)).2 == 5

-- A type parameter, pairs, options, integer tensors, plain numbers.
#guard TensorStruct.paths ({ left := zeros, right := ones, tag := 7 } : Pair (T #[3])) ==
  ["left", "right"]
#guard TensorStruct.paths ((zeros : T #[1]), (some (ones : T #[2]) : Option (T #[2]))) ==
  ["fst", "snd"]
#guard TensorStruct.paths ((⟨.input "ids" #[4] (.i64 10)⟩ : IT #[4] 10), (zeros : T #[4])) ==
  ["snd"]

/-- A marked model (the attribute only records the name). -/
@[model] def tinyModel (x : T #[2]) : T #[2] := x

open Lean Elab Command in
-- `@[model]` is recorded and can be queried; an unmarked definition is not a model.
#eval show CommandElabM Unit from do
  unless isModel (← getEnv) ``tinyModel do throwError "@[model] was not recorded"
  if isModel (← getEnv) ``named then throwError "`named` is not a model"

end torch.MetaTest
