"""The first diagnostic at once (pytyr/lsp/documents.py): an edit's check never waits behind
the extra work of an earlier one — the config's values (whose first run imports torch), a
completion's or a fix's check — and an extra for a text edited since is dropped. The values
step is held on an event here (a slow import, made as slow as the test wants), so that what
is asserted is an order, not a time."""
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

    def _values(self, a, doc, text):
        self.started.append(a.version)
        if not self.release.wait(WAIT_S):
            raise AssertionError("the values step was never released")
        out = super()._values(a, doc, text)
        self.ran.append((a.version, out is not None))
        return out


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
        await _until(lambda: docs.started == [1], "the first check and its values step")
        docs.change(uri, text + "-- an edit\n", 2)
        await _until(lambda: 2 in published, "the edit's diagnostics, the values step held")
        assert docs.ran == []  # still held: the edit's check did not wait for it
        docs.release.set()
        st = await docs.state(uri)
        assert st is not None and st.analysis.version == 2 and st.values  # the config's values
    finally:
        docs.release.set()
        docs.shutdown()


@pytest.mark.asyncio
async def test_an_extra_for_a_text_edited_since_is_dropped(gpt):
    path, uri, text = gpt
    published: list[int | None] = []
    docs = HeldValues(lambda u, a: published.append(a.version))
    try:
        docs.open(uri, path, text, 1)
        await _until(lambda: docs.started == [1], "the first check and its values step")
        docs.change(uri, text + "-- an edit\n", 2)
        await _until(lambda: 2 in published, "the second check")
        docs.change(uri, text + "-- another\n", 3)
        await _until(lambda: 3 in published, "the third check")
        docs.release.set()
        await _until(lambda: len(docs.ran) == 2, "the values steps")
        assert docs.ran == [(1, False), (3, True)]  # 1 edited since, 2 never ran, 3 computed
    finally:
        docs.release.set()
        docs.shutdown()
