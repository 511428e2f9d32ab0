#!/usr/bin/env bash
# Train the Lean GPT data parallel on this machine: NPROC processes under torchrun (gloo on
# CPU, NCCL with GPUs; TYR_DIST_BACKEND=gloo|nccl overrides). train.batch in the config stays
# the global batch, split among the processes; only rank 0 writes the run directory, by default
# runs/gpt-torchrun-NPROC (never the main job's runs/gpt; `--set out=DIR` to choose).
#
#   scripts/torchrun-gpt.sh [NPROC] [-- extra tyr train args]     NPROC defaults to 2
#   scripts/torchrun-gpt.sh 2 -- --set train.max_iters=200 -q
#   scripts/torchrun-gpt.sh 2 -- --resume
#
# PYTHON picks the interpreter (default: the repository's .venv, made by `make venv`).
set -euo pipefail

usage() { sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "torchrun-gpt.sh: $*" >&2; exit 2; }

nproc=2
if [[ $# -gt 0 && $1 != -- ]]; then
  case $1 in
    -h | --help) usage; exit 0 ;;
  esac
  nproc=$1
  shift
fi
[[ $nproc =~ ^[1-9][0-9]*$ ]] || die "NPROC must be a positive integer, got '$nproc'"
if [[ $# -gt 0 ]]; then
  [[ $1 == -- ]] || die "expected '--' before the tyr train arguments, got '$1'"
  shift
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"  # the Lean file, its config.json and runs/ are relative to the repository
python=${PYTHON:-$root/.venv/bin/python}
[[ -x $python ]] || die "$python not found; run 'make venv' first or set PYTHON"

# `python -m pytyr.torchrun` is torchrun, from the interpreter that has pytyr, ended by Ctrl-C
# with one line (the ranks write their checkpoint first).
exec "$python" -m pytyr.torchrun --standalone --nproc_per_node="$nproc" \
  -m pytyr.cli train examples/gpt/GPT.lean --model gpt --set "out=runs/gpt-torchrun-$nproc" "$@"
