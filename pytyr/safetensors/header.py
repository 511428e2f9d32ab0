"""The header of one safetensors file, validated as untrusted input.

Layout: an 8-byte little-endian length `N`, `N` bytes of UTF-8 JSON (an object, may be padded
with spaces), then the data buffer. Each header entry is `{"dtype", "shape", "data_offsets":
[begin, end)}` with offsets relative to the buffer; `__metadata__` maps strings to strings.

`read_header` reads the 8 bytes and the header, never the data, and checks every rule of
`RULES` before anything else touches the file: the entries must tile the buffer exactly (no
gaps, no overlaps, nothing after the last tensor), so a tensor can only ever read its own
bytes. The JSON is parsed by Python's C scanner with no Python hook, and a well-formed header
is checked in one pass (`_fast`); any header that pass does not accept is parsed and checked
again rule by rule (`_parse`), which finds and names the first rule broken. A validated header
is kept per file (`HEADER_CACHE` of them, keyed by the file's device, inode, size and
modification and change times), so a file opened again unchanged is not parsed again.
"""
from __future__ import annotations

import json
import math
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from pytyr.errors import SafeTensorsError

from .dtypes import DType

MAX_HEADER = 100_000_000
MAX_RANK = 64           # torch's own limit on dimensions
MAX_NUMEL = 2**63 - 1   # a dim or element count past int64 cannot be a real tensor
ENTRY_KEYS = ("dtype", "shape", "data_offsets")
HEADER_CACHE = 64       # validated headers kept, the least recently used dropped first

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


class TensorInfo(NamedTuple):
    """One validated header entry: `shape` in elements, `[begin, end)` in buffer bytes.
    (A named tuple: headers can hold 100k entries, and it is made at a fraction of the cost
    of a frozen dataclass.)"""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

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


def object_pairs(text: str) -> tuple[tuple[str, Any], ...] | None:
    """The fast path of the format's JSON (a header, a shard index): parsed with no Python
    hook, each object as a tuple of (key, value) pairs, so a repeated key shows as a dict
    smaller than its pairs; None when `text` is not a JSON object (the slow path, which
    names the problem, runs then)."""
    try:
        top = json.loads(text, object_pairs_hook=tuple)
    except (ValueError, RecursionError):
        return None
    return top if type(top) is tuple else None


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


_CACHE: OrderedDict[tuple[Any, ...], Header] = OrderedDict()


def _identity(path: Path, st: os.stat_result) -> tuple[Any, ...]:
    # a write changes the size or the change time (which no one can set back), a replaced
    # file has another inode
    return (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def clear_header_cache() -> None:
    """Forget every validated header (the next read of each file parses it again)."""
    _CACHE.clear()


def read_header(path: str | os.PathLike[str]) -> Header:
    """Read and validate the header of `path` (its first 8 + N bytes only); a file read
    before and unchanged since gives the header validated then (a copy)."""
    path = Path(path)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the open below
            raise SafeTensorsError(path, "not-a-file", "not a regular file (a directory, "
                                   "FIFO, socket or device)")
        cached = _CACHE.get(_identity(path, st))
        if cached is None:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())  # the file actually read is the one remembered
                cached = _read(f, st.st_size, path)
            key = _identity(path, st)
            _CACHE[key] = cached
            while len(_CACHE) > HEADER_CACHE:
                _CACHE.popitem(last=False)
        else:
            _CACHE.move_to_end(_identity(path, st))
    except OSError as e:
        raise SafeTensorsError(path, "unreadable", f"cannot read the file: {e.strerror or e}")
    return Header(cached.path, dict(cached.tensors), dict(cached.metadata), cached.data_start,
                  cached.file_size)


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
    fast = _fast(text)
    if fast is not None:
        tensors, metadata = fast
        return _located(tensors, metadata, 8 + len(raw), size, path)
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
    return _located(tensors, metadata, 8 + len(raw), size, path)


def _located(tensors: dict[str, TensorInfo], metadata: dict[str, str], data_start: int,
             size: int, path: Path) -> Header:
    """The header, once its entries tile the buffer and the buffer fills the file."""
    end = _check_tiling(tensors, path)
    if data_start + end < size:
        raise SafeTensorsError(path, "trailing-bytes",
                               f"{size - data_start - end:,} bytes follow the last tensor")
    if data_start + end > size:
        raise SafeTensorsError(path, "data-past-eof",
                               f"the tensors need {end:,} bytes of data but the file holds "
                               f"{size - data_start:,}")
    return Header(path, tensors, metadata, data_start, size)


_SPECS = {d.value: (d, d.bits) for d in DType}  # header name -> (dtype, bits per element)


def _fast(text: str) -> tuple[dict[str, TensorInfo], dict[str, str]] | None:
    """The entries and metadata of a well-formed header in one pass, or None for any header
    this pass does not accept (`_parse` then checks it rule by rule).

    The JSON is read with no Python hook: objects come back as tuples of (key, value) pairs
    (arrays stay lists), so a repeated key is seen by comparing a dict's size with its pairs'.
    Accepted: an object of unique names, each an object of exactly dtype (a known name),
    shape (a list of at most MAX_RANK ints in 0..MAX_NUMEL) and data_offsets (two ints,
    0 <= begin <= end, end - begin = numel x bits / 8), and __metadata__ an object of strings.
    """
    top = object_pairs(text)
    if top is None:
        return None
    tensors: dict[str, TensorInfo] = {}
    metadata: dict[str, str] = {}
    has_metadata = False
    specs, new = _SPECS, tuple.__new__
    for name, e in top:
        if type(e) is tuple and len(e) == 3 and e[0][0] == "dtype" and e[1][0] == "shape" \
                and e[2][0] == "data_offsets":  # the order writers use
            (_, dtype), (_, shape), (_, offs) = e
        elif name == "__metadata__" and type(e) is tuple and not has_metadata:
            metadata, has_metadata = dict(e), True
            if len(metadata) != len(e) or not all(type(v) is str for v in metadata.values()):
                return None
            continue
        elif type(e) is tuple and len(e) == 3:
            d = dict(e)
            dtype, shape, offs = d.get("dtype"), d.get("shape"), d.get("data_offsets")
            if len(d) != 3:
                return None
        else:
            return None
        spec = specs.get(dtype) if type(dtype) is str else None
        if (spec is None or name == "__metadata__" or type(shape) is not list
                or len(shape) > MAX_RANK or type(offs) is not list or len(offs) != 2):
            return None
        begin, end = offs
        if type(begin) is not int or type(end) is not int or not 0 <= begin <= end:
            return None
        for x in shape:
            if type(x) is not int or x < 0:
                return None
        numel = math.prod(shape)
        if numel > MAX_NUMEL or (numel == 0 and shape and max(shape) > MAX_NUMEL):
            return None
        bits = numel * spec[1]
        if bits % 8 or bits // 8 != end - begin:
            return None
        tensors[name] = new(TensorInfo, (name, spec[0], tuple(shape), begin, end))
    if len(tensors) + has_metadata != len(top):
        return None  # a name appears twice
    return tensors, metadata


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
