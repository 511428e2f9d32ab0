import Lean
import Tyr.Meta.Deriving

/-!
# Tyr.Meta.SafeTensors — types from a checkpoint's header

```
safetensors_type_provider "bert/model.safetensors" as Bert
def q : T #[384, 768] := Bert.encoder.layer[0].attention.query.weight
```

reads at elaboration time only the checkpoint's header (8-byte little-endian length `N`, at
most 100,000,000 and within the file, then `N` bytes of JSON) and declares one structure per
named subtree of the dotted tensor names, and the constant `Bert`:

* The path may also be a `.schema.json` snapshot or a directory (the shards named by its
  `model.safetensors.index.json`, else all its `*.safetensors`). A relative path is looked up
  beside the Lean file, then in the current directory.
* Children numbered `0 … n-1` whose items have the same names, dtypes, shapes and list
  lengths make lists; other children are fields, numerals included (Flux's `img_mlp.0` and
  `img_mlp.2` are the fields `«0»` and `«2»`), sorted (numbers by value, names by code point).
* The structure at the named path `a.b` (list indices left out: items share one type) is
  `Bert.a.b.Schema`, the root's `Bert.Schema` (`Bert.Schema.a` is the root's projection `a`).
* A tensor field is `torch.T #[d₀, …]` (float dtypes) or `torch.IT #[…] k` (integer, `BOOL`), a
  list field `Vector τ n`; fields are named by the segments (`Bert.«lm-head»`).
* Every structure derives `Inhabited` and `torch.TensorStruct` (whose paths are the tensor
  names). `def Bert : Bert.Schema` holds, for each float tensor, the parameter
  `torch.param (.checkpoint "FILE" "NAME")` (`FILE` the checkpoint path made absolute by
  `IO.FS.realPath`, `NAME` the full tensor name), as the Python checker instantiates it;
  integer tensors are `default`.

Errors name the file and the tensor (a top level that is a list, a tensor that is also a
prefix, an unknown dtype, a field named `mk`, `rec`, … or a subtree named `Schema`). Lake does not track the checkpoint: touch the Lean file after changing it.
The Python checker implements the same command natively (`docs/lean-meta.md`).
-/

namespace torch.SafeTensors

open Lean Elab Command
open System (FilePath)

/-- One tensor as the header declares it. -/
structure Spec where
  /-- The full dotted name. -/
  name : String
  /-- The safetensors dtype, e.g. `"F32"`. -/
  dtype : String
  /-- The shape, outermost first. -/
  shape : Array Nat
  deriving Inhabited

/-- The tree the dotted names make. -/
inductive Tree where
  /-- A tensor. -/
  | leaf (spec : Spec)
  /-- A named level: its fields, sorted. -/
  | node (kids : Array (String × Tree))
  /-- A numbered level: items `0 … n-1`, all of the same structure. -/
  | list (items : Array Tree)

instance : Inhabited Tree := ⟨.node #[]⟩

/-- The largest header or JSON file read (100 MB), as in `pytyr.safetensors.reader`. -/
def maxHeader : Nat := 100000000

/-- `some true` for float dtypes (`T`), `some false` for integer and `BOOL` ones (`IT`). -/
def isFloat? (dtype : String) : Option Bool :=
  if ["F64", "F32", "F16", "BF16", "F4"].contains dtype || dtype.startsWith "F8_" ||
      dtype.startsWith "F6_" then some true
  else if ["BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64"].contains dtype then
    some false
  else none

/-- The bound `k` of an integer tensor's type `torch.IT #[…] k`: the header says nothing tighter
than the dtype, so every non-negative value the dtype holds is below it (`BOOL` 2, `U8` 2⁸,
`I8` 2⁷, …, `I64` 2⁶³), as `INT_BOUNDS` in `pytyr/lean/provider.py`. -/
def intBound (dtype : String) : Nat :=
  match dtype with
  | "BOOL" => 2
  | "U8" => 2 ^ 8
  | "I8" => 2 ^ 7
  | "U16" => 2 ^ 16
  | "I16" => 2 ^ 15
  | "U32" => 2 ^ 32
  | "I32" => 2 ^ 31
  | "U64" => 2 ^ 64
  | _ => 2 ^ 63

