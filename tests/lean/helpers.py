"""Helpers for checker tests: check a snippet of Lean written to a temporary file."""
from __future__ import annotations

from pathlib import Path

from pytyr.errors import Diagnostic
from pytyr.lean import check_files

PRELUDE = "import Tyr\nopen torch\n"


def check_src(tmp_path: Path, src: str, *, prelude: bool = True, name: str = "M.lean") -> list[Diagnostic]:
    path = tmp_path / name
    path.write_text((PRELUDE if prelude else "") + src, encoding="utf-8")
    return check_files(path)


def one_error(tmp_path: Path, src: str, *, prelude: bool = True) -> Diagnostic:
    diags = check_src(tmp_path, src, prelude=prelude)
    assert len(diags) == 1, "\n".join(map(str, diags)) or "no error reported"
    return diags[0]
