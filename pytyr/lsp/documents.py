"""Open documents and their checks: debounced, one at a time, off the server's event loop.

An edit schedules a check of its document after a short quiet time (`debounce`); a newer
edit replaces a scheduled one. A check reuses what the previous one found for the
declarations the edit did not touch (`incremental.py`). Checks run on one worker thread, so
the event loop keeps answering while one runs, and each reads every open buffer instead of
its file (imports included). When a check is done its diagnostics are published; the
config's values and the models' runs are computed when a hover or the inlay hints first ask
for them (the first time loads the task registry: torch, seconds). That and every other extra
(a completion's check of the patched text, a fix's verification) run on a second worker, so
that an edit's check never waits behind them. A document that imports a changed file is
re-checked too. A request waits for the check of the text it is about (bounded).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .analysis import Analysis, analyse
from .lookup import Lookup
from .runs import Runs, model_runs
from .values import Values, config_beside, model_values

WAIT_S = 10.0  # the longest a request waits for a check before it answers from an older one


@dataclass
class Doc:
    uri: str
    path: Path
    text: str
    version: int | None


@dataclass
class State:
    """The newest finished check of a document, with its config's values and, once asked
    for, its models' runs."""

    analysis: Analysis
    values: Values | None = None
    runs: Runs | None = None
    _lookup: Lookup | None = None
    _running: asyncio.Future | None = None

    @property
    def lookup(self) -> Lookup:
        if self._lookup is None:
            self._lookup = Lookup(self.analysis, self.values, self.runs)
        return self._lookup


class Documents:
    def __init__(self, publish: Callable[[str, Analysis], None],
                 log: Callable[[str], None], debounce: float = 0.15) -> None:
        self.publish, self.log, self.debounce = publish, log, debounce
        self.docs: dict[str, Doc] = {}
        self.states: dict[str, State] = {}
        self.good: dict[str, State] = {}  # the newest check that parsed, for completion
        self.tasks: dict[str, asyncio.Task] = {}
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tyr-check")
        self.extras = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tyr-extra")
        self._frozen = 0  # long-lived objects moved out of the collector's way (`_freeze`)

    # ---- buffers ------------------------------------------------------------------------
    def open(self, uri: str, path: Path, text: str, version: int | None) -> None:
        self.docs[uri] = Doc(uri, path, text, version)
        self.schedule(uri, now=True)

    def change(self, uri: str, text: str, version: int | None) -> None:
        doc = self.docs.get(uri)
        if doc is None:
            return
        doc.text, doc.version = text, version
        self.schedule(uri)
        self.dependents_changed(doc.path)

    def close(self, uri: str) -> None:
        doc = self.docs.pop(uri, None)
        self.states.pop(uri, None)
        self.good.pop(uri, None)
        task = self.tasks.pop(uri, None)
        if task is not None:
            task.cancel()
        if doc is not None:  # who imports it reads the file again
            self.dependents_changed(doc.path)

    def overlay(self) -> dict[str, str]:
        out = {}
        for d in self.docs.values():
            try:
                out[str(d.path.resolve())] = d.text
            except (OSError, RuntimeError):
                continue
        return out

    def dependents_changed(self, path: Path) -> None:
        """Re-check the open documents that import `path`."""
        try:
            key = str(path.resolve())
        except (OSError, RuntimeError):
            return
        for uri, st in list(self.states.items()):
            if key in st.analysis.deps and uri in self.docs:
                self.schedule(uri)

    # ---- checks -------------------------------------------------------------------------
    def schedule(self, uri: str, now: bool = False) -> None:
        old = self.tasks.get(uri)
        if old is not None and not old.done():
            old.cancel()
        self.tasks[uri] = asyncio.ensure_future(self._check(uri, 0.0 if now else self.debounce))

    async def _check(self, uri: str, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        doc = self.docs.get(uri)
        if doc is None:
            return
        text = doc.text
        loop = asyncio.get_running_loop()
        try:
            a = await loop.run_in_executor(self.pool, self._analyse, doc, text, self.overlay())
            if a is None or self.docs.get(uri) is not doc or doc.text is not text:
                return  # an edit came meanwhile: its own check follows
            st = State(a)
            self.states[uri] = st
            if a.parsed:
                self.good[uri] = st
            self.publish(uri, a)
            self._freeze(0)
        except asyncio.CancelledError:
            raise  # replaced by a newer check
        except Exception as err:  # noqa: BLE001 — the server outlives any fault of a check
            self.log(f"check of {uri} failed: {type(err).__name__}: {err}")

    def _analyse(self, doc: Doc, text: str, overlay: dict[str, str]) -> Analysis | None:
        if doc.text is not text:  # edited again while this check waited: skip it
            return None
        t0 = time.perf_counter()
        last = self.states.get(doc.uri)
        a = analyse(doc.path, text, overlay, doc.version,
                    previous=last.analysis if last is not None else None)
        reused = f", {a.cache.reused} of {a.cache.reused + a.cache.checked} declarations " \
                 f"reused" if a.cache is not None and a.cache.reused else ""
        self.log(f"checked {a.shown} (version {a.version}) in "
                 f"{(time.perf_counter() - t0) * 1e3:.1f} ms: {len(a.diagnostics)} diagnostics"
                 f"{reused}")
        return a

    def _freeze(self, stage: int) -> None:
        """Move what lives long (the library after the first check, the task registry after
        the first values) out of the collector's way: its full passes skip it."""
        if self._frozen <= stage:
            self._frozen = stage + 1
            gc.freeze()

    def _numbers(self, st: State) -> None:
        """A check's config values and its models' runs (on the extras' thread)."""
        a = st.analysis
        try:
            values = model_values(a.prog, a.path, config_beside(a.path), peek=True)
        except Exception as err:  # noqa: BLE001 — a config is a hover's extra, never a crash
            self.log(f"config values of {a.shown}: {type(err).__name__}: {err}")
            values = Values(problem=str(err))
        runs = model_runs(a.prog, values.models) if values.models else Runs()
        st.values, st.runs, st._lookup = values, runs, None

    async def state(self, uri: str) -> State | None:
        """The check of the document's current text (waiting for it, bounded)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            task = self.tasks.get(uri)
            if task is None or task.done() or time.monotonic() >= deadline:
                break
            try:
                await asyncio.wait_for(asyncio.shield(task), deadline - time.monotonic())
            except (asyncio.CancelledError, asyncio.TimeoutError):
                if asyncio.current_task() is not None and asyncio.current_task().cancelling():
                    raise
            except Exception as err:  # noqa: BLE001 — a failed check: answer from the last
                self.log(f"check of {uri} failed: {type(err).__name__}: {err}")
                break
        return self.states.get(uri)

    async def ready(self, uri: str) -> State | None:
        """`state`, with its config's values and its models' runs: computed on the extras'
        thread the first time a hover or the inlay hints of this check ask (the first time
        loads the task registry), so that an edit's check never waits for them."""
        st = await self.state(uri)
        if st is None or st.analysis.prog is None or st.analysis.refused:
            return st
        if st._running is None:
            st._running = asyncio.ensure_future(self.run(self._numbers, st))
        try:
            await asyncio.shield(st._running)
        except Exception as err:  # noqa: BLE001 — the numbers are an extra: answer without
            self.log(f"config values of {uri}: {type(err).__name__}: {err}")
        self._freeze(1)
        return st

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on the extras' thread (an extra check, for completion or a fix)."""
        return await asyncio.get_running_loop().run_in_executor(self.extras, fn, *args)

    def shutdown(self) -> None:
        for t in self.tasks.values():
            t.cancel()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.extras.shutdown(wait=False, cancel_futures=True)
