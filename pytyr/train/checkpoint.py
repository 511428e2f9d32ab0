"""Training checkpoints: written atomically as a whole, read back through `pytyr.safetensors`.

A checkpoint is a directory:
  model.safetensors      the module's state_dict, keyed by parameter path (`blocks.0.attn.c_attn`)
  optimizer.safetensors  every optimizer's tensor state, keyed `<optimizer>.<param>.<name>`
  state.json             step, config, RNG states (torch, numpy, python), the optimizers'
                         groups and non-tensor state, `extra` (loss history, ...), and the
                         byte size of each file above

Both tensor files are written and read by the project's own safetensors writer and validating
reader: no pickle, and a damaged file is named with the rule it breaks. Loading lists every
mismatch between the file and the module at once (`pytyr.safetensors.load_model`).

Atomicity, with `D` the checkpoint directory: everything is written into `D.tmp/` and
fsynced; then `D` (if any) is renamed to `D.old`, `D.tmp` to `D`, and `D.old` removed. Each
rename is atomic, so at every instant `D` or `D.old` is a complete checkpoint; `resolve`
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
import torch
from torch import nn

from pytyr.errors import CheckpointError, SafeTensorsError
from pytyr.safetensors import SafeTensorsFile, load_model, write_file

FORMAT = 2
MODEL_FILE, OPTIM_FILE, STATE_FILE = "model.safetensors", "optimizer.safetensors", "state.json"
_rename = os.replace  # the two renames that publish a checkpoint (tests interrupt them)

__all__ = ["CheckpointError", "capture_rng", "restore_rng", "save_checkpoint", "resolve",
           "read_state", "load_checkpoint"]


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
    final.parent.mkdir(parents=True, exist_ok=True)
    if old.exists() and not final.exists():
        _rename(old, final)  # a crash between the two renames of an earlier save
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)  # a crash mid-write of an earlier save
    tmp.mkdir()
    write_file(_module_tensors(module), tmp / MODEL_FILE,
               {"format": "pt", "step": str(state["step"])})
    files = [MODEL_FILE]
    if opts:
        write_file(opt_tensors, tmp / OPTIM_FILE, {"optimizers": str(len(opts))})
        files.append(OPTIM_FILE)
    state["files"] = {name: (tmp / name).stat().st_size for name in files}
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1, allow_nan=False), encoding="utf-8")
    _fsync(tmp / STATE_FILE)
    _fsync(tmp)
    if final.exists():
        _rename(final, old)
        _fsync(final.parent)
    _rename(tmp, final)
    _fsync(final.parent)
    shutil.rmtree(old, ignore_errors=True)
    return final


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
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{state_path}: unreadable: {e}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        got = state.get("format") if isinstance(state, dict) else None
        raise CheckpointError(f"{state_path}: unsupported checkpoint format {got!r} "
                              f"(expected {FORMAT})")
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
                    *, restore_rng_state: bool = True) -> dict[str, Any]:
    """Load the checkpoint at `directory` into `module` (and the optimizers); return its state
    (step, config, extra, rng, path). Restores the global RNG states unless told not to.

    Every mismatch between the file and the module (missing and unexpected keys, shapes,
    dtypes) is listed in one CheckpointError; nothing is loaded in that case.
    """
    state = read_state(directory)
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
