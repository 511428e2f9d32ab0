"""A checkpoint made of one file or of a directory of shards, as one set of named tensors.

A directory with `model.safetensors.index.json` is read through the index's `weight_map`
(tensor name → shard file): only the shards it names are opened, their headers must agree with
it exactly (every mapped tensor in its shard, no tensor in two shards, none unmapped), and a
shard path must stay inside the directory (not absolute, no `..`, no symlink leading out).
A directory without an index is the union of its `*.safetensors` files, duplicates refused.
Only headers are read here; data is mapped when a tensor is asked for.
"""
from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from pytyr.errors import SafeTensorsError

from .header import object_pairs
from .reader import (
    MAX_HEADER,
    DuplicateKey,
    Header,
    SafeTensorsFile,
    TensorInfo,
    no_duplicate_pairs,
    read_header,
)

INDEX_NAME = "model.safetensors.index.json"

# Rules of this layer, in addition to the reader's `RULES`.
SHARD_RULES = {
    "index-not-json": "the index is UTF-8 JSON of at most 100 MB",
    "index-malformed": "the index is {weight_map: {name: file}, metadata?: {total_size?: int}}",
    "shard-path-absolute": "a shard path is relative",
    "shard-path-parent": "a shard path has no '..' component",
    "shard-path-escapes": "a shard path resolves inside the directory (symlinks included)",
    "shard-missing": "a shard named by the index exists and is a file",
    "tensor-missing-from-shard": "every mapped tensor is in the shard it is mapped to",
    "tensor-in-two-shards": "no tensor is in two shards",
    "tensor-not-in-index": "every tensor of a referenced shard is in the weight_map",
    "no-shards": "a directory without an index holds at least one *.safetensors file",
    "pickle-not-read": "a PyTorch pickle (torch.save, pytorch_model.bin) is not read: it can "
                       "run code; convert it to safetensors",
}
# What `torch.save` writes: a zip archive (since torch 1.6), or a bare pickle before that.
_PICKLE_MAGIC = (b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
_CONVERT = ("convert it with transformers (AutoModel.from_pretrained(DIR).save_pretrained(OUT, "
            "safe_serialization=True)) or safetensors.torch.save_file")


class Checkpoint:
    """Validated headers of a file or a shard directory; tensors loaded on demand.

    `tensors` maps every name to its header entry, `files` to the shard holding it.
    """

    def __init__(self, root: Path, tensors: dict[str, TensorInfo], files: dict[str, Path],
                 metadata: dict[str, str], index: dict[str, Any] | None):
        self.root = root
        self.tensors = tensors
        self.files = files
        self.metadata = metadata
        self.index = index
        self._open: dict[Path, SafeTensorsFile] = {}

    def shards(self) -> list[Path]:
        """The files holding tensors, sorted."""
        return sorted(set(self.files.values()))

    @property
    def nbytes(self) -> int:
        """Total bytes of tensor data (the index's `total_size`)."""
        return sum(t.nbytes for t in self.tensors.values())

    def __len__(self) -> int:
        return len(self.tensors)

    def __contains__(self, name: object) -> bool:
        return name in self.tensors

    def file(self, path: Path) -> SafeTensorsFile:
        f = self._open.get(path)
        if f is None:
            f = self._open[path] = SafeTensorsFile(path)
        return f

    def tensor(self, name: str, *, device: Any = None, dtype: Any = None) -> Any:
        """The tensor `name` (torch), from the shard that holds it."""
        if name not in self.files:
            raise KeyError(f"{self.root}: no tensor named {name!r}")
        return self.file(self.files[name]).tensor(name, device=device, dtype=dtype)

    def load(self, names: list[str] | None = None, *, device: Any = None,
             dtype: Any = None) -> dict[str, Any]:
        """The named tensors (default: all), as torch tensors."""
        names = list(self.tensors) if names is None else names
        return {n: self.tensor(n, device=device, dtype=dtype) for n in names}

    def close(self) -> None:
        for f in self._open.values():
            f.close()
        self._open.clear()

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """A single `.safetensors` file, or a directory of shards (with or without an index)."""
    path = Path(path)
    if path.is_dir():
        index = path / INDEX_NAME
        return _from_index(path, index) if index.is_file() else _from_glob(path)
    _refuse_pickle(path)
    h = read_header(path)
    return Checkpoint(path, dict(h.tensors), {n: path for n in h.tensors}, h.metadata, None)


def _refuse_pickle(path: Path) -> None:
    """A `torch.save` file is refused by name, before its bytes are read as a header. (A
    safetensors header length can begin with the same bytes; its header then starts with '{'
    at byte 8, which neither a zip archive nor a pickle has there.)"""
    try:
        if not path.is_file():
            return  # read_header names the problem
        with open(path, "rb") as f:
            head = f.read(9)
    except OSError:
        return
    if head.startswith(_PICKLE_MAGIC) and head[8:9] != b"{":
        raise SafeTensorsError(path, "pickle-not-read", f"a PyTorch pickle (torch.save), not "
                               f"safetensors; tyr does not load pickles (they can run code): "
                               f"{_CONVERT}")


def _read_index(index: Path) -> tuple[dict[str, str], dict[str, Any]]:
    def bad(rule: str, what: str) -> SafeTensorsError:
        return SafeTensorsError(index, rule, what)

    try:
        if index.stat().st_size > MAX_HEADER:
            raise bad("index-not-json", f"the index is over {MAX_HEADER:,} bytes")
        text = index.read_bytes().decode("utf-8")
        obj = _fast_index(text)
        if obj is None:  # anything unusual: parsed again, every object checked for repeats
            obj = json.loads(text, object_pairs_hook=no_duplicate_pairs)
    except DuplicateKey as d:
        raise bad("duplicate-name", f"the key {d.key!r} appears twice in the index")
    except OSError as e:
        raise bad("unreadable", f"cannot read the index: {e.strerror or e}")
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError too
        raise bad("index-not-json", f"the index is not UTF-8 JSON: {str(e).splitlines()[0][:120]}")
    if not isinstance(obj, dict) or not isinstance(obj.get("weight_map"), dict):
        raise bad("index-malformed", "the index has no 'weight_map' object")
    wmap = obj["weight_map"]
    if not set(map(type, wmap.values())) <= {str}:
        name = next(n for n, file in wmap.items() if not isinstance(file, str))
        raise bad("index-malformed", f"weight_map[{name!r}] is not a file name")
    meta = obj.get("metadata", {})
    if not isinstance(meta, dict):
        raise bad("index-malformed", "'metadata' is not an object")
    size = meta.get("total_size", 0)
    if type(size) is not int or size < 0:
        raise bad("index-malformed", "metadata.total_size is not a non-negative integer")
    return wmap, meta


def _fast_index(text: str) -> dict[str, Any] | None:
    """The index parsed with no Python hook (objects as tuples of pairs), when it is the usual
    {weight_map: {name: file}, metadata: {key: scalar}} with no key twice; else None."""
    top = object_pairs(text)
    if top is None:
        return None
    obj = dict(top)
    if len(obj) != len(top):
        return None
    for key, value in obj.items():
        if type(value) is tuple:
            inner = dict(value)
            if len(inner) != len(value) or set(map(type, inner.values())) & {tuple, list}:
                return None
            obj[key] = inner
        elif type(value) is list:
            return None
    return obj


def shard_path(directory: Path, rel: str, source: Path) -> Path:
    """`rel` resolved inside `directory`, or an error naming why it may not be opened."""
    def bad(rule: str, what: str) -> SafeTensorsError:
        return SafeTensorsError(source, rule, f"shard path {rel!r} {what}")

    if not rel or "\0" in rel:
        raise bad("shard-path-absolute", "is empty or contains a NUL byte")
    if (PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).anchor or "\\" in rel):
        raise bad("shard-path-absolute", "is absolute (or uses a Windows separator)")
    if ".." in PurePosixPath(rel).parts:
        raise bad("shard-path-parent", "climbs out with '..'")
    full = directory / rel
    try:
        real, base = full.resolve(), directory.resolve()
    except (OSError, RuntimeError) as e:  # symlink loops
        raise bad("shard-path-escapes", f"cannot be resolved: {e}")
    if not real.is_relative_to(base):
        raise bad("shard-path-escapes", f"leads outside the directory (to {real})")
    if not real.is_file():
        raise bad("shard-missing", "does not name an existing file")
    return full


