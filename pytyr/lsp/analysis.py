"""One check of one document, kept for the questions an editor asks about it.

`analyse` checks a file the way `tyr check` does (imports resolved as Lake does, the checked
Tyr library reused), reading open editor buffers instead of the files they shadow, with the
recording checker; the `Analysis` holds the diagnostics, what was elaborated where, and the
user files the document depends on (to re-check it when one of them changes).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Diagnostic, Pos
from ..lean import syntax as S
from ..lean.program import Program, is_native_module, tyr_root
from .incremental import Cache, IncrementalProgram, module_spans, reparse_hook
from .record import Record, RecordingChecker, Ref, Typed
from .text import Point, Source, Span, contains

MAX_CHARS = 1 << 19  # of a document (14x the largest example): a check of seconds at most
MAX_LINE = 10_000  # characters of one line (a longer one is a pasted blob, not a model)


@dataclass
class Analysis:
    path: Path
    shown: str  # the file as the checker names it in positions
    version: int | None
    source: Source
    prog: Program | None = None
    record: Record = field(default_factory=Record)
    module: S.Module | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)  # of every file it loaded
    deps: set[str] = field(default_factory=set)  # resolved paths of user files it imports
    seconds: float = 0.0
    refused: bool = False  # too large to check (`oversize`): no request looks into it
    cache: Cache | None = None  # what the next check of this file may reuse
    typed: list[tuple[Span, Typed]] = field(default_factory=list)  # of this file, with spans
    refs: list[tuple[Span, Ref]] = field(default_factory=list)
    spans: dict[int, Span] = field(default_factory=dict)  # id(syntax node) → span

    @property
    def parsed(self) -> bool:
        """The document parsed (a syntax error leaves no commands to ask about)."""
        return self.module is not None and bool(self.module.commands or self.module.imports)

    def own_diagnostics(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.pos.file == self.shown]

    def others(self) -> list[Diagnostic]:
        """Diagnostics of the files it imports."""
        return [d for d in self.diagnostics if d.pos.file != self.shown]

    def files(self) -> dict[str, Path]:
        """Each loaded module's shown name → its file."""
        out = {m.file: p for p, m in self.prog.modules.items()} if self.prog else {}
        out[self.shown] = self.path
        return out

    # ---- what is at a point -------------------------------------------------------------
    def typed_at(self, p: Point) -> list[Typed]:
        """The terms whose span holds `p`, innermost first (the latest of equal spans)."""
        hits = [(self.source.offset(s[1]) - self.source.offset(s[0]), -k, t)
                for k, (s, t) in enumerate(self.typed) if contains(s, p)]
        return [t for _, _, t in sorted(hits, key=lambda h: (h[0], h[1]))]

    def ref_at(self, p: Point) -> tuple[Span, Ref] | None:
        for span, r in reversed(self.refs):
            if contains(span, p):
                return span, r
        return None


def analyse(path: Path, text: str, overlay: dict[str, str] | None = None,
            version: int | None = None, record: bool = True,
            previous: Analysis | None = None) -> Analysis:
    """Check `text` as the contents of `path`; `overlay`: other files' unsaved texts, by
    resolved path; `previous`: an earlier check of the same file, whose declarations the
    edit did not touch are reused (`incremental.py`). Never raises for any text: a checker
    fault is a diagnostic."""
    t0 = time.perf_counter()
    key = str(path.resolve())
    shown = _display(path)
    refused = oversize(text, shown)
    same = previous is not None and previous.path == path and previous.shown == shown
    a = Analysis(path, shown, version, Source(text, shown, lex=refused is None,
                                              previous=previous.source if same else None))
    if refused is not None:  # bounded work: not lexed, not checked
        a.diagnostics, a.refused = [refused], True
        return a
    if is_native_module(path):  # Lean-only meta code: `lake build` checks it, not we
        return a
    rec = Record()
    if record:
        prev = previous.cache if previous is not None and previous.path == path else None
        prog: Program = IncrementalProgram(checker=RecordingChecker(rec), root=shown, text=text,
                                           source=a.source, record=rec, previous=prev)
    else:
        prog = Program()
    prog.sources = {**(overlay or {}), key: text}
    if a.source.lexed is not None:
        prog.lexed = {key: a.source.lexed}
        hook = reparse_hook(previous.source, previous.module) \
            if record and previous is not None and previous.path == path else None
        if hook is not None:
            prog.reparse = {key: hook}
    a.prog, a.record = prog, rec
    try:
        prog.load_file(path)
    except Exception as err:  # a fault of the checker must not take the editor down
        prog.diagnostics.append(Diagnostic(Pos(shown, 1, 0), f"internal error of the Tyr "
                                           f"checker ({type(err).__name__}: {err}); the file "
                                           f"could not be checked"))
    if isinstance(prog.checker, RecordingChecker):
        prog.checker.detach()
    a.diagnostics = list(prog.diagnostics)
    a.cache = getattr(prog, "cache", None)
    lib = tyr_root().resolve()
    for p, mod in prog.modules.items():
        if mod.file == shown:
            a.module, a.shown = mod, mod.file
            continue
        rp = p.resolve()
        if lib not in rp.parents:
            a.deps.add(str(rp))
    if a.module is not None:
        a.spans = module_spans(a.source, a.module, prog)
        a.typed = [(a.spans[id(t.expr)], t) for t in rec.typed
                   if t.expr.pos.file == a.shown and id(t.expr) in a.spans]
        for r in rec.refs:
            i = a.source.index.get((r.expr.pos.line, r.expr.pos.col))
            if r.expr.pos.file == a.shown and i is not None:
                a.refs.append((a.source.token_span(i), r))
    a.seconds = time.perf_counter() - t0
    return a


def oversize(text: str, shown: str) -> Diagnostic | None:
    """Why `text` is too large to check as it is typed (None: it is not): a check's work
    grows with the text, and an editor waits for each."""
    if len(text) > MAX_CHARS:
        return Diagnostic(Pos(shown, 1, 0), f"this file is {len(text):,} characters long, over "
                          f"the {MAX_CHARS:,} the language server checks: it is not checked")
    lines = text.split("\n")
    if max(map(len, lines)) <= MAX_LINE:
        return None
    k, n = next((k, len(x)) for k, x in enumerate(lines) if len(x) > MAX_LINE)
    return Diagnostic(Pos(shown, k + 1, 0), f"line {k + 1} is {n:,} characters long, over the "
                      f"{MAX_LINE:,} the language server reads in a line: the file is not "
                      "checked")


def _display(path: Path) -> str:
    """The name the checker gives `path` in positions (relative to the working directory)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)
