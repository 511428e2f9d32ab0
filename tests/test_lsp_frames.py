"""The base protocol's frames read from a stream that may hold anything (pytyr/lsp/frames.py),
and `tyr lsp` fed garbage: every broken frame is one logged line, reading resumes at the next
header, and the server (a process spoken to in raw bytes) never dies unasked, never hangs,
and answers a well-formed request sent after the garbage."""
from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsp_raw import INITIALIZE, RawServer, notification, request
from pytyr.lsp.frames import MAX_BODY, MAX_HEADERS, Framer

ANSWER_S = 30.0  # a request after garbage: answered within this (a loaded machine)
HARMLESS = json.dumps({"jsonrpc": "2.0", "id": "g", "method": "textDocument/hover",
                       "params": {"textDocument": {"uri": "file:///none.lean"},
                                  "position": {"line": 0, "character": 0}}}).encode()


def bodies(data: bytes, cuts: list[int] = ()) -> tuple[list[bytes], list[str]]:
    """What a Framer gives for `data` fed in pieces cut at `cuts`, and what it logged."""
    logged: list[str] = []
    f = Framer(logged.append)
    out, at = [], 0
    for c in sorted({min(max(c, 0), len(data)) for c in cuts}) + [len(data)]:
        out += f.feed(data[at:c])
        at = c
    f.close()
    return out, logged


def framed(body: bytes, length: int | None = None) -> bytes:
    n = len(body) if length is None else length
    return b"Content-Length: %d\r\n\r\n" % n + body


# ---- the parser ----------------------------------------------------------------------------

json_bodies = st.lists(st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=3)
                       .map(lambda d: json.dumps({"jsonrpc": "2.0", **d}).encode()),
                       min_size=1, max_size=5)
cut_points = st.lists(st.integers(0, 2000), max_size=8)


@settings(max_examples=200, deadline=None)
@given(msgs=json_bodies, cuts=cut_points,
       extra=st.sampled_from([b"", b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"]))
def test_well_formed_frames_come_out_whole_however_the_stream_is_cut(msgs, cuts, extra):
    data = b"".join(b"Content-Length: %d\r\n%s\r\n" % (len(m), extra) + m for m in msgs)
    out, logged = bodies(data, cuts)
    assert out == msgs and logged == []


garbage_piece = st.one_of(
    st.binary(max_size=300),
    st.sampled_from([b"Content-Length: -5\r\n\r\n", b"Content-Length: abc\r\n\r\n",
                     b"Content-Length: 100000000000000000000\r\n\r\n", b"Content-Length:\r\n\r\n",
                     b"Content-Length: 1.5\r\n\r\n", b"Content-Length: 12\r\n",
                     b"Content-Length: 7", b"Content-Le", b"\r\n\r\n",
                     b"content-length: 3\r\n\r\nab",
                     b"Content-Length: 5\r\nX-" + b"a" * (MAX_HEADERS + 10) + b": b\r\n\r\n"]),
    st.integers(-40, 200).map(lambda d: framed(HARMLESS, max(len(HARMLESS) + d, 0))),
    st.integers(0, len(HARMLESS)).map(lambda k: framed(HARMLESS)[:k]),
)


@settings(max_examples=300, deadline=None)
@given(garbage=st.lists(garbage_piece, max_size=6), cuts=cut_points)
def test_a_frame_after_any_garbage_is_read(garbage, cuts):
    last = b'{"jsonrpc": "2.0", "id": 7, "method": "shutdown"}'
    data = b"".join(garbage) + framed(last)
    out, logged = bodies(data, [len(data) - c for c in cuts])  # cut near the frame too
    assert out and out[-1] == last
    assert all("\n" not in line for line in logged)


@pytest.mark.parametrize("header, why", [
    (b"Content-Length: 100000000000000000000", f"over the limit of {MAX_BODY} bytes"),
    (b"Content-Length: %d" % (MAX_BODY + 1), f"over the limit of {MAX_BODY} bytes"),
    (b"Content-Length: -5", "'-5' is not a number of bytes"),
    (b"Content-Length: twelve", "'twelve' is not a number of bytes"),
])
def test_an_absurd_or_broken_length_is_said_and_skipped(header, why):
    out, logged = bodies(header + b"\r\n\r\n{}" + framed(b"{}"))
    assert out == [b"{}"]
    assert why in logged[0] and "reading resumes at the next header" in logged[0]


def test_a_short_or_long_length_loses_only_its_own_frame():
    body = b'{"jsonrpc": "2.0", "method": "initialized", "params": {}}'
    short, _ = bodies(framed(body, 5) + framed(b"{}"))
    assert short == [body[:5], b"{}"]  # the 5 bytes are a frame; the rest no frame's
    long, logged = bodies(framed(body, len(body) + 50) + framed(b"{}"))
    assert long == [b"{}"] and "holds another frame's header" in logged[0]


def test_the_end_of_the_input_inside_a_frame_is_said():
    out, logged = bodies(framed(b"{}", 10))
    assert out == [] and logged == ["the input ended inside a frame (2 of 10 bytes came): it is "
                                    "dropped"]


# ---- the server ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server():
    s = RawServer()
    s.send(INITIALIZE)
    assert "result" in s.response(0)
    yield s
    s.kill()


asked = iter(range(1000, 10**9))


def _answers(s: RawServer) -> None:
    """A well-formed request is answered (as for a document never opened: no symbols)."""
    rid = next(asked)
    got = s.ask(rid, "textDocument/documentSymbol",
                {"textDocument": {"uri": "file:///never/opened.lean"}}, timeout=ANSWER_S)
    assert got == {"jsonrpc": "2.0", "id": rid, "result": None}
    assert s.proc.poll() is None


@pytest.mark.parametrize("junk", [
    b"Content-Length: 100000000000000000000\r\n\r\n{}",
    framed(HARMLESS, 5),  # too short: a frame of 5 bytes, then bytes of no frame
    framed(HARMLESS, len(HARMLESS) + 500),  # too long: cut short by the next frame's header
    b"Content-Length: -5\r\n\r\n{}",
    b"Content-Length: abc\r\n\r\n{}",
    framed(b"{not json"),
    b"Content-Length: 8\r\n" + b"X-a: " + b"b" * (2 * MAX_HEADERS) + b"\r\n\r\n{}",
], ids=["10^20", "short", "long", "negative", "not a number", "not json", "huge header"])
def test_each_named_broken_frame_is_logged_and_the_server_answers_after_it(server, junk):
    before = len(server.logs())
    server.send(junk)
    _answers(server)
    new = server.logs()[before:]
    assert new and all("\n" not in line for line in new)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(garbage=st.lists(garbage_piece, min_size=1, max_size=6))
def test_garbage_never_kills_or_hangs_the_server(server, garbage):
    server.send(b"".join(garbage))
    _answers(server)


def test_the_server_ends_cleanly_after_the_garbage(server):
    server.send(request("end", "shutdown"))
    assert server.response("end", ANSWER_S)["result"] is None
    server.send(notification("exit"))
    assert server.end() == 0
    time.sleep(0.2)  # the stderr thread's last lines
    assert b"Traceback" not in server.err
    odd = [line for line in bytes(server.err).splitlines() if not line.startswith(b"tyr lsp: ")]
    assert not odd, odd[:5]
