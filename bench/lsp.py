"""How fast `tyr lsp` answers an editor, measured through a real client over stdio (pygls's
`LanguageClient`, the server a `python -m pytyr.cli lsp` process, debounce 0). Each figure has
the goal of issue 32 (issue 21's for the GPT's re-check), judged on the p90:

* open: a fresh server process per sample, initialised; `didOpen` until the first
  `publishDiagnostics` (the Tyr library checked too: nothing is cached in a new process).
  Goal: under 1 s.
* re-check: an edit (`didChange`: a space typed into the value of the file's middle `let`, then
  deleted) until the server's `publishDiagnostics` for that version arrives, from the first
  edit after the document is opened on: an incremental check (the declaration edited is
  checked again, the others are reused), plus the round trip. Goal: under 100 ms for NanoChat
  (and the GPT).
* hover: a `textDocument/hover` on the name of every `let` in turn (the file checked, the
  config's values loaded), until the answer arrives: the type and the config-resolved type.
  Goal: under 16 ms.
* completion: a `textDocument/completion` one character into every `let`'s value (a name being
  typed: the names in scope). Goal: under 16 ms.
* inlay hints: a `textDocument/inlayHint` for the whole file (every `let`'s type with the
  config's numbers). Goal: under 50 ms.

Over examples/gpt/GPT.lean, examples/nanochat/NanoChat.lean and examples/flux/Flux.lean, in one
server warmed by a hover of the GPT (the task registry loaded) before the timings.

* memory: the server's resident set (RSS) grown over 10,000 incremental edits of the GPT (a
  comment line added and removed; every 10th edit waits for its check's diagnostics), after
  a warm-up of 1,000, each end measured once a hover (which waits for the config's values)
  is answered. Goal of issue 32: flat, at most 4 MiB (pygls kept a future for every
  notification: 18 MiB per 10,000 edits).
"""
from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path
from typing import Any

from bench import ROOT, Row, judge, percentile, summarize

FILES = [ROOT / "examples" / "gpt" / "GPT.lean", ROOT / "examples" / "nanochat" / "NanoChat.lean",
         ROOT / "examples" / "flux" / "Flux.lean"]
GOAL_MS = 100.0  # re-check after an edit, p90 (GPT and NanoChat)
OPEN_GOAL_MS = 1000.0  # open → first diagnostic in a fresh process, p90
HOVER_GOAL_MS = 16.0  # hover and completion, p90
INLAY_GOAL_MS = 50.0  # inlay hints of a whole file, p90
JUDGED_RECHECK = ("GPT.lean", "NanoChat.lean")
MEMORY_GOAL_MIB = 4.0  # RSS growth over the edits after the warm-up
MEMORY_EDITS, MEMORY_WARMUP, MEMORY_EVERY = 10_000, 1_000, 10
TIMEOUT_S = 120.0
_LET = re.compile(r"\blet ([A-Za-z_][A-Za-z0-9_']*)")
_VALUE = re.compile(r"\blet [A-Za-z_][A-Za-z0-9_']*(?: : [^:]*)? := ")


def let_positions(text: str) -> list[tuple[int, int]]:
    """(line, column) of every `let`'s name (0-based; the files are ASCII there)."""
    return [(i, m.start(1)) for i, line in enumerate(text.split("\n"))
            for m in _LET.finditer(line)]


