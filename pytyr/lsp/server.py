"""`tyr lsp`: the language server (pygls over stdio) for `.lean` files of the Tyr subset.

Diagnostics as you type, the elaborated type of any term on hover (with the config's numbers
when a `config.json` is beside the file), go-to-definition into the user's files and
`Tyr/*.lean`, document symbols, completion, and the code actions of `actions.py`.
Every request gets an answer: a fault while answering is logged and answered with nothing;
what a client sends broken is answered or logged by `rpc.py` (the protocol over stdio).
Inlay hints give each `let`'s type inline (`inlay.py`). Initialization options:
`{"debounceMs": 150}` (the quiet time before a re-check), `{"inlayHints": false}`.
"""
from __future__ import annotations

import functools
import gc
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from .actions import fixes
from .analysis import Analysis, analyse
from .complete import items, patched, site
from .convert import Units, diagnostics, hover_markdown, location
from .documents import Documents
from .inlay import let_hints
from .rpc import TyrProtocol, serve
from .scopes import Decl

VERSION = "0.1.0"


class TyrServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("tyr", VERSION, protocol_cls=TyrProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.documents = Documents(self._publish, self._log)
        self.inlay = True  # `{"inlayHints": false}` turns the hints off

    @property
    def units(self) -> Units:
        return Units(self.workspace.position_codec)

    def _publish(self, uri: str, a: Analysis) -> None:
        try:
            diags = diagnostics(self.units, a)
        except Exception as err:  # noqa: BLE001
            self._log(f"diagnostics of {uri}: {type(err).__name__}: {err}")
            return
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=a.version))

    def _log(self, message: str) -> None:
        try:
            self.window_log_message(lsp.LogMessageParams(lsp.MessageType.Log, message))
        except Exception:  # noqa: BLE001 — no client to tell (shutting down)
            pass


def path_of(uri: str) -> Path:
    """The file of a document (an unsaved `untitled:` one is checked as if in the working
    directory)."""
    p = to_fs_path(uri)
    if p is None:
        name = "".join(c if c.isalnum() else "_" for c in uri.rsplit("/", 1)[-1]) or "Untitled"
        return Path.cwd() / f"{name}.lean"
    return Path(p)


def answered(fn: Callable) -> Callable:
    """A request handler that answers None instead of failing (and logs why)."""
    @functools.wraps(fn)
    async def wrapper(ls: TyrServer, params: Any) -> Any:
        try:
            return await fn(ls, params)
        except Exception as err:  # noqa: BLE001 — a request always gets an answer
            ls._log(f"{fn.__name__}: {type(err).__name__}: {err}")
            return None
    return wrapper


server = TyrServer()


@server.feature(lsp.INITIALIZE)
def initialize(ls: TyrServer, params: lsp.InitializeParams) -> None:
    opts = params.initialization_options
    if isinstance(opts, dict) and isinstance(opts.get("debounceMs"), (int, float)):
        ls.documents.debounce = max(0.0, float(opts["debounceMs"]) / 1000)
    if isinstance(opts, dict) and opts.get("inlayHints") is False:
        ls.inlay = False


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TyrServer, params: lsp.DidOpenTextDocumentParams) -> None:
    d = params.text_document
    ls.documents.open(d.uri, path_of(d.uri), d.text, d.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TyrServer, params: lsp.DidChangeTextDocumentParams) -> None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    ls.documents.change(doc.uri, doc.source, params.text_document.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: TyrServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.documents.dependents_changed(path_of(params.text_document.uri))


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: TyrServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.documents.close(params.text_document.uri)
    ls.text_document_publish_diagnostics(
        lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched(ls: TyrServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    for change in params.changes:
        p = path_of(change.uri)
        ls.documents.dependents_changed(p)
        if p.name == "config.json":  # new values for the files beside it
            for uri, doc in list(ls.documents.docs.items()):
                if doc.path.parent == p.parent:
                    ls.documents.schedule(uri)
            _refresh_hints(ls)


def _refresh_hints(ls: TyrServer) -> None:
    """Ask the client to ask again for the inlay hints (their numbers changed), if it can."""
    caps = ls.client_capabilities.workspace
    hints = caps.inlay_hint if caps is not None else None
    if ls.inlay and hints is not None and hints.refresh_support:
        ls.workspace_inlay_hint_refresh(None)


async def _found(ls: TyrServer, params: lsp.TextDocumentPositionParams, runs: bool = False
                 ) -> tuple[Any, Any]:
    """The document's checked state and what is at the request's position (None, None when
    the document is unknown; (state, None) when nothing is there or the document was too
    large to check); `runs`: with the numbers of its models' runs."""
    uri = params.text_document.uri
    st = await (ls.documents.ready(uri) if runs else ls.documents.state(uri))
    if st is None or st.analysis.refused:
        return st, None
    return st, st.lookup.at(ls.units.point(st.analysis.source.lines, params.position))


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
@answered
async def hover(ls: TyrServer, params: lsp.HoverParams) -> lsp.Hover | None:
    st, f = await _found(ls, params, runs=True)
    if f is None:
        return None
    a = st.analysis
    cfg = st.values.path if st.values and st.values.values else None
    text = hover_markdown(f, _shown_path(cfg) if cfg else None)
    if st.values is not None and st.values.problem and f.type:
        text += f"\n\n(config not applied: {st.values.problem})"
    if not text:
        return None
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text),
                     ls.units.range(a.source.lines, f.span))


@server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintOptions(resolve_provider=False))
@answered
async def inlay_hint(ls: TyrServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint] | None:
    if not ls.inlay:
        return []
    st = await ls.documents.ready(params.text_document.uri)
    if st is None or st.analysis.refused:
        return None
    lines, units = st.analysis.source.lines, ls.units
    cfg = _shown_path(st.values.path) if st.values and st.values.values else None
    hints = let_hints(st.lookup, units.point(lines, params.range.start),
                      units.point(lines, params.range.end), cfg)
    return [lsp.InlayHint(units.position(lines, h.at), h.label, kind=lsp.InlayHintKind.Type,
                          tooltip=lsp.MarkupContent(lsp.MarkupKind.Markdown, h.tooltip)
                          if h.tooltip else None)
            for h in hints]


