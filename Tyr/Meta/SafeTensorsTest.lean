import Tyr.Meta.SafeTensors

/-!
# Tyr.Meta.SafeTensorsTest — build-time checks of `safetensors_type_provider`

Nothing imports this module; `lake build` compiles it (the `Tyr` library globs `Tyr.*`), so a
broken provider fails the build. The checkpoint is the snapshot `fixtures/tiny.schema.json`
(beside this file): two layers, each with a nested list of two experts, float tensors of three
dtypes, an integer tensor, a scalar and a segment (`lm-head`) that is not an identifier. The
value `Tiny` holds the checkpoint parameters the Python checker would instantiate.
-/

namespace torch.SafeTensorsTest

safetensors_type_provider "fixtures/tiny.schema.json" as Tiny

-- One structure per named subtree; the items of a list share one type.
example : Tiny.Schema := Tiny
example : Vector Tiny.layers.Schema 2 := Tiny.layers
example : Tiny.layers.attn.Schema := Tiny.layers[1].attn
example : Vector Tiny.layers.experts.Schema 2 := Tiny.layers[0].experts

-- Tensor fields carry the header's shapes: float dtypes give `T`, integer ones `IT` with the
-- bound of their dtype (`I64`: 2⁶³).
example : T #[16, 8] := Tiny.embed.weight
example : T #[8, 8] := Tiny.layers[0].attn.w_q
example : T #[8] := Tiny.layers[1].ln.bias
example : T #[8, 4] := Tiny.layers[1].experts[1].w
example : T #[8, 16] := Tiny.«lm-head».weight
example : IT #[1, 4] 9223372036854775808 := Tiny.position_ids
example : T #[] := Tiny.scale

-- A shape the checkpoint does not have is a type error.
#check_failure (Tiny.layers[0].attn.w_q : T #[8, 4])

-- `TensorStruct` is derived: its paths are the names of the float tensors, in field order.
#guard TensorStruct.paths Tiny ==
  ["embed.weight", "layers.0.attn.w_q", "layers.0.experts.0.w", "layers.0.experts.1.w",
    "layers.0.ln.bias", "layers.1.attn.w_q", "layers.1.experts.0.w", "layers.1.experts.1.w",
    "layers.1.ln.bias", "lm-head.weight", "scale"]

/-- The checkpoint file and tensor name of a parameter loaded from a checkpoint. -/
def checkpointOf? : torch.Node → Option (String × String)
  | .param (.checkpoint file key) _ _ => some (file, key)
  | _ => none

-- The value `Tiny`: each float tensor is `torch.param (.checkpoint FILE NAME)` of its shape,
-- `NAME` its full tensor name (its `TensorStruct` path), `FILE` the snapshot's absolute path.
#guard (checkpointOf? Tiny.layers[1].experts[0].w.node).map (·.2) == some "layers.1.experts.0.w"
#guard (checkpointOf? Tiny.«lm-head».weight.node).map (·.2) == some "lm-head.weight"
#guard (match checkpointOf? Tiny.scale.node with
  | some (file, _) => (System.FilePath.mk file).isAbsolute &&
      (System.FilePath.mk file).fileName == some "tiny.schema.json"
  | none => false)
#guard TensorStruct.foldWithPath (fun (acc : Bool) path {s} t => acc && (match t.node with
    | .param (.checkpoint _ key) shape .f32 => key == path && shape == s
    | _ => false)) true Tiny
-- Integer tensors are data, not parameters: they stay `default`.
#guard (match Tiny.position_ids.node with
  | .param _ _ _ => false
  | _ => true)

open torch.SafeTensors

/-- A tensor for the checks of the tree rules below. -/
def spec (name : String) (shape : Array Nat := #[2]) (dtype : String := "F32") : Spec :=
  { name, dtype, shape }

/-- Whether the tensors make a valid tree. -/
def ok (specs : Array Spec) : Bool := buildTree specs matches .ok _

/-- Whether the tensors make a valid tree whose child `a` of the root is a list. -/
def listAt (specs : Array Spec) : Bool :=
  match buildTree specs with
  | .ok (.node kids) => kids.any fun kid => kid.1 == "a" && kid.2 matches .list _
  | _ => false

/-- Whether the tensors make a valid tree whose child `a` of the root is a structure. -/
def fieldsAt (specs : Array Spec) : Bool :=
  match buildTree specs with
  | .ok (.node kids) => kids.any fun kid => kid.1 == "a" && kid.2 matches .node _
  | _ => false

#guard listAt #[spec "a.0.w", spec "a.1.w"]
#guard listAt ((List.range 11).toArray.map fun i => spec s!"a.{i}.w")
-- Lists: numbered from 0 without gaps, canonical numerals, items of one structure. Other
-- numbered children are fields, as an `nn.Sequential` numbers its layers (Flux's
-- `img_mlp.0`, `img_mlp.2` around a parameter-free GELU): `Name.a.«2».w`.
#guard fieldsAt #[spec "a.0.w", spec "a.2.w"]
#guard fieldsAt #[spec "a.1.w"]
#guard fieldsAt #[spec "a.0.w", spec "a.01.w"]
#guard fieldsAt #[spec "a.0.w", spec "a.1.w" #[3]]
#guard fieldsAt #[spec "a.0.w", spec "a.1.w" #[2] "F16"]
#guard fieldsAt #[spec "a.0.w", spec "a.1.v"]
#guard fieldsAt #[spec "a.0.b.0.w", spec "a.1.b.0.w", spec "a.1.b.1.w"]
#guard fieldsAt #[spec "a.0", spec "a.x"]
-- A tensor is never also a prefix; the root has names.
#guard !ok #[spec "a", spec "a.b"]
#guard !ok #[spec "0.w"]
#guard !ok #[spec "a..b"]
#guard !ok #[]
-- Names Lean needs: no field `mk`, `rec`, …; no subtree `Schema` (a tensor may be named so).
#guard !ok #[spec "rec"]
#guard !ok #[spec "a.mk.w"]
#guard !ok #[spec "Schema.w"]
#guard ok #[spec "a.Schema"]
-- Dtypes without a Tyr tensor type.
#guard !ok #[spec "a" #[2] "C64"]
#guard ok #[spec "a" #[2] "BOOL", spec "b" #[2] "F8_E4M3"]

-- Order: segment by segment, indices by value; fields come out sorted.
#guard segLt ["b", "9"] ["b", "10"] && !segLt ["b", "10"] ["b", "9"]
#guard segLt ["a"] ["a-c"] && segLt ["a", "z"] ["a-c"]
#guard (match buildTree #[spec "z", spec "a.w", spec "m"] with
  | .ok (.node kids) => kids.map (·.1) == #["a", "m", "z"]
  | _ => false)

end torch.SafeTensorsTest
