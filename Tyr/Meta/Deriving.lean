import Lean
import Tyr.Meta.TensorStruct

/-!
# Tyr.Meta.Deriving — `deriving TensorStruct` for structures

```
structure Params (c : Config) where
  embed  : T #[c.vocab, c.d]
  blocks : Vector (Block c) c.layers
  deriving TensorStruct
```

writes, field by field, the instance

```
instance {c} : TensorStruct (@Params c) := {
  map      := fun f x => { embed := TensorStruct.map f x.embed, blocks := ... }
  mapM     := fun f x => bind (TensorStruct.mapM f x.embed) fun y₁ => ... pure { ... }
  zipWith  := fun f x x' => { embed := TensorStruct.zipWith f x.embed x'.embed, ... }
  fold     := fun f b x => TensorStruct.fold f (TensorStruct.fold f b x.embed) x.blocks
  mapPathM := fun f p x => bind (TensorStruct.mapPathM f (joinPath p "embed") x.embed) ... }
```

Every field's type needs a `TensorStruct` instance (tensors, vectors, pairs, options, other
derived structures, and the trivial `Nat`/`Float`/`Bool`/`String`/`Unit` ones). Fields inherited
with `extends` are visited as if declared in the structure. The structure's parameters become
implicit binders of the instance; a parameter that is a type (`α : Type`) also gets a
`[TensorStruct α]` binder. The handler declines (so `deriving` reports an error) on anything
that is not a structure.

The handler is registered with `initialize`, so it is active only in modules that import this
one. It follows the pattern of core's handlers (`Lean/Elab/Deriving/FromToJson.lean`,
`Lean/Elab/Deriving/Serialize.lean`): build the instance as syntax and elaborate it.
-/

namespace torch.DeriveTensorStruct

open Lean Elab Command Meta

/-- The path segment of a structure field: its name as written. -/
def fieldSegment (field : Name) : String :=
  field.eraseMacroScopes.getString!

/-- `[TensorStruct α]` binders for the parameters of `indVal` of type `Type`. They are
returned as `implicitBinder` syntax only so they can be spliced next to the implicit binders,
as core's `mkInstanceCmds` does; the nodes themselves are instance binders. -/
def mkInstBinders (indVal : InductiveVal) (argNames : Array Name) :
    TermElabM (Array (TSyntax ``Lean.Parser.Term.implicitBinder)) :=
  forallBoundedTelescope indVal.type indVal.numParams fun xs _ => do
    let mut binders : Array (TSyntax ``Lean.Parser.Term.implicitBinder) := #[]
    for x in xs, argName in argNames do
      if (← whnfD (← inferType x)) == mkSort levelOne then
        let cls := mkCIdent ``torch.TensorStruct
        let binder ← `(Lean.Parser.Term.instBinder| [$cls:ident $(mkIdent argName):ident])
        binders := binders.push ⟨binder.raw⟩
    return binders

/-- The `instance` command giving the structure `declName` its `TensorStruct` instance. -/
def mkInstanceCmd (declName : Name) : TermElabM (TSyntax `command) := do
  let indVal ← getConstInfoInduct declName
  let argNames ← Lean.Elab.Deriving.mkInductArgNames indVal
  let binders ← Lean.Elab.Deriving.mkImplicitBinders argNames
  let binders := binders ++ (← mkInstBinders indVal argNames)
  let self ← Lean.Elab.Deriving.mkInductiveApp indVal argNames
  let fields := getStructureFieldsFlattened (← getEnv) declName (includeSubobjectFields := false)
  let f := mkIdent (← mkFreshUserName `f)
  let p := mkIdent (← mkFreshUserName `p)
  let b := mkIdent (← mkFreshUserName `b)
  let x := mkIdent (← mkFreshUserName `x)
  let x' := mkIdent (← mkFreshUserName `other)
  let labels : Array (TSyntax `ident) := fields.map mkIdent
  let ys ← fields.mapM fun _ => do return mkIdent (← mkFreshUserName `y)
  let yTerms : Array (TSyntax `term) := ys.map fun y => ⟨y.raw⟩
  -- `map` and `zipWith` rebuild the structure from the mapped fields.
  let mapVals ← fields.mapM fun fld =>
    ``(torch.TensorStruct.map $f ($x).$(mkIdent fld))
  let zipVals ← fields.mapM fun fld =>
    ``(torch.TensorStruct.zipWith $f ($x).$(mkIdent fld) ($x').$(mkIdent fld))
  let mapBody ← `(({ $[$labels:ident := $mapVals],* } : $self))
  let zipBody ← `(({ $[$labels:ident := $zipVals],* } : $self))
  -- `fold` threads the accumulator through the fields in order.
  let foldInit : TSyntax `term := ⟨b.raw⟩
  let foldBody ← fields.foldlM (init := foldInit) fun acc fld =>
    ``(torch.TensorStruct.fold $f $acc ($x).$(mkIdent fld))
  -- `mapM` and `mapPathM` bind each field's result in order, then rebuild the structure.
  let rebuilt ← ``(Pure.pure ({ $[$labels:ident := $yTerms],* } : $self))
  let mapMBody ← (fields.zip ys).foldrM (init := rebuilt) fun (fld, y) acc =>
    ``(Bind.bind (torch.TensorStruct.mapM $f ($x).$(mkIdent fld)) (fun $y => $acc))
  let pathBody ← (fields.zip ys).foldrM (init := rebuilt) fun (fld, y) acc => do
    let seg : TSyntax `term := quote (fieldSegment fld)
    let path ← ``(torch.TensorStruct.joinPath $p $seg)
    ``(Bind.bind (torch.TensorStruct.mapPathM $f $path ($x).$(mkIdent fld)) (fun $y => $acc))
  let cls := mkCIdent ``torch.TensorStruct
  `(instance $binders:implicitBinder* : $cls $self := {
      map := fun $f $x => $mapBody,
      mapM := fun $f $x => $mapMBody,
      zipWith := fun $f $x $x' => $zipBody,
      fold := fun $f $b $x => $foldBody,
      mapPathM := fun $f $p $x => $pathBody })

/-- The deriving handler: one instance per structure; declines if any name is not a
structure. -/
def handler (declNames : Array Name) : CommandElabM Bool := do
  let env ← getEnv
  unless declNames.size > 0 && declNames.all (isStructure env) do
    return false
  for declName in declNames do
    let cmd ← liftTermElabM (mkInstanceCmd declName)
    elabCommand cmd
  return true

initialize registerDerivingHandler ``torch.TensorStruct handler

end torch.DeriveTensorStruct
