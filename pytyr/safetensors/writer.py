"""Writing tensors as safetensors: one file, or shards with a Hugging Face index, atomically.

Layout matches the reference writer byte for byte: the header is compact JSON (metadata
first, then tensors largest dtype first, by name within a dtype) padded with spaces to a
multiple of 8, so every tensor starts aligned to its item size and readers can map it without
copying. Every file is written to a temporary name in the same directory, fsynced and renamed;
a sharded save writes its shards first and `model.safetensors.index.json` last, so a reader
never sees an index naming shards that are not complete. Shards left over from an earlier save
with another shard count are removed only after the new index is in place.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, BinaryIO, Callable, Mapping

from pytyr.atomic import atomic_write, atomic_write_bytes
from pytyr.errors import SafeTensorsError

from .dtypes import DType
from .sharded import INDEX_NAME

DEFAULT_METADATA = {"format": "pt"}  # what Hugging Face loaders look for
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(size: int | str) -> int:
    """Bytes from `1000`, `"500MB"` (powers of 10, as Hugging Face) or `"2GiB"`."""
    if isinstance(size, int) and not isinstance(size, bool):
        n = size
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(size))
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"shard size {size!r} is not a size such as 500MB or 2GiB")
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n <= 0:
        raise ValueError(f"shard size {size!r} must be positive")
    return n


def _prepare(tensors: Mapping[str, Any], where: object) -> list[tuple[str, DType, Any]]:
    """(name, dtype, contiguous CPU tensor), in the format's layout order."""
    out = []
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise SafeTensorsError(where, "malformed-entry",
                                   f"{name!r} cannot name a tensor (a string other than "
                                   f"__metadata__ is needed)")
        dtype = DType.from_torch(t.dtype)
        if dtype is None:
            raise SafeTensorsError(where, "unknown-dtype",
                                   f"tensor {name!r} has dtype {t.dtype}, which the format "
                                   f"cannot store")
        out.append((name, dtype, t.detach().to("cpu").contiguous()))
    out.sort(key=lambda e: (-e[1].order, e[0]))
    return out


def header_bytes(entries: list[tuple[str, DType, Any]], metadata: Mapping[str, str] | None,
                 where: object = "<header>") -> bytes:
    """The 8-byte length and the padded JSON header for `entries` laid out in order."""
    head: dict[str, Any] = {}
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SafeTensorsError(where, "metadata-not-strings",
                                   "metadata must map strings to strings")
        head["__metadata__"] = dict(metadata)
    pos = 0
    for name, dtype, t in entries:
        n = t.numel() * t.element_size()
        head[name] = {"dtype": dtype.value, "shape": list(t.shape), "data_offsets": [pos, pos + n]}
        pos += n
    raw = json.dumps(head, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return len(raw).to_bytes(8, "little") + raw


def _write_data(f: BinaryIO, entries: list[tuple[str, DType, Any]]) -> None:
    import torch

    for _, _, t in entries:
        if t.numel():
            f.write(memoryview(t.reshape(-1).view(torch.uint8).numpy()))


def file_writer(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None,
                where: object) -> Callable[[BinaryIO], None]:
    """What writes `tensors` as one `.safetensors` file into an open binary file (streamed);
    the tensors and metadata are checked here, before anything is opened."""
    entries = _prepare(tensors, where)
    head = header_bytes(entries, metadata, where)

    def write(f: BinaryIO) -> None:
        f.write(head)
        _write_data(f, entries)

    return write


def write_file(tensors: Mapping[str, Any], path: str | os.PathLike[str],
               metadata: Mapping[str, str] | None = None) -> Path:
    """Write `tensors` (name → torch tensor) to one `.safetensors` file, atomically."""
    path = Path(path)
    return atomic_write(path, file_writer(tensors, metadata, path))


def _stale(directory: Path, stem: str, keep: set[str]) -> list[Path]:
    pattern = re.compile(re.escape(stem) + r"-[0-9]{5}-of-[0-9]{5}\.safetensors")
    return [p for p in directory.iterdir() if pattern.fullmatch(p.name) and p.name not in keep]


def save_sharded(tensors: Mapping[str, Any], directory: str | os.PathLike[str], *,
                 max_shard_size: int | str | None = "5GB",
                 metadata: Mapping[str, str] | None = None, stem: str = "model") -> list[Path]:
    """Save `tensors` into `directory`: `model.safetensors` when they fit in one shard, else
    `model-00001-of-0000N.safetensors` files and `model.safetensors.index.json` (written last).

    Tensors are grouped greedily in the given order (a state_dict keeps a layer together); a
    tensor larger than the limit gets a shard of its own. Returns the files written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    meta = DEFAULT_METADATA if metadata is None else metadata
    limit = None if max_shard_size is None else parse_size(max_shard_size)
    groups: list[dict[str, Any]] = [{}]
    size = 0
    for name, t in tensors.items():
        n = t.numel() * t.element_size()
        if limit is not None and groups[-1] and size + n > limit:
            groups.append({})
            size = 0
        groups[-1][name] = t
        size += n
    single = directory / f"{stem}.safetensors"
    index = directory / (INDEX_NAME if stem == "model" else f"{stem}.safetensors.index.json")
    if len(groups) == 1:
        written = [write_file(groups[0], single, meta)]
        # the old index (and its shards) would shadow the new file; it goes once that is safe
        index.unlink(missing_ok=True)
        for p in _stale(directory, stem, set()):
            p.unlink()
        return written
    n_shards = len(groups)
    written, weight_map, total = [], {}, 0
    for i, group in enumerate(groups, start=1):
        name = f"{stem}-{i:05d}-of-{n_shards:05d}.safetensors"
        written.append(write_file(group, directory / name, meta))
        for k, t in group.items():
            weight_map[k] = name
            total += t.numel() * t.element_size()
    doc = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    written.append(atomic_write_bytes(index, (json.dumps(doc, indent=2) + "\n").encode("utf-8")))
    for p in _stale(directory, stem, {p.name for p in written}):
        p.unlink()
    single.unlink(missing_ok=True)
    return written


def save_model(model: Any, directory: str | os.PathLike[str], *,
               max_shard_size: int | str | None = "5GB",
               metadata: Mapping[str, str] | None = None) -> list[Path]:
    """Save a module's `state_dict()` (or a name → tensor mapping), keyed by parameter path."""
    state = model.state_dict() if hasattr(model, "state_dict") else model
    return save_sharded(state, directory, max_shard_size=max_shard_size, metadata=metadata)
