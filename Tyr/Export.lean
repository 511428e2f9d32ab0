import Lean.Data.Json
import Std.Data.HashMap
import Tyr.Core
import Tyr.Meta.TensorStruct

/-!
# Tyr.Export — a compiled model library's side of the C ABI (`cc/tyr.h`, `docs/abi.md`)

A model file registers its models; `cc/tyr.c` calls the two `@[export]` functions below and
hands their strings to the host (pytyr) as the C ABI of `cc/tyr.h`:

```
import Tyr.Export
import examples.mlp.MLP
open torch torch.Export

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
```

The graph is the IR of `docs/ir.md`, version 2: inputs in the order given (an integer input
with the bound of its type `IT s n`, carried by its `DType.i64 n`), parameters in field order
at their field paths, op nodes `%0, %1, …` in dependency order, outputs `out` or
`out0, out1, …`. Two things the Python checker's graphs have are missing here, because a
`Node` does not carry them: `loc` (source positions) and `implicit` (solved implicit
arguments); ops whose shapes cannot be re-derived without them are rejected by the host's
validator. Nodes shared in memory (a `let` used twice) are emitted once; the compiler may
also merge equal subterms, so node counts can differ from the checker's.

This module is Lean-only (it imports the `Lean` package): the Python checker skips it.
-/

namespace torch.Export

open Lean (Json)

/-! ## The registry -/

/-- A model a compiled library serves: its name and its graph IR (JSON text) for a config
(JSON text, an object of argument values). Errors are sentences for the host to show. -/
structure ModelEntry where
  name : String
  graph : String → Except String String

/-- The registered models, in registration order; filled by `initialize registerModel …` in
the model modules, which run when the library's root module is initialised (`cc/tyr.c`). -/
initialize modelRegistry : IO.Ref (Array ModelEntry) ← IO.mkRef #[]

/-- Add a model to the library; call it from an `initialize` command of the model's module. -/
def registerModel (entry : ModelEntry) : IO Unit :=
  modelRegistry.modify (·.push entry)

/-! ## Reading a config -/

/-- The config text as a JSON object. -/
def parseConfig (text : String) : Except String Json :=
  match Json.parse text with
  | .error e => .error s!"the config is not valid JSON: {e}"
  | .ok j@(.obj _) => .ok j
  | .ok j => .error s!"the config must be a JSON object, got {j.compress}"

/-- The value at `key` of the config object `cfg`. -/
def field (cfg : Json) (key : String) : Except String Json :=
  match cfg.getObjVal? key with
  | .ok v => .ok v
  | .error _ => .error s!"the config has no key '{key}'"

/-- The value at `key` as a natural number. -/
def natField (cfg : Json) (key : String) : Except String Nat := do
  let v ← field cfg key
  match v.getNat? with
  | .ok n => pure n
  | .error _ => throw s!"config key '{key}' must be a natural number (Nat), got {v.compress}"

/-- The value at `key` as a float (any JSON number). -/
def floatField (cfg : Json) (key : String) : Except String Float := do
  let v ← field cfg key
  match (Lean.fromJson? v : Except String Float) with
  | .ok x => pure x
  | .error _ => throw s!"config key '{key}' must be a number (Float), got {v.compress}"

/-- The value at `key` as a JSON object (a nested config structure). -/
def objField (cfg : Json) (key : String) : Except String Json := do
  match ← field cfg key with
  | j@(.obj _) => pure j
  | v => throw s!"config key '{key}' must be an object, got {v.compress}"

/-! ## Inputs and parameters -/

/-- The graph input `name`, a float tensor; its shape is the one the expected type asks for. -/
def input {s : Shape} (name : String) : T s := ⟨.input name s .f32⟩

/-- The graph input `name`, an integer tensor (ids, class targets) whose values lie in `[0, n)`;
its shape and bound are the ones the expected type asks for. -/
def inputI {s : Shape} {n : Nat} (name : String) : IT s n := ⟨.input name s (.i64 n)⟩

/-- A parameter of the graph: its field path, shape and initialiser. -/
structure ParamLeaf where
  path : String
  shape : Shape
  init : Init

/-- The parameter leaves of `p` in field order, and `p` with each leaf replaced by a
reference to its path: the graph names a parameter by its path (`blocks.0.attn.w_q`). -/
def bindParams {α : Type} [TensorStruct α] (p : α) : α × Array ParamLeaf :=
  let leaves := TensorStruct.foldWithPath (fun (acc : Array ParamLeaf) path {s} t =>
    match t.node with
    | .param init _ _ => acc.push { path := path, shape := s, init := init }
    | _ => acc) #[] p
  let named := TensorStruct.mapWithPath (fun path {s} t =>
    match t.node with
    | .param _ _ _ => (⟨.input path s .f32⟩ : T s)
    | _ => t) p
  (named, leaves)

/-! ## JSON of the graph IR (docs/ir.md) -/

def dtypeJson : DType → Json
  | .f32 => Json.str "f32"
  | .i64 _ => Json.str "i64"

/-- The `bound` field of an input or node record: an integer value's bound, nothing for a
float one. -/
def boundJson : DType → List (String × Json)
  | .f32 => []
  | .i64 n => [("bound", Lean.toJson n)]

