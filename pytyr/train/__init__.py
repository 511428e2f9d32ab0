"""Training: the loop, the parameter tree (Lean's TensorStruct mirrored), example tasks."""
