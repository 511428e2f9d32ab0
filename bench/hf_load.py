"""Running a Hugging Face checkpoint: `tyr run --weights DIR` (no Lean file) against
transformers' own `AutoModelForCausalLM.from_pretrained` + one forward, same checkpoint, same
input.

A random Qwen3 with a tied head is written once by transformers' `save_pretrained` (float32;
~0.6 B parameters, 2.4 GB, by default — Qwen3-0.6B's sizes; ~0.17 B with `--quick`) into
`runs/bench/hf-qwen3-*`. Each side runs in a process of its own at one thread, alternating,
the order flipped every pair, after a warm-up pair (the files in the page cache, the imports
compiled). Measured per process: its wall time (start to exit) and its peak RSS
(`VmHWM`, which the child prints last). `ratio` is transformers' over tyr's (the median of the per-pair
ratios): the goals are time >= 1.0 and tyr's peak RSS within 1.2× of transformers' (a
memory ratio, transformers/tyr, >= 1/1.2). The logits of the two are compared too.

Standalone: `python -m bench.hf_load [--quick]`.
"""
from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import ROOT, Row, judge
from bench.standalone import standalone

SIZES = {  # Qwen3-0.6B's, and a small one
    False: dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                num_attention_heads=16, num_key_value_heads=8, head_dim=128),
    True: dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
               num_attention_heads=12, num_key_value_heads=4, head_dim=64),
}
MEMORY_GOAL = 1 / 1.2
# Each child prints its own peak RSS (VmHWM of /proc/self/status) as its last line: the
# process's `ru_maxrss` would carry this parent's size over fork and exec.
_PEAK = "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])"
_HF = """
import sys, torch, transformers as tf
from safetensors.torch import load_file, save_file
torch.set_num_threads(1)
m = tf.AutoModelForCausalLM.from_pretrained(sys.argv[1]).eval()
with torch.no_grad():
    y = m(input_ids=load_file(sys.argv[2])["input_ids"]).logits
save_file({"out": y.contiguous()}, sys.argv[3])
""" + _PEAK
_TYR = """
import sys
from pytyr.cli import main
rc = main(sys.argv[1:])
""" + _PEAK + "\nsys.exit(rc)"


def make_checkpoint(path: Path, quick: bool) -> Path:
    """The checkpoint and an input file, written once (a directory that exists is reused)."""
    if (path / "config.json").is_file() and (path / "ids.safetensors").is_file():
        return path
    import torch
    import transformers as tf
    from safetensors.torch import save_file

    torch.manual_seed(0)
    config = tf.Qwen3Config(vocab_size=151936, max_position_embeddings=4096,
                            tie_word_embeddings=True, **SIZES[quick])
    tf.Qwen3ForCausalLM(config).save_pretrained(path / "ckpt")
    save_file({"input_ids": torch.randint(0, 151936, (1, 128))}, str(path / "ids.safetensors"))
    (path / "config.json").write_text("{}")  # done marker
    return path


def _child(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {done.stderr[-2000:]}")
    return wall, int(done.stdout.split()[-1]) / 1024


def run(quick: bool = False, pairs: int | None = None) -> dict[str, Any]:
    """Both sides in alternating processes; JSON-serialisable results."""
    import torch
    from safetensors.torch import load_file

    root = make_checkpoint(ROOT / "runs" / "bench" / f"hf-qwen3-{'quick' if quick else '06b'}",
                           quick)
    ckpt, ids = root / "ckpt", root / "ids.safetensors"
    sides = {
        "tyr": [sys.executable, "-c", _TYR, "run", "--weights", str(ckpt), "--inputs",
                str(ids), "-o", str(root / "tyr.safetensors")],
        "transformers": [sys.executable, "-c", _HF, str(ckpt), str(ids),
                         str(root / "hf.safetensors")],
    }
    pairs = pairs or (2 if quick else 4)
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    for i in range(pairs + 1):  # the first pair warms up
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for name in order:
            sample = _child(sides[name])
            if i:
                got[name].append(sample)
    diff = (load_file(root / "tyr.safetensors")["out"]
            - load_file(root / "hf.safetensors")["out"]).abs().max().item()
    out: dict[str, Any] = {"params_m": _params(ckpt) / 1e6, "max_logit_diff": diff,
                           "torch": torch.__version__}
    for name, samples in got.items():
        out[name] = {"wall_s": [w for w, _ in samples], "rss_mb": [m for _, m in samples]}
    pair = list(zip(got["tyr"], got["transformers"]))
    out["time_ratio"] = statistics.median(h[0] / t[0] for t, h in pair)
    out["memory_ratio"] = statistics.median(h[1] / t[1] for t, h in pair)
    return out


def _params(ckpt: Path) -> int:
    from pytyr.safetensors import open_checkpoint

    with open_checkpoint(ckpt) as c:
        return sum(math.prod(spec.shape) for spec in c.tensors.values())


def rows(r: dict[str, Any]) -> list[Row]:
    what = f"{r['params_m']:.0f} M-parameter Qwen3, max |Δlogit| {r['max_logit_diff']:.1e}"
    out = []
    for key, unit, ratio, goal in (("wall_s", "s", "time_ratio", 1.0),
                                   ("rss_mb", "MB", "memory_ratio", MEMORY_GOAL)):
        for side in ("tyr", "transformers"):
            values = sorted(r[side][key])
            row = Row(f"hf checkpoint {key.split('_')[0]} ({side})",
                      f"{statistics.median(values):.2f}" if unit == "s"
                      else f"{statistics.median(values):.0f}", f"{values[-1]:.2f}")
            if side == "tyr":
                row = Row(row.what, row.median, row.p90, **judge(r[ratio], goal),
                          note=f"{unit}; {what}" if key == "wall_s" else
                          f"peak RSS {unit} (transformers/tyr; goal: tyr within 1.2x)")
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.hf_load [--quick]`: rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
