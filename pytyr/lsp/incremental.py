"""Incremental re-checks: an edit re-checks the declarations it touches and those that depend
on them, and reuses the rest; the result is the full check's (rust-analyzer's discipline,
tested against a full check after random edits).

A command of the edited file is reused when its text (from its first token to the end of its
last) is that of a command of the previous check, it starts in the same scope (namespaces,
opens), and every global name its check looked up, found or not, has the version it had then.
A name's version is a digest of what its declaration says to the checker (its signature, its
value, a structure's fields: `fingerprint`, up to the names of bound variables), so a change
reaches what depends on it, transitively, and a change that leaves a declaration saying the
same (its body's layout, a doc comment, a tensor computation) stops there; the library and the
imported files are one version (an imported file changed: nothing is reused). A reused command
is replayed: its declarations, its diagnostics and its recorded terms, moved by the lines the
text above it gained or lost. A command whose check listed the declarations (an error
message's names do), read a checkpoint or declared an op is always checked again.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Diagnostic, Pos
from ..lean import syntax as S
from ..lean.arith import TooLarge
from ..lean.env import DefInfo, IndInfo, StructInfo
from ..lean.failure import Fail
from ..lean.lexer import Token
from ..lean.parser import Reuse
from ..lean.program import Program, tyr_root
from ..lean.terms import Call, Term, map_children
from .fingerprint import fingerprint
from .record import Record, Ref, Typed
from .text import Source, Span, command_exprs, expr_spans

OUTSIDE = "outside"  # the version of every name the library or an imported file declares
_SCOPE = (S.Open, S.Namespace, S.Section, S.End)  # run again every time: they only set scope


class _Watched(dict):
    """The declarations, noting the names a command's check reads (`log`: name → version)
    and whether it listed them all (`wide`)."""

    def __init__(self, decls: dict, versions: dict[str, Any]) -> None:
        super().__init__(decls)
        self.versions = versions
        self.log: dict[str, Any] | None = None
        self.written: list[str] = []
        self.wide = False

    def _note(self, k: str) -> None:
        if self.log is not None and k not in self.log:
            self.log[k] = self.versions.get(k, OUTSIDE) if dict.__contains__(self, k) else None

    def __contains__(self, k: object) -> bool:
        self._note(k)  # type: ignore[arg-type]
        return dict.__contains__(self, k)

    def get(self, k: str, default: Any = None) -> Any:
        self._note(k)
        return dict.get(self, k, default)

    def __getitem__(self, k: str) -> Any:
        self._note(k)
        return dict.__getitem__(self, k)

    def __setitem__(self, k: str, v: Any) -> None:
        self.written.append(k)
        dict.__setitem__(self, k, v)

    def _listed(self) -> None:
        if self.log is not None:
            self.wide = True

    def __iter__(self):  # type: ignore[no-untyped-def]
        self._listed()
        return dict.__iter__(self)

    def keys(self):  # type: ignore[no-untyped-def]
        self._listed()
        return dict.keys(self)

    def values(self):  # type: ignore[no-untyped-def]
        self._listed()
        return dict.values(self)

    def items(self):  # type: ignore[no-untyped-def]
        self._listed()
        return dict.items(self)


@dataclass
class Entry:
    """One command's check, in the coordinates of the text it was last part of."""

    key: tuple
    start: int  # the line of its first token
    syntax: S.Command
    deps: dict[str, Any]
    versions: dict[str, int]  # of each name it declares
    declared: list[tuple[str, Any]]
    diagnostics: list[Diagnostic]
    typed: list[Typed]
    refs: list[Ref]
    spans: dict[int, Span] | None = None  # of its terms, once the analysis has them


@dataclass
class Cache:
    """What the next check of the same file may reuse."""

    entries: dict[tuple, list[Entry]] = field(default_factory=dict)
    infos: dict[str, Any] = field(default_factory=dict)  # every declaration of the file
    imports: tuple = ()
    next_uid: int = 0
    reused: int = 0  # declarations replayed in the check that made it (for the log and tests)
    checked: int = 0  # declarations checked in it


