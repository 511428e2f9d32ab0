"""Reading one safetensors file: the header validated as untrusted input, the data memory-mapped.

Layout: an 8-byte little-endian length `N`, `N` bytes of UTF-8 JSON (an object, may be padded
with spaces), then the data buffer. Each header entry is `{"dtype", "shape", "data_offsets":
[begin, end)}` with offsets relative to the buffer; `__metadata__` maps strings to strings.

`read_header` reads the 8 bytes and the header, never the data, and checks every rule of
`RULES` before anything else touches the file: the entries must tile the buffer exactly (no
gaps, no overlaps, nothing after the last tensor), so a tensor can only ever read its own
bytes. `SafeTensorsFile` then maps the data and hands out tensors without copying where the
dtype and the alignment allow (`torch.frombuffer` on a copy-on-write `mmap`).
"""
from __future__ import annotations

import json
import mmap
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from pytyr.errors import SafeTensorsError

from .dtypes import DType

MAX_HEADER = 100_000_000
MAX_RANK = 64           # torch's own limit on dimensions
MAX_NUMEL = 2**63 - 1   # a dim or element count past int64 cannot be a real tensor
ENTRY_KEYS = ("dtype", "shape", "data_offsets")

# The closed set of rules a file can break; the rule name is part of every error message.
RULES = {
    "unreadable": "the file cannot be opened or read",
    "not-a-file": "the path is a directory, FIFO, socket or device, not a regular file",
    "file-too-small": "a file holds at least the 8-byte header length",
    "header-too-large": f"the header length is at most {MAX_HEADER:,} bytes",
    "header-past-eof": "the header ends before the end of the file",
    "header-not-utf8": "the header is UTF-8 text",
    "header-start": "the header starts with '{'",
    "header-not-json": "the header is one JSON object",
    "duplicate-name": "no key appears twice in a JSON object of the header",
    "metadata-not-strings": "__metadata__ maps strings to strings",
    "malformed-entry": "an entry is {dtype: str, shape: [int >= 0], data_offsets: [int, int]}",
    "unknown-dtype": "the dtype is one of the format's names",
    "shape-too-large": f"rank <= {MAX_RANK} and dims, element count < 2**63",
    "byte-size-mismatch": "end - begin = numel x dtype size, in whole bytes",
    "invalid-offsets": "the entries tile the buffer from 0: no reversed range, gap or overlap",
    "trailing-bytes": "the file ends where the last tensor ends",
    "data-past-eof": "the last tensor ends inside the file",
    "file-changed": "the file still has the size its header was checked against",
    "no-torch-dtype": "a tensor loaded into torch has a dtype torch can hold",
}


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One validated header entry: `shape` in elements, `[begin, end)` in buffer bytes."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True)
class Header:
    """A validated header: entries in header order, metadata, where the buffer starts."""

    path: Path
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str]
    data_start: int
    file_size: int


class DuplicateKey(Exception):
    """Raised by `no_duplicate_pairs` for a key seen twice in one JSON object."""

    def __init__(self, key: str):
        self.key = key


def no_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON object hook: Python's json keeps the last of two equal keys silently; we refuse."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKey(k)
            seen.add(k)
    return d


def _is_nat(x: Any) -> bool:
    return type(x) is int and x >= 0  # JSON true/false are Python bools, a subclass of int


