"""The base protocol's frames (`Content-Length: N\\r\\n\\r\\n` and N bytes of body) read from a
byte stream that may hold anything.

`Framer` is a push parser: bytes in, whole bodies out. What is not a frame is skipped and said
in one line: bytes before a `Content-Length:` header, a length that is not a number or is over
`MAX_BODY` (the frame is dropped and reading resumes at the next header), a header without its
blank line. A body that holds the start of another frame (`Content-Length: N` and a line end,
which no JSON text can hold) was shorter than its header said: it is dropped and reading
resumes at that frame, without waiting for bytes that will never come; a body whose last bytes
may be the start of such a header (`Content-Le`, the rest not come yet) waits for them.
`FrameReader` feeds one from a stream read on a daemon thread, so that `exit` never waits for a
read to return.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import threading
from collections import deque
from typing import BinaryIO, Callable

MAX_BODY = 256 << 20  # bytes: a document of 100 MiB still arrives (and is refused by its size)
MAX_HEADERS = 8192  # bytes from `Content-Length:` to the blank line
CHUNK = 1 << 16

_HEADER = re.compile(rb"content-length:", re.I)
_FRAME_START = re.compile(rb"content-length:[ \t]*\d+[ \t]*\r\n", re.I)  # never inside JSON
_FRAME_PREFIX = re.compile(  # what may still become a frame's start: the buffer's end
    b"(?:" + b"|".join(re.escape(b"content-length"[:i]) for i in range(1, 15))
    + rb"|content-length:[ \t]*(?:\d+[ \t]*\r?)?)\Z", re.I)
_HEADER_LINES = re.compile(rb"(?:[ \t\r\n]*[A-Za-z][A-Za-z0-9-]*:[^\r\n]*\r\n)*[ \t\r\n]*")
_KEEP = len(b"content-length:") - 1  # a header may be split between two reads


class Framer:
    """Bytes in (`feed`), frame bodies out; each problem is given to `log` in one line."""

    def __init__(self, log: Callable[[str], None], max_body: int = MAX_BODY) -> None:
        self.log, self.max_body = log, max_body
        self.buf = bytearray()
        self.need: int | None = None  # the body's length, once its header is read
        self.scanned = 0  # body bytes already searched for the start of another frame
        self.skipped = 0  # bytes of no frame, not yet reported

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out = []
        while True:
            if self.need is None and not self._header():
                return out
            if self.need is None:
                continue  # a broken header was dropped: look for the next one
            body = self._body()
            if body is None:
                return out
            if body is not _DROPPED:
                out.append(body)

    def close(self) -> None:
        """The input ended: say what was left unread."""
        if self.need is not None:
            self.log(f"the input ended inside a frame ({len(self.buf)} of {self.need} bytes "
                     "came): it is dropped")
        elif _HEADER.search(self.buf) is not None:
            self.log("the input ended inside a frame's header: it is dropped")
        else:
            self._skip(len(self.buf))
            self._report()
        self.buf.clear()
        self.need = None

    # ---- steps ----------------------------------------------------------------------------
    def _header(self) -> bool:
        """Read a header; False when more input is needed."""
        m = _HEADER.search(self.buf)
        if m is None:
            self._skip(max(len(self.buf) - _KEEP, 0))
            return False
        self._skip(m.start())
        self._report()
        end = self.buf.find(b"\r\n\r\n", 0, MAX_HEADERS + 4)
        if end < 0:
            if len(self.buf) > MAX_HEADERS:
                self._drop(len(b"content-length:"), f"a header of over {MAX_HEADERS} bytes "
                           "without its blank line")
                return True
            return False
        block = bytes(self.buf[:end])
        again = _HEADER.search(block, 1)
        if again is not None:  # a header without its blank line, then another frame
            self._drop(again.start(), "a Content-Length header without its blank line")
            return True
        value = block.split(b"\r\n", 1)[0][len(b"content-length:"):].strip()
        if not value.isdigit() or len(value) > 12 or int(value) > self.max_body:
            shown = value[:40].decode("ascii", "replace") + ("..." if len(value) > 40 else "")
            why = f"over the limit of {self.max_body} bytes" if value.isdigit() \
                else "not a number of bytes"
            self._drop(end + 4, f"Content-Length {shown!r} is {why}")
            return True
        n = int(value)
        del self.buf[:end + 4]
        self.need, self.scanned = n, 0
        return True

    def _body(self) -> bytes | object | None:
        """The body, `_DROPPED` for a broken one, None when more input is needed."""
        n = self.need
        assert n is not None
        lo = max(self.scanned - 64, 0)
        m = _FRAME_START.search(self.buf, lo, min(len(self.buf), n + 64))
        if m is not None and m.start() < n:
            self.need = None
            self._drop(m.start(), f"a frame said to be {n} bytes long holds another frame's "
                       f"header at byte {m.start()}")
            return _DROPPED
        if len(self.buf) < n or self._header_may_start_before(n):
            self.scanned = len(self.buf)
            return None
        body = bytes(self.buf[:n])
        del self.buf[:n]
        self.need = None
        return body

    def _header_may_start_before(self, n: int) -> bool:
        """The buffer ends in what may become a frame's start that begins inside the body (a
        JSON body never ends so: its last byte is not part of a header)."""
        if len(self.buf) - n >= 64:
            return False
        m = _FRAME_PREFIX.search(self.buf, max(n - 64, 0))
        return m is not None and m.start() < n

    def _drop(self, k: int, why: str) -> None:
        del self.buf[:k]
        self.log(f"{why}: the frame is dropped, reading resumes at the next header")

    def _skip(self, k: int) -> None:
        junk = self.buf[:k]
        if k and not (k < 1024 and _HEADER_LINES.fullmatch(junk)):  # other headers are fine
            self.skipped += k
        del self.buf[:k]

    def _report(self) -> None:
        if self.skipped:
            self.log(f"{self.skipped} bytes of no frame (no Content-Length header) skipped")
            self.skipped = 0


_DROPPED = object()


class FrameReader:
    """Frame bodies from a binary stream (stdin), read on a daemon thread."""

    def __init__(self, stream: BinaryIO, log: Callable[[str], None]) -> None:
        self.stream, self.framer = stream, Framer(log)
        self.ready: deque[bytes] = deque()
        self.chunks: asyncio.Queue[bytes] | None = None

    def _read(self, n: int) -> bytes:
        try:
            return os.read(self.stream.fileno(), n)  # no buffer lock held at interpreter exit
        except (AttributeError, OSError, ValueError):
            read1 = getattr(self.stream, "read1", self.stream.read)
            return read1(n)

    def _pump(self, loop: asyncio.AbstractEventLoop, chunks: asyncio.Queue[bytes]) -> None:
        while True:
            try:
                data = self._read(CHUNK)
            except (OSError, ValueError):
                data = b""
            put = chunks.put(data)
            try:
                asyncio.run_coroutine_threadsafe(put, loop).result()
            except (RuntimeError, asyncio.CancelledError, concurrent.futures.CancelledError):
                put.close()  # never scheduled: no "never awaited" warning at exit
                return  # the loop is gone: the server too
            if not data:
                return

    async def next(self) -> bytes | None:
        """The next frame's body; None at the end of the input."""
        if self.chunks is None:
            self.chunks = asyncio.Queue(maxsize=16)  # at most 1 MiB read ahead
            threading.Thread(target=self._pump, args=(asyncio.get_running_loop(), self.chunks),
                             name="tyr-lsp-stdin", daemon=True).start()
        while not self.ready:
            data = await self.chunks.get()
            if not data:
                self.framer.close()
                return None
            self.ready.extend(self.framer.feed(data))
        return self.ready.popleft()
