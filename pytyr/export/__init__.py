"""`tyr export`: a trained run in another framework's format.

    export_run("hf", Path("runs/gpt"), "out/gpt2")

`hf` writes a Hugging Face directory (model, tokenizer, generation config; `hf.py`) of the
architecture the run's weights have; `hf-gpt2` and `hf-nanochat` name it. The destination is
refused, before anything is read, when it is or lies inside a checkpoint (this run's `ckpt/`,
`best/` or any other; links followed): an export there would replace the checkpoint's files;
and as every output directory is (`output.Output`): empty, the working directory, the run
directory, inside or above it, or a directory of the user's (unless `overwrite`). The export is
written beside it and put in its place whole, replacing a previous export in one step.
"""
from __future__ import annotations

from pathlib import Path

from pytyr.errors import ConfigError

FORMATS = ("hf", "hf-gpt2", "hf-nanochat")


def export_run(fmt: str, run_dir: Path, out: str, checkpoint: str = "best",
               task_module: str | None = None, overwrite: bool = False) -> Path:
    """`task_module`: the user's `--set task.module` (`tasks.recorded_task_class`);
    `overwrite`: replace a directory that is not a previous output of Tyr's."""
    from pytyr.export.output import Output
    from pytyr.train.checkpoint import checkpoint_around

    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    hint = f"{run_dir}-{fmt}"
    inside = checkpoint_around(out) if out.strip() else None
    if inside is not None:
        raise ConfigError(f"{out}: the export would write into the checkpoint {inside}; give a "
                          f"directory outside every checkpoint (e.g. {hint})")
    dest = Output(out, f"tyr export --format {fmt}", overwrite=overwrite,
                  apart={"the run directory": run_dir}, hint=hint)
    from pytyr.export.hf import export_hf

    return export_hf(run_dir, dest, fmt[3:] or None, checkpoint, task_module)
