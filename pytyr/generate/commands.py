"""`tyr generate` on the CLI's parser (`register`, as `sampling.register_sampling`):

    tyr generate DIR --prompt TEXT [--height H] [--width W] [--steps N] [--guidance G]
                 [--seed S] [--latents L.safetensors] [--text-layers 9,18,27]
                 [--max-sequence-length 512] [-o image.png]

Every value is checked here, before the pipeline directory is read (`flux2.generate`).
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


def _options(args: argparse.Namespace) -> Any:
    from pytyr.generate.flux2 import GenerateOptions

    for name, value, top in (("--height", args.height, MAX_SIDE), ("--width", args.width,
                                                                    MAX_SIDE),
                             ("--steps", args.steps, MAX_STEPS),
                             ("--max-sequence-length", args.max_sequence_length, 1 << 16)):
        if not 1 <= value <= top:
            raise ConfigError(f"{name} {value} is out of range (1 to {top})")
    if not math.isfinite(args.guidance) or args.guidance < 0:
        raise ConfigError(f"--guidance {args.guidance} must be a finite number >= 0")
    if not 0 <= args.seed < 2**63:
        raise ConfigError(f"--seed {args.seed} is out of range (0 to 2**63 - 1)")
    layers = args.text_layers.split(",")
    if len(layers) != 3 or not all(x.strip().isdigit() for x in layers):
        raise ConfigError(f"--text-layers {args.text_layers!r}: three layer numbers, as 9,18,27")
    k = tuple(int(x) for x in layers)
    if not k[0] <= k[1] <= k[2]:
        raise ConfigError(f"--text-layers {args.text_layers}: the layers must not decrease")
    if args.latents is not None:
        input_file(args.latents, "latents file")
    output_file(args.out, "image file")
    return GenerateOptions(args.prompt, args.height, args.width, args.steps, args.guidance,
                           args.seed, Path(args.latents) if args.latents else None, k,
                           args.max_sequence_length)


def cmd_generate(args: argparse.Namespace) -> int:
    from tqdm.auto import trange

    from pytyr.generate.flux2 import generate
    from pytyr.generate.layout import read_pipeline

    opts = _options(args)
    pipe = read_pipeline(args.dir)
    bar = (lambda n: trange(n, desc="denoising", unit="step", file=sys.stderr,
                            disable=None)) if not args.quiet else range
    generate(pipe, opts, Path(args.out), progress=bar)
    print(f"wrote {args.out}")
    return 0


def register(sub: Any, make_sub: Callable[..., argparse.ArgumentParser]) -> None:
    """`tyr generate` on the parser's subcommands (`make_sub`: cli's `_sub`)."""
    g = make_sub(sub, "generate", "text to image with a FLUX.2 [klein] pipeline",
                 "Draw an image from a prompt with the three models of a directory diffusers "
                 "wrote for a Flux2KleinPipeline (save_pretrained: model_index.json, "
                 "transformer/, vae/, text_encoder/, tokenizer/, scheduler/), each run as its "
                 "Lean model (examples/flux2, examples/llama), as the pipeline computes it.",
                 "  tyr generate klein/ --prompt 'a red fox' --height 512 --width 512 "
                 "-o fox.png\n"
                 "  tyr generate klein/ --prompt 'a red fox' --latents noise.safetensors")
    g.add_argument("dir", metavar="DIR", help="the pipeline's directory")
    g.add_argument("--prompt", required=True, help="what to draw")
    g.add_argument("--height", type=int, default=1024, help="pixels, a multiple of 16 "
                   "(default %(default)s)")
    g.add_argument("--width", type=int, default=1024, help="pixels, a multiple of 16 "
                   "(default %(default)s)")
    g.add_argument("--steps", type=int, default=50, help="denoising steps (default "
                   "%(default)s; a step-distilled [klein] is made for 4)")
    g.add_argument("--guidance", type=float, default=4.0, help="classifier-free guidance "
                   "scale; 1 or less, or a step-distilled model, runs none (default %(default)s)")
    g.add_argument("--seed", type=int, default=0, help="the initial noise's seed, drawn as the "
                   "pipeline draws it with torch.Generator().manual_seed (default %(default)s)")
    g.add_argument("--latents", metavar="L.safetensors", help="the initial noise instead: one "
                   "tensor 'latents' [1, in_channels, height/16, width/16], as the pipeline's "
                   "latents= argument")
    g.add_argument("--text-layers", default="9,18,27", metavar="A,B,C", help="the text "
                   "encoder's hidden states read, side by side (default %(default)s)")
    g.add_argument("--max-sequence-length", type=int, default=512, metavar="N",
                   help="prompt tokens, padded or cut to N (default %(default)s)")
    g.add_argument("-o", "--out", default="image.png", metavar="FILE.png",
                   help="the image (default %(default)s)")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    g.set_defaults(fn=cmd_generate)
