#!/usr/bin/env bash
# The kernel parity suite: each kernel's contract cases (pytyr/kernels), one suite per kernel,
# against its PyTorch reference with the contract's tolerance. Exit 1 if any case fails.
#
#   scripts/gpu/test_parity_suite.sh
#
# Environment:
#   RANDOMIZED_MHA_TRIALS=N        N randomized flash-attention trials on top (default 0)
#   RANDOMIZED_TRIALS=N            N randomized trials for each other kernel (default 0)
#   TYR_GPU_VENDORED_REF_RUNNER=R  after each suite, run `R <suite-name> <fixture-dir>`;
#                                  a non-zero exit fails the run. Fixtures are then written
#                                  (one safetensors file per case, seed in its metadata)
#   TYR_SUITE_FIXTURES=DIR         where fixtures go, DIR/<suite>/ (default runs/kernels/fixtures;
#                                  written only with a runner or when this is set)
#   TYR_SUITE_SCALE=small|real     case sizes (default: real on CUDA, small elsewhere)
#   TYR_SUITE_ONLY="copy rotary"   run only these suites
#   PYTHON                         the interpreter (default .venv/bin/python, else python3)
# Without CUDA the kernels run in Triton's interpreter (TRITON_INTERPRET=1) at small sizes.
set -euo pipefail

die() { echo "test_parity_suite.sh: $*" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

py=${PYTHON:-}
if [[ -z $py ]]; then
  if [[ -x .venv/bin/python ]]; then py=.venv/bin/python; else py=python3; fi
fi
for n in "${RANDOMIZED_MHA_TRIALS:=0}" "${RANDOMIZED_TRIALS:=0}"; do
  [[ $n =~ ^[0-9]+$ ]] || die "trial counts must be non-negative integers, got '$n'"
done
runner=${TYR_GPU_VENDORED_REF_RUNNER:-}
if [[ -n $runner && ! -x $runner ]]; then
  die "TYR_GPU_VENDORED_REF_RUNNER=$runner is not an executable file"
fi

if "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  scale=${TYR_SUITE_SCALE:-real}
else
  export TRITON_INTERPRET=1
  scale=${TYR_SUITE_SCALE:-small}
fi
[[ $scale == small || $scale == real ]] || die "TYR_SUITE_SCALE must be small or real"

fixtures=${TYR_SUITE_FIXTURES:-}
if [[ -n $runner && -z $fixtures ]]; then fixtures=runs/kernels/fixtures; fi

suites=${TYR_SUITE_ONLY:-$("$py" -m pytyr.kernels.suite --list)}
failed=()
for suite in $suites; do
  trials=$RANDOMIZED_TRIALS
  [[ $suite == flash_attention ]] && trials=$RANDOMIZED_MHA_TRIALS
  args=(--suite "$suite" --scale "$scale" --trials "$trials")
  if [[ -n $fixtures ]]; then
    rm -rf "${fixtures:?}/$suite"
    args+=(--fixtures "$fixtures")
  fi
  echo "== $suite ($scale, $trials randomized trials)"
  "$py" -m pytyr.kernels.suite "${args[@]}" || failed+=("$suite")
  if [[ -n $runner ]]; then
    echo "== $suite: $runner $suite $fixtures/$suite"
    "$runner" "$suite" "$fixtures/$suite" || failed+=("$suite (vendored runner)")
  fi
done

if (( ${#failed[@]} )); then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "all suites passed: ${suites//$'\n'/ }"
