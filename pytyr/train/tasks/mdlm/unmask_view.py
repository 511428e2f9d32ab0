"""A terminal view of iterative unmasking: the `on_step` consumer of `unmask.unmask`.

On a terminal it redraws the sequence in place at every step (rich's `Live`): characters still
masked as a dim `hole`, the ones revealed by this step highlighted, a `step s/n` title. When
the stream is not a terminal (a pipe, a log file, `TERM=dumb`) it writes one plain line per
step instead: `step s/n: <text>`, holes as `hole`, newlines as `\\n`, no control codes.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from pytyr.errors import ConfigError
from pytyr.train.tasks.mdlm.unmask import UnmaskStep


class UnmaskView:
    """Use as `on_step`, inside `with UnmaskView(itos) as view: unmask(..., on_step=view)`.

    `itos[i]` is the text of token `i`; `live` forces the live view on (True) or off (False),
    by default it is on when `stream` (stdout) is a terminal; `frame_seconds` pauses after each
    live frame so that a fast sampler can be watched.
    """

    def __init__(self, itos: Sequence[str], *, stream: TextIO | None = None,
                 live: bool | None = None, hole: str = "_", frame_seconds: float = 0.0):
        if len(hole) != 1:
            raise ConfigError(f"UnmaskView: hole must be one character, got {hole!r}")
        self.itos, self.hole, self.frame_seconds = itos, hole, frame_seconds
        self.stream = stream if stream is not None else sys.stdout
        if live is None:
            live = bool(getattr(self.stream, "isatty", lambda: False)()) \
                and os.environ.get("TERM") != "dumb"
        self.live = live
        self._live: Any = None  # rich.live.Live while a live view is shown

    def text(self, step: UnmaskStep) -> str:
        """The sequence as text, `hole` where still masked."""
        return "".join(self.hole if i == step.mask_id else self.itos[i] for i in step.ids.tolist())

    def __call__(self, step: UnmaskStep) -> None:
        if not self.live:
            flat = self.text(step).replace("\n", "\\n")
            self.stream.write(f"step {step.step}/{step.steps}: {flat}\n")
            self.stream.flush()
            return
        if self._live is None:
            self._start()
        self._live.update(self._frame(step), refresh=True)
        if self.frame_seconds > 0:
            time.sleep(self.frame_seconds)

    def _start(self) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream, force_terminal=True)
        self._live = Live(console=console, auto_refresh=False, transient=False)
        self._live.start()

    def _frame(self, step: UnmaskStep) -> Any:
        from rich.text import Text

        new = set(step.revealed.tolist())
        out = Text()
        out.append(f"step {step.step}/{step.steps}\n", style="bold")
        for pos, i in enumerate(step.ids.tolist()):
            if i == step.mask_id:
                out.append(self.hole, style="dim")
            else:
                out.append(self.itos[i], style="reverse" if pos in new else None)
        return out

    def close(self) -> None:
        """Leave the last frame on the screen."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> UnmaskView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
