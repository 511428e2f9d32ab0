"""Training checkpoints: written atomically as a whole, read back through `pytyr.safetensors`.

A checkpoint is a directory:
  model.safetensors      the module's state_dict, keyed by parameter path (`blocks.0.attn.c_attn`)
  optimizer.safetensors  every optimizer's tensor state, keyed `<optimizer>.<param>.<name>`
  state.json             step, config, RNG states (torch, numpy, python), the optimizers'
                         groups and non-tensor state, `extra` (loss history, ...), the byte
                         size and SHA-256 of each file above, and its own checksum

Both tensor files are written and read by the project's own safetensors writer and validating
reader: no pickle, and a damaged file is named with the rule it breaks. Every load verifies
state.json against its checksum and each file it reads against its SHA-256 first
(`read_state`), so a checkpoint with one byte changed anywhere is refused with the file
named, never used. Loading lists every mismatch between the file and the module at once
(`pytyr.safetensors.load_model`). A checkpoint of format 2 (before checksums) is still read,
with a note that it cannot be verified; the next save writes format 3.

Atomicity, with `D` the checkpoint directory: everything is written into `D.tmp/` and
fsynced; then `D` (if any) is renamed to `D.old`, `D.tmp` to `D`, and `D.old` removed. Each
rename is atomic, so at every instant `D` or `D.old` is a complete checkpoint; `resolve`
falls back to `D.old` when `D` is missing, and the next save first puts `D.old` back.
state.json is written last into `D.tmp`, so a checkpoint interrupted while being written is
never published. A write that fails (a full disk) is one CheckpointError naming the file;
the last complete checkpoint stays.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pytyr.atomic import fsync_dir, write_synced
from pytyr.digest import file_sha256, stamp_problem, stamped
from pytyr.errors import CheckpointError, ConfigError, SafeTensorsError
from pytyr.safetensors import SafeTensorsFile, load_model, write_file

FORMAT = 3
UNVERIFIED_FORMAT = 2  # sizes only, no checksums: read with a note
MODEL_FILE, OPTIM_FILE, STATE_FILE = "model.safetensors", "optimizer.safetensors", "state.json"
_rename = os.replace  # the two renames that publish a checkpoint (tests interrupt them)
_noted: set[str] = set()  # unverifiable checkpoints already noted in this process

__all__ = ["CheckpointError", "capture_rng", "restore_rng", "seed_rngs", "rngs_kept",
           "save_checkpoint", "resolve",
           "read_state", "load_checkpoint", "read_weights", "checkpoint_around"]


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.numpy().tobytes()).decode("ascii")


def capture_rng() -> dict[str, Any]:
    """The global RNG states (torch CPU and CUDA, numpy, python) as JSON-safe data."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch": _b64(torch.get_rng_state()),
        "numpy": {"kind": kind, "keys": keys.tolist(), "pos": int(pos),
                  "has_gauss": int(has_gauss), "gauss": float(gauss)},
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [_b64(s) for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Set the global RNG states from `capture_rng()` data."""
    raw = base64.b64decode(state["torch"])
    torch.set_rng_state(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
    n = state["numpy"]
    np.random.set_state((n["kind"], np.array(n["keys"], dtype=np.uint32), n["pos"],
                         n["has_gauss"], n["gauss"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["internal"]), p["gauss_next"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(
            [torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8)
             for s in state["cuda"]])


def seed_rngs(seed: int) -> None:
    """Seed every global generator a run may draw from (torch's, numpy's, Python's) as a
    fresh run starts, so that its states at every step follow from `seed` alone, as a
    resumed run's do from its checkpoint (`restore_rng`)."""
    torch.manual_seed(seed)
    np.random.seed([seed % 2**32, seed >> 32])  # numpy's legacy seeds are 32-bit words
    random.seed(seed)


@contextlib.contextmanager
def rngs_kept() -> Iterator[None]:
    """The global generators (torch's CPU one, numpy's, Python's) as they were, after the
    block: what a run seeds, draws and restores stays the run's."""
    np_state, py_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            np.random.set_state(np_state)
            random.setstate(py_state)


def _module_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """The state_dict on CPU; tensors sharing memory (tied weights) are cloned, since the
    format refuses aliased storage."""
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for key, t in module.state_dict().items():
        t = t.detach().cpu().contiguous()
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen and t.numel():
            t = t.clone()
        seen.add(ptr)
        out[key] = t
    return out


def _split_optimizer(optimizers: list[torch.optim.Optimizer]
                     ) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """Tensor state as `<o>.<param>.<name>` tensors; groups and the other state as JSON."""
    tensors: dict[str, torch.Tensor] = {}
    rest = []
    for o, opt in enumerate(optimizers):
        sd = opt.state_dict()
        scalars: dict[str, dict[str, Any]] = {}
        for pid, entries in sd["state"].items():
            for name, v in entries.items():
                if isinstance(v, torch.Tensor):
                    tensors[f"{o}.{pid}.{name}"] = v.detach().cpu().contiguous()
                else:
                    scalars.setdefault(str(pid), {})[name] = v
        rest.append({"param_groups": sd["param_groups"], "scalars": scalars})
    return tensors, rest


def _tuples(group: dict[str, Any]) -> dict[str, Any]:
    """JSON turned the tuples of a param group (`betas`) into lists; torch expects tuples."""
    return {k: tuple(v) if isinstance(v, list) and v and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) and k != "params"
        else v for k, v in group.items()}


def save_checkpoint(directory: str | os.PathLike[str], *, module: nn.Module,
                    optimizers: list[torch.optim.Optimizer] | torch.optim.Optimizer | None,
                    step: int, config: dict[str, Any] | None = None,
                    extra: dict[str, Any] | None = None) -> Path:
    """Save a complete checkpoint at `directory` atomically (see module doc); return it.

    `config` and `extra` must be JSON-serialisable. The global RNG states are captured here,
    so call this at the point where training would continue.
    """
    final = Path(directory)
    opts = [] if optimizers is None else (
        list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers])
    tmp, old = final.with_name(final.name + ".tmp"), final.with_name(final.name + ".old")
    opt_tensors, opt_rest = _split_optimizer(opts)
    state = {"format": FORMAT, "step": int(step), "config": config or {},
             "rng": capture_rng(), "optimizers": opt_rest, "extra": extra or {}}
    try:
        json.dumps(state, allow_nan=False)  # fail before writing megabytes of tensors
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{final}: config/extra are not JSON-serialisable: {e}") from None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        if old.exists() and not final.exists():
            _rename(old, final)  # a crash between the two renames of an earlier save
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)  # a crash mid-write of an earlier save
        tmp.mkdir()
        files = {MODEL_FILE: _module_tensors(module)}
        if opts:
            files[OPTIM_FILE] = opt_tensors
        meta = {MODEL_FILE: {"format": "pt", "step": str(state["step"])},
                OPTIM_FILE: {"optimizers": str(len(opts))}}
        state["files"] = {}
        for name, tensors in files.items():
            write_file(tensors, tmp / name, meta[name])
            state["files"][name] = {"bytes": (tmp / name).stat().st_size,
                                    "sha256": file_sha256(tmp / name)}
        _write_state(tmp / STATE_FILE, json.dumps(stamped(state), indent=1, allow_nan=False))
        fsync_dir(tmp)
        if final.exists():
            _rename(final, old)
            fsync_dir(final.parent)
        _rename(tmp, final)
        fsync_dir(final.parent)
    except (OSError, ConfigError) as err:  # a full disk, permissions: the last one stays
        shutil.rmtree(tmp, ignore_errors=True)
        what = str(err)
        if isinstance(err, OSError):
            what = f"{err.filename}: {err.strerror or err}" if err.filename else str(err.strerror)
        raise CheckpointError(f"{final}: cannot save the checkpoint: {what}; the last complete "
                              f"checkpoint is kept") from None
    shutil.rmtree(old, ignore_errors=True)
    return final