def edited(text: str) -> str:
    """`text` with a space typed into the value of its middle `let` (its declaration is
    checked again, the others are reused)."""
    line, col = value_positions(text)[len(value_positions(text)) // 2]
    lines = text.split("\n")
    lines[line] = lines[line][:col] + " " + lines[line][col:]
    return "\n".join(lines)


def value_positions(text: str) -> list[tuple[int, int]]:
    """(line, column) of where every `let`'s value starts (after `:=`)."""
    return [(i, m.end()) for i, line in enumerate(text.split("\n"))
            for m in _VALUE.finditer(line)]


class _Client:
    """A pygls client of a fresh `tyr lsp` process that notes each document's diagnostics."""

    def __init__(self) -> None:
        from lsprotocol import types as lsp
        from pygls.lsp.client import LanguageClient

        self.lsp = lsp
        self.client = LanguageClient("tyr-bench", "0")
        self.arrived: dict[str, tuple[int | None, float, int]] = {}
        self.event = asyncio.Event()

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _diags(params: lsp.PublishDiagnosticsParams) -> None:
            self.arrived[params.uri] = (params.version, time.perf_counter(),
                                        len(params.diagnostics))
            self.event.set()

        self.logs: list[str] = []  # the server's log (a line for each check)

        @self.client.feature(lsp.WINDOW_LOG_MESSAGE)
        def _log(params: lsp.LogMessageParams) -> None:
            self.logs.append(params.message)

    async def start(self) -> None:
        lsp = self.lsp
        await self.client.start_io(sys.executable, "-m", "pytyr.cli", "lsp", cwd=str(ROOT))
        await self.client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), initialization_options={"debounceMs": 0}))
        self.client.initialized(lsp.InitializedParams())

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    async def until(self, uri: str, version: int) -> float:
        """When the diagnostics of `version` arrived."""
        deadline = time.perf_counter() + TIMEOUT_S
        while self.arrived.get(uri, (None, 0.0, 0))[0] != version:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(),
                                   max(deadline - time.perf_counter(), 0.001))
        return self.arrived[uri][1]

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.client.text_document_did_open(self.lsp.DidOpenTextDocumentParams(
            self.lsp.TextDocumentItem(uri, "lean4", 1, text)))
        return uri

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(self.lsp.DidCloseTextDocumentParams(
            self.lsp.TextDocumentIdentifier(uri)))

    async def timed(self, request: Any) -> tuple[float, Any]:
        t0 = time.perf_counter()
        out = await asyncio.wait_for(request, TIMEOUT_S)
        return time.perf_counter() - t0, out


async def _open_cold(path: Path, samples: int) -> list[float]:
    """`didOpen` → diagnostics, each in a fresh server process."""
    out = []
    text = path.read_text(encoding="utf-8")
    for _ in range(samples):
        c = _Client()
        await c.start()
        try:
            t0 = time.perf_counter()
            uri = c.open(path, text)
            out.append(await c.until(uri, 1) - t0)
        finally:
            await c.stop()
    return out


