"""`tyr lsp` over stdio: frames (`frames.py`) to messages, an answer to every request, and the
shutdown/exit sequence of the LSP specification.

pygls's own stdio loop is not used: it hands a header's length to `stdin.read` (an absurd one
ends the process, a wrong one stalls it for good), leaves a request whose params do not fit
its method unanswered, answers nothing after `shutdown`, exits 0 on an `exit` that came
without `shutdown`, and keeps a future for every notification it ever handled. Here a broken
frame or message is one line on stderr and in the client's log (`window/logMessage`), a
request that cannot be served is answered with the protocol's error (-32600 invalid request,
-32602 invalid params), and reading goes on until `exit` (code 0 after `shutdown`, else 1)
or the end of the input (the same codes).
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import sys
from typing import Any, BinaryIO

import attrs
from cattrs import ClassValidationError, transform_error
from lsprotocol import types as lsp
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    RPCRequest,
)
from pygls.protocol.language_server import lsp_method

from .frames import FrameReader

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


class Unfit(Exception):
    """A message whose fields do not fit its method's types (the one line says how)."""


class TyrProtocol(LanguageServerProtocol):
    """pygls's protocol, with an answer for every request and the exit code kept."""

    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self.exit_code: int | None = None  # set by `exit`

    # ---- messages in ------------------------------------------------------------------------
    def deliver(self, body: bytes) -> None:
        """Handle one frame's body, whatever it holds."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as err:
            self.complain(f"a frame of {len(body)} bytes is not JSON ({_line(err)}): it is "
                          "ignored")
            return
        rid, method = (data.get("id"), data.get("method")) if isinstance(data, dict) \
            else (None, None)
        asks = isinstance(data, dict) and "id" in data and "method" in data  # a request
        problem = _envelope(data)
        if problem is None:
            try:
                message = self.structure_message(data)
            except Unfit as err:
                if asks:
                    self.answer_error(rid, INVALID_PARAMS, f"invalid params of '{method}': {err}")
                else:
                    self.complain(f"a message '{method or rid}' ignored: {err}")
                return
            if not asks or isinstance(message, RPCRequest):
                self.handle_message(message)
                return
            problem = f"'{method}' is a notification: it takes no id"
        if asks:
            self.answer_error(rid if _is_id(rid) else None, INVALID_REQUEST, problem)
        self.complain(f"not a JSON-RPC 2.0 message ({problem}): it is ignored")

    def structure_message(self, data: dict[str, Any]) -> Any:
        """pygls's, with the reason a message does not fit as one line (no traceback)."""
        if "jsonrpc" not in data:  # a nested object, when used as json's object hook
            return data
        if "id" not in data:
            cls = self.get_message_type(data.get("method", "")) or JsonRPCNotification
        elif "method" in data:
            cls = self.get_message_type(data["method"]) or JsonRPCRequestMessage
        elif "error" in data:
            cls = lsp.ResponseErrorMessage
        else:
            cls = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
        if "id" in data and "method" in data and data.get("params") is not None \
                and _takes_no_params(cls):  # pygls would take any value for `void`
            raise Unfit(f"'{data['method']}' takes no params")
        try:
            return self._converter.structure(data, cls)
        except ClassValidationError as err:
            raise Unfit("; ".join(_json_path(e) for e in transform_error(err))[:500]) from None
        except Exception as err:  # noqa: BLE001 — any fault of a structure hook
            raise Unfit(_line(err)) from None

    def handle_message(self, message: Any) -> None:
        if self._shutdown and isinstance(message, RPCRequest) and message.method != lsp.EXIT:
            self.answer_error(message.id, INVALID_REQUEST, f"the server is shut down: "
                              f"'{message.method}' is not served (only 'exit' is)")
            return
        try:
            super().handle_message(message)
        except Exception as err:  # noqa: BLE001 — pygls answers a request's faults itself
            self.complain(f"'{getattr(message, 'method', '?')}' failed: {_line(err)}")

    def _check_handler_result(self, future: Any) -> None:
        """A notification was handled: forget its future (pygls keeps every one otherwise)."""
        super()._check_handler_result(future)
        for key in [k for k, f in self._request_futures.items() if f is future]:
            del self._request_futures[key]

    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any) -> None:
        self.exit_code = 0 if self._shutdown else 1

    # ---- messages out -----------------------------------------------------------------------
    def answer_error(self, rid: Any, code: int, message: str) -> None:
        if rid is None:  # JSON-RPC's `"id": null` (pygls's types would leave the id out)
            self._send_data({"jsonrpc": "2.0", "id": None,
                             "error": {"code": code, "message": message}})
        else:
            self._send_response(rid, error=lsp.ResponseError(code, message))

    def complain(self, text: str) -> None:
        """One line on stderr and in the client's log."""
        print(f"tyr lsp: {text}", file=sys.stderr, flush=True)
        try:
            self.notify(lsp.WINDOW_LOG_MESSAGE,
                        lsp.LogMessageParams(lsp.MessageType.Error, text))
        except Exception:  # noqa: BLE001 — no client to tell
            pass


