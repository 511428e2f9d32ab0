#!/usr/bin/env bash
# The nanochat data, built once: the News Articles corpus as parquet (tyr data news), a
# byte-level BPE with a BOS trained on the train documents only (tyr tokenizer train), and
# BOS-delimited token shards whose first tokens, from the val documents, are the val split
# (tyr data prepare). Needs the virtualenv's `tyr` on PATH (run_train_torchrun.sh sets it).
#
#   scripts/nanochat/prepare_data.sh            data/nanochat: all 3,788 documents, vocab 4096
#   scripts/nanochat/prepare_data.sh --debug    data/nanochat-debug: 600 documents, vocab 1024
set -euo pipefail

case ${1:-} in
  "") data=data/nanochat news=(--val-docs 200) vocab=4096 val_tokens=131072 ;;
  --debug) data=data/nanochat-debug news=(--limit 600 --val-docs 40) vocab=1024 val_tokens=16384 ;;
  -h | --help) sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) echo "prepare_data.sh: unknown argument '$1'" >&2; exit 2 ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[[ -f $data/shards/meta.json ]] && exit 0

tyr data news --out "$data/parquet" "${news[@]}"
tyr tokenizer train "$data"/parquet/news_1_train_*.parquet --vocab-size "$vocab" \
  --out "$data/tokenizer.json"
# the val file sorts first, so the first val_tokens tokens (fewer than it holds) are held out
tyr data prepare "$data/parquet" --tokenizer "$data/tokenizer.json" --out "$data/shards" \
  --val-tokens "$val_tokens" --no-progress
