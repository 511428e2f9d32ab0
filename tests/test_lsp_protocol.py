"""`tyr lsp` keeps the protocol's promises to a client that breaks them (a process spoken to
in raw bytes): every request is answered — params that do not fit its method with -32602
(InvalidParams), a message that is no request with -32600 (InvalidRequest), any request
after `shutdown` with -32600 —; `exit` ends the process with 0 after `shutdown` and 1
without, at once; a document too large to check (a 100 MiB identifier) is refused with a
diagnostic within seconds; memory stays flat over thousands of edits."""
from __future__ import annotations

import sys
import time

import attrs
import pytest
from lsprotocol import types as lsp

from lsp_raw import INITIALIZE, RawServer, frame, notification
from lsp_session import ROOT
from pytyr.lsp.analysis import MAX_CHARS, MAX_LINE
from pytyr.lsp.server import server as tyr_server

if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository
    sys.path.insert(0, str(ROOT))

from bench import lsp as bench_lsp  # noqa: E402

ANSWER_S = 30.0
BIG_S = 60.0  # 100 MiB through a pipe, parsed and refused, on a loaded machine


def _requests() -> list[str]:
    """Every request method the server offers (its features and pygls's own)."""
    fm = tyr_server.protocol.fm
    return sorted(m for m in {**fm.features, **fm.builtin_features}
                  if m in lsp.METHOD_TO_TYPES
                  and "id" in attrs.fields_dict(lsp.METHOD_TO_TYPES[m][0]))


MISSING = object()
BAD_PARAMS = [MISSING, None, 42, "x", [], {}, {"textDocument": 5}]


def _started() -> RawServer:
    s = RawServer()
    s.send(INITIALIZE)
    assert "result" in s.response(0)
    s.send(notification("initialized", {}))
    return s


@pytest.fixture
def server():
    s = _started()
    yield s
    s.kill()


def test_the_server_offers_the_requests_an_editor_uses():
    assert {"initialize", "shutdown", "textDocument/hover", "textDocument/definition",
            "textDocument/completion", "textDocument/codeAction",
            "textDocument/documentSymbol"} <= set(_requests())


def test_invalid_params_of_every_request_get_invalid_params(server):
    rid = 0
    for method in _requests():
        for params in BAD_PARAMS:
            if method == "shutdown" and params in (MISSING, None):
                continue  # `void` params: these are the valid ones
            rid += 1
            m = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not MISSING:
                m["params"] = params
            server.send(frame(m))
            got = server.response(rid, ANSWER_S)
            assert got.get("error", {}).get("code") == -32602, (method, params, got)
            assert f"invalid params of '{method}'" in got["error"]["message"]
    assert server.ask("last", "shutdown", timeout=ANSWER_S)["result"] is None  # alive


def test_what_is_no_request_gets_invalid_request(server):
    def answer(message: dict) -> dict:
        server.send(frame(message))
        return server.response(message.get("id") if isinstance(message.get("id"), (int, str))
                               else None, ANSWER_S)

    old = answer({"jsonrpc": "1.0", "id": 1, "method": "textDocument/hover"})
    assert old["error"]["code"] == -32600 and "'jsonrpc'" in old["error"]["message"]
    as_request = answer({"jsonrpc": "2.0", "id": 2, "method": "initialized", "params": {}})
    assert as_request["error"]["code"] == -32600
    assert "notification" in as_request["error"]["message"]
    no_id = answer({"jsonrpc": "2.0", "id": [3], "method": "shutdown"})  # id null: not knowable
    assert no_id["error"]["code"] == -32600 and no_id["id"] is None
    assert server.ask(4, "no/suchMethod", {}, timeout=ANSWER_S)["error"]["code"] == -32601
    assert any("not a JSON-RPC 2.0 message" in line for line in server.logs())


def test_after_shutdown_requests_get_invalid_request_and_exit_is_0(server):
    assert server.ask(1, "shutdown", timeout=ANSWER_S) == {"jsonrpc": "2.0", "id": 1,
                                                           "result": None}
    hover = {"textDocument": {"uri": "file:///x.lean"}, "position": {"line": 0, "character": 0}}
    for rid, method, params in [(2, "textDocument/hover", hover), (3, "shutdown", None),
                                (4, "initialize", {"capabilities": {}})]:
        got = server.ask(rid, method, params, timeout=ANSWER_S)
        assert got["error"]["code"] == -32600 and "shut down" in got["error"]["message"]
    server.send(notification("exit"))
    assert server.end() == 0


