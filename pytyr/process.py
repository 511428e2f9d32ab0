"""Process life under a launcher: a rank whose launcher dies ends itself.

torchrun's agent is the parent of every rank; killed (SIGKILL, out of memory), it cannot stop
its children, which would wait in a collective forever or go on writing checkpoints. A rank
whose parent dies is re-parented (to init or a subreaper), which `watch_launcher` notices
within a fraction of a second. It starts as the CLI starts (before torch is imported), so
even a rank still loading its libraries goes when its launcher does.

`StopRequest` turns Ctrl-C and SIGTERM into a request the training loop answers at the next
step boundary: a checkpoint, the plot and the metrics are written before the process exits.
"""
from __future__ import annotations

import os
import sys
import threading
import time

_started: threading.Thread | None = None


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


class StopRequest:
    """SIGINT and SIGTERM as a request to stop at the next step boundary.

    Inside `with StopRequest() as stop:` the first signal only sets `stop.signal` (its name),
    so the loop can finish the step, write a checkpoint and its outputs, and exit; a second
    one interrupts at once (KeyboardInterrupt), which the atomic checkpoint writes survive.
    Outside the main thread signals cannot be caught, and nothing is installed.
    """

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self) -> None:
        self.signal: str | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: object) -> None:
        import signal

        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name

    def __enter__(self) -> StopRequest:
        import signal

        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                num = getattr(signal, name)
                self._previous[num] = signal.signal(num, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        for num, handler in self._previous.items():
            signal.signal(num, handler)  # type: ignore[arg-type]
        self._previous.clear()

    @property
    def exit_code(self) -> int:
        import signal

        return 128 + int(getattr(signal, self.signal or "SIGINT"))
