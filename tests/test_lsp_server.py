"""`tyr lsp` driven over stdio by a real LSP client (pytest-lsp): diagnostics appear at the
mistake and clear when it is fixed; hover gives the elaborated type and the same type with
the config's numbers; definition, symbols, completion and code actions answer as an editor
needs. One server per module (its start-up and the config's first load are paid once)."""
from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_session import (
    BAD_LINE,
    GOOD_LINE,
    ROOT,
    SERVER,
    at,
    diagnostics,
    gpt_copy,
    hover_text,
    init_params,
    line_of,
    open_doc,
    replace_all,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def gpt_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("gpt")


async def test_diagnostic_appears_at_the_mistake_and_clears(client: LanguageClient, gpt_dir):
    path = gpt_copy(gpt_dir, mistake=True)
    text = path.read_text()
    uri = open_doc(client, path)
    diags = await diagnostics(client, uri, lambda ds: len(ds) > 0)
    assert len(diags) == 1
    d = diags[0]
    assert d.range.start.line == line_of(text, BAD_LINE)
    assert d.range.start.character == BAD_LINE.index("p.c_attn")
    assert d.range.end.character == BAD_LINE.index("p.c_attn") + len("p.c_attn")
    assert "argument 'M' of 'linearBias3'" in d.message and d.source == "tyr"
    assert d.severity == lsp.DiagnosticSeverity.Error
    # the callee is related information: where `linearBias3` is declared (Tyr/Ops.lean)
    related = d.related_information or []
    assert any(r.location.uri.endswith("/Tyr/Ops.lean") and "linearBias3" in r.message
               for r in related)
    replace_all(client, uri, text.replace(BAD_LINE, GOOD_LINE), 2)
    assert await diagnostics(client, uri, lambda ds: ds == []) == []
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        lsp.TextDocumentIdentifier(uri)))


async def test_hover_gives_the_type_and_the_config_resolved_type(client: LanguageClient,
                                                                 gpt_dir):
    path = gpt_copy(gpt_dir)
    text = path.read_text()
    uri = open_doc(client, path)
    await diagnostics(client, uri, lambda ds: ds == [])
    let_qkv = await hover_text(client, uri, at(text, "let qkv", 4))
    assert "qkv : T #[b, t, 3 * c.n_embd]" in let_qkv
    assert "config.json" in let_qkv and "T #[12, 64, 384]" in let_qkv  # b=12, t=64, 3·4·32
    binder = await hover_text(client, uri, at(text, "(x : T #[b, t, c.n_embd]) :", 1))
    assert "x : T #[b, t, c.n_embd]" in binder and "T #[12, 64, 128]" in binder
    field = await hover_text(client, uri, at(text, "c_attn : T", 0))
    assert "c_attn : T #[3 * c.n_embd, c.n_embd]" in field and "T #[384, 128]" in field
    # an op: its signature and doc comment from Tyr/*.lean, and its type at this use
    op = await hover_text(client, uri, at(text, "let qkv := linearBias3", 11))
    assert "def linearBias3 {b t m n : Nat}" in op
    assert "x Mᵀ + bias" in op and "here: `T #[b, t, 3 * c.n_embd]`" in op
    # a projection of the parameter structure, and a number's value under the config
    proj = await hover_text(client, uri, at(text, "rows p.wpe t h", 8))
    assert "p.wpe : T #[c.block, c.n_embd]" in proj and "T #[64, 128]" in proj
    width = await hover_text(client, uri, at(text, "(x : T #[b, t, c.n_embd]) :", 17))
    assert "n_embd" in width and "= `128`" in width
    # the prefix of a projection: the structure itself
    p = await hover_text(client, uri, at(text, "rows p.wpe t h", 5))
    assert "p : GPTParams c" in p
    blank = text.split("\n").index("")
    assert await hover_text(client, uri, lsp.Position(blank, 0)) is None
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        lsp.TextDocumentIdentifier(uri)))


async def test_hover_without_a_config_is_symbolic(client: LanguageClient, tmp_path):
    path = gpt_copy(tmp_path, config=False)
    text = path.read_text()
    uri = open_doc(client, path)
    h = await hover_text(client, uri, at(text, "let qkv", 4))
    assert "qkv : T #[b, t, 3 * c.n_embd]" in h and "config" not in h
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        lsp.TextDocumentIdentifier(uri)))


async def test_definition_into_the_file_and_the_library(client: LanguageClient, gpt_dir):
    path = gpt_copy(gpt_dir)
    text = path.read_text()
    uri = open_doc(client, path)

    async def target(pos: lsp.Position) -> lsp.Location:
        loc = await client.text_document_definition_async(lsp.DefinitionParams(
            lsp.TextDocumentIdentifier(uri), pos))
        assert isinstance(loc, lsp.Location), loc
        return loc

    op = await target(at(text, "let qkv := linearBias3", 12))
    assert op.uri.endswith("/Tyr/Ops.lean")
    lib = (ROOT / "Tyr" / "Ops.lean").read_text().split("\n")
    assert "def linearBias3" in lib[op.range.start.line]
    x = await target(at(text, "linearBias3 x p.c_attn", 12))  # `x` in attention's body
    assert x.uri == uri and x.range.start.line == line_of(text, "def attention")
    field = await target(at(text, "linearBias3 x p.c_attn", 16))  # `c_attn` of `p.c_attn`
    assert field.range.start.line == line_of(text, "c_attn : T #[3 * c.n_embd")
    width = await target(at(text, "(x : T #[b, t, c.n_embd]) :", 17))  # `n_embd`
    assert width.range.start.line == line_of(text, "def GPTConfig.n_embd")
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        lsp.TextDocumentIdentifier(uri)))


