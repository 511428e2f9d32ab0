"""`tyr lsp` when files change under it: a document is re-checked when a file it imports
changes (in the editor or on disk); a document whose file is deleted is still checked from
its buffer; requests about documents that were never opened, imports of a FIFO or a
directory, all get an answer and never a hang."""
from __future__ import annotations

import os

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_session import SERVER, diagnostics, init_params, line_of, open_doc, replace_all

pytestmark = pytest.mark.asyncio(loop_scope="module")

LIB = """import Tyr
open torch

def width : Nat := 8

def proj {b : Nat} (x : T #[b, width]) (w : T #[16, width]) : T #[b, 16] := linear x w
"""

MAIN = """import Tyr
import Lib
open torch

def f (x : T #[2, 8]) (w : T #[16, 8]) : T #[2, 16] := proj x w
"""


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


async def test_a_change_in_an_imported_buffer_rechecks_the_importer(client, tmp_path):
    (tmp_path / "Lib.lean").write_text(LIB)
    (tmp_path / "Main.lean").write_text(MAIN)
    main = open_doc(client, tmp_path / "Main.lean")
    assert await diagnostics(client, main, lambda ds: ds == []) == []
    use = lsp.Position(line_of(MAIN, "def f"), MAIN.split("\n")[line_of(MAIN, "def f")]
                       .index("proj"))
    loc = await client.text_document_definition_async(lsp.DefinitionParams(
        lsp.TextDocumentIdentifier(main), use))  # into the imported user file
    assert loc.uri == (tmp_path / "Lib.lean").as_uri()
    assert loc.range.start.line == line_of(LIB, "def proj")
    lib = open_doc(client, tmp_path / "Lib.lean")
    await diagnostics(client, lib, lambda ds: ds == [])
    replace_all(client, lib, LIB.replace(":= 8", ":= 4"), 2)  # unsaved: the buffer counts
    (d,) = await diagnostics(client, main, lambda ds: len(ds) == 1)
    assert d.range.start.line == line_of(MAIN, "def f") and "argument 'x' of 'proj'" in d.message
    replace_all(client, lib, LIB, 3)
    assert await diagnostics(client, main, lambda ds: ds == []) == []


async def test_an_error_in_an_import_is_shown_at_the_import(client, tmp_path):
    (tmp_path / "Lib.lean").write_text(LIB.replace("linear x w", "linear w x"))
    main = open_doc(client, tmp_path / "Main.lean", MAIN)
    (d,) = await diagnostics(client, main, lambda ds: len(ds) == 1)
    assert d.range.start.line == line_of(MAIN, "import Lib")
    assert "1 error in imported files" in d.message
    (rel,) = d.related_information
    assert rel.location.uri == (tmp_path / "Lib.lean").as_uri()
    assert rel.location.range.start.line == line_of(LIB, "def proj")
    # fixed on disk, with the file closed in the editor: the watcher's event re-checks
    (tmp_path / "Lib.lean").write_text(LIB)
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
        [lsp.FileEvent((tmp_path / "Lib.lean").as_uri(), lsp.FileChangeType.Changed)]))
    assert await diagnostics(client, main, lambda ds: ds == []) == []


async def test_a_deleted_file_is_checked_from_its_buffer(client, tmp_path):
    path = tmp_path / "Gone.lean"
    path.write_text(LIB)
    uri = open_doc(client, path)
    await diagnostics(client, uri, lambda ds: ds == [])
    path.unlink()
    replace_all(client, uri, LIB.replace("linear x w", "linear w x"), 2)
    (d,) = await diagnostics(client, uri, lambda ds: len(ds) == 1)
    assert d.range.start.line == line_of(LIB, "def proj")
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    h = await client.text_document_hover_async(lsp.HoverParams(
        lsp.TextDocumentIdentifier(uri), lsp.Position(line_of(LIB, "def width"), 5)))
    assert h is not None and "def width : Nat" in h.contents.value


async def test_requests_about_unopened_or_missing_files_are_answered(client, tmp_path):
    uri = (tmp_path / "Never.lean").as_uri()
    doc, pos = lsp.TextDocumentIdentifier(uri), lsp.Position(3, 4)
    assert await client.text_document_hover_async(lsp.HoverParams(doc, pos)) is None
    assert await client.text_document_definition_async(lsp.DefinitionParams(doc, pos)) is None
    assert await client.text_document_completion_async(lsp.CompletionParams(doc, pos)) is None
    assert await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(doc)) is None
    # positions past the end of a document are clamped, not a fault
    opened = open_doc(client, tmp_path / "Short.lean", "def x : Nat := 1\n")
    far = lsp.Position(400, 9000)
    assert await client.text_document_hover_async(lsp.HoverParams(
        lsp.TextDocumentIdentifier(opened), far)) is None


async def test_imports_of_a_fifo_or_a_directory_neither_hang_nor_crash(client, tmp_path):
    os.mkfifo(tmp_path / "Pipe.lean")
    (tmp_path / "Dir.lean").mkdir()
    text = "import Pipe\nimport Dir\n\ndef x : Nat := 1\n"
    uri = open_doc(client, tmp_path / "Uses.lean", text)
    diags = await diagnostics(client, uri, lambda ds: len(ds) == 2, timeout=30)
    assert ["unknown module 'Pipe'" in diags[0].message,
            "unknown module 'Dir'" in diags[1].message] == [True, True]
    assert [d.range.start.line for d in diags] == [0, 1]


async def test_a_file_that_is_not_a_model_of_the_subset_gets_diagnostics(client, tmp_path):
    text = "theorem t : 1 = 1 := rfl\n"
    uri = open_doc(client, tmp_path / "Thm.lean", text)
    (d,) = await diagnostics(client, uri, lambda ds: len(ds) == 1)
    assert "not in the Tyr subset" in d.message and d.range.start.line == 0
