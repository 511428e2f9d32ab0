"""Paths given by a user, checked for their kind before anything opens them.

A FIFO opened for reading blocks until a writer appears, a directory where a file is expected
fails deep inside a library with a traceback, and a binary file fails at its first decode:
each is one `ConfigError` here instead, naming the path and what it was expected to be.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import ConfigError


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a regular file"


def _blocker(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` when it is not a directory."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def _missing(path: Path, what: str) -> ConfigError:
    blocker = _blocker(path)
    if blocker is not None:
        return ConfigError(f"{path}: {what} not found ({blocker} is not a directory)")
    parent = path.parent
    if str(parent) not in ("", ".") and not parent.is_dir():
        return ConfigError(f"{path}: {what} not found (its directory {parent} does not exist)")
    return ConfigError(f"{path}: {what} not found")


def _mode(path: Path, what: str) -> int:
    """The mode of an existing `path`, or a ConfigError saying why there is none."""
    try:
        return path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise _missing(path, what) from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the {what}: {err.strerror}") from None


def input_file(path: str | os.PathLike[str], what: str = "file") -> Path:
    """`path` if it is an existing regular file (symlinks followed), else a ConfigError."""
    path = Path(path)
    mode = _mode(path, what)
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{path}: the {what} is {_kind(mode)}, not a regular file")
    return path


def input_dir(path: str | os.PathLike[str], what: str = "directory") -> Path:
    """`path` if it is an existing directory, else a ConfigError."""
    path = Path(path)
    mode = _mode(path, what)
    if not stat.S_ISDIR(mode):
        raise ConfigError(f"{path}: the {what} is {_kind(mode)}, not a directory")
    return path


def _mode_if_any(path: Path, make: str, use: str) -> int | None:
    """The mode of what is at `path`, None where nothing is and something can be made (a
    ConfigError `cannot {make}` names a non-directory in the way, `cannot {use}` the rest)."""
    try:
        return path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        blocker = _blocker(path)
        if blocker is not None:
            raise ConfigError(f"{path}: cannot {make}: {blocker} is not a directory") from None
        return None
    except OSError as err:
        raise ConfigError(f"{path}: cannot {use}: {err.strerror}") from None


def output_dir(path: str | os.PathLike[str], what: str = "output directory") -> Path:
    """`path` where a directory can be (it is one, or nothing is there yet), else a
    ConfigError; it is not created here, so a bad run leaves nothing behind."""
    path = Path(path)
    mode = _mode_if_any(path, f"make the {what}", f"use the {what}")
    if mode is None:
        return path
    if not stat.S_ISDIR(mode):
        raise ConfigError(f"{path}: the {what} is {_kind(mode)}, not a directory")
    return path


def output_file(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """`path` where a file can be written (a regular file or nothing is there, and no
    non-directory is in the way of its parent), else a ConfigError."""
    path = Path(path)
    mode = _mode_if_any(path, f"write the {what}", f"write the {what}")
    if mode is None:
        return path
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{path}: the {what} is {_kind(mode)}, not a regular file")
    return path


def shared_place(path: str | os.PathLike[str]) -> str | None:
    """What `path` is when it is no directory of its own to fill or replace ("the working
    directory", "the home directory", ...), links followed; None when it is one."""
    real = Path(os.path.realpath(path))
    cwd = Path(os.path.realpath(os.getcwd()))
    home = Path(os.path.realpath(Path.home()))
    return ("the filesystem root" if real == Path(real.anchor) else
            "the home directory" if real == home else
            "the working directory" if real == cwd else
            "a directory above the working directory" if real in cwd.parents else None)


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """The UTF-8 text of the regular file `path`; a binary or non-UTF-8 file is named."""
    path = input_file(path, what)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the {what}: {err.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: the {what} is not UTF-8 text (byte "
                          f"0x{data[err.start]:02x} at offset {err.start})") from None


def repository_file(rel: str) -> Path:
    """A file of Tyr's repository (`examples/llama/Llama.lean`) by its path from the root: as
    written where the working directory is the root, else its absolute path; a ConfigError
    where this install has no such file (a wheel carries `Tyr/`, not `examples/`)."""
    root = Path(__file__).resolve().parent.parent
    path = root / rel
    if not path.is_file():
        raise ConfigError(f"{path}: not found (this install of pytyr has no {rel}); give the "
                          f"Lean file of the model")
    return Path(rel) if Path(rel).resolve() == path else path
