"""`tyr generate` on the CLI's parser (`register`, as `sampling.register_sampling`):

    tyr generate DIR --prompt TEXT [--height H] [--width W] [--steps N] [--guidance G]
                 [--seed S] [--latents L.safetensors] [--text-layers 9,18,27]
                 [--max-sequence-length 512] [--checkpoint best|last] [-o image.png]

DIR is a `Flux2KleinPipeline` directory (`flux2.generate`) or, where it holds a `run.json`, a
run of `tyr train` prompted as FLUX.2 is (`trained.generate_from_run`), which draws the size it
was trained on with its own prompt length and text layers: `--height`, `--width`,
`--text-layers` and `--max-sequence-length` are the pipeline's alone, `--checkpoint` the run's,
and `--steps` and `--guidance` default to the run's `sample` table. Every value is checked
here, before the directory's models are read.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytyr.errors import ConfigError
from pytyr.paths import input_file, output_file

MAX_SIDE = 1 << 14  # pixels: a 16384² image is 1 M latent tokens, past any model's reach
MAX_STEPS = 10_000


PIPELINE_DEFAULTS = {"height": 1024, "width": 1024, "steps": 50, "guidance": 4.0,
                     "text_layers": "9,18,27", "max_sequence_length": 512}
PIPELINE_ONLY = ("height", "width", "text_layers", "max_sequence_length")
RUN_ONLY = ("checkpoint",)


def _check_common(args: argparse.Namespace) -> None:
    if args.steps is not None and not 1 <= args.steps <= MAX_STEPS:
        raise ConfigError(f"--steps {args.steps} is out of range (1 to {MAX_STEPS})")
    if args.guidance is not None and (not math.isfinite(args.guidance) or args.guidance < 0):
        raise ConfigError(f"--guidance {args.guidance} must be a finite number >= 0")
    if not 0 <= args.seed < 2**63:
        raise ConfigError(f"--seed {args.seed} is out of range (0 to 2**63 - 1)")
    if args.latents is not None:
        input_file(args.latents, "latents file")
    output_file(args.out, "image file")


def _options(args: argparse.Namespace) -> Any:
    from pytyr.generate.flux2 import GenerateOptions

    given = [k for k in RUN_ONLY if getattr(args, k) is not None]
    if given:
        raise ConfigError(f"--{given[0]} is a run's setting; {args.dir} is a pipeline's "
                          f"directory (a run of `tyr train` has a run.json)")
    for key, value in PIPELINE_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    _check_common(args)
    for name, value, top in (("--height", args.height, MAX_SIDE), ("--width", args.width,
                                                                    MAX_SIDE),
                             ("--max-sequence-length", args.max_sequence_length, 1 << 16)):
        if not 1 <= value <= top:
            raise ConfigError(f"{name} {value} is out of range (1 to {top})")
    layers = args.text_layers.split(",")
    if len(layers) != 3 or not all(x.strip().isdigit() for x in layers):
        raise ConfigError(f"--text-layers {args.text_layers!r}: three layer numbers, as 9,18,27")
    k = tuple(int(x) for x in layers)
    if not k[0] <= k[1] <= k[2]:
        raise ConfigError(f"--text-layers {args.text_layers}: the layers must not decrease")
    return GenerateOptions(args.prompt, args.height, args.width, args.steps, args.guidance,
                           args.seed, Path(args.latents) if args.latents else None, k,
                           args.max_sequence_length)


def _run_options(args: argparse.Namespace) -> Any:
    from pytyr.generate.trained import RunGenerateOptions

    given = [k for k in PIPELINE_ONLY if getattr(args, k) is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ConfigError(f"{flag} is a pipeline's setting; {args.dir} is a run of `tyr train`, "
                          f"which draws the images it was trained on, with its own prompt "
                          f"length and text layers")
    _check_common(args)
    return RunGenerateOptions(args.prompt, args.steps, args.guidance, args.seed,
                              Path(args.latents) if args.latents else None,
                              args.checkpoint or "best")


def cmd_generate(args: argparse.Namespace) -> int:
    from tqdm.auto import trange

    bar = (lambda n: trange(n, desc="denoising", unit="step", file=sys.stderr,
                            disable=None)) if not args.quiet else range
    if (Path(args.dir) / "run.json").is_file():
        from pytyr.generate.trained import PromptedRun, generate_from_run

        opts = _run_options(args)
        generate_from_run(PromptedRun(Path(args.dir)), opts, Path(args.out), progress=bar)
    else:
        from pytyr.generate.flux2 import generate
        from pytyr.generate.layout import read_pipeline

        opts = _options(args)
        generate(read_pipeline(args.dir), opts, Path(args.out), progress=bar)
    print(f"wrote {args.out}")
    return 0


def register(sub: Any, make_sub: Callable[..., argparse.ArgumentParser]) -> None:
    """`tyr generate` on the parser's subcommands (`make_sub`: cli's `_sub`)."""
    g = make_sub(sub, "generate", "text to image with a FLUX.2 [klein] pipeline or a run",
                 "Draw an image from a prompt with the three models of a directory diffusers "
                 "wrote for a Flux2KleinPipeline (save_pretrained: model_index.json, "
                 "transformer/, vae/, text_encoder/, tokenizer/, scheduler/), each run as its "
                 "Lean model (examples/flux2, examples/llama), as the pipeline computes it; or "
                 "with a run of `tyr train` prompted as FLUX.2 is (a directory with run.json: "
                 "examples/flux2/digits), drawn at the size it was trained on over FLUX.2 "
                 "[klein]'s schedule, each pixel written as a 16 × 16 block.",
                 "  tyr generate klein/ --prompt 'a red fox' --height 512 --width 512 "
                 "-o fox.png\n"
                 "  tyr generate klein/ --prompt 'a red fox' --latents noise.safetensors\n"
                 "  tyr generate runs/digits --prompt 'the digit 7' -o seven.png")
    g.add_argument("dir", metavar="DIR", help="the pipeline's directory, or a run's")
    g.add_argument("--prompt", required=True, help="what to draw")
    g.add_argument("--height", type=int, help="pixels, a multiple of 16 (default 1024; a "
                   "pipeline's alone)")
    g.add_argument("--width", type=int, help="pixels, a multiple of 16 (default 1024; a "
                   "pipeline's alone)")
    g.add_argument("--steps", type=int, help="denoising steps (default 50, a run's "
                   "sample.steps; a step-distilled [klein] is made for 4)")
    g.add_argument("--guidance", type=float, help="classifier-free guidance scale; 1 or less, "
                   "or a step-distilled model, runs none (default 4.0, a run's sample.cfg_scale)")
    g.add_argument("--seed", type=int, default=0, help="the initial noise's seed, drawn as the "
                   "pipeline draws it with torch.Generator().manual_seed (default %(default)s)")
    g.add_argument("--latents", metavar="L.safetensors", help="the initial noise instead: one "
                   "tensor 'latents' [1, in_channels, height/16, width/16], as the pipeline's "
                   "latents= argument (a run: [1, channels, height, width] of its images)")
    g.add_argument("--text-layers", metavar="A,B,C", help="the text encoder's hidden states "
                   "read, side by side (default 9,18,27; a pipeline's alone)")
    g.add_argument("--max-sequence-length", type=int, metavar="N",
                   help="prompt tokens, padded or cut to N (default 512; a pipeline's alone)")
    g.add_argument("--checkpoint", choices=["best", "last"], help="a run's weights: best "
                   "(the lowest validation loss; the default, where the run has one) or last "
                   "(the last step's; a run's alone)")
    g.add_argument("-o", "--out", default="image.png", metavar="FILE.png",
                   help="the image (default %(default)s)")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    g.set_defaults(fn=cmd_generate)