async def test_document_symbols(client: LanguageClient, gpt_dir):
    path = gpt_copy(gpt_dir)
    uri = open_doc(client, path)
    syms = await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(
        lsp.TextDocumentIdentifier(uri)))
    by_name = {s.name: s for s in syms}
    assert {"GPTConfig", "Attention", "attention", "logits", "gpt"} <= set(by_name)
    assert by_name["attention"].kind == lsp.SymbolKind.Function
    assert by_name["Attention"].kind == lsp.SymbolKind.Struct
    assert [c.name for c in by_name["Attention"].children] == [
        "c_attn", "c_attn_bias", "c_proj", "c_proj_bias"]
    gpt = by_name["gpt"]  # the whole declaration, from `@[model]` to its last line
    text = path.read_text()
    assert gpt.range.start.line == line_of(text, "def gpt (") - 1
    assert gpt.range.end.line == line_of(text, "  (z, crossEntropy2 z targets)")
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        lsp.TextDocumentIdentifier(uri)))


async def test_completion_of_ops_and_of_fields(client: LanguageClient, gpt_dir):
    path = gpt_copy(gpt_dir)
    text = path.read_text()
    line = line_of(text, "let qkv := linearBias3")
    lines = text.split("\n")
    lines[line] = "  let qkv := linearBi"
    uri = open_doc(client, path, "\n".join(lines))
    res = await client.text_document_completion_async(lsp.CompletionParams(
        lsp.TextDocumentIdentifier(uri), lsp.Position(line, len(lines[line]))))
    labels = {i.label: i for i in res.items}
    assert "linearBias3" in labels and "linear3" not in labels
    assert labels["linearBias3"].detail.startswith("def linearBias3 {b t m n : Nat}")
    # after `p.` inside `attention`: the fields of `Attention c`, with their types
    lines[line] = "  let qkv := linearBias3 x p."
    replace_all(client, uri, "\n".join(lines), 2)
    res = await client.text_document_completion_async(lsp.CompletionParams(
        lsp.TextDocumentIdentifier(uri), lsp.Position(line, len(lines[line]))))
    fields = {i.label: i.detail for i in res.items}
    assert set(fields) == {"c_attn", "c_attn_bias", "c_proj", "c_proj_bias"}
    assert fields["c_attn"] == "T #[3 * c.n_embd, c.n_embd]"
    # after `c.`: the config's fields and the functions of its type
    lines[line] = "  let qkv := c."
    replace_all(client, uri, "\n".join(lines), 3)
    res = await client.text_document_completion_async(lsp.CompletionParams(
        lsp.TextDocumentIdentifier(uri), lsp.Position(line, len(lines[line]))))
    assert {"vocab", "n_head", "n_embd", "residStd"} <= {i.label for i in res.items}
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        lsp.TextDocumentIdentifier(uri)))


PROOF = """import Tyr
open torch

def firstRows {n d : Nat} (x : T #[n, d]) (t : Nat) (h : t ≤ n) : T #[t, d] := rows x t h

def head2 (x : T #[4, 8]) : T #[2, 8] := firstRows x 2
"""

SWAPPED = """import Tyr
open torch

def proj {b : Nat} (x : T #[b, 8]) (w : T #[16, 8]) : T #[b, 16] := linear w x
"""


async def _actions(client, uri: str, line: int) -> list[lsp.CodeAction]:
    diags = await diagnostics(client, uri, lambda ds: len(ds) > 0)
    return await client.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(line, 0), lsp.Position(line, 80)),
        lsp.CodeActionContext(diagnostics=diags)))


async def test_code_action_adds_a_missing_proof(client: LanguageClient, tmp_path):
    uri = open_doc(client, tmp_path / "Proof.lean", PROOF)
    line = line_of(PROOF, "def head2")
    actions = await _actions(client, uri, line)
    assert [a.title for a in actions] == ["Prove 'h' with `by decide`"]
    (edit,) = actions[0].edit.changes[uri]
    assert edit.new_text == " (by decide)"
    assert edit.range.start == lsp.Position(line, len(PROOF.split("\n")[line]))
    fixed = PROOF.replace("firstRows x 2\n", "firstRows x 2 (by decide)\n")
    replace_all(client, uri, fixed, 2)
    assert await diagnostics(client, uri, lambda ds: ds == []) == []


async def test_code_action_swaps_arguments_in_the_wrong_order(client: LanguageClient,
                                                              tmp_path):
    uri = open_doc(client, tmp_path / "Swap.lean", SWAPPED)
    actions = await _actions(client, uri, line_of(SWAPPED, "def proj"))
    assert [a.title for a in actions] == ["Swap the arguments `w` and `x` of 'linear'"]
    edits = actions[0].edit.changes[uri]
    assert sorted(e.new_text for e in edits) == ["w", "x"]


async def test_no_code_action_where_no_fix_is_sure(client: LanguageClient, gpt_dir):
    path = gpt_copy(gpt_dir, mistake=True)  # the wrong weight: no swap or proof fixes it
    uri = open_doc(client, path)
    assert list(await _actions(client, uri, line_of(path.read_text(), BAD_LINE))) == []
