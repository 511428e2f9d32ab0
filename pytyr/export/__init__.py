"""`tyr export`: a trained run in another framework's format.

    export_run("hf", Path("runs/gpt"), Path("out/gpt2"))

`hf` writes a Hugging Face directory (model, tokenizer, generation config; `hf.py`) of the
architecture the run's weights have; `hf-gpt2` and `hf-nanochat` name it. The destination is
refused, before anything is read, when it is or lies inside a checkpoint (this run's `ckpt/`,
`best/` or any other; links followed): an export there would replace the checkpoint's files.
"""
from __future__ import annotations

from pathlib import Path

from pytyr.errors import ConfigError

FORMATS = ("hf", "hf-gpt2", "hf-nanochat")


def export_run(fmt: str, run_dir: Path, out: Path, checkpoint: str = "best",
               task_module: str | None = None) -> Path:
    """`task_module`: the user's `--set task.module` (`tasks.recorded_task_class`)."""
    from pytyr.train.checkpoint import checkpoint_around

    inside = checkpoint_around(out)
    if inside is not None:
        raise ConfigError(f"{out}: the export would write into the checkpoint {inside}; give a "
                          f"directory outside every checkpoint (e.g. {run_dir}-{fmt})")
    if fmt in FORMATS:
        from pytyr.export.hf import export_hf

        return export_hf(run_dir, out, fmt[3:] or None, checkpoint, task_module)
    raise ConfigError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