def _write_state(path: Path, text: str) -> None:
    """Write and fsync state.json (the last file of a checkpoint); errors name it."""
    try:
        write_synced(path, text.encode("utf-8"))
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from None


def resolve(directory: str | os.PathLike[str]) -> Path:
    """The complete checkpoint for `directory`: itself, or `D.old` after an interrupted save."""
    final = Path(directory)
    old = final.with_name(final.name + ".old")
    if not (final / STATE_FILE).is_file() and (old / STATE_FILE).is_file():
        return old
    return final


def read_state(directory: str | os.PathLike[str], *,
               files: Iterable[str] | None = None) -> dict[str, Any]:
    """state.json of the checkpoint at `directory`, verified: its own checksum, its keys, and
    every file it lists (or only `files`) present with its recorded size and SHA-256. Any
    problem is a CheckpointError naming the file."""
    where = resolve(directory)
    if not where.is_dir():
        raise CheckpointError(f"{directory}: no checkpoint (directory not found)")
    state_path = where / STATE_FILE
    if not state_path.is_file():
        raise CheckpointError(f"{where}: not a checkpoint: {STATE_FILE} is missing")
    try:
        state = json.loads(state_path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{state_path}: unreadable: {e}") from None
    except OSError as e:
        raise CheckpointError(f"{state_path}: cannot read: {e.strerror}") from None
    fmt = state.get("format") if isinstance(state, dict) else None
    if fmt == FORMAT:
        problem = stamp_problem(state)
        if problem:
            raise CheckpointError(f"{state_path}: damaged: {problem}; the checkpoint cannot be "
                                  f"used")
        del state["checksum"]
    elif fmt == UNVERIFIED_FORMAT and "checksum" not in state and isinstance(
            state.get("files"), dict) and all(type(v) is int for v in state["files"].values()):
        if str(state_path) not in _noted:
            _noted.add(str(state_path))
            print(f"note: {where}: written before checkpoints carried checksums (format 2); "
                  f"its files cannot be verified (the next save adds them)", file=sys.stderr)
        state["files"] = {k: {"bytes": v} for k, v in state["files"].items()}
    else:
        raise CheckpointError(f"{state_path}: unsupported checkpoint format {fmt!r} "
                              f"(expected {FORMAT})")
    _check_keys(state, state_path)
    listed = state["files"]
    wanted = listed if files is None else [n for n in files if n in listed]
    problems = []
    for name in wanted:
        problem = _file_problem(where / name, listed[name])
        if problem:
            problems.append(f"{name} {problem}")
    if problems:
        raise CheckpointError(f"{where}: damaged checkpoint: " + "; ".join(problems))
    state["path"] = str(where)
    return state


_KEYS = {"step": int, "config": dict, "rng": dict, "optimizers": list, "extra": dict,
         "files": dict}


def _check_keys(state: dict[str, Any], state_path: Path) -> None:
    for key, kind in _KEYS.items():
        if key not in state:
            raise CheckpointError(f"{state_path}: not a checkpoint's state: '{key}' is missing")
        if type(state[key]) is not kind:
            raise CheckpointError(f"{state_path}: not a checkpoint's state: '{key}' must be "
                                  f"{'an integer' if kind is int else f'a JSON {kind.__name__}'}")
    if MODEL_FILE not in state["files"]:
        raise CheckpointError(f"{state_path}: not a checkpoint's state: it lists no "
                              f"{MODEL_FILE}")
    rng = state["rng"]
    if not all(isinstance(rng.get(k), t) for k, t in (("torch", str), ("numpy", dict),
                                                        ("python", dict))):
        raise CheckpointError(f"{state_path}: not a checkpoint's state: 'rng' lacks the torch, "
                              f"numpy or python state")
    for entry in state["files"].values():
        if not isinstance(entry, dict) or type(entry.get("bytes")) is not int:
            raise CheckpointError(f"{state_path}: not a checkpoint's state: 'files' entries "
                                  f"must give each file's bytes")


def _file_problem(path: Path, entry: dict[str, Any]) -> str | None:
    """Why the file at `path` is not the one state.json lists (None when it is)."""
    if not path.is_file():
        return "is missing"
    size = path.stat().st_size
    if size != entry["bytes"]:
        return f"has {size} bytes, state.json says {entry['bytes']}"
    want = entry.get("sha256")
    if want is None:  # format 2
        return None
    got = file_sha256(path)
    if got != want:
        return (f"is damaged: its SHA-256 is {got[:16]}…, state.json recorded "
                f"{str(want)[:16]}… (changed since it was written)")
    return None


def read_weights(directory: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """The module tensors of the checkpoint at `directory` (name → tensor), verified first."""
    state = read_state(directory, files=[MODEL_FILE])
    try:
        with SafeTensorsFile(Path(state["path"]) / MODEL_FILE) as f:
            return {name: f.tensor(name).clone() for name in f.names()}
    except SafeTensorsError as e:
        raise CheckpointError(str(e)) from None


def checkpoint_around(path: str | os.PathLike[str]) -> Path | None:
    """The checkpoint directory `path` is or lies inside (following links), if any: a
    directory holding a checkpoint's state.json, or the `D.tmp`/`D.old` of a save."""
    here = Path(os.path.realpath(path))
    for p in (here, *here.parents):
        if (p / STATE_FILE).is_file():
            return p
        for suffix in (".tmp", ".old"):
            if p.name.endswith(suffix) and (p.with_name(p.name[:-len(suffix)]) / STATE_FILE
                                            ).is_file():
                return p
    return None


def _load_optimizers(where: Path, state: dict[str, Any],
                     opts: list[torch.optim.Optimizer]) -> None:
    saved = state.get("optimizers", [])
    if OPTIM_FILE not in state.get("files", {}) or not saved:
        raise CheckpointError(f"{where}: no optimizer state was saved ({OPTIM_FILE})")
    if len(saved) != len(opts):
        raise CheckpointError(f"{where}: the checkpoint has {len(saved)} optimizer(s), this "
                              f"run has {len(opts)}")
    with SafeTensorsFile(where / OPTIM_FILE) as f:
        tensors = {name: f.tensor(name).clone() for name in f.names()}
    for o, (opt, rest) in enumerate(zip(opts, saved)):
        entries: dict[int, dict[str, Any]] = {}
        for name, t in tensors.items():
            oi, pid, key = name.split(".", 2)
            if int(oi) == o:
                entries.setdefault(int(pid), {})[key] = t
        for pid, scalars in rest["scalars"].items():
            entries.setdefault(int(pid), {}).update(scalars)
        try:
            opt.load_state_dict({"state": entries,
                                 "param_groups": [_tuples(g) for g in rest["param_groups"]]})
        except (ValueError, KeyError, RuntimeError) as e:
            raise CheckpointError(f"{where / OPTIM_FILE} does not fit optimizer {o}: {e}") from None


def load_checkpoint(directory: str | os.PathLike[str], module: nn.Module,
                    optimizers: list[torch.optim.Optimizer] | torch.optim.Optimizer | None = None,
                    *, restore_rng_state: bool = True,
                    state: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load the checkpoint at `directory` into `module` (and the optimizers); return its state
    (step, config, extra, rng, path). Restores the global RNG states unless told not to.
    `state` is what `read_state(directory)` returned just before, to verify the files once.

    Every mismatch between the file and the module (missing and unexpected keys, shapes,
    dtypes) is listed in one CheckpointError; nothing is loaded in that case.
    """
    state = state if state is not None else read_state(directory)
    where = Path(state["path"])
    try:
        load_model(module, where / MODEL_FILE)
    except SafeTensorsError as e:
        raise CheckpointError(str(e)) from None
    if optimizers is not None:
        opts = list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]
        try:
            _load_optimizers(where, state, opts)
        except SafeTensorsError as e:
            raise CheckpointError(str(e)) from None
    if restore_rng_state:
        restore_rng(state["rng"])
    return state
