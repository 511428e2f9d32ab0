"""Process life under a launcher: a rank whose launcher or a peer dies ends itself, with one
line that says why.

torchrun's agent is the parent of every rank; killed (SIGKILL, out of memory), it cannot stop
its children, which would wait in a collective forever or go on writing checkpoints. A rank
whose parent dies is re-parented (to init or a subreaper), which `watch_launcher` notices
within a fraction of a second. It starts as the CLI starts (before torch is imported), so
even a rank still loading its libraries goes when its launcher does.

A rank that dies kills the others' collectives (gloo: "Connection closed by peer") and makes
the agent send them SIGTERM, whichever comes first. Once the ranks know each other's host and
pid (`note_peers`, as the process group forms), either way ends with one line naming the rank
that died (`end_if_peer_died`, and a SIGTERM handler), not a traceback. Peers on other hosts
cannot be checked from here: their deaths still end this rank, as torch reports them.

`StopRequest` turns Ctrl-C and SIGTERM into a request the training loop answers at the next
step boundary: a checkpoint, the plot and the metrics are written before the process exits.
It does so only in a process whose signals are tyr's (`own_signals`: a tyr command run as a
program); a program that calls tyr (a test suite, a notebook) keeps its own Ctrl-C.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

_started: threading.Thread | None = None
_command = "tyr"  # how this process's one-line messages start (`tyr train`)
_peers: dict[int, tuple[str, int]] = {}  # rank → (host, pid) of the others
_me = 0
_ending = threading.Lock()  # the one line is printed once, whoever notices first
_owned = False  # whether Ctrl-C and SIGTERM are tyr's to answer (`own_signals`)


def launched() -> bool:
    """Whether this process is one rank of several (torchrun's WORLD_SIZE > 1)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def _exit(parent: int) -> None:
    print(f"rank {os.environ.get('RANK', '?')}: the launcher (pid {parent}) is gone; exiting",
          file=sys.stderr, flush=True)
    os._exit(1)


def watch_launcher(interval: float = 0.25) -> threading.Thread | None:
    """Start (once) a daemon thread that ends this process when its parent dies."""
    global _started
    if _started is not None:
        return _started
    parent = os.getppid()
    if parent == 1:  # the launcher died before we could watch it
        _exit(parent)

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                _exit(parent)

    _started = threading.Thread(target=watch, name="tyr-launcher-watch", daemon=True)
    _started.start()
    return _started


def own_signals(owned: bool = True) -> bool:
    """Say whether this process's Ctrl-C and SIGTERM are tyr's, to answer as a stop request
    (`StopRequest`): so for a tyr command run as a program (`tyr …`, `python -m pytyr.cli`,
    a torchrun rank: the CLI says so); not by default, so that a program calling tyr's
    functions (pytest, a notebook) is interrupted by its Ctrl-C as always. Returns the
    previous value."""
    global _owned
    before, _owned = _owned, owned
    return before


def set_command(name: str) -> None:
    """What this process's last line starts with (`tyr train`)."""
    global _command
    _command = name


def note_peers(table: Sequence[tuple[str, int]], rank: int) -> None:
    """Remember every rank's (host, pid), in rank order, and end this rank with one line
    when the launcher stops it (SIGTERM) because a peer died (from the main thread)."""
    global _me
    _me = rank
    _peers.clear()
    _peers.update({r: (host, int(pid)) for r, (host, pid) in enumerate(table) if r != rank})
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers belong to the main thread; the exception path still works
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:
        end_if_peer_died(wait=0.5)
        if callable(previous):  # not a peer's death: as before
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)


def forget_peers() -> None:
    """The ranks' last collective is done: from now on a peer that ends is no news."""
    _peers.clear()


def _gone(pid: int) -> bool:
    """Whether the local process `pid` has died (exited, or a zombie not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            pass
        return False


def dead_peer(wait: float = 0.0) -> tuple[int, int] | None:
    """(rank, pid) of a peer on this host that has died, looking for up to `wait` seconds
    (a rank ending on an error of its own takes a moment); None when all are alive."""
    host = socket.gethostname()
    local = {r: pid for r, (h, pid) in _peers.items() if h == host}
    if not local:
        return None
    deadline = time.monotonic() + wait
    while True:
        for rank, pid in sorted(local.items()):
            if _gone(pid):
                return rank, pid
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def end_if_peer_died(wait: float = 1.0) -> None:
    """If a peer has died, print one line naming it and end this process (its collectives
    cannot go on); else return."""
    dead = dead_peer(wait)
    if dead is None:
        return
    if _ending.acquire(blocking=False):
        rank, pid = dead
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        print(f"{_command}: rank {rank} (pid {pid}) died; rank {_me} stops too",
              file=sys.stderr, flush=True)
    os._exit(1)


class StopRequest:
    """SIGINT and SIGTERM as a request to stop at the next step boundary.

    Inside `with StopRequest() as stop:` the first signal only sets `stop.signal` (its name),
    so the loop can finish the step, write a checkpoint and its outputs, and exit; a second
    one interrupts at once (KeyboardInterrupt), which the atomic checkpoint writes survive.
    Nothing is installed where the signals are not tyr's (`own_signals`) or outside the main
    thread (signals cannot be caught there); a signal the process was started ignoring stays
    ignored (a shell starts `cmd &` ignoring SIGINT, so a terminal's Ctrl-C is not for it).
    """

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self) -> None:
        self.signal: str | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: object) -> None:
        if signum == signal.SIGTERM:  # the launcher stopping us for a dead peer: say so
            end_if_peer_died(wait=0.5)
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name

    def __enter__(self) -> StopRequest:
        if _owned and threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                num = getattr(signal, name)
                if signal.getsignal(num) is not signal.SIG_IGN:
                    self._previous[num] = signal.signal(num, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for num, handler in self._previous.items():
            signal.signal(num, handler)  # type: ignore[arg-type]
        self._previous.clear()

    @property
    def exit_code(self) -> int:
        return 128 + int(getattr(signal, self.signal or "SIGINT"))
