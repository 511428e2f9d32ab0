"""How many torch threads a CPU run uses: measured at the start, fixed for the run.

On a shared machine more threads can be much slower than one: OpenMP's threads wait for each
other at every op, and a core taken by another process stalls them all (the GPT step 28 ms →
2.9 s with two threads on a loaded 2-core machine). On an idle machine they are faster. So
`train.threads = "auto"` (the default) times the run's own training step, forward and backward
on its first micro-batch, at one thread and at every core this process may use, alternately (3
rounds, up to 25 for a short step: the median of many is steady on a busy machine, but no more
once most of them are decided, or once a step at every core stalls), and keeps the faster. Each timed step follows an untimed one at the same count: the first step after a
switch pays for waking the thread team at every op (on an idle machine the GPT step at 2
threads timed 43 ms so, then ran at 38 ms). The count then stays fixed: results differ in the
last bits between thread counts, so the run records it and a resume uses it again (`--resume`
stays bit-exact).

Idle OpenMP threads spin for a while after each op unless `OMP_WAIT_POLICY=PASSIVE`. On a
quiet machine that is what makes more threads pay (the GPT step at 2 threads: 0.60x one
thread's time spinning, 0.99x with PASSIVE); once other work runs, a spinning thread takes
the core its partner needs and the same step took 2.4-21x one thread's time
(docs/performance.md, "Threads"). The probe sees the load of the moment; against load that
arrives later, more threads must save a quarter of the time where idle threads spin, a
tenth where they sleep.

The C attention kernel runs on torch's threads where it can (`pytyr/kernels/native.py`),
else at one thread only: then the step timed at one thread is the step with the kernel and
the one at every core is torch's, so the choice weighs the kernel too.

Nothing is measured where the cores are taken (a load average within half a process of the
usable cores, 1.5 on two: one thread, the probe's answer there, without its stalled steps,
which took 12 s before the first step on a loaded 2-core machine), nor where the choice is
someone else's: an explicit `train.threads`,
`OMP_NUM_THREADS` or `MKL_NUM_THREADS` in the environment (torchrun sets 1 per rank), a CUDA
device, or a machine with one core. A step under 2 ms at one thread is too small to share.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator

import torch

ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
MARGIN = 0.9  # more threads must take at most this fraction of one thread's time
SPIN_MARGIN = 0.75  # the same where idle threads spin (no OMP_WAIT_POLICY=PASSIVE)
TINY_S = 0.002  # a step this short at one thread gains nothing from more
ROUNDS = (3, 25)  # alternating rounds: at least 3, more for short steps, within BUDGET_S
BUDGET_S = 1.2
STALL = 4.0  # a step at every core this many times one thread's slowest: stop measuring
BUSY = 0.5  # a load average within this of the usable cores: they are taken, not measured


@dataclasses.dataclass(frozen=True)
class ThreadChoice:
    """The thread count of a run and why (one line for the log)."""

    threads: int
    reason: str

    def line(self) -> str:
        return f"threads: {self.threads} ({self.reason})"


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def load_average() -> float | None:
    """The 1-minute load average, None where the system has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _load() -> str:
    load = load_average()
    return "load unknown" if load is None else f"load {load:.1f}"


def _margin() -> tuple[float, str]:
    """The margin more threads must win by, and the wait policy it follows from."""
    wait = os.environ.get("OMP_WAIT_POLICY", "").strip().upper()
    if wait == "PASSIVE":
        return MARGIN, "idle threads sleep"
    return SPIN_MARGIN, "idle threads spin: no OMP_WAIT_POLICY=PASSIVE"


def _timed(step: Callable[[], None], threads: int, stall: float = math.inf) -> float:
    """One step at `threads`, timed after an untimed one (the team is awake, as in a run);
    an untimed step over `stall` seconds is the answer itself (the timed one would stall
    too)."""
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    step()
    warm = time.perf_counter() - t0
    if warm > stall:
        return warm
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def _decided(one: list[float], many: list[float], margin: float, rounds: int) -> bool:
    """Whether more rounds could not change the choice: most of the planned samples at every
    core already on one side of the margin around all of one thread's, or one of them stalled
    (over `STALL` times one thread's slowest: the cores are taken, as on a loaded machine,
    where a step at two threads took 1.6 s against 0.09 s at one and the probe paid it 6
    times)."""
    slow = sum(t > margin * max(one) for t in many)
    fast = sum(t <= margin * min(one) for t in many)
    stalled = any(t > STALL * max(one) for t in many)
    return stalled or 2 * max(slow, fast) > rounds and len(many) >= 2


def choose_threads(setting: int | str, step: Callable[[], None], *, device: torch.device,
                   recorded: int | None = None) -> ThreadChoice:
    """Set and return the run's thread count. `step` runs one training step's forward and
    backward without changing the run (the caller restores gradients and RNG state);
    `recorded` is the count of the run being resumed."""
    if isinstance(setting, int):
        torch.set_num_threads(setting)
        return ThreadChoice(setting, "train.threads")
    if device.type != "cpu":
        return ThreadChoice(torch.get_num_threads(), f"torch's default on {device.type}")
    if recorded is not None:
        torch.set_num_threads(recorded)
        return ThreadChoice(recorded, "the count the resumed run used, for a bit-exact resume")
    env = next((v for v in ENV_VARS if os.environ.get(v)), None)
    if env is not None:
        return ThreadChoice(torch.get_num_threads(), f"{env}={os.environ[env]}")
    cores = usable_cores()
    if cores == 1:
        torch.set_num_threads(1)
        return ThreadChoice(1, "one usable core")
    load = load_average()
    if load is not None and load >= cores - BUSY:  # others hold the cores: more threads stall
        torch.set_num_threads(1)
        return ThreadChoice(1, f"auto: load {load:.1f} on {cores} usable cores, taken; "
                               f"set train.threads to choose")
    one = _timed(step, 1)  # its untimed step pays first-call costs (a kernel build, ...)
    if one < TINY_S:
        torch.set_num_threads(1)
        return ThreadChoice(1, f"auto: a step takes {one * 1e3:.1f} ms, too small to share")
    times: dict[int, list[float]] = {1: [one], cores: []}
    rounds = max(ROUNDS[0], min(ROUNDS[1], int(BUDGET_S / (4 * one))))  # 2 steps a time
    margin, wait = _margin()
    for r in range(rounds):
        for n in ((cores, 1) if r % 2 == 0 else (1, cores)):
            times[n].append(_timed(step, n, STALL * max(times[1]) if n == cores else math.inf))
        if _decided(times[1], times[cores], margin, rounds):
            break
    t1, tn = statistics.median(times[1]), statistics.median(times[cores])
    best = cores if tn <= margin * t1 else 1
    torch.set_num_threads(best)
    return ThreadChoice(best, f"auto: a step took {t1 * 1e3:.0f} ms at 1 thread, "
                              f"{tn * 1e3:.0f} ms at {cores} ({wait}); {_load()}; set "
                              "train.threads to choose")


@contextlib.contextmanager
def threads_kept(threads: int | None) -> Iterator[None]:
    """Work at the run's thread count `threads` (None: as the process is), then the count as
    it was: a run's sampling is timed by the choice its training made, not torch's default
    (on a busy 2-core machine 200 tokens took 66 s at the default against 9 s at one)."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
