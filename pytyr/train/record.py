"""A finished run read back: `run.json` verified, and the checkpoint a command uses.

`tyr train` leaves in its directory `run.json` (what made the run: origin as an absolute
path, so the run works from any directory; model, values, task, sample; with its checksum,
which proves against damage, not against a hand: a task module it names is never imported,
`tasks.recorded_task_class`),
`ckpt/` (the last step) and, where an evaluation improved on it, `best/` (the weights of the
lowest validation loss). Commands that use a run's weights take `best/` where it exists
(`--checkpoint last` for the last step's), read through the validating reader and verified
against their SHA-256; `tyr sample` writes into a new `samples/NNN/`, never over the
training's sample.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pytyr.digest import stamp_problem
from pytyr.errors import ConfigError
from pytyr.paths import input_dir

_noted: set[str] = set()  # unverifiable run records already noted in this process
_RUN_KEYS = ("origin", "model", "values", "init", "task", "sample", "train", "checksum")
CHECKPOINTS = ("best", "last")


def read_run(run_dir: Path) -> dict[str, Any]:
    """run.json of a run directory, checked to be one and verified against its checksum."""
    from pytyr.config import read_json

    input_dir(run_dir, "run directory")
    path = run_dir / "run.json"
    run = read_json(path, "run record (run.json of `tyr train`)")
    unknown = sorted(set(run) - set(_RUN_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} in the run record (damaged, or "
                          f"not written by `tyr train`)")
    problem = stamp_problem(run)
    if problem and "checksum" in run:
        raise ConfigError(f"{path}: damaged: {problem}; the run cannot be used")
    for key, kind in (("origin", dict), ("model", str), ("values", dict), ("task", dict)):
        if key not in run:
            raise ConfigError(f"{path}: missing '{key}'; is this the output directory of "
                              f"`tyr train`?")
        if not isinstance(run[key], kind):
            raise ConfigError(f"{path}: '{key}' must be a {'string' if kind is str else 'table'}")
    origin = run["origin"]
    if not any(isinstance(origin.get(k), str) for k in ("file", "lib")):
        raise ConfigError(f"{path}: 'origin' names no Lean file or library")
    if problem and str(path) not in _noted:  # a record of an older tyr, otherwise whole
        _noted.add(str(path))
        print(f"note: {path}: written before run records carried checksums; it cannot be "
              f"verified", file=sys.stderr)
    run.pop("checksum", None)
    return run


def checkpoint_dir(run_dir: Path, checkpoint: str = "best") -> Path:
    """The checkpoint of a run that `checkpoint` names: `best` is `best/` (the lowest
    validation loss) where the run has one and `ckpt/` otherwise; `last` is `ckpt/`."""
    from pytyr.train.checkpoint import STATE_FILE, resolve

    if checkpoint not in CHECKPOINTS:
        raise ConfigError(f"--checkpoint must be one of {', '.join(CHECKPOINTS)}, "
                          f"got {checkpoint!r}")
    best = resolve(run_dir / "best")
    if checkpoint == "best" and (best / STATE_FILE).is_file():
        return best
    return resolve(run_dir / "ckpt")


def describe_checkpoint(run_dir: Path, checkpoint: str = "best") -> str:
    """`runs/gpt/best (step 1750, val 1.9032)`: which weights a command uses, for its log."""
    from pytyr.train.checkpoint import read_state

    where = checkpoint_dir(run_dir, checkpoint)
    state = read_state(where)
    val = state.get("extra", {}).get("val")
    return f"{where} (step {state['step']}" + (f", val {val:.4f})" if val is not None else ")")


def run_threads(run_dir: Path, checkpoint: str = "best") -> int | None:
    """The thread count the run's training chose, as its `checkpoint` records it; None where
    it chose none (a device, an environment's count) or the record is older."""
    from pytyr.train.checkpoint import read_state

    state = read_state(checkpoint_dir(run_dir, checkpoint), files=[])  # its files: the reader's
    threads = state.get("extra", {}).get("threads")
    return threads if isinstance(threads, int) and threads > 0 else None


def run_weights(run_dir: Path, checkpoint: str = "best") -> dict[str, Any]:
    """The trained weights of a run (`checkpoint_dir`), verified against their SHA-256, read
    through the validating reader."""
    from pytyr.train.checkpoint import read_weights

    return read_weights(checkpoint_dir(run_dir, checkpoint))


def sample_dir(run_dir: Path) -> Path:
    """A new directory `samples/NNN/` of the run for one `tyr sample` (the next number)."""
    parent = run_dir / "samples"
    parent.mkdir(exist_ok=True)
    taken = [int(p.name) for p in parent.iterdir() if p.name.isdigit()]
    n = max(taken, default=0) + 1
    while True:
        try:
            (parent / f"{n:03d}").mkdir()
            return parent / f"{n:03d}"
        except FileExistsError:  # another `tyr sample` took it
            n += 1
