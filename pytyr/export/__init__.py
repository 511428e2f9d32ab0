"""`tyr export`: a trained run in another framework's format.

    export_run("hf-gpt2", Path("runs/gpt"), Path("out/gpt2"))

The destination is refused, before anything is read, when it is or lies inside a checkpoint
(this run's `ckpt/` or any other; links followed): an export there would replace the
checkpoint's own files.
"""
from __future__ import annotations

from pathlib import Path

from pytyr.errors import ConfigError

FORMATS = ("hf-gpt2",)


def export_run(fmt: str, run_dir: Path, out: Path) -> Path:
    from pytyr.train.checkpoint import checkpoint_around

    inside = checkpoint_around(out)
    if inside is not None:
        raise ConfigError(f"{out}: the export would write into the checkpoint {inside}; give a "
                          f"directory outside every checkpoint (e.g. {run_dir}-{fmt})")
    if fmt == "hf-gpt2":
        from pytyr.export.hf_gpt2 import export_gpt2

        return export_gpt2(run_dir, out)
    raise ConfigError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
