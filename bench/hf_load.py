"""Running a Hugging Face checkpoint: `tyr run --weights DIR` (no Lean file) against
transformers' own `AutoModelForCausalLM.from_pretrained` + one forward, same checkpoint, same
input.

A random Qwen3 with a tied head is written once by transformers' `save_pretrained` (float32;
~0.6 B parameters, 2.4 GB, by default — Qwen3-0.6B's sizes; ~0.17 B with `--quick`) into
`runs/bench/hf-qwen3-*`. The two run as processes (`bench/processes.py`: alternating, one
thread, wall time and peak RSS each). `ratio` is transformers' over tyr's (the median of the
per-pair ratios): the goals are time >= 1.0 and tyr's peak RSS within 1.2× of transformers' (a
memory ratio, transformers/tyr, >= 1/1.2). The logits of the two are compared too.

Standalone: `python -m bench.hf_load [--quick]`.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from bench import ROOT, Row, processes
from bench.processes import PEAK, alternate
from bench.standalone import standalone

SIZES = {  # Qwen3-0.6B's, and a small one
    False: dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                num_attention_heads=16, num_key_value_heads=8, head_dim=128),
    True: dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
               num_attention_heads=12, num_key_value_heads=4, head_dim=64),
}
_HF = """
import sys, torch, transformers as tf
from safetensors.torch import load_file, save_file
torch.set_num_threads(1)
m = tf.AutoModelForCausalLM.from_pretrained(sys.argv[1]).eval()
with torch.no_grad():
    y = m(input_ids=load_file(sys.argv[2])["input_ids"]).logits
save_file({"out": y.contiguous()}, sys.argv[3])
""" + PEAK


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


def run(quick: bool = False, pairs: int | None = None) -> dict[str, Any]:
    """Both sides in alternating processes; JSON-serialisable results."""
    import torch
    from safetensors.torch import load_file

    root = make_checkpoint(ROOT / "runs" / "bench" / f"hf-qwen3-{'quick' if quick else '06b'}",
                           quick)
    ckpt, ids = root / "ckpt", root / "ids.safetensors"
    sides = {
        "tyr": [sys.executable, "-c", processes.TYR, "run", "--weights", str(ckpt), "--inputs",
                str(ids), "-o", str(root / "tyr.safetensors")],
        "transformers": [sys.executable, "-c", _HF, str(ckpt), str(ids),
                         str(root / "hf.safetensors")],
    }
    got = alternate(sides, pairs or (2 if quick else 4))
    diff = (load_file(root / "tyr.safetensors")["out"]
            - load_file(root / "hf.safetensors")["out"]).abs().max().item()
    out: dict[str, Any] = {"params_m": _params(ckpt) / 1e6, "max_logit_diff": diff,
                           "torch": torch.__version__}
    return {**out, **got}


def _params(ckpt: Path) -> int:
    from pytyr.safetensors import open_checkpoint

    with open_checkpoint(ckpt) as c:
        return sum(math.prod(spec.shape) for spec in c.tensors.values())


def rows(r: dict[str, Any]) -> list[Row]:
    what = f"{r['params_m']:.0f} M-parameter Qwen3, max |Δlogit| {r['max_logit_diff']:.1e}"
    return processes.rows(r, "hf checkpoint", "transformers", what)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.hf_load [--quick]`: rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
