import Tyr.Core

/-!
# Tyr.Meta.TensorStruct — traversing every tensor inside a value

A model's parameters are an ordinary Lean value: a structure of tensors, vectors of
sub-structures, pairs, options. `TensorStruct α` says how to reach every float tensor `T s`
inside a value of type `α`, whatever its shape, so that generic code can

* `map` a shape-preserving function over all parameters (e.g. an SGD step),
* `mapM` the same in a monad (e.g. instantiate parameters with fresh names),
* `zipWith` two values of the *same type* (params and grads: the type system guarantees that
  the two structures line up tensor for tensor, shape for shape),
* `fold` over all parameters (count them, collect their shapes),
* `mapPathM` with the *field path* of each tensor, e.g. `blocks.0.attn.w_q`: structure fields
  are named by their field names, vector elements by their index, joined with dots.

Instances here cover `T s`, `IT s n`, pairs, `Option` and core's length-indexed `Vector α n`;
`deriving TensorStruct` (module `Tyr.Meta.Deriving`) writes the instance of a structure.

Choices:
* Integer tensors `IT s n` are **not** traversed: they are data (token ids, targets), never
  trainable parameters, and the traversal functions are typed over float tensors `T s` only.
  Their instance leaves them unchanged and `fold` skips them.
* Non-tensor fields of type `Nat`, `Float`, `Bool`, `String` or `Unit` (e.g. a size stored
  next to the weights) are allowed: their instances are the identity. `zipWith` keeps the
  value of its first argument. Fields of any other type need a `TensorStruct` instance.
* Vector elements are named by their index; `some a` is visited at the option's own path
  (`none` holds nothing); a pair's components are at `fst` and `snd`.

This module is Lean-only meta code: the Python checker does not read it, it implements the
same traversal natively (see `docs/lean-meta.md`).
-/

namespace torch

/-- Values of type `α` contain float tensors that generic code can visit: every `T s` inside,
in field order. The functions passed in are polymorphic in the shape `s`. -/
class TensorStruct (α : Type) where
  /-- Apply a shape-preserving function to every float tensor. -/
  map : (∀ {s : Shape}, T s → T s) → α → α
  /-- Apply a monadic shape-preserving function to every float tensor, in field order. -/
  mapM {m : Type → Type} [Monad m] : (∀ {s : Shape}, T s → m (T s)) → α → m α
  /-- Combine two values of the same type tensor by tensor (same path, same shape). -/
  zipWith : (∀ {s : Shape}, T s → T s → T s) → α → α → α
  /-- Left fold over every float tensor, in field order. -/
  fold {β : Type} : (∀ {s : Shape}, β → T s → β) → β → α → β
  /-- `mapM` that also passes each tensor's field path. The `String` argument is the path of
  the value itself (`""` at the root); see `TensorStruct.joinPath`. -/
  mapPathM {m : Type → Type} [Monad m] :
    (String → ∀ {s : Shape}, T s → m (T s)) → String → α → m α

namespace TensorStruct

/-- Extend the path `pre` by one segment: `joinPath "blocks" "0" = "blocks.0"`, and
`joinPath "" "w" = "w"` at the root. -/
def joinPath (pre seg : String) : String :=
  if pre.isEmpty then seg else pre ++ "." ++ seg

/-- The instance of a type that holds no float tensor: every method is the identity
(`zipWith` keeps its first argument). -/
@[reducible] def constant (α : Type) : TensorStruct α where
  map _ x := x
  mapM _ x := pure x
  zipWith _ x _ := x
  fold _ b _ := b
  mapPathM _ _ x := pure x

/-- `map` with the path of each tensor: `f path t`. Paths start at the root (`""`). -/
def mapWithPath {α : Type} [TensorStruct α] (f : String → ∀ {s : Shape}, T s → T s)
    (x : α) : α :=
  Id.run (mapPathM (m := Id) (fun p {_s} t => pure (f p t)) "" x)

/-- `fold` with the path of each tensor: `f acc path t`, in field order. -/
def foldWithPath {α β : Type} [TensorStruct α] (f : β → String → ∀ {s : Shape}, T s → β)
    (init : β) (x : α) : β :=
  let visit : String → ∀ {s : Shape}, T s → StateM β (T s) := fun p {_s} t => do
    modify fun acc => f acc p t
    pure t
  (Id.run (StateT.run (mapPathM visit "" x) init)).2

