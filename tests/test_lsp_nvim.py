"""A real editor: Neovim's built-in LSP client, headless, set up by docs/editor.md's own snippet
for the Neovim found (0.10 and later, or 0.7), opens examples/gpt/GPT.lean with one planted
mistake, gets the diagnostic at the mistake's line, presses `K` on a `let` and reads the hover's
window (scripts/editor/nvim-check.lua). Without the snippet's mapping, 0.7's `K` opens no hover.
Skipped where `nvim` is not installed (`.ci/run` installs Debian's neovim when it can)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_session import BAD_LINE, ROOT, gpt_copy, line_of

NVIM = shutil.which("nvim")
SCRIPT = ROOT / "scripts" / "editor" / "nvim-check.lua"
DOC = ROOT / "docs" / "editor.md"

pytestmark = [pytest.mark.skipif(NVIM is None, reason="nvim is not installed"),
              pytest.mark.slow]


def _version() -> tuple[int, int]:
    out = subprocess.run([NVIM, "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.match(r"NVIM v(\d+)\.(\d+)", out)
    assert m, out
    return int(m[1]), int(m[2])


def documented_setup(version: tuple[int, int]) -> str:
    """docs/editor.md's Lua snippet for `version`, started as this test's server."""
    which = "0.10" if version >= (0, 10) else "0.7"
    m = re.search(rf"<!-- nvim: {re.escape(which)} -->\n```lua\n(.*?)```", DOC.read_text(),
                  re.DOTALL)
    assert m, f"no Neovim {which} snippet in {DOC}"
    cmd = '{ "/path/to/repo/.venv/bin/tyr", "lsp" }'
    assert cmd in m[1]
    return m[1].replace(cmd, f'{{ "{sys.executable}", "-m", "pytyr.cli", "lsp" }}')


def _session(tmp_path: Path, setup: str, wait_ms: int = 60000) -> tuple[list[str], str]:
    path = gpt_copy(tmp_path, mistake=True)
    text = path.read_text()
    (tmp_path / "setup.lua").write_text(setup)
    out = tmp_path / "nvim.txt"
    qkv = line_of(text, "let qkv") + 1
    env = {**os.environ, "TYR_FILE": str(path), "TYR_OUT": str(out),
           "TYR_INIT": str(tmp_path / "setup.lua"), "TYR_HOVER": f"{qkv}:7",
           "TYR_HOVER_WAIT_MS": str(wait_ms), "XDG_STATE_HOME": str(tmp_path),
           "XDG_CACHE_HOME": str(tmp_path), "MANPAGER": "cat", "PAGER": "cat"}
    run = subprocess.run([NVIM, "--headless", "--clean", "-u", "NONE", "-c",
                          f"luafile {SCRIPT}"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL)
    got = out.read_text().splitlines() if out.exists() else []
    return got, f"{run.returncode} {got} {run.stderr}"


def test_neovim_shows_the_diagnostic_at_the_mistake_and_k_hovers(tmp_path):
    got, why = _session(tmp_path, documented_setup(_version()))
    assert got[-1:] == ["done"], why
    text = (tmp_path / "GPT.lean").read_text()
    diags = [g for g in got if g.startswith("diagnostic ")]
    want = f"diagnostic {line_of(text, BAD_LINE) + 1}:{BAD_LINE.index('p.c_attn')}: " \
           f"argument 'M' of 'linearBias3'"
    assert len(diags) == 1 and diags[0].startswith(want), got
    (hover,) = [g for g in got if g.startswith("hover ")]
    assert "qkv : T #[b, t, 3 * c.n_embd]" in hover and "T #[12, 64, 384]" in hover


@pytest.mark.skipif(NVIM is not None and _version() >= (0, 10),
                    reason="0.10 maps K to the hover itself")
def test_without_the_mapping_k_is_no_hover_on_neovim_0_7(tmp_path):
    setup = documented_setup(_version())
    mapping = 'vim.keymap.set("n", "K", vim.lsp.buf.hover, { buffer = bufnr })'
    assert mapping in setup
    got, why = _session(tmp_path, setup.replace(mapping, ""), wait_ms=3000)
    assert got[-2:] == ["error: no hover window after K", "failed"], why