def read_header(path: str | os.PathLike[str]) -> Header:
    """Read and validate the header of `path` (its first 8 + N bytes only)."""
    path = Path(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the open below
            raise SafeTensorsError(path, "not-a-file", "not a regular file (a directory, "
                                   "FIFO, socket or device)")
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return _read(f, size, path)
    except OSError as e:
        raise SafeTensorsError(path, "unreadable", f"cannot read the file: {e.strerror or e}")


def parse_bytes(data: bytes, source: str = "<bytes>") -> Header:
    """Validate a whole safetensors file given as bytes (for tests and in-memory use)."""
    import io

    return _read(io.BytesIO(data), len(data), Path(source))


def _read(f: BinaryIO, size: int, path: Path) -> Header:
    if size < 8:
        raise SafeTensorsError(path, "file-too-small",
                               f"the file has {size} bytes, fewer than the 8 of the header length")
    n = int.from_bytes(f.read(8), "little")
    if n > MAX_HEADER:
        raise SafeTensorsError(path, "header-too-large",
                               f"the header length {n:,} is over the limit of {MAX_HEADER:,} bytes")
    if 8 + n > size:
        raise SafeTensorsError(path, "header-past-eof",
                               f"the header length {n:,} runs past the end of the "
                               f"{size:,}-byte file")
    raw = f.read(n)
    if len(raw) != n:
        raise SafeTensorsError(path, "header-past-eof", "the file ended while reading the header")
    return _parse(raw, size, path)


def _parse(raw: bytes, size: int, path: Path) -> Header:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SafeTensorsError(path, "header-not-utf8",
                               f"the header is not UTF-8 (bad byte at offset {8 + e.start})")
    if not text.startswith("{"):
        raise SafeTensorsError(path, "header-start",
                               f"the header must start with '{{', not {text[:10]!r}")
    try:
        obj = json.loads(text, object_pairs_hook=no_duplicate_pairs)
    except DuplicateKey as d:
        raise SafeTensorsError(path, "duplicate-name",
                               f"the key {d.key!r} appears twice in the header (JSON readers "
                               f"would silently keep the last one)")
    except (ValueError, RecursionError) as e:  # JSONDecodeError, digit limits, deep nesting
        raise SafeTensorsError(path, "header-not-json",
                               f"the header is not a JSON object: {str(e).splitlines()[0][:120]}")
    metadata = _metadata(obj.pop("__metadata__", {}), path)
    tensors = {name: _entry(name, entry, path) for name, entry in obj.items()}
    data_start = 8 + len(raw)
    end = _check_tiling(tensors, path)
    if data_start + end < size:
        raise SafeTensorsError(path, "trailing-bytes",
                               f"{size - data_start - end:,} bytes follow the last tensor")
    if data_start + end > size:
        raise SafeTensorsError(path, "data-past-eof",
                               f"the tensors need {end:,} bytes of data but the file holds "
                               f"{size - data_start:,}")
    return Header(path, tensors, metadata, data_start, size)


def _metadata(meta: Any, path: Path) -> dict[str, str]:
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise SafeTensorsError(path, "metadata-not-strings",
                               "__metadata__ must be an object of string values")
    return meta


def _entry(name: str, e: Any, path: Path) -> TensorInfo:
    # The common, valid case runs first with few calls: headers can hold 100k entries.
    if type(e) is dict and len(e) == 3:
        dtype = DType.parse(e.get("dtype"))
        shape, offs = e.get("shape"), e.get("data_offsets")
        if (dtype is not None and type(shape) is list and type(offs) is list and len(offs) == 2
                and len(shape) <= MAX_RANK
                and all(type(d) is int and 0 <= d <= MAX_NUMEL for d in shape)
                and type(offs[0]) is int and type(offs[1]) is int and 0 <= offs[0] <= offs[1]):
            numel = 1
            for d in shape:
                numel *= d
            if numel <= MAX_NUMEL and dtype.nbytes(numel) == offs[1] - offs[0]:
                return TensorInfo(name, dtype, tuple(shape), offs[0], offs[1])
    _entry_error(name, e, path)
    raise AssertionError("unreachable")  # _entry_error always raises


def _entry_error(name: str, e: Any, path: Path) -> None:
    """Raise the error that names what is wrong with entry `e`."""
    def bad(rule: str, what: str) -> SafeTensorsError:
        return SafeTensorsError(path, rule, f"tensor {name!r}: {what}")

    if not isinstance(e, dict):
        raise bad("malformed-entry", f"the entry is a {type(e).__name__}, not an object")
    for key in ENTRY_KEYS:
        if key not in e:
            raise bad("malformed-entry", f"the entry has no {key!r}")
    extra = sorted(set(e) - set(ENTRY_KEYS))
    if extra:
        raise bad("malformed-entry", f"unknown key {extra[0]!r} in the entry")
    if not isinstance(e["dtype"], str):
        raise bad("malformed-entry", "'dtype' is not a string")
    dtype = DType.parse(e["dtype"])
    if dtype is None:
        raise bad("unknown-dtype", f"unknown dtype {e['dtype'][:40]!r}")
    shape = e["shape"]
    if not isinstance(shape, list) or not all(type(d) is int for d in shape):
        raise bad("malformed-entry", "'shape' is not a list of integers")
    if len(shape) > MAX_RANK:
        raise bad("shape-too-large", f"rank {len(shape)} is over {MAX_RANK}")
    if any(d < 0 for d in shape):
        raise bad("malformed-entry", f"negative dimension in shape {shape[:MAX_RANK]}")
    numel = 1
    for d in shape:
        numel *= d
        if d > MAX_NUMEL or numel > MAX_NUMEL:
            raise bad("shape-too-large", "the shape has 2**63 or more elements")
    offs = e["data_offsets"]
    if not (isinstance(offs, list) and len(offs) == 2 and all(_is_nat(o) for o in offs)):
        raise bad("malformed-entry", "'data_offsets' is not two non-negative integers")
    begin, end = offs
    if end < begin:
        raise bad("invalid-offsets", f"data_offsets [{begin}, {end}] end before they begin")
    want = dtype.nbytes(numel)
    if want is None:
        raise bad("byte-size-mismatch",
                  f"{numel} x {dtype.bits} bits of {dtype} is not a whole number of bytes")
    raise bad("byte-size-mismatch", f"shape {shape} of {dtype} needs {want:,} bytes, "
              f"data_offsets [{begin}, {end}] hold {end - begin:,}")


def _check_tiling(tensors: dict[str, TensorInfo], path: Path) -> int:
    """The entries sorted by offset must tile [0, end) exactly; returns that end."""
    pos, prev = 0, None
    for t in sorted(tensors.values(), key=lambda t: (t.begin, t.end)):
        if t.begin != pos:
            kind = "a gap" if t.begin > pos else "an overlap"
            after = f"after tensor {prev!r}" if prev is not None else "at the start"
            raise SafeTensorsError(path, "invalid-offsets",
                                   f"{kind} at byte {pos:,} of the data {after}: tensor {t.name!r} "
                                   f"begins at {t.begin:,}")
        pos, prev = t.end, t.name
    return pos


class SafeTensorsFile:
    """One validated file; tensors come from a memory map opened on first use.

    The map is copy-on-write (`ACCESS_COPY`): tensors are writable views that never write
    back to the file. A tensor keeps the map alive after `close()`.
    """

    def __init__(self, path: str | os.PathLike[str], header: Header | None = None):
        self.header = header or read_header(path)
        self.path = self.header.path
        self._map: mmap.mmap | None = None
        self._store: Any = None

    @property
    def metadata(self) -> dict[str, str]:
        return self.header.metadata

    def names(self) -> list[str]:
        return list(self.header.tensors)

    def info(self, name: str) -> TensorInfo:
        try:
            return self.header.tensors[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor named {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.header.tensors

    def __len__(self) -> int:
        return len(self.header.tensors)

    def __iter__(self) -> Iterator[str]:
        return iter(self.header.tensors)

    def __enter__(self) -> SafeTensorsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Forget the map; tensors already handed out keep it alive until they go."""
        self._map = self._store = None

    def _storage(self) -> Any:
        """One torch storage over the whole map (zero-copy); tensors are views into it."""
        if self._store is None:
            import torch

            self._store = torch.frombuffer(self._buffer(), dtype=torch.uint8).untyped_storage()
        return self._store

    def _buffer(self) -> mmap.mmap:
        if self._map is None:
            if sys.byteorder != "little":  # the format is little-endian; views would be wrong
                raise SafeTensorsError(self.path, "unreadable",
                                       "big-endian hosts are not supported")
            try:
                with open(self.path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size != self.header.file_size:
                        raise SafeTensorsError(
                            self.path, "file-changed",
                            f"the file has {size:,} bytes now, {self.header.file_size:,} when its "
                            f"header was checked")
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
            except OSError as e:
                raise SafeTensorsError(self.path, "unreadable", f"cannot map the file: {e}")
        return self._map

    def tensor(self, name: str, *, device: Any = None, dtype: Any = None) -> Any:
        """The tensor `name` as a torch tensor, zero-copy on CPU when aligned."""
        import torch

        info = self.info(name)
        tdt = info.dtype.torch
        if tdt is None:
            raise SafeTensorsError(self.path, "no-torch-dtype",
                                   f"tensor {name!r} is {info.dtype}, which torch cannot hold")
        numel = info.numel
        if numel == 0:
            t = torch.empty(info.shape, dtype=tdt)
        else:
            store, off = self._storage(), self.header.data_start + info.begin
            if off % info.dtype.itemsize == 0:
                # a view into the one storage over the map (measured faster to read through
                # than a torch.frombuffer export per tensor)
                t = torch.empty(0, dtype=tdt).set_(store, off // info.dtype.itemsize, info.shape)
            else:  # unaligned: one copy into fresh (aligned) memory
                raw = torch.empty(0, dtype=torch.uint8).set_(store, off, (info.nbytes,))
                t = raw.clone().view(tdt).view(info.shape)
        if device is not None or dtype is not None:
            t = t.to(device=device, dtype=dtype)
        return t

    def numpy(self, name: str) -> Any:
        """The tensor `name` as a numpy array over the map (bf16 / float8 as raw uints)."""
        import numpy as np

        info = self.info(name)
        npdt = info.dtype.numpy
        if npdt is None:
            raise SafeTensorsError(self.path, "no-torch-dtype",
                                   f"tensor {name!r} is {info.dtype}, which numpy cannot hold")
        if info.numel == 0:
            return np.empty(info.shape, dtype=npdt)
        return np.frombuffer(self._buffer(), dtype=npdt, count=info.numel,
                             offset=self.header.data_start + info.begin).reshape(info.shape)

    def load(self, names: list[str] | None = None, *, device: Any = None,
             dtype: Any = None) -> dict[str, Any]:
        """The named tensors (default: all, in header order) as a dict of torch tensors."""
        names = self.names() if names is None else names
        return {n: self.tensor(n, device=device, dtype=dtype) for n in names}


def load_file(path: str | os.PathLike[str], *, device: Any = None,
              dtype: Any = None) -> dict[str, Any]:
    """Every tensor of the file at `path`, validated first; zero-copy views on CPU."""
    return SafeTensorsFile(path).load(device=device, dtype=dtype)
