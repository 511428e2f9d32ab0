#!/usr/bin/env bash
# A short nanochat training on GPUs: NCCL, bf16 autocast, one process per GPU, the config
# examples/nanochat/gpu.json (depth 12: width 768 in 6 heads of 128, 1024-token context, 64K
# tokens per step, 300 steps; sized for well under 10 minutes on one H200). Prints tokens/s
# and the model FLOPs utilisation (MFU) against PEAK_FLOPS. UNTESTED: no GPU was available
# where it was written (see the README).
#
#   scripts/nanochat/gpu_run.sh [-- extra tyr train args]
#
# NPROC_PER_NODE  processes (default: the number of GPUs nvidia-smi lists)
# PEAK_FLOPS      dense bf16 peak of one GPU (default 989e12, an H100/H200 SXM)
# OUT             run directory (default runs/nanochat-gpu)
set -euo pipefail

case ${1:-} in
  -h | --help) sed -n '2,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
  --) shift ;;
  "") ;;
  *) echo "gpu_run.sh: unknown argument '$1' (tyr train arguments go after '--')" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
if ! command -v nvidia-smi >/dev/null; then
  echo "gpu_run.sh: no nvidia-smi: this needs NVIDIA GPUs" >&2
  exit 2
fi
gpus=$(nvidia-smi -L | grep -c '^GPU ')
nproc=${NPROC_PER_NODE:-$gpus}
out=${OUT:-runs/nanochat-gpu}
export PEAK_FLOPS=${PEAK_FLOPS:-989e12}

NPROC_PER_NODE=$nproc OUT=$out scripts/nanochat/run_train_torchrun.sh \
  --config examples/nanochat/gpu.json -- "$@"
.venv/bin/python - "$out" "$nproc" <<'PY'
import json, os, sys
from bench.nanochat import flops_per_token
run, nproc = sys.argv[1], int(sys.argv[2])
m = json.load(open(f"{run}/metrics.json"))
c = json.load(open(f"{run}/run.json"))["values"]["c"]
t = json.load(open(f"{run}/run.json"))["task"]["seq"]
tps = m["tokens_per_s"]
mfu = tps * flops_per_token(c, t) / (float(os.environ["PEAK_FLOPS"]) * nproc)
print(f"nanochat on {nproc} GPU(s): {tps:,.0f} tokens/s, {flops_per_token(c, t):.3e} FLOPs "
      f"per token, MFU {mfu:.1%} of {nproc} x {float(os.environ['PEAK_FLOPS']):.3g} FLOP/s; "
      f"val bpb {m['final'].get('val_bpb', float('nan')):.4f}")
PY
