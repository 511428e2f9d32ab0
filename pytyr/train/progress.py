"""The training loop's progress: a tqdm bar on a terminal, plain lines in a log file."""
from __future__ import annotations

import sys
import time

from tqdm.auto import tqdm


class Progress:
    """The loop's progress: a tqdm bar on a terminal; in a log file (stderr not a terminal)
    a plain line every twentieth of the run instead of a bar redrawn at every step."""

    def __init__(self, total: int, start: int, *, enabled: bool):
        self.total, self.enabled = total, enabled
        self.tty = enabled and sys.stderr.isatty()
        self.every = max(1, total // 20)
        self.t0, self.start = time.perf_counter(), start
        self.bar = tqdm(total=total, initial=start, desc="train", unit="step",
                        dynamic_ncols=True) if self.tty else None

    def update(self, step: int, *, loss: float, lr: float, tok_s: float, show: bool) -> None:
        if self.bar is not None:
            self.bar.update(1)
            if show:
                self.bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{tok_s:,.0f}",
                                     refresh=False)
        elif self.enabled and (step % self.every == 0 or step == self.total):
            per_step = (time.perf_counter() - self.t0) / max(step - self.start, 1)
            left = per_step * (self.total - step)
            print(f"step {step}/{self.total}: loss {loss:.4f}, lr {lr:.2e}, {tok_s:,.0f} tok/s, "
                  f"{per_step * 1e3:.0f} ms/step, {_clock(left)} left", flush=True)

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line)
        elif self.enabled:
            print(line, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds + 0.5), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{s:02d}s"
