"""Run directories that cannot overwrite each other.

`tyr train` writes one run into one directory (`out`). Before any work:

- `check_out`: `out` must name a directory of its own: not empty, not the filesystem root,
  the home directory, the working directory or a directory above it (`~` is expanded).
- `claim`: rank 0 takes an exclusive advisory lock (`fcntl.flock` on `run.lock`, which
  holds its pid) for the run's life, so a second process on the same directory fails at
  once with one line naming the directory and the holder's pid; then a fresh run over an
  existing one (any entry but the lock) is refused unless `--overwrite`, and `--resume`
  needs a checkpoint. Under torchrun every rank learns rank 0's outcome, so all stop alike.
- `Claimed.start()`: with `--overwrite`, the old run's outputs (`OUTPUTS`) are removed just
  before the new run writes its own: after every check passed, and never other files.

The lock file is removed when the run ends; one left by a killed run is no obstacle (the
kernel dropped its lock), and an acquirer checks that the file it locked is still the one at
the path, so removing it cannot let two processes hold the directory.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from pytyr.errors import ConfigError
from pytyr.paths import output_dir, shared_place
from pytyr.train import distributed

LOCK = "run.lock"
# What a run writes into its directory (the checkpoint and its save leftovers, a best
# checkpoint, records, plots, samples): what --overwrite removes.
OUTPUTS = ("run.json", "ckpt", "ckpt.tmp", "ckpt.old", "best", "best.tmp", "best.old",
           "metrics.json", "loss.png", "sample.txt", "samples.png", "samples")
_RUN_MARKERS = ("run.json", "ckpt", "ckpt.old", "best", "best.old")


def check_out(value: str | None, model: str, where: str) -> Path:
    """The run directory `out` names (`runs/<model>` when not set), or a ConfigError when it is
    empty, unsafe (see the module doc) or not where a directory can be."""
    if value is None:
        return output_dir(Path("runs") / model, "run directory")
    hint = f"a run needs a directory of its own (e.g. runs/{model})"
    if not value.strip():
        raise ConfigError(f"{where}: 'out' is empty; {hint}, or leave 'out' out for "
                          f"runs/{model}")
    if "\0" in value:
        raise ConfigError(f"{where}: 'out' contains a NUL character; {hint}")
    # `~` and `~/...` as a shell would (a config value is not expanded by one); `~user` is not
    path = Path(value).expanduser() if value == "~" or value.startswith("~/") else Path(value)
    what = shared_place(path)
    if what:
        raise ConfigError(f"{where}: 'out' is {value!r}, {what}; {hint}")
    return output_dir(path, "run directory ('out')")


class Claimed:
    """A run directory held by this process (rank 0) or its rank 0 (the other ranks)."""

    def __init__(self, path: Path, overwrite: bool):
        self.path, self.overwrite = path, overwrite

    def start(self) -> None:
        """Called by rank 0 as the run starts writing: with --overwrite, the old run goes."""
        if not self.overwrite:
            return
        for name in OUTPUTS:
            p = self.path / name
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                p.unlink()


@contextlib.contextmanager
def claim(out: Path, *, resume: bool, overwrite: bool) -> Iterator[Claimed]:
    """Hold `out` for the body (see the module doc); a ConfigError, on every rank, when it
    is in use, holds a run that neither --resume nor --overwrite says what to do with, or
    has no checkpoint to resume."""
    if resume and overwrite:
        raise ConfigError("--resume continues the run in 'out' and --overwrite replaces it; "
                          "give one of them")
    lock: _Lock | None = None
    problem = None
    created = False  # by this process, which then removes it if the run writes nothing
    try:
        if distributed.is_main():
            existed = out.exists()
            try:
                lock = _Lock(out)
                created = not existed
                _check_contents(out, resume=resume, overwrite=overwrite)
            except ConfigError as err:
                problem = str(err)
        shared = distributed.gather(problem)  # every rank stops alike (None when alone)
        if shared is not None:
            problem = shared[0]
        if problem:
            raise ConfigError(problem)
        yield Claimed(out, overwrite)
    finally:
        if lock is not None:
            lock.release()
        if created:  # a run that failed before writing anything leaves nothing behind
            with contextlib.suppress(OSError):
                out.rmdir()


def _check_contents(out: Path, *, resume: bool, overwrite: bool) -> None:
    names = sorted(p.name for p in out.iterdir() if p.name != LOCK)
    if resume:
        from pytyr.train.checkpoint import STATE_FILE, resolve

        if not (resolve(out / "ckpt") / STATE_FILE).is_file():
            hint = " (or replace the run with --overwrite)" if names else ""
            raise ConfigError(f"{out}: no checkpoint to resume from; run without --resume to "
                              f"start a new run{hint}")
        return
    if not names or overwrite:
        return
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    if any(n in _RUN_MARKERS for n in names):
        raise ConfigError(f"{out}: the run directory already holds a run ({shown}); continue "
                          f"it with --resume or replace it with --overwrite")
    raise ConfigError(f"{out}: the run directory is not empty ({shown}); give a new or empty "
                      f"directory, or --overwrite to write the run there")


class _Lock:
    """An exclusive flock on `directory/run.lock`, which holds the holder's pid."""

    def __init__(self, directory: Path):
        self.path = directory / LOCK
        try:
            for attempt in range(100):
                directory.mkdir(parents=True, exist_ok=True)
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                except FileNotFoundError:  # an ending run removed its empty directory
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _holder(fd)
                    os.close(fd)
                    pid = f" (pid {holder})" if holder else ""
                    raise ConfigError(f"{directory}: the run directory is in use by another "
                                      f"process{pid}; wait for it to end or give another "
                                      f"'out'") from None
                if self._still_there(fd):
                    break
                os.close(fd)  # the holder removed it as we opened it: take the new one
            else:
                raise ConfigError(f"{directory}: cannot take the run directory's lock")
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError as err:
            raise ConfigError(f"{directory}: cannot use the run directory: "
                              f"{err.strerror or err}") from None
        self.fd: int | None = fd

    def _still_there(self, fd: int) -> bool:
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # while still held: no one can lock this file after us
        os.close(self.fd)
        self.fd = None


def _holder(fd: int) -> str | None:
    """The pid holding the flock on `fd`'s file: from /proc/locks (Linux; exact even while
    the holder is still writing its pid), else the pid the holder wrote into the file."""
    st = os.fstat(fd)
    try:
        with open("/proc/locks", encoding="ascii") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6 or parts[1] != "FLOCK" or "->" in parts:
                    continue
                major, minor, inode = parts[5].split(":")
                if (int(major, 16), int(minor, 16), int(inode)) == (
                        os.major(st.st_dev), os.minor(st.st_dev), st.st_ino):
                    return parts[4]
    except (OSError, ValueError):
        pass
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return text if text.isdigit() else None
