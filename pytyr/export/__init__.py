"""`tyr export`: a trained run in another framework's format.

    export_run("hf-gpt2", Path("runs/gpt"), Path("out/gpt2"))
"""
from __future__ import annotations

from pathlib import Path

from pytyr.errors import ConfigError

FORMATS = ("hf-gpt2",)


def export_run(fmt: str, run_dir: Path, out: Path) -> Path:
    if fmt == "hf-gpt2":
        from pytyr.export.hf_gpt2 import export_gpt2

        return export_gpt2(run_dir, out)
    raise ConfigError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