def _from_index(directory: Path, index: Path) -> Checkpoint:
    wmap, meta = _read_index(index)
    # Two spellings of one file ("a.safetensors", "./a.safetensors") are the same shard.
    canon: dict[str, Path] = {}
    by_real: dict[Path, Path] = {}
    for rel in sorted(set(wmap.values())):
        p = shard_path(directory, rel, index)
        canon[rel] = by_real.setdefault(p.resolve(), p)
    headers = {p: read_header(p) for p in sorted(set(canon.values()))}
    entries_of = {rel: headers[p].tensors for rel, p in canon.items()}  # str keys: fast
    problems: list[tuple[str, str]] = []
    tensors: dict[str, TensorInfo] = {}
    for name, rel in wmap.items():
        info = entries_of[rel].get(name)
        if info is None:
            problems.append(("tensor-missing-from-shard", f"tensor {name!r} is mapped to "
                             f"{canon[rel].name} but that shard lacks it"))
        else:
            tensors[name] = info
    # Each tensor found above is in the shard it is mapped to; if the shards hold no more
    # tensors than were found, they hold nothing else (no unmapped tensor, none in two).
    if sum(len(h.tensors) for h in headers.values()) != len(tensors):
        problems += _unmapped(headers, wmap, canon)
    _raise_gathered(index, problems)
    shard_of = {name: canon[rel] for name, rel in wmap.items()}
    first = headers[min(headers)].metadata if headers else {}
    return Checkpoint(directory, tensors, shard_of, first, {"metadata": meta, "weight_map": wmap})