@server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
@answered
async def definition(ls: TyrServer, params: lsp.DefinitionParams) -> lsp.Location | None:
    st, f = await _found(ls, params)
    if f is None or f.target is None:
        return None
    return location(ls.units, st.analysis, f.target)


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@answered
async def document_symbol(ls: TyrServer, params: lsp.DocumentSymbolParams
                          ) -> list[lsp.DocumentSymbol] | None:
    uri = params.text_document.uri
    st = await ls.documents.state(uri)
    if st is not None and not st.analysis.parsed:
        st = ls.documents.good.get(uri, st)
    if st is None:
        return None
    lines = st.analysis.source.lines
    return [_symbol(ls.units, lines, d) for d in st.lookup.decls]


_SYMBOL_KIND = {"def": lsp.SymbolKind.Function, "structure": lsp.SymbolKind.Struct,
                "inductive": lsp.SymbolKind.Enum, "field": lsp.SymbolKind.Field,
                "ctor": lsp.SymbolKind.EnumMember}


def _symbol(units: Units, lines: list[str], d: Decl) -> lsp.DocumentSymbol:
    head, rest = d.bindings[0], d.bindings[1:]
    full = units.range(lines, d.span)
    kids = [lsp.DocumentSymbol(b.name, _SYMBOL_KIND[b.kind], units.range(lines, b.at),
                               units.range(lines, b.at))
            for b in rest if b.kind in ("field", "ctor")]
    return lsp.DocumentSymbol(head.name, _SYMBOL_KIND[head.kind], full,
                              units.range(lines, head.at), children=kids or None)


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["."]))
@answered
async def completion(ls: TyrServer, params: lsp.CompletionParams) -> lsp.CompletionList | None:
    uri = params.text_document.uri
    st = await ls.documents.state(uri)
    doc = ls.documents.docs.get(uri)
    if st is None or doc is None or st.analysis.refused:
        return None
    lines = st.analysis.source.lines
    p = ls.units.point(lines, params.position)
    s = site(lines[p[0] - 1] if p[0] - 1 < len(lines) else "", p)
    a = st.analysis
    if s.dot:
        text = patched(st.analysis.source.text, s, p)
        a = await ls.documents.run(functools.partial(analyse, previous=st.analysis), doc.path,
                                   text, ls.documents.overlay())
    good = ls.documents.good.get(uri)
    return lsp.CompletionList(is_incomplete=False,
                              items=items(s, a, good.analysis if good else None))


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
@answered
async def code_action(ls: TyrServer, params: lsp.CodeActionParams
                      ) -> list[lsp.CodeAction] | None:
    uri = params.text_document.uri
    st = await ls.documents.state(uri)
    doc = ls.documents.docs.get(uri)
    if st is None or doc is None:
        return None
    a, units = st.analysis, ls.units
    if a.refused:
        return []
    lo = units.point(a.source.lines, params.range.start)
    hi = units.point(a.source.lines, params.range.end)
    wanted = [d for d in a.own_diagnostics()
              if lo[0] <= d.pos.line <= hi[0]]
    if not wanted:
        return []
    overlay = ls.documents.overlay()

    def check(text: str) -> Analysis:
        return analyse(doc.path, text, overlay, record=False)

    found = await ls.documents.run(fixes, a, wanted, check)
    out = []
    for f in found:
        edits = [lsp.TextEdit(units.range(a.source.lines, span), new) for span, new in f.edits]
        out.append(lsp.CodeAction(f.title, kind=lsp.CodeActionKind.QuickFix, is_preferred=True,
                                  edit=lsp.WorkspaceEdit(changes={uri: edits})))
    return out


@server.feature(lsp.SHUTDOWN)
def shutdown(ls: TyrServer, params: Any) -> None:
    ls.documents.shutdown()


def _shown_path(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(p)


def main() -> NoReturn:
    """Serve stdin/stdout, then end the process with the protocol's exit code (at once: a
    check still running on its worker thread must not hold the exit)."""
    assert isinstance(server.protocol, TyrProtocol)
    # A check makes and frees a few hundred thousand objects, nearly all freed by their
    # counts; at Python's default threshold (700) the collector ran through a tenth of every
    # re-check. Its passes are rarer here, and what lives long is frozen (`Documents`).
    gc.set_threshold(20_000, 20, 20)
    code = serve(server.protocol)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
