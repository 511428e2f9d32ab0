#!/usr/bin/env bash
# The prepared GPU run for the Triton kernels, sized for one H200 in under 10 minutes:
#   1. tests/test_exec_kernels.py with the kernels compiled (the GPT routed to them on CUDA)
#   2. the parity suite at real sizes (scripts/gpu/test_parity_suite.sh), with
#      RANDOMIZED_MHA_TRIALS (default 8) randomized attention trials
#   3. the benchmark: each kernel against the torch path, and the GPT train step with kernels
#      against without (python -m bench --only kernels)
# Each step has its own time limit; the run goes on after a failed step and exits 1 at the
# end if any failed. Logs and bench.json go to $OUT (set by the device tool) or runs/gpu.
#
#   scripts/gpu/kernels.sh
#
# PYTHON picks the interpreter: default python3, which on the GPU machine is the one holding
# its CUDA build of torch and Triton; the repository is put on PYTHONPATH, nothing installed.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 2
out=${OUT:-runs/gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

"$py" - <<'EOF' 2>&1 | tee "$out/versions.txt"
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__)
try:
    import triton
    print("triton", triton.__version__)
except ImportError as e:
    print("triton missing:", e)
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")
EOF
"$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' || {
  echo "kernels.sh: no CUDA device for $py; this script is for a GPU machine" >&2
  exit 2
}

status=()
step() {  # step NAME SECONDS COMMAND...: run with a limit, log to $out/NAME.log
  local name=$1 limit=$2 start rc
  shift 2
  echo "=== $name (limit $limit s)"
  start=$(date +%s)
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
  rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc after $(( $(date +%s) - start )) s"
  status+=("$name=$rc")
}

step tests 120 "$py" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
  tests/test_exec_kernels.py
step suite 300 env RANDOMIZED_MHA_TRIALS="${RANDOMIZED_MHA_TRIALS:-8}" \
  RANDOMIZED_TRIALS="${RANDOMIZED_TRIALS:-2}" PYTHON="$py" scripts/gpu/test_parity_suite.sh
step bench 120 "$py" -m bench --only kernels --out "$out/bench.json"

echo "steps: ${status[*]}"
for s in "${status[@]}"; do
  [[ ${s#*=} == 0 ]] || exit 1
done