def _envelope(data: Any) -> str | None:
    """What makes `data` no JSON-RPC 2.0 message (None: nothing)."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if data.get("jsonrpc") != "2.0":
        return "its 'jsonrpc' is not \"2.0\""
    if "method" in data and not isinstance(data["method"], str):
        return "its 'method' is not a string"
    if "id" in data and not _is_id(data["id"]):
        return "its 'id' is neither an integer nor a string"
    if "method" not in data and "id" not in data:
        return "neither a method nor an id"
    return None


@functools.cache
def _takes_no_params(cls: type) -> bool:
    """A request type whose params are `void` in the specification (`shutdown`)."""
    fields = attrs.fields_dict(cls) if attrs.has(cls) else {}
    return "params" in fields and fields["params"].type is type(None)


def _json_path(error: str) -> str:
    """cattrs's `problem @ $.params.text_document` with the protocol's names: `textDocument`."""
    what, at, path = error.rpartition(" @ ")
    return f"{what}{at}{re.sub(r'_([a-z0-9])', lambda m: m.group(1).upper(), path)}" if at \
        else error


def _is_id(rid: Any) -> bool:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def _line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:300]}"


class Output:
    """stdout for pygls: a client that stopped reading is noted, not raised in every
    handler."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream, self.gone = stream, False

    def write(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            self.stream.write(data)
            self.stream.flush()
        except (OSError, ValueError):
            self.gone = True

    def close(self) -> None:
        self.gone = True


class _OneLine(logging.Handler):
    """pygls's own errors, one line each on stderr (its tracebacks dropped)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split("\n", 1)[0].split())[:300]
            print(f"tyr lsp: pygls: {text}", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 — a log line must not become a fault
            pass


def serve(protocol: TyrProtocol, stdin: BinaryIO | None = None,
          stdout: BinaryIO | None = None) -> int:
    """Serve until `exit` or the end of the input; the exit code."""
    log = logging.getLogger("pygls")
    log.handlers[:], log.propagate = [_OneLine(logging.ERROR)], False
    out = Output(stdout or sys.stdout.buffer)
    protocol.set_writer(out)
    reader = FrameReader(stdin or sys.stdin.buffer, protocol.complain)
    return asyncio.run(_loop(protocol, reader, out))


async def _loop(protocol: TyrProtocol, reader: FrameReader, out: Output) -> int:
    def fault(loop: asyncio.AbstractEventLoop, ctx: dict[str, Any]) -> None:
        err = ctx.get("exception")
        protocol.complain(f"{ctx.get('message')}{': ' + _line(err) if err else ''}")
    asyncio.get_running_loop().set_exception_handler(fault)
    while protocol.exit_code is None:
        if out.gone:
            print("tyr lsp: the client stopped reading: exiting", file=sys.stderr, flush=True)
            return 1
        body = await reader.next()
        if body is None:
            if not protocol._shutdown:
                protocol.complain("the input ended without 'shutdown' and 'exit': exiting")
            return 0 if protocol._shutdown else 1
        protocol.deliver(body)
    return protocol.exit_code
