"""A directory a command writes whole (`tyr export`, `tyr import`): checked before any work,
written beside its place, then put there in one step.

    out = Output(args.out, "tyr export --format hf", overwrite=False,
                 apart={"the run directory": run_dir}, hint="runs/gpt-hf")
    ...                                   # every check and all the work; nothing written yet
    with out.writing(source=str(run_dir)) as stage:
        stage.write_text("config.json", text)
        stage.write_tensors("model.safetensors", tensors, {"format": "pt"})

Refused in one line, before anything is read: an empty name; the working directory, one above
it, the home directory or the root; a directory that is, lies inside or holds one of `apart`
(the run an export reads); something that is not a directory; a directory with entries that is
not a previous output of Tyr's, unless `overwrite` (which replaces all of it). A previous
output is known by its record, `written-by-tyr.json` (the command, its source, every file's
size and SHA-256), and replaced without `overwrite` only while it holds nothing else and its
files are unchanged: a file added or edited since is the user's.

The files go into a new `OUT.tmpXXXXXXXX/` beside OUT (`atomic.staging_directory`), each
fsynced, the record last; then that directory takes OUT's place in one step
(`atomic.swap_directory`) and the previous output is removed. A failure at any write leaves OUT
as it was and no temporary directory; a kill leaves OUT the previous output or the new one,
never a mix (and an `OUT.tmp…` that nothing reads).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from pytyr.atomic import fsync_dir, staging_directory, swap_directory
from pytyr.digest import file_sha256
from pytyr.errors import ConfigError
from pytyr.paths import output_dir, shared_place

RECORD = "written-by-tyr.json"


def _put(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Write one new file of an output and fsync it (every file of an output comes here)."""
    with open(path, "xb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


class Stage:
    """The temporary directory an output is written into; it remembers what it wrote."""

    def __init__(self, path: Path):
        self.path, self.files = path, {}

    def write(self, name: str, write: Callable[[BinaryIO], Any]) -> None:
        _put(self.path / name, write)
        self.files[name] = {"bytes": (self.path / name).stat().st_size,
                            "sha256": file_sha256(self.path / name)}

    def write_text(self, name: str, text: str) -> None:
        self.write(name, lambda f: f.write(text.encode("utf-8")))

    def write_tensors(self, name: str, tensors: Mapping[str, Any],
                      metadata: Mapping[str, str] | None = None) -> None:
        from pytyr.safetensors.writer import file_writer

        self.write(name, file_writer(tensors, metadata, self.path / name))

    def finish(self, command: str, source: str) -> None:
        """The record, last: a directory without it was never a whole output."""
        record = {"written_by": command, "source": source, "files": dict(self.files)}
        _put(self.path / RECORD, lambda f: f.write(
            (json.dumps(record, indent=1) + "\n").encode("utf-8")))
        fsync_dir(self.path)


def _recorded_files(path: Path) -> dict[str, Any] | None:
    """The files a record lists (name → bytes and SHA-256), None unless it is a record."""
    try:
        files = json.loads(path.read_bytes()).get("files")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(files, dict) or not all(
            isinstance(e, dict) and type(e.get("bytes")) is int
            and isinstance(e.get("sha256"), str) and Path(n).name == n
            and n not in ("", ".", "..", RECORD) for n, e in files.items()):
        return None
    return files


def not_tyr_output(directory: Path) -> str | None:
    """Why the existing directory `directory` is not an output of Tyr's to replace freely
    (module doc), or None when it is one or is empty."""
    names = {p.name for p in directory.iterdir()}
    if not names:
        return None
    if RECORD not in names:
        return f"it holds files and no {RECORD}"
    files = _recorded_files(directory / RECORD)
    if files is None:
        return f"its {RECORD} is not one Tyr wrote"
    extra = sorted(names - set(files) - {RECORD})
    if extra:
        return f"{extra[0]} in it is not a file Tyr wrote"
    for name, entry in files.items():
        path = directory / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return f"{name} in it is not the file Tyr wrote"
        if path.is_file() and (path.stat().st_size != entry["bytes"]
                               or file_sha256(path) != entry["sha256"]):
            return f"{name} in it changed since Tyr wrote it"
    return None


class Output:
    """An output directory checked for a command (module doc); `writing` fills it."""

    def __init__(self, out: str, command: str, *, overwrite: bool = False,
                 apart: Mapping[str, Path] | None = None, hint: str = "a new directory"):
        if not out.strip():
            raise ConfigError(f"{command}: the output directory is empty; give the directory "
                              f"to write (e.g. {hint})")
        if "\0" in out:
            raise ConfigError(f"{command}: the output directory contains a NUL character")
        self.shown, self.command, self.overwrite = out, command, overwrite
        self.path = Path(os.path.realpath(out))  # a link: its target is replaced, not the link
        place = shared_place(out)
        if place is not None:
            raise ConfigError(f"{out}: the output directory is {place}; give a directory of "
                              f"its own (e.g. {hint})")
        for what, path in (apart or {}).items():
            self._refuse_around(what, path, hint)
        output_dir(out, "output directory")
        self._refuse_foreign()

    def _refuse_around(self, what: str, path: Path, hint: str) -> None:
        there = Path(os.path.realpath(path))
        how = ("is" if self.path == there else "lies inside" if there in self.path.parents
               else "holds" if self.path in there.parents else None)
        if how is not None:
            raise ConfigError(f"{self.shown}: the output directory {how} {what} ({path}); give "
                              f"a directory apart from it (e.g. {hint})")

    def _refuse_foreign(self) -> None:
        if self.overwrite or not self.path.is_dir():
            return
        why = not_tyr_output(self.path)
        if why is not None:
            raise ConfigError(f"{self.shown}: the output directory is not empty and not an "
                              f"output of Tyr's ({why}); give a new directory, or --overwrite "
                              f"to replace everything in it")

    @contextlib.contextmanager
    def writing(self, source: str) -> Iterator[Stage]:
        """A Stage to write the files into; published at OUT when the block ends without an
        error, with the record of `source` (what the files were made from)."""
        old = None
        try:
            stage = Stage(staging_directory(self.path))
        except OSError as err:
            raise ConfigError(f"{self.shown}: cannot make the output directory beside it: "
                              f"{err.strerror or err}") from None
        try:
            yield stage
            stage.finish(self.command, source)
            self._refuse_foreign()  # again: it may have changed while the work ran
            old = swap_directory(stage.path, self.path)
        except OSError as err:  # a full disk, permissions: named, OUT as it was
            where = err.filename or stage.path
            raise ConfigError(f"{self.shown}: cannot write the output: {where}: "
                              f"{err.strerror or err}; the output directory is as it "
                              f"was") from None
        finally:
            shutil.rmtree(stage.path, ignore_errors=True)  # unpublished, or the old output
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
