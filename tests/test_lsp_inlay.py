"""Inlay hints through a real client (pytest-lsp): every `let`'s type after its name, with the
config's numbers where a config is beside the file and without them where none is; a range
gives only its lets; `{"inlayHints": false}` turns them off."""
from __future__ import annotations

import re

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_session import SERVER, at, diagnostics, gpt_copy, init_params, line_of, open_doc

pytestmark = pytest.mark.asyncio(loop_scope="module")
_LET = re.compile(r"\blet ([A-Za-z_][A-Za-z0-9_']*)")


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


async def _hints(client, uri: str, text: str, lo: int = 0, hi: int | None = None
                 ) -> dict[tuple[int, int], lsp.InlayHint]:
    hi = len(text.split("\n")) if hi is None else hi
    got = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(lo, 0), lsp.Position(hi, 0))))
    return {(h.position.line, h.position.character): h for h in got}


def _let_ends(text: str) -> list[tuple[int, int]]:
    """Where each `let`'s name ends (0-based), the place of its hint."""
    return [(i, m.end(1)) for i, line in enumerate(text.split("\n"))
            for m in _LET.finditer(line)]


async def test_every_let_has_its_type_and_the_configs_numbers(client: LanguageClient,
                                                               tmp_path):
    path = gpt_copy(tmp_path)
    text = path.read_text()
    uri = open_doc(client, path)
    await diagnostics(client, uri, lambda ds: ds == [])
    hints = await _hints(client, uri, text)
    assert set(hints) == set(_let_ends(text))  # one per `let`, right after its name
    qkv = at(text, "let qkv", 7)
    h = hints[(qkv.line, qkv.character)]
    assert h.label == ": T #[b, t, 3 * c.n_embd] = T #[12, 64, 384]"
    assert h.kind == lsp.InlayHintKind.Type and "config.json" in h.tooltip.value
    mlp = at(text, "let h := gelu", 5)
    assert hints[(mlp.line, mlp.character)].label == ": T #[b, t, 4 * c.n_embd] = T #[12, 64, 512]"
    # a range: the lets of `mlp` only
    first = line_of(text, "def mlp")
    some = await _hints(client, uri, text, first, first + 4)
    assert list(some) == [(mlp.line, mlp.character)]


async def test_without_a_config_the_hints_are_symbolic(client: LanguageClient, tmp_path):
    path = gpt_copy(tmp_path, config=False)
    text = path.read_text()
    uri = open_doc(client, path)
    await diagnostics(client, uri, lambda ds: ds == [])
    hints = await _hints(client, uri, text)
    qkv = at(text, "let qkv", 7)
    assert hints[(qkv.line, qkv.character)].label == ": T #[b, t, 3 * c.n_embd]"
    assert hints[(qkv.line, qkv.character)].tooltip is None
    assert all(" = " not in h.label for h in hints.values())


async def test_the_lets_after_an_error_have_hints(client: LanguageClient, tmp_path):
    path = gpt_copy(tmp_path)
    text = path.read_text().replace("let q := splitHeads (third qkv 0)",
                                    "let q := splitHeads (third x 0)")
    uri = open_doc(client, path, text)
    await diagnostics(client, uri, lambda ds: len(ds) == 1)
    hints = await _hints(client, uri, text)
    k = at(text, "let k", 5)
    assert hints[(k.line, k.character)].label.startswith(": T #[b, c.n_head, t, c.head_dim]")


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER))
async def quiet(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params(inlayHints=False))
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_hints_can_be_turned_off(quiet: LanguageClient, tmp_path):
    path = gpt_copy(tmp_path)
    text = path.read_text()
    uri = open_doc(quiet, path)
    await diagnostics(quiet, uri, lambda ds: ds == [])
    assert await _hints(quiet, uri, text) == {}
