"""How fast `tyr lsp` answers an editor, measured through a real client over stdio (pygls's
`LanguageClient`, the server a `python -m pytyr.cli lsp` process, debounce 0):

* re-check: an edit (`didChange`, a comment line appended or removed) until the server's
  `publishDiagnostics` for that version arrives: the check of the file, imports resolved and
  the Tyr library reused, plus the round trip. Goal of issue 21: under 100 ms for the GPT
  (judged on the p90).
* hover: a `textDocument/hover` on the name of every `let` in turn (the file checked, the
  config's values loaded), until the answer arrives: the type and the config-resolved type.

Over examples/gpt/GPT.lean, examples/nanochat/NanoChat.lean and examples/flux/Flux.lean.

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
GOAL_MS = 100.0  # re-check of the GPT after an edit, p90
MEMORY_GOAL_MIB = 4.0  # RSS growth over the edits after the warm-up
MEMORY_EDITS, MEMORY_WARMUP, MEMORY_EVERY = 10_000, 1_000, 10
TIMEOUT_S = 120.0
_LET = re.compile(r"\blet ([A-Za-z_][A-Za-z0-9_']*)")


def let_positions(text: str) -> list[tuple[int, int]]:
    """(line, column) of every `let`'s name (0-based; the files are ASCII there)."""
    return [(i, m.start(1)) for i, line in enumerate(text.split("\n"))
            for m in _LET.finditer(line)]


async def _session(files: list[Path], edits: int, hovers: int) -> dict[str, Any]:
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("tyr-bench", "0")
    arrived: dict[str, tuple[int | None, float, int]] = {}
    event = asyncio.Event()

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def _diags(params: lsp.PublishDiagnosticsParams) -> None:
        arrived[params.uri] = (params.version, time.perf_counter(), len(params.diagnostics))
        event.set()

    @client.feature(lsp.WINDOW_LOG_MESSAGE)
    def _log(params: lsp.LogMessageParams) -> None:  # the server's log of each check
        pass

    async def until(uri: str, version: int) -> float:
        deadline = time.perf_counter() + TIMEOUT_S
        while arrived.get(uri, (None, 0.0, 0))[0] != version:
            event.clear()
            await asyncio.wait_for(event.wait(), max(deadline - time.perf_counter(), 0.001))
        return arrived[uri][1]

    await client.start_io(sys.executable, "-m", "pytyr.cli", "lsp", cwd=str(ROOT))
    await client.initialize_async(lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(), initialization_options={"debounceMs": 0}))
    client.initialized(lsp.InitializedParams())
    out: dict[str, Any] = {}
    try:
        for path in files:
            text = path.read_text(encoding="utf-8")
            uri = path.as_uri()
            client.text_document_did_open(lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri, "lean4", 1, text)))
            await until(uri, 1)
            if arrived[uri][2]:
                raise RuntimeError(f"{path} has diagnostics; the benchmark needs it clean")
            lets = let_positions(text)
            doc = lsp.TextDocumentIdentifier(uri)
            first = await client.text_document_hover_async(lsp.HoverParams(
                doc, lsp.Position(*lets[0])))  # waits for the config's values, once
            if first is None or "T #[" not in first.contents.value:
                raise RuntimeError(f"no type in the hover of {path}:{lets[0]}: {first}")
            recheck = []
            for k in range(edits):
                version = k + 2
                new = text + ("-- an edit\n" if k % 2 == 0 else "")
                t0 = time.perf_counter()
                client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                    lsp.VersionedTextDocumentIdentifier(version=version, uri=uri),
                    [lsp.TextDocumentContentChangeWholeDocument(text=new)]))
                recheck.append(await until(uri, version) - t0)
            hover, resolved = [], 0
            for k in range(hovers):
                pos = lets[k % len(lets)]
                t0 = time.perf_counter()
                h = await asyncio.wait_for(client.text_document_hover_async(lsp.HoverParams(
                    doc, lsp.Position(*pos))), TIMEOUT_S)
                hover.append(time.perf_counter() - t0)
                resolved += h is not None and "config.json" in h.contents.value
            out[str(path.relative_to(ROOT))] = {
                "lines": text.count("\n"), "lets": len(lets),
                "recheck": {**summarize(recheck), "p99_ms": percentile(recheck, 99) * 1e3},
                "hover": {**summarize(hover), "p99_ms": percentile(hover, 99) * 1e3},
                "hovers_with_config": resolved,
            }
            client.text_document_did_close(lsp.DidCloseTextDocumentParams(doc))
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
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
    """Time re-checks and hovers, measure memory over edits; `iters` overrides the counts
    (the smoke test uses 1: 100 edits) and `files` the example files (the smoke test: the
    GPT's)."""
    n = iters if iters is not None else (20 if quick else 100)
    files = asyncio.run(_session(FILES if files is None else files, n, 2 * n))
    edits = 100 * iters if iters is not None else (2_000 if quick else MEMORY_EDITS)
    return {"benchmark": "lsp", "goal_ms": GOAL_MS, "iters": n, "files": files,
            "memory_goal_mib": MEMORY_GOAL_MIB,
            "memory": memory(edits, min(MEMORY_WARMUP, edits), MEMORY_EVERY)}


def rows(result: dict[str, Any]) -> list[Row]:
    out = []
    for name, r in result["files"].items():
        rc, hv = r["recheck"], r["hover"]
        verdict = judge(rc["p90_ms"], result["goal_ms"], at_most=True, digits=1) \
            if name.endswith("GPT.lean") else {}
        out.append(Row(f"lsp re-check after an edit {name}", f"{rc['median_ms']:.1f}",
                       f"{rc['p90_ms']:.1f}", **verdict,
                       note=f"p90 ms; p99 {rc['p99_ms']:.1f}, {r['lines']} lines"))
        out.append(Row(f"lsp hover {name}", f"{hv['median_ms']:.2f}", f"{hv['p90_ms']:.2f}",
                       note=f"p99 {hv['p99_ms']:.2f}; {r['lets']} lets, "
                            f"{r['hovers_with_config']}/{hv['n']} with the config's numbers"))
    m = result["memory"]
    out.append(Row(f"lsp memory growth over {m['edits']:,} edits {m['file']}",
                   f"{m['growth_mib']:.2f}",
                   **judge(m["growth_mib"], result["memory_goal_mib"], at_most=True),
                   note=f"MiB of RSS ({m['rss_start_mib']:.0f} after {m['warmup']:,} edits); "
                        f"a check every {m['every']} edits"))
    return out
