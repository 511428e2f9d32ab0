"""Text to image: `tyr generate DIR` against diffusers' own `Flux2KleinPipeline`
(`from_pretrained` + one call + the PNG), the same pipeline directory, prompt and seed.

A random FLUX.2 [klein]-layout pipeline is written once by diffusers' `save_pretrained`
(`tests/flux2_pipeline.build` at bench sizes: a 6-layer Qwen3 of width 256, a transformer of
2 double and 4 single blocks of width 512, the autoencoder of the tests; ~60 M parameters,
float32; the tests' tiny one with `--quick`) into `runs/bench/flux2-*`. Each side runs in a
process of its own at one thread, alternating, the order flipped every pair, after a warm-up
pair; measured per process: wall time (start to exit) and peak RSS (`VmHWM`, printed by the
child last). A 256 × 256 image in 4 steps with guidance from a 64-token prompt. `ratio` is
diffusers' over tyr's (the median of the per-pair ratios): the goals are time >= 1.0 and tyr's
peak RSS within 1.2× of diffusers'. The two PNGs are compared too (the largest pixel
difference, of 255).

Standalone: `python -m bench.generate [--quick]`.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import ROOT, Row, judge
from bench.standalone import standalone

SIZES = {False: dict(width=256, layers=6, blocks=(2, 4), heads=4, head=128),
         True: {}}
SIDE, STEPS, LENGTH, LAYERS = 256, 4, 64, (1, 3, 5)
PROMPT = "a red cat on a mat"
MEMORY_GOAL = 1 / 1.2
_PEAK = "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])"
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
""" + _PEAK
_TYR = """
import sys
from pytyr.cli import main
rc = main(sys.argv[1:])
""" + _PEAK + "\nsys.exit(rc)"


def make_pipeline(path: Path, quick: bool) -> Path:
    """The pipeline directory, written once (one that is complete is reused)."""
    if (path / "done").is_file():
        return path
    sys.path.insert(0, str(ROOT / "tests"))
    from flux2_pipeline import build

    build(path / "pipe", **SIZES[quick])
    (path / "done").write_text("")
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
    import numpy as np
    from PIL import Image

    root = make_pipeline(ROOT / "runs" / "bench" / f"flux2-{'quick' if quick else 'small'}",
                         quick)
    pipe, layers = root / "pipe", ",".join(map(str, LAYERS))
    side = 32 if quick else SIDE
    sides = {
        "tyr": [sys.executable, "-c", _TYR, "generate", str(pipe), "--prompt", PROMPT,
                "--height", str(side), "--width", str(side), "--steps", str(STEPS),
                "--max-sequence-length", str(LENGTH), "--text-layers",
                "1,2,2" if quick else layers, "-q", "-o", str(root / "tyr.png")],
        "diffusers": [sys.executable, "-c", _DIFFUSERS, str(pipe), PROMPT, str(side),
                      str(STEPS), str(LENGTH), "1,2,2" if quick else layers,
                      str(root / "diffusers.png")],
    }
    pairs = pairs or (2 if quick else 4)
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    for i in range(pairs + 1):  # the first pair warms up
        for name in (list(sides) if i % 2 == 0 else list(reversed(sides))):
            sample = _child(sides[name])
            if i:
                got[name].append(sample)
    a, b = (np.asarray(Image.open(root / f"{n}.png"), dtype=np.int16)
            for n in ("tyr", "diffusers"))
    out: dict[str, Any] = {"params_m": _params(pipe) / 1e6, "side": side,
                           "max_pixel_diff": int(np.abs(a - b).max())}
    for name, samples in got.items():
        out[name] = {"wall_s": [w for w, _ in samples], "rss_mb": [m for _, m in samples]}
    pair = list(zip(got["tyr"], got["diffusers"]))
    out["time_ratio"] = statistics.median(d[0] / t[0] for t, d in pair)
    out["memory_ratio"] = statistics.median(d[1] / t[1] for t, d in pair)
    return out


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
    out = []
    for key, unit, ratio, goal in (("wall_s", "s", "time_ratio", 1.0),
                                   ("rss_mb", "MB", "memory_ratio", MEMORY_GOAL)):
        for side in ("tyr", "diffusers"):
            values = sorted(r[side][key])
            row = Row(f"generate {key.split('_')[0]} ({side})",
                      f"{statistics.median(values):.2f}" if unit == "s"
                      else f"{statistics.median(values):.0f}", f"{values[-1]:.2f}")
            if side == "tyr":
                row = Row(row.what, row.median, row.p90, **judge(r[ratio], goal),
                          note=f"{unit}; {what}" if key == "wall_s" else
                          f"peak RSS {unit} (diffusers/tyr; goal: tyr within 1.2x)")
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.generate [--quick]`: rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
