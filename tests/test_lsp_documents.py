"""The first diagnostic at once (pytyr/lsp/documents.py): an edit's check never waits behind
the extra work of an earlier one — the config's values and the models' runs (whose first
computation imports torch), a completion's or a fix's check — and the values are computed only
when a hover or the inlay hints ask for them. The values step is held on an event here (a slow
import, made as slow as the test wants), so that what is asserted is an order, not a time."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable

import pytest

from lsp_session import gpt_copy
from pytyr.lsp.documents import Documents

WAIT_S = 60.0  # the longest any step here is waited for (a check, torch's import)


class HeldValues(Documents):
    """Documents whose config-values step waits until `release` is set."""

    def __init__(self, publish: Callable) -> None:
        super().__init__(publish, lambda message: None, debounce=0.0)
        self.release = threading.Event()
        self.started: list[int | None] = []  # versions whose values step began
        self.ran: list[tuple[int | None, bool]] = []  # (version, values computed)

    def _numbers(self, st):
        self.started.append(st.analysis.version)
        if not self.release.wait(WAIT_S):
            raise AssertionError("the values step was never released")
        super()._numbers(st)
        self.ran.append((st.analysis.version, st.values is not None))


async def _until(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {WAIT_S} s")
        await asyncio.sleep(0.02)


@pytest.fixture
def gpt(tmp_path):
    path = gpt_copy(tmp_path)  # with its config.json: there are values to compute
    return path, path.as_uri(), path.read_text(encoding="utf-8")


@pytest.mark.asyncio
async def test_an_edit_is_checked_while_the_values_step_is_held(gpt):
    path, uri, text = gpt
    published: list[int | None] = []
    docs = HeldValues(lambda u, a: published.append(a.version))
    try:
        docs.open(uri, path, text, 1)
        await _until(lambda: 1 in published, "the first check")
        hover = asyncio.ensure_future(docs.ready(uri))  # a hover asks for the numbers
        await _until(lambda: docs.started == [1], "the values step of the first check")
        docs.change(uri, text + "-- an edit\n", 2)
        await _until(lambda: 2 in published, "the edit's diagnostics, the values step held")
        assert docs.ran == [] and not hover.done()  # held: the edit's check did not wait
        docs.release.set()
        st = await asyncio.wait_for(hover, WAIT_S)
        assert st is not None and st.values and st.runs  # the config's values, the runs
    finally:
        docs.release.set()
        docs.shutdown()


@pytest.mark.asyncio
async def test_values_are_computed_only_when_asked_for(gpt):
    path, uri, text = gpt
    published: list[int | None] = []
    docs = HeldValues(lambda u, a: published.append(a.version))
    docs.release.set()
    try:
        docs.open(uri, path, text, 1)
        docs.change(uri, text + "-- an edit\n", 2)
        await _until(lambda: 2 in published, "the second check")
        docs.change(uri, text + "-- another\n", 3)
        await _until(lambda: 3 in published, "the third check")
        assert docs.started == []  # three checks, no values: none was asked for
        st = await asyncio.wait_for(docs.ready(uri), WAIT_S)
        again = await asyncio.wait_for(docs.ready(uri), WAIT_S)
        assert st is again and docs.ran == [(3, True)]  # once, for the text asked about
    finally:
        docs.release.set()
        docs.shutdown()