@dataclass
class IncrementalProgram(Program):
    """A program whose root file (`root`, as positions name it) reuses `previous`'s checks;
    `cache` is what it leaves for the next check."""

    root: str = ""
    text: str = ""
    source: Source | None = None  # the root's tokens: where each command's text ends
    record: Record | None = None
    previous: Cache | None = None
    cache: Cache | None = None
    # command index → (its previous check, the lines it moved, old node id → new node or None
    # when it did not move: the module holds the previous check's syntax then)
    replayed: dict[int, tuple[Entry, int, dict[int, Any] | None]] = field(default_factory=dict)
    entries: dict[int, Entry] = field(default_factory=dict)  # command index → its entry

    def _elaborate(self, mod: S.Module) -> None:
        if mod.file != self.root or self.record is None \
                or len(mod.starts) != len(mod.commands):
            return super()._elaborate(mod)
        _Replay(self, mod).run()


class _Replay:
    """The root module's commands, each reused or checked."""

    def __init__(self, prog: IncrementalProgram, mod: S.Module) -> None:
        self.prog, self.mod = prog, mod
        self.checker, self.env = prog.checker, prog.checker.env
        self.rec: Record = prog.record  # type: ignore[assignment]
        self.versions: dict[str, Any] = {}
        self.moved: dict[int, Any] = {}  # id of a moved declaration → its moved copy
        self.out = Cache(imports=self._imports())
        prev = prog.previous
        self.old = None if prev is None or prev.imports != self.out.imports else \
            {k: list(v) for k, v in prev.entries.items()}
        # the previous check's declarations: a reused command's references to one checked
        # again go to its new declaration
        self.old_infos = prev.infos if self.old is not None else {}
        if prev is not None:
            self.env.reserve_uids(prev.next_uid)

    def _imports(self) -> tuple:
        """The imports and the text of every imported file that is not the library's."""
        lib = tyr_root().resolve()
        out = [tuple(i.module for i in self.mod.imports), self.checker.meta_imported]
        for path, m in sorted(self.prog.modules.items(), key=lambda pm: str(pm[0])):
            rp = Path(path).resolve()
            if m.file == self.mod.file or lib in rp.parents:
                continue
            text = self.prog.sources.get(str(rp))
            if text is None:
                try:
                    text = rp.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    text = None
            out.append((str(rp), text))
        return tuple(out)

    def run(self) -> None:
        self.checker.scope.reset()
        watched = _Watched(self.env.decls, self.versions)
        prims = _Watched(self.env.prims, {})
        self.env.decls, self.env.prims = watched, prims
        lines = self.prog.text.split("\n")
        try:
            for k, cmd in enumerate(self.mod.commands):
                start, end = self.mod.starts[k], self._end(k)
                sc = self.checker.scope
                key = (_slice(lines, start, end), start.col, tuple(sc.namespaces),
                       tuple(sc.opens), tuple(sc.stack), self.checker.meta_imported)
                old = self._reusable(key, watched)
                if old is not None:
                    self._replay(k, old, cmd, start.line)
                else:
                    self._check(k, cmd, key, start.line, watched, prims)
        finally:
            self.env.decls, self.env.prims = dict(watched), dict(prims)
        self.out.next_uid = self.env.reserve_uids(0)
        self.prog.cache = self.out

    def _end(self, k: int) -> Pos | None:
        """Where command `k`'s text ends: at the end of its last token (a comment or blank
        line after it is no part of it); None: at the end of the text."""
        starts, src = self.mod.starts, self.prog.source
        nxt = starts[k + 1] if k + 1 < len(starts) else None
        if src is None or not src.toks:
            return nxt
        i = len(src.toks) if nxt is None else src.index.get((nxt.line, nxt.col))
        if i is None or i == 0:
            return nxt
        line, col = src.ends[i - 1]
        return Pos(starts[k].file, line, col)

    def _reusable(self, key: tuple, watched: _Watched) -> Entry | None:
        cands = self.old.get(key) if self.old is not None else None
        for i, e in enumerate(cands or []):
            if all(dict.__contains__(watched, n) == (v is not None)
                   and (v is None or self.versions.get(n, OUTSIDE) == v)
                   for n, v in e.deps.items()) \
                    and not any(dict.__contains__(watched, n) for n, _ in e.declared):
                del cands[i]
                return e
        return None

    def _check(self, k: int, cmd: S.Command, key: tuple, start: int, watched: _Watched,
               prims: _Watched) -> None:
        prog, rec = self.prog, self.rec
        n_diag, n_typed, n_refs = len(prog.diagnostics), len(rec.typed), len(rec.refs)
        watched.log, watched.written, watched.wide = {}, [], False
        prims.log, prims.written, prims.wide = {}, [], False
        reusable = not isinstance(cmd, (S.TypeProvider, *_SCOPE))
        try:
            self.checker.command(cmd)
        except Fail as err:
            prog.diagnostics.append(Diagnostic(err.pos, err.msg))
        except TooLarge as err:
            prog.diagnostics.append(Diagnostic(cmd.pos, str(err)))
            reusable = False
        except RecursionError:  # as Program._elaborate: the parser bounds nesting
            prog.diagnostics.append(Diagnostic(cmd.pos, "this declaration is nested too "
                                                        "deeply for the checker; split it "
                                                        "with `let`"))
            reusable = False
        deps, names = watched.log or {}, list(watched.written)
        watched.log = None
        touched_ops = bool(prims.log or prims.written or prims.wide)
        prims.log = None
        declared = [(n, dict.__getitem__(watched, n)) for n in names]
        deps = {n: v for n, v in deps.items() if n not in names}
        versions = {n: fingerprint(i) for n, i in declared}
        self.versions.update(versions)
        self.out.infos.update(declared)
        for n, i in declared:
            if n in self.old_infos:
                self.moved[id(self.old_infos[n])] = i
        if not isinstance(cmd, _SCOPE):
            self.out.checked += 1
        if not reusable or watched.wide or touched_ops:
            return
        e = Entry(key, start, cmd, deps, versions, declared, prog.diagnostics[n_diag:],
                  rec.typed[n_typed:], rec.refs[n_refs:])
        self.out.entries.setdefault(key, []).append(e)
        prog.entries[k] = e

    def _replay(self, k: int, old: Entry, cmd: S.Command, start: int) -> None:
        d, file = start - old.start, self.mod.file
        nodes = _pair(old.syntax, cmd, {}) if d else None
        if nodes is None:  # not moved: its terms are the previous check's, as recorded
            cmd = self.mod.commands[k] = old.syntax
        declared = []
        for n, info in old.declared:
            new = _moved_info(info, d, file) if d else info
            if new is not info:
                self.moved[id(info)] = new
            self.env.declare(n, new)
            self.versions[n] = old.versions[n]
            declared.append((n, new))
            self.out.infos[n] = new
        diags = [Diagnostic(_pos(x.pos, d, file), x.message, x.severity)
                 for x in old.diagnostics]
        self.prog.diagnostics.extend(diags)
        typed, refs = old.typed, old.refs
        if nodes is not None:
            typed = [Typed(nodes.get(id(t.expr), t.expr), t.term, t.type, t.ctx, t.elab)
                     for t in typed]
        if nodes is not None or self.moved:  # a declaration it names may have moved
            refs = [Ref(nodes.get(id(r.expr), r.expr) if nodes is not None else r.expr,
                        r.name, self.moved.get(id(r.info), r.info), r.ctx, r.elab)
                    for r in refs]
        self.rec.typed.extend(typed)
        self.rec.refs.extend(refs)
        e = Entry(old.key, start, cmd, old.deps, old.versions, declared, diags, typed, refs)
        self.out.entries.setdefault(old.key, []).append(e)
        self.prog.replayed[k] = (old, d, nodes)
        self.prog.entries[k] = e
        self.out.reused += 1


