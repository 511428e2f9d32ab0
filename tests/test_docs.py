"""The Python code of the docs runs as written (from the repository root)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("doc", ["docs/python-api.md"])
def test_the_python_blocks_run(doc, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(encoding="utf-8"), re.S)
    assert blocks, f"{doc} has no python blocks"
    scope: dict = {"__name__": "docs"}
    exec(compile("\n".join(blocks), doc, "exec"), scope)  # one script: later blocks use earlier
