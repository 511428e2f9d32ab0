"""Helpers for the language-server tests: the server command, a GPT copy with a planted
mistake, and waiting for what a real client (pytest-lsp's) receives."""
from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

from lsprotocol import types as lsp

ROOT = Path(__file__).resolve().parents[1]
GPT = ROOT / "examples" / "gpt"
SERVER = [sys.executable, "-m", "pytyr.cli", "lsp"]
# the planted mistake: the output projection given the fused q, k, v weights
GOOD_LINE = "  dropout (linearBias3 y p.c_proj p.c_proj_bias) c.dropout"
BAD_LINE = "  dropout (linearBias3 y p.c_attn p.c_proj_bias) c.dropout"


def gpt_copy(tmp: Path, *, config: bool = True, mistake: bool = False) -> Path:
    """examples/gpt/GPT.lean (and its config.json) in `tmp`; `mistake` plants the error."""
    text = (GPT / "GPT.lean").read_text(encoding="utf-8")
    assert GOOD_LINE in text
    if mistake:
        text = text.replace(GOOD_LINE, BAD_LINE)
    (tmp / "GPT.lean").write_text(text, encoding="utf-8")
    if config:
        shutil.copy(GPT / "config.json", tmp / "config.json")
    return tmp / "GPT.lean"


def line_of(text: str, needle: str) -> int:
    """0-based line of the first line containing `needle`."""
    for i, line in enumerate(text.split("\n")):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in the text")


def at(text: str, needle: str, offset: int = 0) -> lsp.Position:
    """The position of `needle` (plus `offset` characters) in `text` (ASCII lines)."""
    line = line_of(text, needle)
    return lsp.Position(line, text.split("\n")[line].index(needle) + offset)


def init_params(**options: object) -> lsp.InitializeParams:
    return lsp.InitializeParams(capabilities=lsp.ClientCapabilities(),
                                initialization_options={"debounceMs": 0, **options})


def open_doc(client, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(
        uri, "lean4", version, text if text is not None else path.read_text(encoding="utf-8"))))
    return uri


def replace_all(client, uri: str, text: str, version: int) -> None:
    """didChange with the whole new text (a full-document change event)."""
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(version=version, uri=uri),
        [lsp.TextDocumentContentChangeWholeDocument(text=text)]))


async def diagnostics(client, uri: str, ready: Callable[[list], bool],
                      timeout: float = 60.0) -> list[lsp.Diagnostic]:
    """The document's diagnostics once `ready(them)` holds (fails after `timeout` s)."""
    deadline = time.monotonic() + timeout
    while True:
        got = list(client.diagnostics.get(uri, []))
        if uri in client.diagnostics and ready(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"no diagnostics as expected for {uri} after {timeout} s: "
                                 f"{[d.message for d in got]}")
        await asyncio.sleep(0.05)


async def hover_text(client, uri: str, pos: lsp.Position) -> str | None:
    h = await client.text_document_hover_async(lsp.HoverParams(
        lsp.TextDocumentIdentifier(uri), pos))
    return None if h is None else h.contents.value