/-- Segments Lean already uses for a structure's own declarations (`S.mk`, `S.rec`, …). -/
def reserved : List String :=
  ["mk", "rec", "recOn", "casesOn", "noConfusion", "noConfusionType", "below", "brecOn",
    "binductionOn", "ibelow", "ctorIdx", "toCtorIdx", "ctorElim", "ctorElimType"]

/-- A list index: ASCII digits only. -/
def isIndex (s : String) : Bool := !s.isEmpty && s.all Char.isDigit

/-- The value of a list index. -/
def indexVal (s : String) : Nat := s.foldl (fun n c => n * 10 + (c.toNat - '0'.toNat)) 0

/-- Order of segment lists: segment by segment, two indices by value, otherwise by string. -/
def segLt : List String → List String → Bool
  | [], [] => false
  | [], _ :: _ => true
  | _ :: _, [] => false
  | a :: xs, b :: ys =>
    if a == b then segLt xs ys
    else if isIndex a && isIndex b && indexVal a != indexVal b then decide (indexVal a < indexVal b)
    else decide (a < b)

/-- A canonical string for a subtree's structure: list items must all have the same. -/
partial def shapeSig : Tree → String
  | .leaf s => s!"{s.dtype}{s.shape}"
  | .node kids =>
    "{" ++ ", ".intercalate (kids.toList.map fun (k, t) => k.quote ++ ": " ++ shapeSig t) ++ "}"
  | .list items => s!"[{items.size} × {shapeSig items[0]!}]"

