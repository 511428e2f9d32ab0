"""`tyr lsp` as a process spoken to in raw bytes: for tests of what no well-behaved client
sends (broken frames, invalid params, the exit sequence). `RawServer` writes bytes to the
server's stdin and reads its stdout's frames on a thread, so that a test waits for a
response with a deadline instead of blocking on a pipe."""
from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from typing import Any

from lsp_session import ROOT, SERVER

START_S = 60.0  # the first answer waits for the server's imports (a loaded machine)


def frame(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def request(rid: Any, method: str, params: Any = None) -> bytes:
    m: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        m["params"] = params
    return frame(m)


def notification(method: str, params: Any = None) -> bytes:
    m: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        m["params"] = params
    return frame(m)


INITIALIZE = request(0, "initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                       "initializationOptions": {"debounceMs": 0}})


class RawServer:
    """A `tyr lsp` process; its frames (parsed) arrive in `messages`, its stderr in `err`."""

    def __init__(self, cwd: Any = ROOT) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd, env=env)
        self.messages: queue.Queue[dict] = queue.Queue()
        self.seen: list[dict] = []
        self.err = bytearray()
        self.threads = [threading.Thread(target=self._frames, daemon=True),
                        threading.Thread(target=self._stderr, daemon=True)]
        for t in self.threads:
            t.start()

    def _frames(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            n = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":", 1)[1])
                if line == b"\r\n":
                    break
            assert n is not None, "a frame of the server without its Content-Length"
            self.messages.put(json.loads(out.read(n)))

    def _stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err += line

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.proc.wait(10)
            raise AssertionError(f"the server ended (exit {self.proc.returncode}); stderr: "
                                 f"{self.err[-2000:]!r}") from None

    def response(self, rid: Any, timeout: float = START_S) -> dict:
        """The response to request `rid` (fails after `timeout` s)."""
        deadline = time.monotonic() + timeout
        for m in self.seen:
            if m.get("id") == rid and "method" not in m:
                return m
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no response to {rid!r} in {timeout} s; alive: "
                                     f"{self.proc.poll() is None}; stderr: {self.err[-2000:]!r}")
            try:
                m = self.messages.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            self.seen.append(m)
            if m.get("id") == rid and "method" not in m:
                return m

    def logs(self) -> list[str]:
        """The `window/logMessage` texts received so far."""
        while True:
            try:
                self.seen.append(self.messages.get_nowait())
            except queue.Empty:
                break
        return [m["params"]["message"] for m in self.seen
                if m.get("method") == "window/logMessage"]

    def ask(self, rid: Any, method: str, params: Any = None, timeout: float = START_S) -> dict:
        self.send(request(rid, method, params))
        return self.response(rid, timeout)

    def end(self, timeout: float = 30.0) -> int:
        """Close stdin and wait for the process to end; its exit code."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the server did not end within {timeout} s of its input")
        self._close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def _close(self) -> None:
        """The pipes, once the process is gone and its output read."""
        for t in self.threads:
            t.join(5)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