def reparse_hook(src: Source, mod: S.Module | None) -> Reuse | None:
    """The parser's hook (`parser.Reuse`) that takes a command of a previous parse (`src`'s
    tokens, `mod`) again where the new text has the same tokens at the same places, and the
    same token after them (where the command stopped): the same parse, without parsing."""
    toks = src.lexed
    if not toks or mod is None or len(mod.starts) != len(mod.commands):
        return None
    at: dict[tuple[int, int], tuple[int, int, S.Command]] = {}
    for k, (cmd, st) in enumerate(zip(mod.commands, mod.starts)):
        a = src.index.get((st.line, st.col))
        nxt = mod.starts[k + 1] if k + 1 < len(mod.starts) else None
        b = len(toks) - 1 if nxt is None else src.index.get((nxt.line, nxt.col))
        if a is not None and b is not None and b > a:
            at[(st.line, st.col)] = (a, b, cmd)

    def reuse(new: list[Token], i: int) -> tuple[S.Command, int] | None:
        p = new[i].pos
        hit = at.get((p.line, p.col))
        if hit is None:
            return None
        a, b, cmd = hit
        n = b - a
        if i + n >= len(new) or new[i + n] != toks[b] or new[i:i + n] != toks[a:b]:
            return None
        return cmd, n

    return reuse


