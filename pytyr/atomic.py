"""Atomic file writes: a crash leaves either the old file or the new one, never a torn one."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable

from .errors import ConfigError
from .paths import output_file


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()  # read once: os.umask can only be read by setting it


def fsync_dir(path: Path) -> None:
    """Persist a rename inside `path` (where the OS allows opening directories)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    """Write `data` to `path` and fsync it: for a file of a directory that one rename then
    publishes whole (a checkpoint's), where the file itself needs no rename of its own."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], Any]) -> Path:
    """Run `write(f)` on a temporary file in the same directory, fsync it, then rename it over
    `path` (streaming: large files are never held in memory whole)."""
    path = output_file(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; a written file gets the usual mode
    except OSError as err:
        raise ConfigError(f"{path}: cannot write the file: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as err:  # disk full, permissions: named, and nothing half-written left
        Path(tmp).unlink(missing_ok=True)
        raise ConfigError(f"{path}: cannot write the file: {err.strerror or err}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))
