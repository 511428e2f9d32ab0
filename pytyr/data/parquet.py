"""Text datasets of parquet files (FineWeb / Hugging Face layout), streamed by row group.

`ParquetTextStream` reads only the footers up front (row-group layout, schema) and then one
row group at a time, one column: a file is never loaded whole. The row groups of all files
form one global sequence in file order; rank r of `world` reads groups r, r + world, ... —
disjoint and deterministic. `tyr data prepare` tokenizes it into shards (`prepare.py`);
`iter_tokens` gives the tokens of each group (a BOS before each document).
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

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


def iter_tokens(stream: ParquetTextStream, tokenizer: Tokenizer, *, bos: bool = True,
                dtype: Any = np.uint16) -> Iterator[tuple[int, np.ndarray]]:
    """(group, tokens) per row group: the group's documents tokenized, a BOS before each."""
    for g, texts in stream:
        yield g, encode_documents(tokenizer, texts, bos=bos, dtype=dtype)
