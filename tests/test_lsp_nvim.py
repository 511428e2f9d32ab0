"""A real editor: Neovim's built-in LSP client, headless, opens examples/gpt/GPT.lean with one
planted mistake, gets the diagnostic at the mistake's line and a hover with the type
(scripts/editor/nvim-check.lua). Skipped where `nvim` is not installed (`.ci/run` installs
Debian's neovim when it can)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from lsp_session import BAD_LINE, ROOT, gpt_copy, line_of

NVIM = shutil.which("nvim")
SCRIPT = ROOT / "scripts" / "editor" / "nvim-check.lua"

pytestmark = [pytest.mark.skipif(NVIM is None, reason="nvim is not installed"),
              pytest.mark.slow]


def test_neovim_shows_the_diagnostic_at_the_mistake_and_the_hover(tmp_path):
    path = gpt_copy(tmp_path, mistake=True)
    text = path.read_text()
    out = tmp_path / "nvim.txt"
    qkv = line_of(text, "let qkv") + 1
    env = {**os.environ, "TYR_FILE": str(path), "TYR_OUT": str(out),
           "TYR_PYTHON": sys.executable, "TYR_HOVER": f"{qkv}:7", "XDG_STATE_HOME": str(tmp_path),
           "XDG_CACHE_HOME": str(tmp_path)}
    run = subprocess.run([NVIM, "--headless", "--clean", "-u", "NONE", "-c",
                          f"luafile {SCRIPT}"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL)
    got = out.read_text().splitlines() if out.exists() else []
    assert run.returncode == 0 and got[-1:] == ["done"], (run.returncode, got, run.stderr)
    diags = [g for g in got if g.startswith("diagnostic ")]
    want = f"diagnostic {line_of(text, BAD_LINE) + 1}:{BAD_LINE.index('p.c_attn')}: " \
           f"argument 'M' of 'linearBias3'"
    assert len(diags) == 1 and diags[0].startswith(want), got
    (hover,) = [g for g in got if g.startswith("hover ")]
    assert "qkv : T #[b, t, 3 * c.n_embd]" in hover