def test_exit_without_shutdown_is_1(server):
    server.send(notification("exit"))
    assert server.end() == 1


@pytest.mark.parametrize("shut_down, code", [(True, 0), (False, 1)])
def test_the_end_of_the_input_exits_as_exit_would(server, shut_down, code):
    if shut_down:
        server.ask(1, "shutdown", timeout=ANSWER_S)
    assert server.end() == code
    said = b"the input ended without 'shutdown' and 'exit'" in server.err
    assert said == (not shut_down)


def test_exit_is_not_held_by_a_check_in_progress(server, tmp_path):
    """A check of seconds is running on the worker thread when `exit` comes."""
    text = "def x : Nat :=\n" + " +\n".join(["  1"] * 75_000) + "\n"  # within the limits
    assert len(text) <= MAX_CHARS and max(map(len, text.split("\n"))) <= MAX_LINE
    server.send(notification("textDocument/didOpen", {"textDocument": {
        "uri": (tmp_path / "Slow.lean").as_uri(), "languageId": "lean4", "version": 1,
        "text": text}}))
    time.sleep(1.0)  # the check has started
    server.ask(1, "shutdown", timeout=ANSWER_S)
    server.send(notification("exit"))
    assert server.end(timeout=2) == 0  # the check alone takes 3 s or more


def _diagnostics(s: RawServer, uri: str) -> list[dict]:
    for m in reversed(s.seen):
        if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri:
            return m["params"]["diagnostics"]
    raise AssertionError(f"no diagnostics for {uri}")


def test_a_100_mib_identifier_is_refused_within_seconds(server, tmp_path):
    big = (tmp_path / "Huge.lean").as_uri()
    server.send(notification("textDocument/didOpen", {"textDocument": {
        "uri": big, "languageId": "lean4", "version": 1,
        "text": "import Tyr\ndef " + "a" * (100 << 20) + " : Nat := 1\n"}}))
    small = (tmp_path / "Small.lean").as_uri()
    server.send(notification("textDocument/didOpen", {"textDocument": {
        "uri": small, "languageId": "lean4", "version": 1, "text": "def x : Nat := 1\n"}}))
    syms = server.ask(1, "textDocument/documentSymbol", {"textDocument": {"uri": small}},
                      timeout=BIG_S)
    assert [s["name"] for s in syms["result"]] == ["x"]  # the other document is served
    where = {"textDocument": {"uri": big}, "position": {"line": 1, "character": 5_000_000}}
    for rid, method in [(2, "textDocument/hover"), (3, "textDocument/completion"),
                        (4, "textDocument/definition")]:
        assert server.ask(rid, method, where, timeout=ANSWER_S)["result"] is None
    (d,) = _diagnostics(server, big)
    assert f"characters long, over the {MAX_CHARS:,} the language server checks" in d["message"]
    assert d["range"]["start"] == {"line": 0, "character": 0}


def test_a_line_too_long_is_refused_at_that_line(server, tmp_path):
    uri = (tmp_path / "Long.lean").as_uri()
    line = "def " + "a" * MAX_LINE + " : Nat := 1"
    server.send(notification("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "lean4", "version": 1, "text": f"import Tyr\n\n{line}\n"}}))
    assert server.ask(1, "textDocument/hover", {"textDocument": {"uri": uri}, "position": {
        "line": 2, "character": 9}}, timeout=ANSWER_S)["result"] is None
    (d,) = _diagnostics(server, uri)
    assert d["range"]["start"] == {"line": 2, "character": 0}
    assert f"line 3 is {len(line):,} characters long" in d["message"]


def test_memory_is_flat_over_thousands_of_edits():
    """6,000 edits after 1,000 (pygls kept a future per notification: +12 MiB here); the
    bench's row measures 10,000 edits with a check every 10."""
    m = bench_lsp.memory(edits=6_000, warmup=1_000, every=250)
    assert m["growth_mib"] < 5.0, m