/-- The field paths of all float tensors in `x`, in field order. -/
def paths {α : Type} [TensorStruct α] (x : α) : List String :=
  foldWithPath (fun (acc : List String) p {_s} _ => acc ++ [p]) [] x

/-- The total number of scalars in the float tensors of `x` (the parameter count). -/
def paramCount {α : Type} [TensorStruct α] (x : α) : Nat :=
  fold (fun {s} (acc : Nat) _ => acc + numel s) 0 x

end TensorStruct

/-- A float tensor is a leaf: the function is applied to it, at the path of the value. -/
instance {s : Shape} : TensorStruct (T s) where
  map f t := f t
  mapM f t := f t
  zipWith f a b := f a b
  fold f b t := f b t
  mapPathM f p t := f p t

/-- Integer tensors are data, not parameters: they are not visited (see the module doc). -/
instance {s : Shape} {n : Nat} : TensorStruct (IT s n) := TensorStruct.constant (IT s n)

/-- A natural number field (a stored size) holds no tensor. -/
instance : TensorStruct Nat := TensorStruct.constant Nat

/-- A float field (a stored constant) holds no tensor. -/
instance : TensorStruct Float := TensorStruct.constant Float

/-- A boolean field (a flag) holds no tensor. -/
instance : TensorStruct Bool := TensorStruct.constant Bool

/-- A string field (a label) holds no tensor. -/
instance : TensorStruct String := TensorStruct.constant String

/-- `Unit` holds no tensor. -/
instance : TensorStruct Unit := TensorStruct.constant Unit

/-- A pair visits its first component (path `fst`), then its second (path `snd`). -/
instance {α β : Type} [TensorStruct α] [TensorStruct β] : TensorStruct (α × β) where
  map f x := (TensorStruct.map f x.1, TensorStruct.map f x.2)
  mapM f x := do
    let a ← TensorStruct.mapM f x.1
    let b ← TensorStruct.mapM f x.2
    pure (a, b)
  zipWith f x y := (TensorStruct.zipWith f x.1 y.1, TensorStruct.zipWith f x.2 y.2)
  fold f b x := TensorStruct.fold f (TensorStruct.fold f b x.1) x.2
  mapPathM f p x := do
    let a ← TensorStruct.mapPathM f (TensorStruct.joinPath p "fst") x.1
    let b ← TensorStruct.mapPathM f (TensorStruct.joinPath p "snd") x.2
    pure (a, b)

/-- An optional value is visited when present, at the option's own path. `zipWith` combines
two `some`s and otherwise keeps its first argument. -/
instance {α : Type} [TensorStruct α] : TensorStruct (Option α) where
  map f x := x.map (TensorStruct.map f)
  mapM f x := match x with
    | none => pure none
    | some a => do
      let a ← TensorStruct.mapM f a
      pure (some a)
  zipWith f x y := match x, y with
    | some a, some b => some (TensorStruct.zipWith f a b)
    | _, _ => x
  fold f b x := match x with
    | none => b
    | some a => TensorStruct.fold f b a
  mapPathM f p x := match x with
    | none => pure none
    | some a => do
      let a ← TensorStruct.mapPathM f p a
      pure (some a)

/-- A vector of `n` values (core's `Vector`): element `i` is at path segment `i`, so the
`w_q` of block 0 is `blocks.0.attn.w_q`. Two vectors of the same type have the same length,
so `zipWith` pairs elements one to one. -/
instance {α : Type} {n : Nat} [TensorStruct α] : TensorStruct (Vector α n) where
  map f v := v.map (TensorStruct.map f)
  mapM f v := v.mapM (TensorStruct.mapM f)
  zipWith f v w := Vector.ofFn fun i => TensorStruct.zipWith f (v.get i) (w.get i)
  fold f b v := v.foldl (fun acc a => TensorStruct.fold f acc a) b
  mapPathM f p v :=
    (Vector.ofFn fun i => (i.val, v.get i)).mapM fun ia =>
      TensorStruct.mapPathM f (TensorStruct.joinPath p (toString ia.1)) ia.2

end torch