def initJson : Init → Json
  | .zeros => Json.mkObj [("kind", Json.str "zeros")]
  | .ones => Json.mkObj [("kind", Json.str "ones")]
  | .normal std => Json.mkObj [("kind", Json.str "normal"), ("std", Lean.toJson std)]
  | .uniform bound => Json.mkObj [("kind", Json.str "uniform"), ("bound", Lean.toJson bound)]
  | .interval lo hi => Json.mkObj [("kind", Json.str "interval"), ("lo", Lean.toJson lo),
      ("hi", Lean.toJson hi)]
  | .fill value => Json.mkObj [("kind", Json.str "fill"), ("value", Lean.toJson value)]
  | .ramp first last => Json.mkObj [("kind", Json.str "ramp"), ("first", Lean.toJson first),
      ("last", Lean.toJson last)]
  | .checkpoint file key => Json.mkObj [("kind", Json.str "checkpoint"),
      ("file", Json.str file), ("key", Json.str key)]

def attrJson : Attr → String × Json
  | .nat key v => (key, Lean.toJson v)
  | .float key v => (key, Lean.toJson v)
  | .shape key v => (key, Lean.toJson v)

/-- The address of a node object. Only compared while every node is alive (the outputs
hold them, and no node is allocated during emission), so equal addresses mean one node. -/
private unsafe def nodeAddrImpl (n : Node) : USize := ptrAddrUnsafe n

@[implemented_by nodeAddrImpl]
private opaque nodeAddr (n : Node) : USize

/-- Nodes emitted so far, and the name of each by address (sharing is kept, not unfolded:
a residual stream used twice per block would otherwise double the graph per block). -/
structure EmitState where
  names : Std.HashMap USize String := {}
  nodes : Array Json := #[]

/-- Emit `n` after its arguments; return the name the graph knows it by. -/
partial def emitNode (st : EmitState) (n : Node) : Except String (String × EmitState) :=
  match n with
  | .input name _ _ => .ok (name, st)
  | .param _ _ _ =>
    .error "a parameter that is not in the parameter structure (use bindParams on it)"
  | .op op args attrs shape dtype => do
    let key := nodeAddr n
    if let some name := st.names[key]? then
      return (name, st)
    let (ins, st) ← args.foldlM (init := ((#[] : Array String), st)) fun acc a => do
      let (name, st') ← emitNode acc.2 a
      pure (acc.1.push name, st')
    let name := s!"%{st.nodes.size}"
    let node := Json.mkObj ([
      ("name", Json.str name), ("op", Json.str op), ("inputs", Lean.toJson ins),
      ("attrs", Json.mkObj (attrs.map attrJson)), ("shape", Lean.toJson shape),
      ("dtype", dtypeJson dtype)] ++ boundJson dtype)
    return (name, { names := st.names.insert key name, nodes := st.nodes.push node })

/-- The graph IR of a model, as compact JSON text: `inputs` are the input nodes in binder
order, `params` the leaves from `bindParams`, `outputs` the model's results in order. -/
def graphJson (model : String) (config : Json) (inputs : List Node) (params : Array ParamLeaf)
    (outputs : List Node) : Except String String := do
  let mut ins : Array Json := #[]
  for n in inputs do
    match n with
    | .input name shape dtype =>
      ins := ins.push (Json.mkObj ([("name", Json.str name), ("shape", Lean.toJson shape),
                                    ("dtype", dtypeJson dtype)] ++ boundJson dtype))
    | _ => throw "the graph inputs must be input nodes (made with `input` or `inputI`)"
  let ps := params.map fun p => Json.mkObj [("path", Json.str p.path),
    ("shape", Lean.toJson p.shape), ("dtype", Json.str "f32"), ("init", initJson p.init)]
  let mut st : EmitState := {}
  let mut refs : Array String := #[]
  for o in outputs do
    let (name, st') ← emitNode st o
    refs := refs.push name
    st := st'
  let mut outs : Array Json := #[]
  let mut i := 0
  for r in refs do
    let name := if refs.size == 1 then "out" else s!"out{i}"
    outs := outs.push (Json.mkObj [("name", Json.str name), ("ref", Json.str r)])
    i := i + 1
  let doc := Json.mkObj [
    ("format", Json.str "tyr.graph"), ("version", Lean.toJson (2 : Nat)),
    ("model", Json.str model), ("source", Json.null), ("config", config),
    ("inputs", Json.arr ins), ("params", Json.arr ps), ("nodes", Json.arr st.nodes),
    ("outputs", Json.arr outs)]
  return doc.compress

/-! ## The entry points of `cc/tyr.c` -/

/-- The registered model names as a JSON array (`tyr_list_models`). -/
@[export tyr_lean_models]
def exportModels (_ : Unit) : IO String := do
  let models ← modelRegistry.get
  return (Json.arr (models.map fun m => Json.str m.name)).compress

/-- The graph IR of model `name` for the config text (`tyr_model_graph`); an unknown model
or a config the model rejects is an `IO` error whose text the host shows. -/
@[export tyr_lean_graph]
def exportGraph (name config : String) : IO String := do
  let models ← modelRegistry.get
  match models.find? (·.name == name) with
  | none =>
    let known := ", ".intercalate (models.toList.map (·.name))
    throw <| IO.userError
      s!"no model named '{name}' (models: {if known.isEmpty then "none" else known})"
  | some m =>
    match m.graph config with
    | .ok json => return json
    | .error msg => throw <| IO.userError s!"model '{name}': {msg}"

end torch.Export
