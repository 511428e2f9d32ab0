import Tyr

/-!
# A two-layer perceptron, written in Lean and trained from Python

`tyr train examples/mlp/MLP.lean --model mlp` instantiates `mlp` with the config and batch
size of `examples/mlp/config.json` and trains it on a synthetic spiral task.
-/

open torch

/-- Sizes of the MLP. -/
structure MLPConfig where
  /-- Input features. -/
  inputs : Nat
  /-- Hidden width. -/
  hidden : Nat
  /-- Number of classes. -/
  classes : Nat

/-- Parameters of the MLP; the shapes follow from the config. -/
structure MLPParams (c : MLPConfig) where
  w1 : T #[c.hidden, c.inputs] := normal 0.5
  b1 : T #[c.hidden] := zeros
  w2 : T #[c.hidden, c.hidden] := normal 0.15
  b2 : T #[c.hidden] := zeros
  w3 : T #[c.classes, c.hidden] := normal 0.15
  b3 : T #[c.classes] := zeros
  deriving TensorStruct

/-- Class logits for a batch of `b` points. -/
def logits (c : MLPConfig) {b : Nat} (p : MLPParams c) (x : T #[b, c.inputs]) : T #[b, c.classes] :=
  let h1 := relu (linearBias x p.w1 p.b1)
  let h2 := relu (linearBias h1 p.w2 p.b2)
  linearBias h2 p.w3 p.b3

/-- The training graph: logits and the mean cross-entropy loss against labels `y`. -/
@[model]
def mlp (c : MLPConfig) {b : Nat} (p : MLPParams c) (x : T #[b, c.inputs])
    (y : IT #[b] c.classes) :
    T #[b, c.classes] × T #[] :=
  let z := logits c p x
  (z, crossEntropy z y)
