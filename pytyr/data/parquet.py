"""Text datasets of parquet files (FineWeb / Hugging Face layout), streamed by row group.

`ParquetTextStream` reads only the footers up front (row-group layout, schema) and then one
row group at a time, one column: a file is never loaded whole. The row groups of all files
form one global sequence in file order; rank r of `world` reads groups r, r + world, ... —
disjoint and deterministic. Its state is the index of the next group of the rank.

`ParquetTokenBatches` tokenizes that stream on the fly (BOS before each document) and cuts it
into [batch, seq] batches; its state (the group a batch starts in and the token offset in it)
resumes exactly on the next batch, by re-reading and re-tokenizing that one group.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from pytyr.data.tokenizer import Tokenizer, encode_documents
from pytyr.errors import ConfigError, DataError


def parquet_files(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Files from paths that are parquet files or directories (their `*.parquet`, sorted)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.parquet"))
            if not found:
                raise DataError(f"{p}: empty dataset: no *.parquet files in the directory")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        elif p.exists():
            raise DataError(f"{p}: not a parquet file or directory (a FIFO, socket or device)")
        else:
            raise DataError(f"{p}: no such parquet file or directory")
    if not out:
        raise DataError("empty dataset: no parquet files were given")
    return out


def _open(path: Path, column: str) -> pq.ParquetFile:
    """The file's reader (footer read, nothing else), its `column` checked to be text."""
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as err:
        raise DataError(f"{path}: not a readable parquet file ({err})") from None
    schema = pf.schema_arrow
    i = schema.get_field_index(column)
    if i < 0:
        raise DataError(f"{path}: no column '{column}' (the file has: "
                        f"{', '.join(schema.names) or 'no columns'})")
    typ = schema.field(i).type
    if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)
            or pa.types.is_string_view(typ)):
        raise DataError(f"{path}: column '{column}' holds {typ}, not text")
    return pf


class ParquetTextStream:
    """This rank's row groups of a parquet dataset, each as a list of documents (str).

    Iterating yields (group, texts): `group` the index of the row group in this rank's
    sequence, `texts` its non-null `column` values. Null rows are skipped (counted in
    `null_rows`); a dataset without rows is a DataError."""

    def __init__(self, paths: Any, column: str = "text", *, rank: int = 0, world: int = 1):
        if not (isinstance(world, int) and world >= 1 and isinstance(rank, int)
                and 0 <= rank < world):
            raise ConfigError(f"ParquetTextStream: need 0 <= rank < world, got rank {rank!r}, "
                              f"world {world!r}")
        self.files = parquet_files(paths)
        self.column, self.rank, self.world = column, rank, world
        layout, rows = [], 0
        for f in self.files:
            meta = _open(f, column).metadata
            layout.extend((f, g) for g in range(meta.num_row_groups))
            rows += meta.num_rows
        if rows == 0:
            raise DataError(f"{', '.join(map(str, self.files))}: empty dataset (0 rows)")
        self.total_rows = rows
        self.groups: list[tuple[Path, int]] = layout[rank::world]  # this rank's row groups
        self.next_group = 0
        self.null_rows = 0
        self._pf: tuple[Path, pq.ParquetFile] | None = None

    def __len__(self) -> int:
        return len(self.groups)

    def read_group(self, group: int) -> list[str]:
        """The documents of this rank's row group `group` (one group read, one column)."""
        path, g = self.groups[group]
        if self._pf is None or self._pf[0] != path:
            self._pf = (path, _open(path, self.column))  # one open reader, the current file
        try:
            col = self._pf[1].read_row_group(g, columns=[self.column]).column(0)
        except (pa.ArrowException, OSError) as err:
            raise DataError(f"{path}: row group {g} cannot be read ({err})") from None
        self.null_rows += col.null_count
        if col.null_count:
            col = col.drop_null()
        return col.to_pylist()

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        while self.next_group < len(self.groups):
            g = self.next_group
            texts = self.read_group(g)
            self.next_group += 1
            yield g, texts

    def state_dict(self) -> dict[str, Any]:
        return {"next_group": self.next_group, "rank": self.rank, "world": self.world,
                "groups": len(self.groups), "column": self.column}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        mine = self.state_dict()
        diff = [f"{k}: saved {state.get(k)!r}, here {v!r}" for k, v in mine.items()
                if k != "next_group" and state.get(k) != v]
        if diff:
            raise ConfigError("ParquetTextStream.load_state_dict: the saved stream differs "
                              "from this one (" + "; ".join(diff) + ")")
        self.next_group = int(state["next_group"])


