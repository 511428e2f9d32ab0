/-!
# Tyr.Core — shapes, tensors and the graph nodes they stand for

A model in Tyr is an ordinary Lean function over tensors. A tensor `T s` is a *structure*
indexed by its shape, so `T #[1]` and `T #[2]` are different types and a dimension
mismatch is a type error. The value inside is a node of the model's graph; running the
model builds the graph IR that the Python harness executes.

`numel`, `mergesOrSplits`, `prim`, `primI` and `param` are the five definitions the Python
checker implements natively (it checks their signatures against these declarations);
everything else in `Tyr/` is read and type-checked by it. See `docs/lean-subset.md`.
-/

namespace torch

/-- A tensor shape: one `Nat` per dimension, outermost first. -/
abbrev Shape := Array Nat

/-- Number of elements of a shape (`1` for a scalar). -/
def numel (s : Shape) : Nat := s.foldl (fun acc d => acc * d) 1

/-- Whether `t` is `s` with runs of adjacent axes merged and single axes split, in order
(`#[2, 6]` to `#[12]` or `#[2, 2, 3]`): the two have as many elements, and every axis of `s`
lies within one axis of `t` (a merge) or starts and ends where axes of `t` do (a split). Axis `i`
covers the row-major offsets `p` to `p * s[i]`, `p` the product of the axes before it. A view
without a transpose (`[b, h, t, d]` as `[b, t, h * d]`) fails: an axis of `t` starts inside an
axis of `s` and ends beyond it. With no elements, any shape of none is `true`.

`reshape` asks `mergesOrSplits s target = true`, proved `by decide` on closed shapes. Written
with `Init`'s functions by name (`and`, `Nat.ble`, not `&&`, `≤`): the fidelity probes compile
this very text with real Lean and no `Init` (`tests/test_lean_fidelity.py`), against the
checker's own evaluation (`pytyr/lean/reshapes.py`). -/
def mergesOrSplits (s t : Shape) : Bool :=
  -- the elements of `t`, and the offsets where its axes end: `[t[0] * t[1], t[0], 1]`
  let tEnds := List.foldl (fun (acc : Prod Nat (List Nat)) (d : Nat) =>
      Prod.mk (Nat.mul acc.fst d) (List.cons (Nat.mul acc.fst d) acc.snd))
    (Prod.mk 1 (List.cons 1 List.nil)) t.toList
  let isEnd := fun (p : Nat) => List.any tEnds.snd fun (e : Nat) => Nat.beq e p
  -- the axis of `s` over the offsets `p` to `q` fits the axes of `t`
  let fits := fun (p q : Nat) =>
    or (List.all tEnds.snd fun (e : Nat) => or (Nat.ble e p) (Nat.ble q e))
      (and (isEnd p) (isEnd q))
  -- the elements of `s`, and whether each of its axes fits
  let sAxes := List.foldl (fun (acc : Prod Nat Bool) (d : Nat) =>
      Prod.mk (Nat.mul acc.fst d) (and acc.snd (fits acc.fst (Nat.mul acc.fst d))))
    (Prod.mk 1 true) s.toList
  and (Nat.beq sAxes.fst tEnds.fst) (or (Nat.beq tEnds.fst 0) sAxes.snd)

/-- Element type of a graph value: a float, or an integer whose every value lies in
`[0, bound)` (the bound of its `IT` type, which the graph IR carries). -/
inductive DType where
  | f32
  | i64 (bound : Nat)
  deriving Repr, BEq, Inhabited

/-- How a parameter is initialised when the graph is instantiated. -/
inductive Init where
  | zeros
  | ones
  | normal (std : Float)
  | uniform (bound : Float)
  /-- Drawn uniformly from `[lo, hi]` (a gate that starts slightly open, `[0, 0.02]`). -/
  | interval (lo hi : Float)
  /-- Every element `value`. -/
  | fill (value : Float)
  /-- Element `i` of `n` (row-major) is `first + (last - first) · i / max (n - 1) 1`: one value
  per layer, from the first layer's to the last's. -/
  | ramp (first last : Float)
  /-- The tensor `key` of the safetensors checkpoint `file` (a type provider's tensors). -/
  | checkpoint (file : String) (key : String)
  deriving Repr, Inhabited

/-- A compile-time value attached to an op node: a factor, an epsilon, a target shape. -/
inductive Attr where
  | nat (key : String) (value : Nat)
  | float (key : String) (value : Float)
  | shape (key : String) (value : Shape)
  deriving Repr, Inhabited

/-- A node of the model graph: a model input, a parameter leaf, or an op application. -/
inductive Node where
  | input (name : String) (shape : Shape) (dtype : DType)
  | param (init : Init) (shape : Shape) (dtype : DType)
  | op (name : String) (args : List Node) (attrs : List Attr) (shape : Shape) (dtype : DType)
  deriving Inhabited

/-- A float tensor of shape `s`. -/
structure T (s : Shape) where
  node : Node
  deriving Inhabited

/-- An integer (int64) tensor of shape `s` whose every element lies in `[0, n)`: an *index*
tensor, typed by the size of what it indexes. Token ids that pick rows of a `T #[v, d]` table
are `IT #[b, t] v`, class targets of `c`-class logits `IT #[b] c`, a keep mask `IT #[b, t] 2`.
So an embedding with another table, or a loss over logits of another width, is a type error.
The harness checks the bound where the data enters: every task's loader, and every call of a
model (an id `≥ n` is an error naming the input). -/
structure IT (s : Shape) (n : Nat) where
  node : Node
  deriving Inhabited

/-- Emit the op node `name`; its shape is the one the expected type asks for. Every typed op
of `Tyr.Ops` and `Tyr.NN` is a `prim` whose arguments are its tensor arguments in order and
whose attributes are its other explicit arguments, named as in its signature. -/
def prim {s : Shape} (name : String) (args : List Node) (attrs : List Attr := []) : T s :=
  ⟨.op name args attrs s .f32⟩

/-- `prim` for an op whose result is an index tensor `IT s n` (the top-k ids of a router, typed
by the number of experts they pick from): the node's shape and bound are the ones the expected
type asks for. The same convention as `prim`, with the result `IT s n` instead of `T s`. -/
def primI {s : Shape} {n : Nat} (name : String) (args : List Node) (attrs : List Attr := []) :
    IT s n :=
  ⟨.op name args attrs s (.i64 n)⟩

/-- A parameter leaf initialised by `init`; its path is the field path it sits at. -/
def param {s : Shape} (init : Init) : T s :=
  ⟨.param init s .f32⟩

/-- A parameter drawn from `N(0, std²)`. -/
def normal {s : Shape} (std : Float) : T s := param (.normal std)

/-- A parameter drawn uniformly from `[-bound, bound]`. -/
def uniform {s : Shape} (bound : Float) : T s := param (.uniform bound)

/-- A parameter initialised to zeros (biases). -/
def zeros {s : Shape} : T s := param .zeros

/-- A parameter initialised to ones (norm gains). -/
def ones {s : Shape} : T s := param .ones

/-- A parameter drawn uniformly from `[lo, hi]`. -/
def interval {s : Shape} (lo hi : Float) : T s := param (.interval lo hi)

/-- A parameter whose every element is `value`. -/
def fill {s : Shape} (value : Float) : T s := param (.fill value)

/-- A parameter of per-layer values from `first` to `last`, evenly spaced (see `Init.ramp`). -/
def ramp {s : Shape} (first last : Float) : T s := param (.ramp first last)

end torch
