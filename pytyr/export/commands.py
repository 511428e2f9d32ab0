"""`tyr export` on the CLI's parser (`register`, as `sampling.register_sampling`):

    tyr export --format hf RUN_DIR OUT_DIR [--checkpoint last] [--set task.module=PATH]
                                           [--overwrite]

`--set task.module` names again the task module of the user's that the run was trained with:
a run directory is data, and no module its run.json names is imported
(`tasks.recorded_task_class`).
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytyr.export import FORMATS


def cmd_export(args: argparse.Namespace) -> int:
    from pytyr.export import export_run
    from pytyr.train.tasks import named_task_module

    module = named_task_module(args.set, "export", alone=True)
    out = export_run(args.format, Path(args.run), args.out, args.checkpoint, module,
                     args.overwrite)
    print(f"wrote {out} ({args.format})")
    return 0


def register(sub: Any, make_sub: Callable[..., argparse.ArgumentParser],
             add_checkpoint: Callable[[argparse.ArgumentParser], None]) -> None:
    """`tyr export` on the parser's subcommands (`make_sub`: cli's `_sub`)."""
    e = make_sub(sub, "export", "export a trained run to another framework's format",
                 "Export a trained language-model run as a Hugging Face directory (config.json, "
                 "model.safetensors, tokenizer files, generation_config.json) that "
                 "AutoTokenizer and AutoModelForCausalLM load: the GPT example as GPT-2 "
                 "(hf-gpt2), nanochat as NanoChat (hf-nanochat), a Hugging Face family's own "
                 "model (examples/llama) as that family; hf picks by the run's model. The "
                 "directory is written beside OUT_DIR and put in its place whole: a previous "
                 "export there is replaced, a directory of anything else is refused (unless "
                 "--overwrite), and so are the working directory and the run directory.",
                 "  tyr export --format hf runs/gpt out/gpt2\n"
                 "  tyr export --format hf runs/mine out/mine --set task.module=my_task.py")
    e.add_argument("--format", required=True, choices=list(FORMATS),
                   help="hf: by the run's model; hf-gpt2, hf-nanochat: that architecture")
    e.add_argument("run", metavar="RUN_DIR", help="the `tyr train` run directory")
    e.add_argument("out", metavar="OUT_DIR", help="the directory to write (new, or a previous "
                   "export, which is replaced)")
    e.add_argument("--overwrite", action="store_true",
                   help="replace OUT_DIR even where it holds files that no Tyr export wrote")
    e.add_argument("--set", action="append", metavar="task.module=PATH",
                   help="the task module of your own the run was trained with (a run "
                        "directory's code is never imported; checked by its SHA-256)")
    add_checkpoint(e)
    e.set_defaults(fn=cmd_export)
