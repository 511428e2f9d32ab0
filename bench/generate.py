"""Text to image: `tyr generate DIR` against diffusers' own `Flux2KleinPipeline`
(`from_pretrained` + one call + the PNG), the same pipeline directory, prompt and seed.

A random FLUX.2 [klein]-layout pipeline is written once by diffusers' `save_pretrained`
(`tests/flux2_pipeline.build` at bench sizes: a 6-layer Qwen3 of width 256, a transformer of
2 double and 4 single blocks of width 512, the autoencoder of the tests; 30 M parameters,
float32; the tests' tiny one with `--quick`) into `runs/bench/flux2-*`. The two run as
processes (`bench/processes.py`: alternating, one thread, wall time and peak RSS each). A
256 × 256 image in 4 steps with guidance from a 64-token prompt. `ratio` is
diffusers' over tyr's (the median of the per-pair ratios): the goals are time >= 1.0 and tyr's
peak RSS within 1.2× of diffusers'. The two PNGs are compared too (the largest pixel
difference, of 255).

Standalone: `python -m bench.generate [--quick]`.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench import ROOT, Row, processes
from bench.processes import PEAK, alternate
from bench.standalone import standalone

SIZES = {False: dict(width=256, layers=6, blocks=(2, 4), heads=4, head=128),
         True: {}}
SIDE, STEPS, LENGTH, LAYERS = 256, 4, 64, (1, 3, 5)
PROMPT = "a red cat on a mat"
_DIFFUSERS = """
import sys, torch, diffusers
torch.set_num_threads(1)
pipe = diffusers.Flux2KleinPipeline.from_pretrained(sys.argv[1])
pipe.set_progress_bar_config(disable=True)
out = pipe(prompt=sys.argv[2], height=int(sys.argv[3]), width=int(sys.argv[3]),
           num_inference_steps=int(sys.argv[4]), max_sequence_length=int(sys.argv[5]),
           text_encoder_out_layers=tuple(map(int, sys.argv[6].split(","))),
           generator=torch.Generator().manual_seed(0))
out.images[0].save(sys.argv[7])
""" + PEAK


def make_pipeline(path: Path, quick: bool) -> Path:
    """The pipeline directory, written once (one that is complete is reused)."""
    if (path / "done").is_file():
        return path
    sys.path.insert(0, str(ROOT / "tests"))
    from flux2_pipeline import build

    build(path / "pipe", **SIZES[quick])
    (path / "done").write_text("")
    return path


def run(quick: bool = False, pairs: int | None = None) -> dict[str, Any]:
    """Both sides in alternating processes; JSON-serialisable results."""
    import numpy as np
    from PIL import Image

    root = make_pipeline(ROOT / "runs" / "bench" / f"flux2-{'quick' if quick else 'small'}",
                         quick)
    pipe, layers = root / "pipe", ",".join(map(str, LAYERS))
    side = 32 if quick else SIDE
    sides = {
        "tyr": [sys.executable, "-c", processes.TYR, "generate", str(pipe), "--prompt", PROMPT,
                "--height", str(side), "--width", str(side), "--steps", str(STEPS),
                "--max-sequence-length", str(LENGTH), "--text-layers",
                "1,2,2" if quick else layers, "-q", "-o", str(root / "tyr.png")],
        "diffusers": [sys.executable, "-c", _DIFFUSERS, str(pipe), PROMPT, str(side),
                      str(STEPS), str(LENGTH), "1,2,2" if quick else layers,
                      str(root / "diffusers.png")],
    }
    got = alternate(sides, pairs or (2 if quick else 4))
    a, b = (np.asarray(Image.open(root / f"{n}.png"), dtype=np.int16)
            for n in ("tyr", "diffusers"))
    out: dict[str, Any] = {"params_m": _params(pipe) / 1e6, "side": side,
                           "max_pixel_diff": int(np.abs(a - b).max())}
    return {**out, **got}


def _params(pipe: Path) -> int:
    import math

    from pytyr.safetensors import open_checkpoint

    total = 0
    for part in ("text_encoder", "transformer", "vae"):
        with open_checkpoint(pipe / part) as c:
            total += sum(math.prod(spec.shape) for spec in c.tensors.values())
    return total


def rows(r: dict[str, Any]) -> list[Row]:
    what = (f"{r['params_m']:.0f} M-parameter FLUX.2 [klein] layout, {r['side']}², "
            f"max pixel diff {r['max_pixel_diff']}")
    return processes.rows(r, "generate", "diffusers", what)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.generate [--quick]`: rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
