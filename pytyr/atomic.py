"""Atomic file writes: a crash leaves either the old file or the new one, never a torn one.

A whole directory is published the same way (`swap_directory`): written complete elsewhere
on the same filesystem, then put in place by one rename.
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys
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
_rename = os.rename  # the renames of `swap_directory` without an exchange (tests interrupt them)


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


def staging_directory(final: Path) -> Path:
    """A new empty directory `final.name.tmpXXXXXXXX` beside `final` (its parents made), with
    the mode a directory made there would get, to write `final`'s contents into."""
    final.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f"{final.name}.tmp", dir=final.parent))
    os.chmod(stage, 0o777 & ~_UMASK)
    return stage


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2  # <fcntl.h>, <linux/fs.h>


def _exchange(a: Path, b: Path) -> bool:
    """Swap the directories `a` and `b` in one step (Linux's renameat2 RENAME_EXCHANGE);
    False where the system or the filesystem cannot."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    rename2 = getattr(libc, "renameat2", None)
    if rename2 is None:
        return False
    if rename2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap_directory(stage: Path, final: Path) -> Path | None:
    """Put the complete directory `stage` at `final` (a sibling): where nothing or an empty
    directory is, by one rename; else by one exchange, so that `final` is at every instant
    the old directory or the new one. Where no exchange exists, `final` moves to
    `stage.old` first and comes back if the second rename fails (a kill between the two
    leaves `final` absent and the old directory whole in `stage.old`). Returns where the
    old directory now lies, for the caller to remove, or None."""
    if not final.is_dir() or not any(final.iterdir()):
        os.replace(stage, final)
        fsync_dir(final.parent)
        return None
    if _exchange(stage, final):
        fsync_dir(final.parent)
        return stage
    old = stage.with_name(stage.name + ".old")
    _rename(final, old)
    try:
        _rename(stage, final)
    except BaseException:
        _rename(old, final)
        raise
    fsync_dir(final.parent)
    return old
