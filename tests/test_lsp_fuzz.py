"""A fuzz of 500 random edits of examples/gpt/GPT.lean sent to `tyr lsp` by a real client
(5 hypothesis examples of 100 incremental edits, each with requests between them): every
request is answered within its time limit, none with an error, the server is alive after,
and a last request about the final text answers as for that text."""
from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_session import GPT, SERVER, diagnostics, init_params, open_doc

pytestmark = pytest.mark.asyncio(loop_scope="module")

EDITS_PER_EXAMPLE = 100
EXAMPLES = 5  # 500 edits in all
ANSWER_S = 30.0  # the longest any one request may take (a check waits behind the others)
PIECES = ["(", ")", "#[", "]", "⟨", "⟩", "{", "}", ":=", ":", " ", "\n", "\n  ", "let ", "fun ",
          "=>", "→", "x", "p.", "c.n_embd", "T #[b, t]", "linear", "by decide", "0", "3 *",
          "/-", "-/", "--", "\"", "«", "»", ".", "@[model]", "def ", "structure ", "where",
          "import Tyr\n", "🦀", "λ", "\t", "\r\n", "\u0000"]


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def doc(client, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "GPT.lean"
    path.write_text((GPT / "GPT.lean").read_text(encoding="utf-8"))
    (path.parent / "config.json").write_text((GPT / "config.json").read_text())
    return path


edit = st.tuples(
    st.floats(0, 1), st.floats(0, 1),  # where: a line, a column, as fractions
    st.integers(0, 12),  # characters deleted there
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=3),
    st.sampled_from(["none"] * 10 + ["hover", "definition", "completion", "symbols",
                                     "action"]))  # a request after a third of the edits


def _place(text: str, fy: float, fx: float) -> tuple[int, int, int]:
    """(line, character, offset) of a point in `text` (ASCII-safe: characters as UTF-16)."""
    lines = text.split("\n")
    line = min(int(fy * len(lines)), len(lines) - 1)
    col = min(int(fx * (len(lines[line]) + 1)), len(lines[line]))
    offset = sum(len(x) + 1 for x in lines[:line]) + col
    return line, col, offset


def _utf16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


async def _request(client, uri: str, kind: str, pos: lsp.Position) -> object:
    doc = lsp.TextDocumentIdentifier(uri)
    if kind == "hover":
        return await client.text_document_hover_async(lsp.HoverParams(doc, pos))
    if kind == "definition":
        return await client.text_document_definition_async(lsp.DefinitionParams(doc, pos))
    if kind == "completion":
        return await client.text_document_completion_async(lsp.CompletionParams(doc, pos))
    if kind == "symbols":
        return await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc))
    return await client.text_document_code_action_async(lsp.CodeActionParams(
        doc, lsp.Range(pos, pos), lsp.CodeActionContext(diagnostics=[])))


# No shrinking: a failing script is reported as drawn (shrinking 100-edit scripts against a
# live server can take many minutes, and CI must stay bounded).
@settings(max_examples=EXAMPLES, deadline=None, phases=[Phase.explicit, Phase.reuse,
                                                        Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(script=st.lists(edit, min_size=EDITS_PER_EXAMPLE, max_size=EDITS_PER_EXAMPLE))
async def test_random_edits_never_crash_hang_or_go_unanswered(client: LanguageClient, doc,
                                                              script):
    text = doc.read_text(encoding="utf-8")
    uri = open_doc(client, doc, text)
    answered = sent = 0
    for version, (fy, fx, cut, pieces, ask) in enumerate(script, start=2):
        line, col, off = _place(text, fy, fx)
        end = min(off + cut, len(text))
        removed, new = text[off:end], "".join(pieces)
        tail_lines = removed.split("\n")
        end_line = line + len(tail_lines) - 1
        end_col = (_utf16(text.split("\n")[line][:col]) if len(tail_lines) == 1 else 0) \
            + _utf16(tail_lines[-1])
        start = lsp.Position(line, _utf16(text.split("\n")[line][:col]))
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [lsp.TextDocumentContentChangePartial(
                range=lsp.Range(start, lsp.Position(end_line, end_col)), text=new)]))
        text = text[:off] + new + text[end:]
        if ask != "none":
            sent += 1
            await asyncio.wait_for(_request(client, uri, ask, start), ANSWER_S)
            answered += 1
    assert answered == sent
    # alive, and in step: back to the example's text, its declarations are the symbols
    original = doc.read_text(encoding="utf-8")
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(version=len(script) + 2, uri=uri),
        [lsp.TextDocumentContentChangeWholeDocument(text=original)]))
    syms = await asyncio.wait_for(client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri))), ANSWER_S)
    assert [s.name for s in syms][:3] == ["GPTConfig", "GPTConfig.n_embd", "GPTConfig.residStd"]
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        lsp.TextDocumentIdentifier(uri)))
    assert client.error is None


async def test_the_server_still_checks_after_the_fuzz(client: LanguageClient, doc):
    uri = open_doc(client, doc, doc.read_text(encoding="utf-8"))
    assert await diagnostics(client, uri, lambda ds: ds == []) == []
