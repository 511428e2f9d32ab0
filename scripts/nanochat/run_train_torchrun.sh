#!/usr/bin/env bash
# Train the nanochat model of examples/nanochat/NanoChat.lean data parallel under torchrun,
# from a fresh clone: the virtualenv (make venv), the data once (prepare_data.sh: the News
# Articles corpus, a byte-level BPE, BOS-delimited token shards with a val split, under
# data/nanochat/ or data/nanochat-debug/), then `tyr train` with Muon.
#
#   scripts/nanochat/run_train_torchrun.sh [--debug | --config FILE] [-- tyr train args]
#   scripts/nanochat/run_train_torchrun.sh --debug                 the tiny CPU check
#   NPROC_PER_NODE=1 scripts/nanochat/run_train_torchrun.sh -- --set train.max_iters=50
#   scripts/nanochat/run_train_torchrun.sh -- --resume
#
# NPROC_PER_NODE  processes (default 2; gloo on CPU, NCCL with GPUs, TYR_DIST_BACKEND forces)
# MODEL           the @[model] (default nanochat, today's layout; nanochatJan with january.json)
# TORCHRUN_BIN    the launcher (default: torchrun on PATH, the repository's .venv/bin first)
# OUT             run directory (default runs/nanochat[-debug]-torchrun-N)
# --debug         examples/nanochat/debug.json: 600 documents, vocab 1024, depth 2, 40 steps
# --config FILE   another run config on the full data (default examples/nanochat/config.json;
#                 examples/nanochat/january.json is January 2026's layout, MODEL=nanochatJan)
set -euo pipefail

usage() { sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "run_train_torchrun.sh: $*" >&2; exit 2; }

debug=0 config=examples/nanochat/config.json
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --debug) debug=1; shift ;;
    --config) [[ $# -ge 2 ]] || die "--config needs a file"; config=$2; shift 2 ;;
    --) shift; break ;;
    *) die "unknown argument '$1' (extra tyr train arguments go after '--')" ;;
  esac
done

nproc=${NPROC_PER_NODE:-2}
[[ $nproc =~ ^[1-9][0-9]*$ ]] || die "NPROC_PER_NODE must be a positive integer, got '$nproc'"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"  # the Lean file, its configs, data/ and runs/ are relative to the repository
make --no-print-directory venv >/dev/null
export PATH="$root/.venv/bin:$PATH"
torchrun_bin=${TORCHRUN_BIN:-$(command -v torchrun || true)}
[[ -n $torchrun_bin && -x $torchrun_bin ]] || die "no torchrun: set TORCHRUN_BIN"

if ((debug)); then
  config=examples/nanochat/debug.json name=nanochat-debug
  scripts/nanochat/prepare_data.sh --debug
else
  [[ -f $config ]] || die "no config file '$config'"
  name=$(basename "$config" .json)
  [[ $name == config ]] && name=nanochat || name=nanochat-$name
  scripts/nanochat/prepare_data.sh
fi
out=${OUT:-runs/$name-torchrun-$nproc}

exec "$torchrun_bin" --standalone --nproc_per_node="$nproc" -m pytyr.cli train \
  examples/nanochat/NanoChat.lean --model "${MODEL:-nanochat}" --config "$config" \
  --set "out=$out" "$@"
