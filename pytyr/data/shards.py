"""Token shards on disk, read back as read-only numpy memory maps.

Two formats, both of uint16 token ids (so a vocabulary of at most 65,536):
  nanogpt  raw little-endian uint16 tokens, nothing else (`train.bin`, `val.bin`)
  fineweb  the modded-nanogpt format: a header of 256 little-endian int32, of which
           [0] = magic 20240520, [1] = version 1, [2] = token count; then the tokens

`read_shard` detects the format from the magic (or takes it as an argument) and checks the
file against itself: a shard is never silently truncated, padded or tiled. Every problem is a
`DataError` naming the file and what is wrong with it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np

from pytyr.atomic import atomic_write_bytes
from pytyr.digest import file_sha256
from pytyr.errors import DataError

Format = Literal["nanogpt", "fineweb"]
FORMATS: tuple[str, ...] = ("nanogpt", "fineweb")
MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
TOKEN_DTYPE = np.dtype("<u2")
MAX_VOCAB = 1 << 16


def _check_format(fmt: str, where: str) -> None:
    if fmt not in FORMATS:
        raise DataError(f"{where}: unknown shard format {fmt!r} (known: {', '.join(FORMATS)})")


def write_shard(path: str | os.PathLike[str], tokens: np.ndarray | list[int],
                fmt: Format = "nanogpt") -> Path:
    """Write `tokens` (1-D, integers in [0, 65535]) as a shard at `path`; return the path.

    Atomic: the bytes go to a temporary file in the same directory, which is fsynced and then
    renamed over `path`, so a reader sees either the old shard or the complete new one.
    """
    path = Path(path)
    _check_format(fmt, str(path))
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise DataError(f"{path}: tokens must be 1-D, got shape {list(arr.shape)}")
    if arr.size == 0:
        raise DataError(f"{path}: refusing to write an empty shard (0 tokens)")
    if not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"{path}: tokens must be integers, got dtype {arr.dtype}")
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= MAX_VOCAB:
        bad = int(np.flatnonzero((arr < 0) | (arr >= MAX_VOCAB))[0])
        raise DataError(f"{path}: token {int(arr[bad])} at position {bad} does not fit in "
                        f"uint16 (0..{MAX_VOCAB - 1})")
    if fmt == "fineweb" and arr.size >= 2**31:
        raise DataError(f"{path}: {arr.size} tokens exceed the int32 count of the fineweb header")
    payload = arr.astype(TOKEN_DTYPE, copy=False).tobytes()
    if fmt == "fineweb":
        header = np.zeros(HEADER_INTS, dtype="<i4")
        header[:3] = (MAGIC, VERSION, arr.size)
        payload = header.tobytes() + payload
    atomic_write_bytes(path, payload)
    return path


def detect_format(path: str | os.PathLike[str]) -> Format:
    """`fineweb` if the file starts with the fineweb magic. Anything else is an error: a
    header whose magic is damaged is named as such, and headerless data is read only when the
    caller says `fmt="nanogpt"` (a damaged header must never pass as tokens)."""
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    ints = np.frombuffer(head[:12].ljust(12, b"\0"), dtype="<i4")
    if len(head) >= 4 and int(ints[0]) == MAGIC:
        return "fineweb"
    size = os.stat(path).st_size
    count = int(ints[2])
    if (len(head) == HEADER_BYTES and int(ints[1]) == VERSION and count > 0
            and HEADER_BYTES + count * TOKEN_DTYPE.itemsize == size):
        raise DataError(f"{path}: damaged shard header: the magic number is {int(ints[0])}, "
                        f"expected {MAGIC} (the version and token count are those of a "
                        f"fineweb shard); re-create the shard")
    raise DataError(f"{path}: no fineweb header (magic {MAGIC}); if it is a headerless "
                    f"nanoGPT shard of raw uint16 tokens, give its format explicitly "
                    f"(format nanogpt)")


def verify_sha256(path: str | os.PathLike[str], expected: str, written_by: str) -> None:
    """A DataError when the file's bytes are not those `written_by` recorded."""
    got = file_sha256(path)
    if got != expected:
        raise DataError(f"{path}: checksum mismatch: the file's SHA-256 is {got[:16]}…, "
                        f"{written_by} recorded {expected[:16]}…; the data changed or was "
                        f"corrupted since it was written — re-create it")


def read_shard(path: str | os.PathLike[str], *, fmt: Format | None = None,
               vocab_size: int | None = None) -> np.memmap:
    """The tokens of the shard at `path` as a read-only uint16 memmap of shape [n_tokens].

    `fmt=None` detects the format from the magic number (`detect_format`: headerless data
    needs `fmt="nanogpt"`). With `vocab_size`, every token is
    checked to be < vocab_size (one pass over the file).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such shard file")
    size = path.stat().st_size
    fmt = fmt or detect_format(path)
    _check_format(fmt, str(path))
    if fmt == "fineweb":
        offset, count = HEADER_BYTES, _read_header(path, size)
    else:
        if size == 0:
            raise DataError(f"{path}: empty shard (0 bytes)")
        if size % TOKEN_DTYPE.itemsize:
            raise DataError(f"{path}: odd byte length {size}; a nanogpt shard is uint16 tokens, "
                            f"2 bytes each (truncated write?)")
        offset, count = 0, size // TOKEN_DTYPE.itemsize
    tokens = np.memmap(path, dtype=TOKEN_DTYPE, mode="r", offset=offset, shape=(count,))
    if vocab_size is not None:
        check_vocab(tokens, vocab_size, str(path))
    return tokens


def _read_header(path: Path, size: int) -> int:
    """Check a fineweb header against the file; return the token count."""
    if size < HEADER_BYTES:
        raise DataError(f"{path}: truncated header: {size} bytes, the fineweb header alone is "
                        f"{HEADER_BYTES} ({HEADER_INTS} int32)")
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    magic, version, count = (int(v) for v in header[:3])
    if magic != MAGIC:
        raise DataError(f"{path}: wrong magic number {magic} in the header (expected {MAGIC}); "
                        f"not a fineweb shard")
    if version != VERSION:
        raise DataError(f"{path}: unsupported shard version {version} (expected {VERSION})")
    payload = size - HEADER_BYTES
    if payload % TOKEN_DTYPE.itemsize:
        raise DataError(f"{path}: odd byte length {payload} after the header; tokens are "
                        f"uint16, 2 bytes each (truncated write?)")
    if count <= 0:
        raise DataError(f"{path}: empty shard (the header says {count} tokens)")
    if count * TOKEN_DTYPE.itemsize != payload:
        raise DataError(f"{path}: the header says {count} tokens but the file holds "
                        f"{payload // TOKEN_DTYPE.itemsize} after the header")
    return count


def check_vocab(tokens: np.ndarray, vocab_size: int, where: str) -> None:
    """Raise DataError naming the first token id >= vocab_size, if any."""
    if not (isinstance(vocab_size, int) and 0 < vocab_size <= MAX_VOCAB):
        raise DataError(f"{where}: vocab_size must be an integer in 1..{MAX_VOCAB}, "
                        f"got {vocab_size!r}")
    # Chunks keep the temporary boolean arrays small on multi-GB shards.
    chunk = 1 << 24
    for start in range(0, len(tokens), chunk):
        part = np.asarray(tokens[start:start + chunk])
        if int(part.max()) >= vocab_size:
            bad = int(np.flatnonzero(part >= vocab_size)[0])
            raise DataError(f"{where}: token {int(part[bad])} at position {start + bad} is "
                            f"out of range for vocab_size {vocab_size}")
