import Lake
open Lake DSL

/-!
# Tyr's Lake configuration

* `lake build` type-checks the `Tyr` library (every `Tyr.lean` and `Tyr/**.lean` file) and the
  example models (every `examples/**.lean` file, as modules `examples.<dir>.<File>`).
* `lake run` (the default script, also `lake run test`) runs the Python test suite, `make test`.
* `lake run train` runs the main training job, `make train`.

Arguments after `--` are passed on to `make`, e.g. `lake run test -- PYTEST_ARGS=-x`.
No external packages are required.
-/

/-- `autoImplicit` off: a name a signature does not bind is an error, in Lean as in `tyr check`
(docs/lean-subset.md, *Binders*), not a fresh implicit argument that a typo in a shape would
make. The fidelity probes run with these options too (`tests/lean/fidelity.py`). -/
package tyr where
  leanOptions := #[⟨`autoImplicit, false⟩, ⟨`relaxedAutoImplicit, false⟩]

/-- The Tyr library: `Tyr.lean` and every module under `Tyr/`, including `Tyr.Meta.Test`,
which nothing imports and which holds the build-time checks of the meta code. -/
@[default_target]
lean_lib Tyr where
  globs := #[.andSubmodules `Tyr]

/-- The example models: every `.lean` file under `examples/`, whatever its directory. With the
package directory as source root, `examples/mlp/MLP.lean` is the module `examples.mlp.MLP`. -/
@[default_target]
lean_lib Examples where
  roots := #[`examples]
  globs := #[.submodules `examples]

/-- Run `make <target> <args>` in the root package's directory; return make's exit code. -/
def runMake (target : String) (args : List String) : ScriptM UInt32 := do
  let dir := (← getRootPackage).dir
  let child ← IO.Process.spawn { cmd := "make", args := #[target] ++ args.toArray, cwd := some dir }
  child.wait

/-- The Python test suite (`make test`); the default script of `lake run`. -/
@[default_script]
script test (args) do
  runMake "test" args

/-- The main training job (`make train`). -/
script train (args) do
  runMake "train" args

/-! ## The model library for Python (`cc/tyr.h`, `docs/abi.md`)

`lake build TyrModels` links the models registered in `TyrModels.lean` and the C glue
`cc/tyr.c` into a shared library for `tyr run --lib`. -/

input_file tyr_abi_c where
  path := "cc/tyr.c"
  text := true

target tyr_abi_o pkg : System.FilePath := do
  let src ← tyr_abi_c.fetch
  let oFile := pkg.buildDir / "cc" / "tyr.o"
  -- -isystem: warnings in lean.h's inline functions are not ours to fix
  let weakArgs := #["-isystem", (← getLeanIncludeDir).toString, "-I", (pkg.dir / "cc").toString]
  let traceArgs := #["-std=c11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror",
    "-DTYR_LEAN_INIT=initialize_tyr_TyrModels"]
  buildO oFile src weakArgs traceArgs "cc" getLeanTrace

lean_lib TyrModels where
  -- Lean's shared facet links a library's own modules, so Tyr and the examples are listed too.
  globs := #[.one `TyrModels, .andSubmodules `Tyr, .submodules `examples]
  moreLinkObjs := #[tyr_abi_o]
  defaultFacets := #[LeanLib.sharedFacet]
