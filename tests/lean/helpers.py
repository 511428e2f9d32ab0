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


def examples_layout(tmp_path: Path) -> Path:
    """The repository's lakefile and examples under `tmp_path` (returned): a changed example
    written there checks as in the repository, an import of another example resolved from
    the lakefile's folder as Lake resolves it (`import examples.flux2.transformer.Transformer`)."""
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "lakefile.lean").write_text((root / "lakefile.lean").read_text())
    for f in (root / "examples").rglob("*.lean"):
        copy = tmp_path / f.relative_to(root)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    return tmp_path
