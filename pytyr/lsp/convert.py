"""The checker's answers in the protocol's terms: positions, ranges, diagnostics, hovers.

The checker counts columns in code points from 1-based lines; a client counts in the units
it negotiated (UTF-16 unless it said otherwise) from 0-based lines: `Units` converts, with the
lines of the text the positions are in.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from lsprotocol import types as lsp
from pygls.uris import from_fs_path

from ..errors import Diagnostic, Pos
from ..lean.env import DefInfo, IndInfo, StructInfo
from .analysis import Analysis
from .lookup import Found
from .text import Point, Span

_LOCATED = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+):\s*(?P<msg>.*)$")
_QUOTED = re.compile(r"'([A-Za-z_][\w.']*)'")
_NAME = re.compile(r"[^\s()\[\]{}⟨⟩,:]+")


class Units:
    """Converts between the checker's points and a client's positions."""

    def __init__(self, codec: Any) -> None:
        self.codec = codec  # pygls' PositionCodec for the negotiated encoding

    def position(self, lines: Sequence[str], p: Point) -> lsp.Position:
        line = max(p[0] - 1, 0)
        text = lines[line] if line < len(lines) else ""
        col = min(max(p[1], 0), len(text))
        return lsp.Position(line, self.codec.client_num_units(text[:col]))

    def range(self, lines: Sequence[str], span: Span) -> lsp.Range:
        return lsp.Range(self.position(lines, span[0]), self.position(lines, span[1]))

    def point(self, lines: Sequence[str], pos: lsp.Position) -> Point:
        """A client position as a point (clamped to the text)."""
        line = min(max(pos.line, 0), max(len(lines) - 1, 0))
        text = lines[line] if lines else ""
        units, col = 0, 0
        while col < len(text) and units < pos.character:
            units += self.codec.client_num_units(text[col])
            col += 1
        return line + 1, col


def file_lines(path: Path) -> list[str]:
    """The lines of a file, to place positions in it ([] if it cannot be read)."""
    try:
        return path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n")
    except (OSError, UnicodeDecodeError):
        return []


def location(units: Units, a: Analysis, pos: Pos) -> lsp.Location | None:
    """Where a declaration's position is, in whatever file holds it."""
    path = a.files().get(pos.file) or Path(pos.file)
    if not path.is_absolute():
        path = Path.cwd() / path
    lines = a.source.lines if path == a.path or pos.file == a.shown else file_lines(path)
    if not lines:
        return None
    if pos.file == a.shown:
        span = a.source.word_span((pos.line, pos.col))
    else:  # another file: the name that starts there
        text = lines[pos.line - 1] if 0 < pos.line <= len(lines) else ""
        m = _NAME.match(text, pos.col)
        span = (pos.line, pos.col), (pos.line, m.end() if m else pos.col)
    return lsp.Location(from_fs_path(str(path)) or "", units.range(lines, span))


# ---- diagnostics ---------------------------------------------------------------------------

def diagnostics(units: Units, a: Analysis) -> list[lsp.Diagnostic]:
    """The document's diagnostics; an imported file's errors become one diagnostic at the
    import, each of them related information."""
    out = [_one(units, a, d) for d in a.own_diagnostics()]
    others = a.others()
    if others:
        at = _import_for(a, others[0].pos.file)
        related = [lsp.DiagnosticRelatedInformation(loc, d.message) for d in others
                   if (loc := location(units, a, d.pos)) is not None]
        n = len(others)
        out.append(lsp.Diagnostic(
            units.range(a.source.lines, at), severity=lsp.DiagnosticSeverity.Error,
            source="tyr", related_information=related or None,
            message=f"{n} error{'s' if n != 1 else ''} in imported files; first: "
                    f"{others[0]}"))
    return out


def _one(units: Units, a: Analysis, d: Diagnostic) -> lsp.Diagnostic:
    lines = d.message.split("\n")
    message, related = [lines[0]], []
    for extra in lines[1:]:  # `file:line:col: note` lines point elsewhere
        m = _LOCATED.match(extra.strip())
        loc = location(units, a, Pos(m["file"], int(m["line"]), int(m["col"]))) if m else None
        if loc is not None:
            related.append(lsp.DiagnosticRelatedInformation(loc, m["msg"]))
        else:
            message.append(extra)
    related += _declared_here(units, a, lines[0])
    severity = lsp.DiagnosticSeverity.Warning if d.severity == "warning" else \
        lsp.DiagnosticSeverity.Error
    return lsp.Diagnostic(units.range(a.source.lines, a.source.word_span((d.pos.line,
                                                                          d.pos.col))),
                          "\n".join(message), severity=severity, source="tyr",
                          related_information=related or None)


def _declared_here(units: Units, a: Analysis, message: str) -> list:
    """'f' named in a message, when it is a declaration with a place: where it is declared."""
    if a.prog is None:
        return []
    out = []
    for name in dict.fromkeys(_QUOTED.findall(message)):
        info = a.prog.env.get(name) or a.prog.env.get("torch." + name)
        if not isinstance(info, (DefInfo, StructInfo, IndInfo)) or info.pos.file.startswith("<"):
            continue
        loc = location(units, a, info.pos)
        if loc is not None:
            out.append(lsp.DiagnosticRelatedInformation(loc, f"'{name}' is declared here"))
        if len(out) == 2:
            break
    return out


def _import_for(a: Analysis, file: str) -> Span:
    imports = a.module.imports if a.module is not None else []
    for imp in imports:
        if file.endswith(imp.module.replace(".", "/") + ".lean"):
            return a.source.word_span((imp.pos.line, imp.pos.col))
    if imports:
        return a.source.word_span((imports[0].pos.line, imports[0].pos.col))
    return (1, 0), (1, 0)


# ---- hover -------------------------------------------------------------------------------

def hover_markdown(f: Found, config: str | None) -> str:
    """Lean's infoview in a hover: the name and type, the config's numbers, the signature
    and doc of a declaration."""
    parts = []
    with_cfg = f" with `{config}`" if config else ""
    if f.signature:
        parts.append(f"```lean\n{f.signature}\n```")
        if f.type:
            parts.append(f"here: `{f.type}`" + (f" — {with_cfg.strip()}: `{f.resolved}`"
                                                 if f.resolved else ""))
    elif f.type:
        what = f.name or f.text
        parts.append(f"```lean\n{what + ' : ' if what else ''}{f.type}\n```")
        if f.resolved:
            parts.append(f"{with_cfg.strip().capitalize()}: `{f.resolved}`")
    if f.value is not None:
        parts.append(f"= `{f.value}`{with_cfg}")
    if f.doc:
        parts.append(f.doc)
    return "\n\n".join(parts)
