"""The real Lean 4.35 front end (`scripts/lean_headers.py`), for tests that compare with it.

`real_lean()` builds it once into the shared cache (as `make lean-headers` does); where the
wheel cannot be installed it skips the calling test with the reason, except in CI (`CI` set),
where that is a failure.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "lean_headers.py"


def _load():
    if "lean_headers" in sys.modules:
        return sys.modules["lean_headers"]
    spec = importlib.util.spec_from_file_location("lean_headers", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["lean_headers"] = mod
    spec.loader.exec_module(mod)
    return mod


lean_headers = _load()


def cache_dir() -> Path:
    return Path(os.environ.get("TYR_LEAN_CACHE") or ROOT / ".cache" / "lean")


def real_lean():
    """The built `RealLean`, or skip (fail in CI) when it cannot be set up."""
    try:
        return lean_headers.RealLean(cache_dir()).ensure()
    except lean_headers.SetupError as err:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the real Lean: {err}")
        pytest.skip(f"the real Lean could not be set up here: {err}")


def lean_messages(lean, tmp_path: Path, src: str) -> list:
    """Lean's messages on `src` as a file with no imports (only the stand-in `Init`)."""
    f = tmp_path / "t.lean"
    f.write_text(src, encoding="utf-8")
    return lean.run(Path("t.lean"), lean.init_olean.parent, tmp_path)