async def _file(c: _Client, path: Path, edits: int, hovers: int) -> dict[str, Any]:
    lsp = c.lsp
    text = path.read_text(encoding="utf-8")
    uri = c.open(path, text)
    await c.until(uri, 1)
    if c.arrived[uri][2]:
        raise RuntimeError(f"{path} has diagnostics; the benchmark needs it clean")
    doc = lsp.TextDocumentIdentifier(uri)
    spaced = edited(text)
    recheck = []  # from the first edit after the open
    for k in range(edits):
        version = k + 2
        new = spaced if k % 2 == 0 else text
        t0 = time.perf_counter()
        c.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [lsp.TextDocumentContentChangeWholeDocument(text=new)]))
        recheck.append(await c.until(uri, version) - t0)
    lets = let_positions(text)
    hover, completion, inlay, resolved = [], [], [], 0
    for k in range(hovers):
        pos = lsp.Position(*lets[k % len(lets)])
        dt, h = await c.timed(c.client.text_document_hover_async(lsp.HoverParams(doc, pos)))
        hover.append(dt)
        resolved += h is not None and "config.json" in h.contents.value
    values = value_positions(text)
    for k in range(hovers):
        line, col = values[k % len(values)]
        dt, _ = await c.timed(c.client.text_document_completion_async(lsp.CompletionParams(
            doc, lsp.Position(line, col + 1))))
        completion.append(dt)
    whole = lsp.Range(lsp.Position(0, 0), lsp.Position(text.count("\n") + 1, 0))
    for _ in range(max(hovers // 4, 1)):
        dt, hints = await c.timed(c.client.text_document_inlay_hint_async(
            lsp.InlayHintParams(doc, whole)))
        inlay.append(dt)
    c.close(uri)
    return {"lines": text.count("\n"), "lets": len(lets),
            "recheck": {**summarize(recheck), "p99_ms": percentile(recheck, 99) * 1e3,
                        "first_ms": recheck[0] * 1e3},
            "hover": {**summarize(hover), "p99_ms": percentile(hover, 99) * 1e3},
            "completion": summarize(completion), "inlay": summarize(inlay),
            "hints": len(hints or []), "hovers_with_config": resolved}


async def _session(files: list[Path], edits: int, hovers: int) -> dict[str, Any]:
    c = _Client()
    await c.start()
    out: dict[str, Any] = {}
    try:
        gpt = files[0]  # warm: the task registry loads on the first config's values
        uri = c.open(gpt, gpt.read_text(encoding="utf-8"))
        await c.until(uri, 1)
        first = await c.client.text_document_hover_async(c.lsp.HoverParams(
            c.lsp.TextDocumentIdentifier(uri), c.lsp.Position(*let_positions(
                gpt.read_text(encoding="utf-8"))[0])))
        if first is None or "T #[" not in first.contents.value:
            raise RuntimeError(f"no type in the first hover of {gpt}: {first}")
        c.close(uri)
        for path in files:
            out[str(path.relative_to(ROOT))] = await _file(c, path, edits, hovers)
    finally:
        await c.stop()
    return out


def rss_mib(pid: int) -> float:
    """A process's resident set in MiB (Linux's /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def _memory(edits: int, warmup: int, every: int) -> dict[str, Any]:
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("tyr-bench", "0")
    versions: dict[str, int | None] = {}
    event = asyncio.Event()

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def _diags(params: lsp.PublishDiagnosticsParams) -> None:
        versions[params.uri] = params.version
        event.set()

    @client.feature(lsp.WINDOW_LOG_MESSAGE)
    def _log(params: lsp.LogMessageParams) -> None:
        pass

    async def checked(uri: str, version: int) -> None:
        while versions.get(uri) != version:
            event.clear()
            await asyncio.wait_for(event.wait(), TIMEOUT_S)

    async def settled(uri: str, version: int) -> None:
        """The check of `version` done, and its extra work (the config's values: the first
        loads torch): a hover waits for both."""
        await checked(uri, version)
        await asyncio.wait_for(client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(*let_positions(text)[0]))), TIMEOUT_S)

    path = FILES[0]
    text, uri = path.read_text(encoding="utf-8"), path.as_uri()
    end = text.count("\n")  # the line after the last: where the comment goes
    await client.start_io(sys.executable, "-m", "pytyr.cli", "lsp", cwd=str(ROOT))
    pid = client._server.pid  # type: ignore[union-attr]
    try:
        await client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), initialization_options={"debounceMs": 0}))
        client.initialized(lsp.InitializedParams())
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri, "lean4", 1, text)))
        await settled(uri, 1)
        start = rss_mib(pid)
        for k in range(warmup + edits):
            version = k + 2
            added = k % 2 == 0
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(version=version, uri=uri),
                [lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(end, 0), lsp.Position(end + (not added), 0)),
                    text="-- an edit\n" if added else "")]))
            if k + 1 == warmup:  # measured with the work for this text done
                await settled(uri, version)
                start = rss_mib(pid)
            elif version % every == 0:
                await checked(uri, version)
        await settled(uri, warmup + edits + 1)
        stop = rss_mib(pid)
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
    return {"file": str(path.relative_to(ROOT)), "edits": edits, "warmup": warmup,
            "every": every, "rss_start_mib": start, "rss_end_mib": stop,
            "growth_mib": stop - start}


def memory(edits: int = MEMORY_EDITS, warmup: int = MEMORY_WARMUP,
           every: int = MEMORY_EVERY) -> dict[str, Any]:
    """The server's RSS growth over `edits` edits after `warmup` (a check every `every`)."""
    return asyncio.run(_memory(edits, warmup, every))


def run(*, quick: bool = False, iters: int | None = None, files: list[Path] | None = None
        ) -> dict[str, Any]:
    """Time opens, re-checks, hovers, completions and inlay hints, measure memory over edits;
    `iters` overrides the counts (the smoke test uses 1: 100 edits) and `files` the example
    files (the smoke test: the GPT's)."""
    n = iters if iters is not None else (20 if quick else 100)
    samples = iters if iters is not None else (5 if quick else 10)
    chosen = FILES if files is None else files
    opens = {str(p.relative_to(ROOT)): summarize(asyncio.run(_open_cold(p, samples)))
             for p in chosen[:2]}
    files = asyncio.run(_session(chosen, n, 2 * n))
    edits = 100 * iters if iters is not None else (2_000 if quick else MEMORY_EDITS)
    return {"benchmark": "lsp", "goal_ms": GOAL_MS, "open_goal_ms": OPEN_GOAL_MS,
            "hover_goal_ms": HOVER_GOAL_MS, "inlay_goal_ms": INLAY_GOAL_MS, "iters": n,
            "open": opens, "files": files, "memory_goal_mib": MEMORY_GOAL_MIB,
            "memory": memory(edits, min(MEMORY_WARMUP, edits), MEMORY_EVERY)}


def rows(result: dict[str, Any]) -> list[Row]:
    out = []
    for name, o in result["open"].items():
        out.append(Row(f"lsp open → first diagnostic, cold process {name}",
                       f"{o['median_ms']:.0f}", f"{o['p90_ms']:.0f}",
                       **judge(o["p90_ms"], result["open_goal_ms"], at_most=True, digits=0),
                       note=f"p90 ms over {o['n']} fresh processes (the library checked too)"))
    for name, r in result["files"].items():
        rc, hv, cp, ih = r["recheck"], r["hover"], r["completion"], r["inlay"]
        verdict = judge(rc["p90_ms"], result["goal_ms"], at_most=True, digits=1) \
            if name.endswith(JUDGED_RECHECK) else {}
        out.append(Row(f"lsp re-check after an edit {name}", f"{rc['median_ms']:.1f}",
                       f"{rc['p90_ms']:.1f}", **verdict,
                       note=f"p90 ms; the first edit after the open {rc['first_ms']:.1f}, "
                            f"p99 {rc['p99_ms']:.1f}, {r['lines']} lines"))
        hover_goal = result["hover_goal_ms"]
        out.append(Row(f"lsp hover {name}", f"{hv['median_ms']:.2f}", f"{hv['p90_ms']:.2f}",
                       **judge(hv["p90_ms"], hover_goal, at_most=True),
                       note=f"p99 {hv['p99_ms']:.2f}; {r['lets']} lets, "
                            f"{r['hovers_with_config']}/{hv['n']} with the config's numbers"))
        out.append(Row(f"lsp completion {name}", f"{cp['median_ms']:.2f}",
                       f"{cp['p90_ms']:.2f}", **judge(cp["p90_ms"], hover_goal, at_most=True),
                       note="a name being typed in every let's value"))
        out.append(Row(f"lsp inlay hints, whole file {name}", f"{ih['median_ms']:.2f}",
                       f"{ih['p90_ms']:.2f}",
                       **judge(ih["p90_ms"], result["inlay_goal_ms"], at_most=True),
                       note=f"{r['hints']} hints"))
    m = result["memory"]
    out.append(Row(f"lsp memory growth over {m['edits']:,} edits {m['file']}",
                   f"{m['growth_mib']:.2f}",
                   **judge(m["growth_mib"], result["memory_goal_mib"], at_most=True),
                   note=f"MiB of RSS ({m['rss_start_mib']:.0f} after {m['warmup']:,} edits); "
                        f"a check every {m['every']} edits"))
    return out
