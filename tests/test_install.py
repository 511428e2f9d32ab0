"""Installing: `make venv` says in one line which Python it needs when $(PYTHON) is another
(a fake interpreter stands in for each version), its range is pyproject.toml's
requires-python, and what pip needs to resolve the dependencies is pinned or bounded."""
from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def fake_python(tmp_path: Path, version: str) -> Path:
    """An interpreter that prints `version` for the Makefile's question, and fails anything
    else (so a run that got past the check would fail loudly, not make a venv)."""
    shim = tmp_path / f"python{version}"
    shim.write_text("#!/bin/sh\n"
                    'case "$2" in *version_info*) echo "%s"; exit 0;; esac\n'
                    "echo 'fake python: not a real interpreter' >&2; exit 3\n" % version)
    shim.chmod(0o755)
    return shim


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("version", ["3.10.12", "3.11.7", "3.12.3", "3.13.0", "3.14.0",
                                     "2.7.18", "4.0.0"])
def test_the_makefile_admits_exactly_the_pythons_pyproject_does(tmp_path, version):
    admitted = version in SpecifierSet(PYPROJECT["project"]["requires-python"])
    out = make("check-python", f"PYTHON={fake_python(tmp_path, version)}")
    assert (out.returncode == 0) == admitted, out.stderr
    if not admitted:
        first = out.stderr.splitlines()[0]
        assert first == (f"error: Tyr needs Python 3.11–3.13; found {version} "
                         f"({tmp_path}/python{version}) — set PYTHON=python3.13")


def test_make_venv_stops_before_making_anything_with_another_python(tmp_path):
    venv = tmp_path / "venv"
    out = make("venv", f"PYTHON={fake_python(tmp_path, '3.10.12')}", f"VENV={venv}")
    assert out.returncode != 0
    assert out.stderr.startswith("error: Tyr needs Python 3.11–3.13; found 3.10.12")
    assert not venv.exists()


def test_a_python_that_does_not_run_is_named(tmp_path):
    out = make("check-python", f"PYTHON={tmp_path / 'python9'}")
    assert out.returncode != 0
    assert out.stderr.splitlines()[0] == (f"error: Tyr needs Python 3.11–3.13; "
                                          f"'{tmp_path / 'python9'}' does not run — set "
                                          f"PYTHON=python3.13")


def test_every_dependency_is_pinned_or_bounded_where_pip_could_backtrack():
    # torch exactly (the CPU wheel on disk); transformers and the libraries it pins in a
    # window, so that pip never walks back through their old releases
    deps = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    extras = PYPROJECT["project"]["optional-dependencies"]
    by_name = {r.name: r for r in deps + [Requirement(r) for r in extras["test"]]}
    assert str(by_name["torch"].specifier) == "==2.13.0"
    for name in ("transformers", "tokenizers", "safetensors", "numpy"):
        ops = {s.operator for s in by_name[name].specifier}
        assert ops == {">=", "<"}, (name, str(by_name[name].specifier))
    # Triton is the kernels' extra (torch's CUDA wheels bring their own), in the tests' too
    assert "triton" not in {r.name for r in deps}
    assert any(Requirement(r).name == "triton" for r in extras["kernels"])
    assert any(Requirement(r).name == "triton" for r in extras["test"])
