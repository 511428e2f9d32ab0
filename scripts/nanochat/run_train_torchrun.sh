#!/usr/bin/env bash
# Train the nanochat model of examples/nanochat/NanoChat.lean data parallel under torchrun,
# from a fresh clone: the virtualenv (make venv), the News Articles corpus as parquet
# (tyr data news), a byte-level BPE (tyr tokenizer train, on the train documents only),
# BOS-aligned token shards with a val split (tyr data prepare), then `tyr train` with Muon.
# Data is built once, under data/nanochat/ (data/nanochat-debug/ with --debug).
#
#   scripts/nanochat/run_train_torchrun.sh [--debug] [-- extra tyr train args]
#   scripts/nanochat/run_train_torchrun.sh --debug                 the tiny CPU check
#   NPROC_PER_NODE=1 scripts/nanochat/run_train_torchrun.sh -- --set train.max_iters=50
#   scripts/nanochat/run_train_torchrun.sh -- --resume
#
# NPROC_PER_NODE  processes (default 2; gloo on CPU, NCCL with GPUs, TYR_DIST_BACKEND forces)
# TORCHRUN_BIN    the launcher (default: torchrun on PATH, the repository's .venv/bin first)
# OUT             run directory (default runs/nanochat[-debug]-torchrun-N)
# --debug         examples/nanochat/debug.json: 600 documents, vocab 1024, depth 2, 40 steps
set -euo pipefail

usage() { sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "run_train_torchrun.sh: $*" >&2; exit 2; }

debug=0
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --debug) debug=1; shift ;;
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
  config=examples/nanochat/debug.json data=data/nanochat-debug name=nanochat-debug
  news=(--limit 600 --val-docs 40) vocab=1024 val_tokens=8192
else
  config=examples/nanochat/config.json data=data/nanochat name=nanochat
  news=(--val-docs 200) vocab=4096 val_tokens=131072
fi
out=${OUT:-runs/$name-torchrun-$nproc}

if [[ ! -f $data/shards/meta.json ]]; then
  tyr data news --out "$data/parquet" "${news[@]}"
  tyr tokenizer train "$data"/parquet/news_1_train_*.parquet --vocab-size "$vocab" \
    --out "$data/tokenizer.json"
  # the val documents come first (file names in order): the first val_tokens are held out
  tyr data prepare "$data/parquet" --tokenizer "$data/tokenizer.json" --out "$data/shards" \
    --val-tokens "$val_tokens" --no-progress
fi

exec "$torchrun_bin" --standalone --nproc_per_node="$nproc" -m pytyr.cli train \
  examples/nanochat/NanoChat.lean --model nanochat --config "$config" --set "out=$out" "$@"