/-- The tree of the entries `(remaining segments, spec)` under `path`, sorted by `segLt`. -/
partial def buildLevel (path : String) (es : Array (List String × Spec)) : Except String Tree := do
  if es.size == 1 && es[0]!.1.isEmpty then return .leaf es[0]!.2
  if let some (_, s) := es.find? (·.1.isEmpty) then
    throw s!"tensor '{s.name}' is also a prefix of other tensor names"
  let mut groups : Array (String × Array (List String × Spec)) := #[]
  for (segs, s) in es do
    let seg := segs.headD ""
    match groups.back? with
    | some (k, g) =>
      if k == seg then
        groups := groups.set! (groups.size - 1) (k, g.push (segs.tail, s))
      else
        groups := groups.push (seg, #[(segs.tail, s)])
    | none => groups := groups.push (seg, #[(segs.tail, s)])
  let join := fun (k : String) => if path.isEmpty then k else path ++ "." ++ k
  let firstName := fun (g : Array (List String × Spec)) => g[0]!.2.name
  let mut kids : Array (String × Tree) := #[]
  for (k, g) in groups do
    if reserved.contains k then
      throw s!"tensor '{firstName g}': '{k}' cannot be a field (Lean declares it for a structure)"
    let t ← buildLevel (join k) g
    if k == "Schema" && !(t matches .leaf _) then
      throw s!"tensor '{firstName g}': 'Schema' names the generated types, not a subtree"
    kids := kids.push (k, t)
  -- Children numbered `0, 1, …, n-1` whose subtrees agree make a list; any other children are
  -- fields, numerals included (`img_mlp.0`, `img_mlp.2`: an `nn.Sequential`'s layers around a
  -- parameter-free one, the fields `«0»` and `«2»`).
  let numbered := (List.range kids.size).all fun i => kids[i]!.1 == toString i
  if numbered && kids.all (fun kid => shapeSig kid.2 == shapeSig kids[0]!.2) then
    return .list (kids.map (·.2))
  return .node kids

/-- The tree of a checkpoint's tensors; its root is a named level. -/
def buildTree (specs : Array Spec) : Except String Tree := do
  if specs.isEmpty then throw "the checkpoint holds no tensors"
  for s in specs do
    if (s.name.splitOn ".").any (·.isEmpty) then
      throw s!"tensor '{s.name}' has an empty name segment"
    if (isFloat? s.dtype).isNone then
      throw s!"tensor '{s.name}': dtype '{s.dtype}' has no Tyr tensor type"
  let es := (specs.map fun s => (s.name.splitOn ".", s)).qsort fun a b => segLt a.1 b.1
  match (← buildLevel "" es) with
  | .node kids => return .node kids
  | _ => throw "the top level of the tensor names holds list indices, not names"

/-- One header entry: `{"dtype": str, "shape": [nat, …], …}`. -/
def specOf (name : String) (e : Json) : Except String Spec := do
  let bad := fun (_ : String) =>
    s!"tensor '{name}': expected an object with a string 'dtype' and a 'shape' list of naturals"
  let dtype ← (e.getObjVal? "dtype" >>= Json.getStr?).mapError bad
  let dims ← (e.getObjVal? "shape" >>= Json.getArr?).mapError bad
  let shape ← (dims.mapM Json.getNat?).mapError bad
  return { name, dtype, shape }

/-- The tensors of a header (or of a snapshot's `tensors`), `__metadata__` left out. -/
def specsOf (obj : Json) : Except String (Array Spec) := do
  let entries ← obj.getObj? |>.mapError fun _ => "expected a JSON object of tensors"
  let mut out : Array Spec := #[]
  for (name, e) in entries.toList do
    unless name == "__metadata__" do
      out := out.push (← specOf name e)
  return out

/-- The tensors of a `.schema.json` snapshot (`format`, `version` 1, `tensors`). -/
def schemaSpecs (j : Json) : Except String (Array Spec) := do
  unless (j.getObjValD "format").getStr?.toOption == some "tyr.safetensors.schema" do
    throw "not a schema snapshot: its 'format' is not 'tyr.safetensors.schema'"
  unless (j.getObjValD "version").getNat?.toOption == some 1 do
    throw "the snapshot's 'version' is not the supported 1"
  specsOf (j.getObjValD "tensors")

/-- Fail naming the file. -/
def failAt {α : Type} (path : FilePath) (msg : String) : CommandElabM α :=
  throwError "safetensors_type_provider: {path.toString}: {msg}"

/-- The value of `r`, or an error naming the file. -/
def ofExcept {α : Type} (path : FilePath) (r : Except String α) : CommandElabM α :=
  match r with
  | .ok a => pure a
  | .error msg => failAt path msg

/-- Up to `n` bytes from `h` (fewer only at the end of the file). -/
def readBytes (h : IO.FS.Handle) (n : Nat) : IO ByteArray := do
  let mut acc := ByteArray.empty
  while acc.size < n do
    let chunk ← h.read (n - acc.size).toUSize
    if chunk.size == 0 then break
    acc := acc ++ chunk
  return acc

/-- The tensors of one safetensors file, reading its header only. -/
def fileSpecs (path : FilePath) : CommandElabM (Array Spec) := do
  let size := (← path.metadata).byteSize.toNat
  if size < 8 then failAt path s!"{size} bytes is too short for a safetensors header"
  let h ← IO.FS.Handle.mk path .read
  let n := (← readBytes h 8).data.foldr (fun b acc => acc * 256 + b.toNat) 0
  if n > maxHeader then failAt path s!"the header length {n} is over the limit of {maxHeader} bytes"
  if 8 + n > size then
    failAt path s!"the header length {n} runs past the end of the file ({size} bytes)"
  let some text := String.fromUTF8? (← readBytes h n) | failAt path "the header is not UTF-8"
  let j ← ofExcept path ((Json.parse text).mapError ("the header is not JSON: " ++ ·))
  ofExcept path (specsOf j)

/-- A JSON file (a snapshot or a shard index) of at most `maxHeader` bytes. -/
def jsonFile (path : FilePath) : CommandElabM Json := do
  if (← path.metadata).byteSize.toNat > maxHeader then failAt path s!"over {maxHeader} bytes"
  ofExcept path ((Json.parse (← IO.FS.readFile path)).mapError ("not JSON: " ++ ·))

/-- The tensors of a directory: the shards of its index, else all its `*.safetensors` files. -/
def dirSpecs (dir : FilePath) : CommandElabM (Array Spec) := do
  let index := dir / "model.safetensors.index.json"
  let mut specs : Array Spec := #[]
  if (← index.pathExists) then
    let wm := (← jsonFile index).getObjValD "weight_map"
    let some entries := wm.getObj?.toOption | failAt index "'weight_map' is not an object"
    let mut shards : Array String := #[]
    for (name, f) in entries.toList do
      let some f := f.getStr?.toOption | failAt index s!"'weight_map' of '{name}' is not a string"
      if (f : FilePath).isAbsolute || (f : FilePath).components.contains ".." then
        failAt index s!"shard '{f}' is not a relative path inside the directory"
      unless shards.contains f do shards := shards.push f
    for f in shards.qsort (· < ·) do
      for s in (← fileSpecs (dir / f)) do
        unless (wm.getObjValD s.name).getStr?.toOption == some f do
          failAt (dir / f) s!"tensor '{s.name}' is not mapped to this shard by the index"
        specs := specs.push s
    unless specs.size == entries.toList.length do
      failAt index "some tensors of 'weight_map' are missing from their shards"
  else
    let files := (← dir.readDir).filter (·.fileName.endsWith ".safetensors")
    if files.isEmpty then failAt dir "no model.safetensors.index.json and no *.safetensors file"
    for f in (files.map (·.fileName)).qsort (· < ·) do
      for s in (← fileSpecs (dir / f)) do
        if specs.any (·.name == s.name) then failAt (dir / f) s!"tensor '{s.name}' is in two files"
        specs := specs.push s
  return specs

/-- The tensors at `path`: a directory, a `.schema.json` snapshot or a safetensors file. -/
def readSpecs (path : FilePath) : CommandElabM (Array Spec) := do
  if (← path.isDir) then
    dirSpecs path
  else if path.toString.endsWith ".schema.json" then
    let j ← jsonFile path
    ofExcept path (schemaSpecs j)
  else
    fileSpecs path

/-- `rel` beside the file being elaborated, else in the current directory. -/
def resolvePath (rel : String) : CommandElabM FilePath := do
  let file ← MonadLog.getFileName
  let beside := match (FilePath.mk file).parent with
    | some dir => dir / rel
    | none => FilePath.mk rel
  if (← beside.pathExists) then return beside
  if (← (FilePath.mk rel).pathExists) then return FilePath.mk rel
  throwError (m!"safetensors_type_provider: checkpoint '{rel}' not found " ++
    m!"(looked beside {file} and in the current directory)")

/-- The shape `#[d₀, …]` of a tensor, as a term. -/
def shapeTerm (shape : Array Nat) : CommandElabM Term := do
  let dims : Array Term := shape.map fun d => ⟨(Syntax.mkNumLit (toString d)).raw⟩
  `(#[$dims,*])

/-- The type of a tensor: `torch.T #[…]` for a float dtype, `torch.IT #[…] k` otherwise, `k` its
`intBound`. -/
def leafType (s : Spec) : CommandElabM Term := do
  let shape ← shapeTerm s.shape
  if isFloat? s.dtype == some true then
    let fam := mkCIdent ``torch.T
    `($fam:ident $shape)
  else
    let fam := mkCIdent ``torch.IT
    let bound : Term := ⟨(Syntax.mkNumLit (toString (intBound s.dtype))).raw⟩
    `($fam:ident $shape $bound)

/-- Declare the structures of `t` at the named path `np` under `root`, children first, and
return the type of a value shaped like `t`. `ns` is the current namespace. -/
partial def declare (ns root np : Name) (t : Tree) : CommandElabM Term := do
  match t with
  | .leaf s => leafType s
  | .list items =>
    let elem ← declare ns root np items[0]!
    `(Vector $elem $(quote items.size))
  | .node kids =>
    let tyName := root ++ np ++ `Schema
    let fields ← kids.mapM fun (k, sub) => do
      let ty ← declare ns root (np.str k) sub
      `(Lean.Parser.Command.structSimpleBinder| $(mkIdent (Name.mkSimple k)):ident : $ty)
    let tyId := mkIdent tyName
    elabCommand (← `(command| structure $tyId:ident where $[$fields:structSimpleBinder]*))
    elabCommand (← `(command| deriving instance Inhabited for $tyId:ident))
    elabCommand (← `(command| deriving instance torch.TensorStruct for $tyId:ident))
    unless (← getEnv).contains (ns ++ tyName) do
      throwError "safetensors_type_provider: could not declare the structure '{tyName}'"
    return ⟨(mkCIdent (ns ++ tyName)).raw⟩

/-- The value of `t` (declared by `declare` at the same `ns`, `root`, `np`): a float tensor is
`torch.param (s := #[…]) (torch.Init.checkpoint "file" "name")`, an integer one
`(default : torch.IT #[…] k)`, a list `#v[item₀, …]`, a structure `S.mk field₀ …`. Every term
carries its own type, so none needs an expected type. -/
partial def valueOf (ns root np : Name) (file : String) (t : Tree) : CommandElabM Term := do
  match t with
  | .leaf s =>
    if isFloat? s.dtype == some true then
      let paramId := mkCIdent ``torch.param
      let ckptId := mkCIdent ``torch.Init.checkpoint
      let shape ← shapeTerm s.shape
      let fileLit : Term := ⟨(Syntax.mkStrLit file).raw⟩
      let keyLit : Term := ⟨(Syntax.mkStrLit s.name).raw⟩
      `($paramId:ident (s := $shape) ($ckptId:ident $fileLit $keyLit))
    else
      let ty ← leafType s
      `((default : $ty))
  | .list items =>
    let elems ← items.mapM (valueOf ns root np file)
    `(#v[$elems,*])
  | .node kids =>
    let args ← kids.mapM fun (k, sub) => valueOf ns root (np.str k) file sub
    let ctor := mkCIdent (ns ++ root ++ np ++ `Schema ++ `mk)
    `($ctor:ident $args*)

/-- `safetensors_type_provider "path" as Name` declares `Name.Schema` (and one structure per
named subtree, `Name.a.b.Schema`) from the header of the checkpoint at `path`, and
`Name : Name.Schema`. See the module documentation of `Tyr.Meta.SafeTensors`. -/
syntax (name := safetensorsTypeProvider)
  "safetensors_type_provider " str &" as " ident : command

/-- The elaborator of `safetensors_type_provider`. -/
@[command_elab safetensorsTypeProvider]
def elabTypeProvider : CommandElab := fun stx => do
  let some rel := stx[1].isStrLit? | throwUnsupportedSyntax
  let nameId : Ident := ⟨stx[3]⟩
  let path ← resolvePath rel
  let tree ← ofExcept path (buildTree (← readSpecs path))
  let ns ← getCurrNamespace
  let rootTy ← declare ns nameId.getId .anonymous tree
  -- The checkpoint as the Python checker names it (`Path.resolve()`): absolute, no symlinks.
  let file := (← IO.FS.realPath path).toString
  let value ← valueOf ns nameId.getId .anonymous file tree
  elabCommand (← `(command| def $nameId:ident : $rootTy := $value))

end torch.SafeTensors
