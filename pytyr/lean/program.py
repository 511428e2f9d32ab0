"""Load Lean files the way Lake resolves them, check them, and instantiate models as graphs.

`import Tyr` (and `Tyr.X`) resolves to the Lean library shipped with pytyr; other imports
resolve against the directory of the importing root file, as `A.B` → `A/B.lean`, then, where
that has no such file, against the Lake package holding it (the nearest directory above with a
`lakefile.lean` or `lakefile.toml`), where `lake build` resolves them: an example imports
another's module by its Lake name (`import examples.flux2.transformer.Transformer`). Modules
under `Tyr.Meta` are Lean metaprograms that the checker provides natively.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Diagnostic, LeanError, Pos
from . import syntax as S
from .arith import TooLarge
from .check import Checker
from .env import NATIVE_MODULE_PREFIX, DefInfo, Env, builtin_defs
from .failure import Fail
from .parser import Parser
from .terms import show

# The checked Tyr library (`import Tyr`), kept per process: a model file that imports it
# starts from its declarations instead of checking the library again. Keyed by the working
# directory (positions are shown relative to it) and by every library file's size and mtime.
_LIBRARY: dict[str, tuple[tuple, tuple, dict]] = {}
_LIBRARY_LOCK = threading.Lock()
_BUILTINS = len(builtin_defs())


def _library_files() -> tuple:
    root = tyr_root()
    files = [root / "Tyr.lean", *sorted((root / "Tyr").rglob("*.lean"))]
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)


def clear_library_cache() -> None:
    """Forget the checked library (benchmarks measure a cold check with it)."""
    with _LIBRARY_LOCK:
        _LIBRARY.clear()


def tyr_root() -> Path:
    """Directory holding `Tyr.lean` and `Tyr/`: inside the wheel, or the repository."""
    here = Path(__file__).resolve().parent.parent
    for cand in (here / "_lean", here.parent):
        if (cand / "Tyr.lean").is_file() and (cand / "Tyr").is_dir():
            return cand
    raise FileNotFoundError("the Tyr Lean library was not found next to pytyr "
                            f"(looked in {here / '_lean'} and {here.parent})")


def lake_package(root: Path) -> list[Path]:
    """The Lake package directory above `root` (the nearest holding a lakefile), as a list of
    at most one directory, none when it is `root` itself (already searched first)."""
    start = root.resolve()
    for folder in (start, *start.parents):
        if (folder / "lakefile.lean").is_file() or (folder / "lakefile.toml").is_file():
            return [] if folder == start else [folder]
    return []


@dataclass
class Program:
    """Every module reachable from the root files, elaborated in import order."""

    checker: Checker = field(default_factory=Checker)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    loaded: dict[str, Path] = field(default_factory=dict)  # module name -> file
    modules: dict[Path, S.Module] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    # Text to check instead of the file's, by resolved path: an editor's unsaved buffers.
    sources: dict[str, str] = field(default_factory=dict)
    # The tokens of a text of `sources` lexed already, by resolved path (an editor lexes a
    # buffer for its own use: once is enough).
    lexed: dict[str, list] = field(default_factory=dict)
    # A hook of the parser (`parser.Reuse`), by resolved path: the commands of an editor's
    # previous parse of the text, taken again where their tokens are the same.
    reparse: dict[str, Callable] = field(default_factory=dict)
    _keys: set[str] = field(default_factory=set)  # resolved paths of the modules loaded

    def load_file(self, path: str | Path) -> None:
        path = Path(path)
        if str(path.resolve()) not in self.sources and not path.is_file():
            what = "is a directory, not a Lean file" if path.is_dir() else "file not found"
            self.diagnostics.append(Diagnostic(Pos(str(path), 1, 0), what))
            return
        self._load(path, self._display(path), str(path.resolve()), [], root=path.parent)

    def _display(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(Path.cwd()))
        except ValueError:
            return str(path)

    def _resolve_import(self, name: str, root: Path) -> Path | None:
        rel = Path(*name.split(".")).with_suffix(".lean")
        bases = [tyr_root()] if name == "Tyr" or name.startswith("Tyr.") else \
            [root, *lake_package(root)]
        for base in bases:
            try:
                if (base / rel).is_file() or str((base / rel).resolve()) in self.sources:
                    return base / rel
            except OSError:  # a name the file system refuses (too long, …) names no module
                return None
        return None

    def _load(self, path: Path, shown: str, key: str, stack: list[str], root: Path) -> None:
        if key in stack:
            self.diagnostics.append(Diagnostic(Pos(shown, 1, 0),
                                               "import cycle: " + " → ".join(stack + [key])))
            return
        if key in self._keys:
            return
        self._keys.add(key)
        t0 = time.perf_counter()
        try:
            text = self.sources.get(key)
            if text is None:
                raw = path.read_bytes()
                text = raw.decode("utf-8")
        except OSError as err:
            self.diagnostics.append(Diagnostic(Pos(shown, 1, 0), f"cannot read: {err.strerror}"))
            return
        except UnicodeDecodeError as err:
            line = raw.count(b"\n", 0, err.start) + 1
            col = err.start - (raw.rfind(b"\n", 0, err.start) + 1)
            self.diagnostics.append(Diagnostic(Pos(shown, line, col),
                                               f"not UTF-8 text (byte 0x{raw[err.start]:02x}); "
                                               f"Lean source files are UTF-8"))
            return
        parser = None
        try:
            toks = self.lexed.get(key)
            parser = Parser(text, shown, toks if toks and toks[-1].pos.file == shown else None,
                            self.reparse.get(key))
            mod = parser.module()
        except LeanError as err:
            self.diagnostics.extend(err.diagnostics)
            self.modules[path] = S.Module(shown, [], [])
            return
        except RecursionError:  # the parser bounds nesting; this is a last resort
            where = parser.tok.pos if parser is not None else Pos(shown, 1, 0)
            self.diagnostics.append(Diagnostic(where, "this term is nested too deeply for the "
                                                      "checker; split it with `let`"))
            self.modules[path] = S.Module(shown, [], [])
            return
        self.modules[path] = mod
        self._imports(mod, key, stack, root)
        self._elaborate(mod)
        self.timings[shown] = time.perf_counter() - t0

    def _imports(self, mod: S.Module, key: str, stack: list[str], root: Path) -> None:
        for imp in mod.imports:
            if imp.module.startswith(NATIVE_MODULE_PREFIX) or imp.module == "Tyr":
                self.checker.meta_imported = True
            if imp.module == "Tyr" and self._fresh() and self._library(stack + [key], root):
                continue
            if imp.module in (NATIVE_MODULE_PREFIX, "Tyr.Export") or \
                    imp.module.startswith(NATIVE_MODULE_PREFIX + "."):
                continue
            if imp.module in ("Lean", "Init", "Std") or imp.module.startswith(("Lean.", "Std.")):
                self.diagnostics.append(Diagnostic(imp.pos, f"importing '{imp.module}' is not "
                                                   "in the Tyr subset of Lean"))
                continue
            target = self._resolve_import(imp.module, root)
            if target is None:
                self.diagnostics.append(Diagnostic(
                    imp.pos, f"unknown module '{imp.module}' (imports resolve as Lake does: "
                             f"A.B → A/B.lean)"))
                continue
            sub_root = tyr_root() if imp.module.split(".")[0] == "Tyr" else root
            self._load(target, self._display(target), str(target.resolve()), stack + [key],
                       sub_root)

    def _fresh(self) -> bool:
        """Nothing declared yet (the root's first import): the cached library fits."""
        return len(self.env.decls) == _BUILTINS and not self.diagnostics

    def _library(self, stack: list[str], root: Path) -> bool:
        """Start from the cached checked library; check it and cache it if there is none."""
        key = os.getcwd()
        try:
            files = _library_files()
        except OSError:
            return False
        with _LIBRARY_LOCK:
            hit = _LIBRARY.get(key)
        if hit is None or hit[0] != files:
            target = tyr_root() / "Tyr.lean"
            before = set(self.modules)  # the importing file is not part of the library
            self._load(target, self._display(target), str(target.resolve()), stack, root)
            if not self.diagnostics:
                library = {p: m for p, m in self.modules.items() if p not in before}
                with _LIBRARY_LOCK:
                    _LIBRARY[key] = (files, self.env.snapshot(), library)
            return True
        _, snap, modules = hit
        self.checker.env = self.checker.scope.env = Env.restore(snap)
        self.modules.update(modules)
        self._keys.update(str(p.resolve()) for p in modules)
        return True

    def _elaborate(self, mod: S.Module) -> None:
        checker = self.checker
        checker.scope.reset()
        for cmd in mod.commands:
            try:
                checker.command(cmd)
            except Fail as err:
                self.diagnostics.append(Diagnostic(err.pos, err.msg))
            except TooLarge as err:
                self.diagnostics.append(Diagnostic(cmd.pos, str(err)))
            except RecursionError:  # the parser bounds nesting; this is a last resort
                self.diagnostics.append(Diagnostic(cmd.pos, "this declaration is nested too "
                                                            "deeply for the checker; split it "
                                                            "with `let`"))

    # ---- queries ------------------------------------------------------------------------
    def raise_if_errors(self) -> None:
        if self.diagnostics:
            raise LeanError(self.diagnostics)

    @property
    def env(self) -> Env:
        """The checked declarations; read-only once the program is loaded."""
        return self.checker.env

    def models(self) -> dict[str, DefInfo]:
        return {n: i for n, i in self.env.decls.items()
                if isinstance(i, DefInfo) and "model" in i.attrs}

    def find_model(self, name: str) -> DefInfo:
        """The model `name` (or the one model whose last name component it is), if it can
        run: its result holds tensors."""
        models = self.models()
        hits = [name] if name in models else [n for n in models if n.split(".")[-1] == name]
        if len(hits) == 1:
            info = models[hits[0]]
            if not info.tensor_level:
                raise LeanError([Diagnostic(info.pos, f"model '{info.name}' returns "
                                            f"{show(info.result)}, no tensors: there is nothing "
                                            f"to run")])
            return info
        known = ", ".join(sorted(models)) or "none"
        raise LeanError([Diagnostic(Pos("<command line>", 1, 0),
                                    f"no model named '{name}' (models marked @[model]: {known})")])

    def ops(self) -> dict[str, DefInfo]:
        return self.env.ops()


def load(*paths: str | Path) -> Program:
    """Parse and check the given files (and what they import); raise on any error."""
    prog = Program()
    for p in paths:
        prog.load_file(p)
    prog.raise_if_errors()
    return prog


def is_native_module(path: str | Path) -> bool:
    """`Tyr/Meta.lean`, `Tyr/Meta/**` and `Tyr/Export.lean`: Lean-only modules (metaprograms,
    the C ABI's export side) that the checker provides natively or does not need."""
    p, root = Path(path).resolve(), tyr_root().resolve()
    return p in (root / "Tyr" / "Meta.lean", root / "Tyr" / "Export.lean") or \
        root / "Tyr" / "Meta" in p.parents


def check_files(*paths: str | Path) -> list[Diagnostic]:
    """Check files independently; return every diagnostic found. Lean-only meta modules of
    the Tyr library are skipped: `lake build` is their check."""
    out: list[Diagnostic] = []
    for p in paths:
        if is_native_module(p):
            continue
        prog = Program()
        prog.load_file(p)
        out.extend(d for d in prog.diagnostics if d not in out)
    return out


def library() -> Program:
    """The Tyr library alone: the one source of op signatures."""
    prog = Program()
    prog._library([], tyr_root())
    prog.raise_if_errors()
    return prog
