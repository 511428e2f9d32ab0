"""Training checkpoints: written atomically as a whole, loaded with every problem listed.

A checkpoint is a directory:
  model.safetensors  the module's state_dict, keyed by parameter path (`blocks.0.attn.w_q`)
  optimizer.pt       the optimizer's state_dict (torch.save; loaded with weights_only=True)
  state.json         step, config, RNG states (torch, numpy, python), `extra` (data cursor,
                     loss history, ...), and the byte size of each file above

Atomicity, with `D` the checkpoint directory: everything is written into `D.tmp/` and
fsynced; then `D` (if any) is renamed to `D.old`, `D.tmp` to `D`, and `D.old` removed. Each
rename is atomic, so at every instant `D` or `D.old` is a complete checkpoint; `load_checkpoint`
falls back to `D.old` when `D` is missing, and the next save first puts `D.old` back.
"""
from __future__ import annotations

import base64
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
from torch import nn

from pytyr.errors import TyrError

FORMAT = 1
MODEL_FILE, OPTIM_FILE, STATE_FILE = "model.safetensors", "optimizer.pt", "state.json"


class CheckpointError(TyrError):
    """A checkpoint that is missing, incomplete or does not fit the module; lists problems."""


def _fsync(path: Path) -> None:
    """fsync a file or directory (directories: where the OS allows it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        if not path.is_dir():
            raise
    finally:
        os.close(fd)


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


def _tensors_for_file(module: nn.Module) -> dict[str, torch.Tensor]:
    """The state_dict on CPU, contiguous; tensors sharing memory (tied weights) are cloned,
    since safetensors refuses aliased storage."""
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


def save_checkpoint(directory: str | os.PathLike[str], *, module: nn.Module,
                    optimizer: torch.optim.Optimizer | None, step: int,
                    config: dict[str, Any] | None = None,
                    extra: dict[str, Any] | None = None) -> Path:
    """Save a complete checkpoint at `directory` atomically (see module doc); return it.

    `config` and `extra` must be JSON-serialisable (`extra` carries e.g. the data cursor
    `RandomBatches.state_dict()` and the loss history). The global RNG states are captured
    here, so call this at the point where training would continue.
    """
    final = Path(directory)
    tmp, old = final.with_name(final.name + ".tmp"), final.with_name(final.name + ".old")
    state = {"format": FORMAT, "step": int(step), "config": config or {},
             "rng": capture_rng(), "extra": extra or {}}
    try:
        json.dumps(state, allow_nan=False)  # fail before writing megabytes of tensors
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{final}: config/extra are not JSON-serialisable: {e}") from None
    final.parent.mkdir(parents=True, exist_ok=True)
    if old.exists() and not final.exists():
        os.replace(old, final)  # a crash between the two renames of an earlier save
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)  # a crash mid-write of an earlier save
    tmp.mkdir()
    _write_files(tmp, module, optimizer, state)
    if final.exists():
        os.replace(final, old)
        _fsync(final.parent)
    os.replace(tmp, final)
    _fsync(final.parent)
    shutil.rmtree(old, ignore_errors=True)
    return final


def _write_files(tmp: Path, module: nn.Module, optimizer: torch.optim.Optimizer | None,
                 state: dict[str, Any]) -> None:
    """Fill the temporary directory and fsync it; state.json records the others' sizes."""
    safetensors.torch.save_file(_tensors_for_file(module), str(tmp / MODEL_FILE),
                                metadata={"step": str(state["step"])})
    files = [MODEL_FILE]
    if optimizer is not None:
        torch.save(optimizer.state_dict(), tmp / OPTIM_FILE)
        files.append(OPTIM_FILE)
    state["files"] = {name: (tmp / name).stat().st_size for name in files}
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1, allow_nan=False), encoding="utf-8")
    for name in (*files, STATE_FILE):
        _fsync(tmp / name)
    _fsync(tmp)


def resolve(directory: str | os.PathLike[str]) -> Path:
    """The complete checkpoint for `directory`: itself, or `D.old` after an interrupted save."""
    final = Path(directory)
    old = final.with_name(final.name + ".old")
    if not (final / STATE_FILE).is_file() and (old / STATE_FILE).is_file():
        return old
    return final


def read_state(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """state.json of the checkpoint at `directory`, with its files checked to be complete."""
    where = resolve(directory)
    if not where.is_dir():
        raise CheckpointError(f"{directory}: no checkpoint (directory not found)")
    state_path = where / STATE_FILE
    if not state_path.is_file():
        raise CheckpointError(f"{where}: not a checkpoint: {STATE_FILE} is missing")
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{state_path}: unreadable: {e}") from None
    if state.get("format") != FORMAT:
        raise CheckpointError(f"{state_path}: unsupported checkpoint format "
                              f"{state.get('format')!r} (expected {FORMAT})")
    problems = []
    for name, size in state.get("files", {}).items():
        path = where / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif path.stat().st_size != size:
            problems.append(f"{name} has {path.stat().st_size} bytes, state.json says {size}")
    if problems:
        raise CheckpointError(f"{where}: incomplete checkpoint: " + "; ".join(problems))
    state["path"] = str(where)
    return state


def load_checkpoint(directory: str | os.PathLike[str], module: nn.Module,
                    optimizer: torch.optim.Optimizer | None = None, *,
                    restore_rng_state: bool = True) -> dict[str, Any]:
    """Load the checkpoint at `directory` into `module` (and `optimizer`); return its state
    (step, config, extra, rng, path). Restores the global RNG states unless told not to.

    Every mismatch between the file and the module (missing keys, unexpected keys, shapes,
    dtypes) is listed in one CheckpointError; nothing is loaded in that case.
    """
    state = read_state(directory)
    where = Path(state["path"])
    try:
        saved = safetensors.torch.load_file(str(where / MODEL_FILE))
    except Exception as e:  # safetensors raises its own error types for corrupt files
        raise CheckpointError(f"{where / MODEL_FILE}: unreadable: {e}") from None
    own = module.state_dict()
    problems = [f"missing from the checkpoint: {k} {list(own[k].shape)}"
                for k in own if k not in saved]
    problems += [f"not in the module: {k} {list(saved[k].shape)}" for k in saved if k not in own]
    for k in own.keys() & saved.keys():
        if own[k].shape != saved[k].shape:
            problems.append(f"shape of {k}: checkpoint {list(saved[k].shape)}, "
                            f"module {list(own[k].shape)}")
        elif own[k].dtype != saved[k].dtype:
            problems.append(f"dtype of {k}: checkpoint {saved[k].dtype}, module {own[k].dtype}")
    if problems:
        raise CheckpointError(f"{where / MODEL_FILE} does not fit the module "
                              f"({len(problems)} problem{'s' if len(problems) != 1 else ''}):\n"
                              + "\n".join(f"  - {p}" for p in sorted(problems)))
    module.load_state_dict(saved)
    if optimizer is not None:
        if OPTIM_FILE not in state.get("files", {}):
            raise CheckpointError(f"{where}: no optimizer state was saved ({OPTIM_FILE})")
        try:
            opt_state = torch.load(where / OPTIM_FILE, map_location="cpu", weights_only=True)
            optimizer.load_state_dict(opt_state)
        except (ValueError, KeyError, RuntimeError) as e:
            raise CheckpointError(f"{where / OPTIM_FILE} does not fit the optimizer: {e}") from None
    if restore_rng_state:
        restore_rng(state["rng"])
    return state