def iter_tokens(stream: ParquetTextStream, tokenizer: Tokenizer, *, bos: bool = True,
                dtype: Any = np.uint16) -> Iterator[tuple[int, np.ndarray]]:
    """(group, tokens) per row group: the group's documents tokenized, a BOS before each."""
    for g, texts in stream:
        yield g, encode_documents(tokenizer, texts, bos=bos, dtype=dtype)


class ParquetTokenBatches:
    """[batch, seq] LM batches tokenized on the fly from a parquet text dataset.

    Step batches are back to back windows of `batch * seq + 1` tokens of this rank's token
    stream (the last token of one batch is the first of the next); one pass, then
    StopIteration. Yields (x, y) int64 [batch, seq]. The tokens after the last full batch are
    counted in `dropped_tokens` once the pass ends."""

    def __init__(self, paths: Any, tokenizer: Tokenizer, batch: int, seq: int, *,
                 column: str = "text", rank: int = 0, world: int = 1, bos: bool = True):
        for name, v in (("batch", batch), ("seq", seq)):
            if not (isinstance(v, int) and v >= 1):
                raise ConfigError(f"ParquetTokenBatches: {name} must be a positive integer, "
                                  f"got {v!r}")
        self.stream = ParquetTextStream(paths, column, rank=rank, world=world)
        self.tokenizer, self.batch, self.seq, self.bos = tokenizer, batch, seq, bos
        self.step = 0
        self.dropped_tokens = 0
        self._start = (0, 0)  # (group, offset) of the next batch's first token
        self._buf: list[tuple[int, np.ndarray]] = []  # groups' tokens from self._start on
        self._tokens = None

    def _fill(self, need: int) -> bool:
        have = sum(len(t) for _, t in self._buf)
        if self._tokens is None:
            self.stream.next_group = self._start[0]
            self._tokens = iter_tokens(self.stream, self.tokenizer, bos=self.bos,
                                       dtype=np.int64)
        for g, toks in self._tokens:
            if g == self._start[0] and not self._buf:
                toks = toks[self._start[1]:]
            self._buf.append((g, toks))
            have += len(toks)
            if have >= need:
                return True
        return have >= need

    def __iter__(self) -> ParquetTokenBatches:
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.batch * self.seq
        if not self._fill(n + 1):
            self.dropped_tokens = sum(len(t) for _, t in self._buf)
            raise StopIteration
        flat = np.concatenate([t for _, t in self._buf])
        window = torch.from_numpy(flat[:n + 1])
        # keep from token n on (shared with the next batch), with its group and offset
        used = n
        while used >= len(self._buf[0][1]):
            used -= len(self._buf.pop(0)[1])
        g, toks = self._buf[0]
        first_offset = self._start[1] if g == self._start[0] else 0
        self._start = (g, first_offset + used)
        self._buf[0] = (g, toks[used:])
        self.step += 1
        return window[:-1].view(self.batch, self.seq), window[1:].view(self.batch, self.seq)

    def state_dict(self) -> dict[str, Any]:
        """The next batch's start: this rank's row group and the token offset in it."""
        return {"step": self.step, "group": self._start[0], "offset": self._start[1],
                "batch": self.batch, "seq": self.seq, "bos": self.bos,
                "stream": self.stream.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        mine = self.state_dict()
        diff = [f"{k}: saved {state.get(k)!r}, here {mine[k]!r}" for k in ("batch", "seq", "bos")
                if state.get(k) != mine[k]]
        if diff:
            raise ConfigError("ParquetTokenBatches.load_state_dict: the saved stream differs "
                              "from this one (" + "; ".join(diff) + ")")
        self.stream.load_state_dict({**state["stream"], "next_group": state["group"]})
        self.step, self._start = int(state["step"]), (int(state["group"]), int(state["offset"]))
        self._buf, self._tokens = [], None