def _unmapped(headers: dict[Path, Header], wmap: dict[str, str], canon: dict[str, Path]
              ) -> list[tuple[str, str]]:
    """The tensors of the shards that the weight_map does not map there."""
    problems = []
    for p, h in headers.items():
        for name in h.tensors:
            rel = wmap.get(name)
            if rel is None:
                problems.append(("tensor-not-in-index",
                                 f"tensor {name!r} of {p.name} is not in the weight_map"))
            elif canon[rel] is not p:
                problems.append(("tensor-in-two-shards",
                                 f"tensor {name!r} is in {p.name} and mapped to "
                                 f"{canon[rel].name}"))
    return problems


def _from_glob(directory: Path) -> Checkpoint:
    shards = sorted(directory.glob("*.safetensors"))
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix in _PICKLE_SUFFIXES)
    if not shards and pickles:
        raise SafeTensorsError(directory, "pickle-not-read",
                               f"the directory holds {', '.join(pickles)} and no *.safetensors "
                               f"file; tyr does not load pickles (they can run code): {_CONVERT}")
    if not shards:
        raise SafeTensorsError(directory, "no-shards",
                               f"the directory has no {INDEX_NAME} and no *.safetensors file")
    tensors: dict[str, TensorInfo] = {}
    files: dict[str, Path] = {}
    problems: list[tuple[str, str]] = []
    metadata: dict[str, str] | None = None
    for p in shards:
        shard_path(directory, p.name, directory)
        h = read_header(p)
        metadata = h.metadata if metadata is None else metadata
        for name, info in h.tensors.items():
            if name in files:
                problems.append(("tensor-in-two-shards",
                                 f"tensor {name!r} is in {files[name].name} and in {p.name}"))
                continue
            tensors[name], files[name] = info, p
    _raise_gathered(directory, problems)
    return Checkpoint(directory, tensors, files, metadata or {}, None)


def _raise_gathered(source: Path, problems: list[tuple[str, str]]) -> None:
    """One error for every disagreement found; the rule is that of the first."""
    if not problems:
        return
    if len(problems) == 1:
        raise SafeTensorsError(source, problems[0][0], problems[0][1])
    lines = [f"{text} (rule {rule})" for rule, text in problems]
    raise SafeTensorsError(source, problems[0][0],
                           f"{len(problems)} disagreements between the shards", lines)
