#!/usr/bin/env bash
# Data-parallel scaling of nanochat training: tokens/s for each process count in SIZES, the
# speed-up and the scaling efficiency against the first size, as a table and as
# runs/bench/scaling/scaling.csv and scaling.png (python -m bench.scaling does the work).
#
#   scripts/nanochat/bench_distributed.sh                 SIZES="1 2" (this machine's 2 cores)
#   SIZES="1 2 4 8" STEPS=50 scripts/nanochat/bench_distributed.sh
#
# SIZES     process counts (default: 1, then doubling up to the CPU count)
# STEPS     optimizer steps per run (default 20); REPEATS alternating rounds (default 2)
# CONFIG    the run config (default examples/nanochat/config.json; its data is built first)
# THREADS   OMP_NUM_THREADS of each process (default 1)
# TORCHRUN_BIN as in run_train_torchrun.sh; OUT the output directory (runs/bench/scaling)
set -euo pipefail

case ${1:-} in
  -h | --help) sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
  "") ;;
  *) echo "bench_distributed.sh: no arguments (settings are environment variables)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
make --no-print-directory venv >/dev/null
export PATH="$root/.venv/bin:$PATH"
torchrun_bin=${TORCHRUN_BIN:-$(command -v torchrun || true)}
if [[ -z $torchrun_bin || ! -x $torchrun_bin ]]; then
  echo "bench_distributed.sh: no torchrun: set TORCHRUN_BIN" >&2
  exit 2
fi

if [[ -z ${SIZES:-} ]]; then
  SIZES=1
  for ((n = 2; n <= $(nproc); n *= 2)); do SIZES+=" $n"; done
fi
config=${CONFIG:-examples/nanochat/config.json}
if [[ $config == *debug* ]]; then
  scripts/nanochat/prepare_data.sh --debug
else
  scripts/nanochat/prepare_data.sh
fi

# shellcheck disable=SC2086  # SIZES is a list
exec python -m bench.scaling --sizes $SIZES --steps "${STEPS:-20}" --repeats "${REPEATS:-2}" \
  --config "$config" --out "${OUT:-runs/bench/scaling}" --torchrun "$torchrun_bin" \
  --threads "${THREADS:-1}"