def module_spans(src: Source, mod: S.Module, prog: Program) -> dict[int, Span]:
    """`id(node)` → span for every term of `mod` (`text.expr_spans`): a replayed command's
    from its previous check, moved with it; the others' found in the tokens, and kept in
    their entries for the next check."""
    replayed = getattr(prog, "replayed", {})
    entries = getattr(prog, "entries", {})
    out: dict[int, Span] = {}
    for k, cmd in enumerate(mod.commands):
        r = replayed.get(k)
        if r is not None and r[0].spans is not None:
            old, d, nodes = r
            if nodes is None:
                mine = old.spans
            else:
                mine = {id(nodes[i]): ((a[0] + d, a[1]), (b[0] + d, b[1]))
                        for i, (a, b) in old.spans.items() if i in nodes}
        else:
            mine = expr_spans(src, command_exprs(cmd))
        out.update(mine)
        if k in entries:
            entries[k].spans = mine
    return out


def _slice(lines: list[str], start: Pos, end: Pos | None) -> str:
    """The text from `start` to `end` (the end of the text when None)."""
    if end is None:
        return "\n".join([lines[start.line - 1][start.col:]] + lines[start.line:])
    if end.line == start.line:
        return lines[start.line - 1][start.col:end.col]
    return "\n".join([lines[start.line - 1][start.col:]] + lines[start.line:end.line - 1]
                     + [lines[end.line - 1][:end.col]])


def _pair(old: Any, new: Any, out: dict[int, Any]) -> dict[int, Any]:
    """id of each syntax node of `old` → the node of `new` at its place (the same text, so
    the same tree)."""
    if isinstance(old, list):
        for a, b in zip(old, new):
            _pair(a, b, out)
    elif dataclasses.is_dataclass(old) and type(old) is type(new):
        out[id(old)] = new
        for k, v in vars(old).items():
            if isinstance(v, (list, S.Expr, S.Arg, S.Binder, S.Field, S.Ctor)):
                _pair(v, getattr(new, k), out)
    return out


def _pos(p: Pos, d: int, file: str) -> Pos:
    return Pos(p.file, p.line + d, p.col) if p.file == file else p


def _moved_term(t: Term, d: int, file: str) -> Term:
    """`t` with its call sites moved `d` lines."""
    if isinstance(t, Call):
        head = t.head if isinstance(t.head, str) else _moved_term(t.head, d, file)
        return Call(head, tuple(_moved_term(a, d, file) for a in t.args), _pos(t.pos, d, file))
    return map_children(t, lambda c: _moved_term(c, d, file))


def _moved_info(info: Any, d: int, file: str) -> Any:
    """A declaration moved `d` lines: its place, its fields' and its calls'."""
    if isinstance(info, DefInfo):
        code = _moved_term(info.code, d, file) if info.code is not None else None
        return dataclasses.replace(info, pos=_pos(info.pos, d, file), code=code)
    if isinstance(info, StructInfo):
        return dataclasses.replace(info, pos=_pos(info.pos, d, file), fields=[
            dataclasses.replace(f, pos=_pos(f.pos, d, file)) for f in info.fields])
    if isinstance(info, IndInfo):
        return dataclasses.replace(info, pos=_pos(info.pos, d, file))
    return info
