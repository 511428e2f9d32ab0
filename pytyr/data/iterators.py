"""Sequential language-model batches over token shards (`shard_lm`'s data).

A *row* is a window of `seq + 1` tokens: x = row[:-1], y = row[1:].

`SequentialBatchIterator` yields batches of exactly [batch, seq]. Step k takes
`batch * world` rows; rank r takes the r-th block of `batch` of them. By default the rows are
*packed*: the shards are one token stream (documents end to end, BOS-delimited, as `tyr data
prepare` writes them; nanoGPT's layout) and row i starts at token i * seq of it, crossing
shard boundaries, so a pass reads every token. Looping, the stream wraps: step k starts at
token k * batch * world * seq modulo its length, so each epoch reads every token and none is
dropped. With `bos_id` the rows are BOS-aligned instead (nanochat's layout, see
`bos_aligned_starts`): every row starts at a document's BOS, and the rows of all shards, in
order, are one list that wraps row by row: row i of the stream is row i modulo their count,
so an epoch reads every row and none is dropped. Either way batch k of rank r is rows
`(k * world + r) * batch …` of one stream, whatever the world size: W processes with batch b
read what one process reads with batch W·b (wraps included).

Batch k is a pure function of k (`batch_at`), so a resumed run needs only the step.
"""
from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from pytyr.data.shards import Format, check_vocab, read_shard
from pytyr.errors import ConfigError, DataError

Source = str | os.PathLike[str] | np.ndarray


def _positive(owner: str, **values: Any) -> None:
    for name, value in values.items():
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise ConfigError(f"{owner}: {name} must be a positive integer, got {value!r}")


def _check_rank(owner: str, rank: Any, world: int) -> None:
    if not (isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < world):
        raise ConfigError(f"{owner}: rank must be in 0..{world - 1}, got {rank!r}")


def load_shards(shards: Source | Sequence[Source], vocab_size: int | None = None,
                fmt: Format | None = None) -> tuple[list[np.ndarray], list[str]]:
    """Token arrays and their names (path, or `<array i>`) from a path, an array, or a list.

    Paths are read with `read_shard` (memmaps, header checked; `fmt` as there); with
    `vocab_size` every token of every shard is checked to be below it."""
    if isinstance(shards, (str, os.PathLike, np.ndarray)):
        shards = [shards]
    arrays, names = [], []
    for i, s in enumerate(shards):
        if isinstance(s, (str, os.PathLike)):
            arrays.append(read_shard(s, fmt=fmt, vocab_size=vocab_size))
            names.append(str(s))
            continue
        arr, name = np.asarray(s), f"<array {i}>"
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise DataError(f"{name}: tokens must be a 1-D integer array, got {arr.dtype} "
                            f"of shape {list(arr.shape)}")
        if arr.size == 0:
            raise DataError(f"{name}: empty token array")
        if int(arr.min()) < 0:
            raise DataError(f"{name}: negative token id {int(arr.min())}")
        if vocab_size is not None:
            check_vocab(arr, vocab_size, name)
        arrays.append(arr)
        names.append(name)
    if not arrays:
        raise DataError("empty dataset: no token shards were given")
    return arrays, names


def bos_aligned_starts(tokens: np.ndarray, seq: int, bos_id: int) -> np.ndarray:
    """Row starts (int64 [n_rows]) that pack documents into rows of `seq + 1` tokens, each
    row starting at a BOS token.

    A row starting at BOS position p holds tokens [p, p + seq]: the documents that begin
    there, the last one cropped. The next row starts at the first BOS at or after p + seq (the
    first token no x has held yet), so the cropped rest of a document is skipped: the model
    always reads a document from its beginning. Tokens before the first BOS are skipped too.
    """
    bos = np.flatnonzero(np.asarray(tokens) == bos_id)
    n, starts, j = len(tokens), [], 0
    while j < len(bos) and bos[j] + seq + 1 <= n:
        p = int(bos[j])
        starts.append(p)
        j = int(np.searchsorted(bos, p + seq, side="left"))
    return np.asarray(starts, dtype=np.int64)


class _Stream:
    """Shards as one token stream: windows that may cross shard boundaries and, past the
    end, wrap around to the start."""

    def __init__(self, arrays: list[np.ndarray]):
        self.arrays = arrays
        self.ends = np.cumsum([len(a) for a in arrays]).tolist()
        self.total = self.ends[-1]

    def read(self, start: int, n: int) -> np.ndarray:
        """Tokens start..start+n-1 of the stream (indices modulo its length): int64 [n]."""
        i = bisect.bisect_right(self.ends, start % self.total)
        at = start % self.total - (self.ends[i - 1] if i else 0)
        if at + n <= len(self.arrays[i]):  # the usual case: one contiguous read
            return np.asarray(self.arrays[i][at:at + n], dtype=np.int64)
        pieces = []
        while n > 0:
            a = self.arrays[i]
            pieces.append(a[at:at + n])
            n -= len(pieces[-1])
            i, at = (i + 1) % len(self.arrays), 0
        return np.concatenate(pieces).astype(np.int64)


class _Rows:
    """The BOS-aligned rows of a list of shards (`bos_aligned_starts`), shard by shard."""

    def __init__(self, arrays: list[np.ndarray], seq: int, bos_id: int):
        # Plain ndarray views of the memmaps: a memmap's slicing runs Python code of its own
        # (numpy's __getitem__ and __array_finalize__), as long as the copy of a batch.
        self.arrays = [np.asarray(a) for a in arrays]
        self.seq = seq
        self.starts = [bos_aligned_starts(a, seq, bos_id) for a in arrays]
        self.counts = [len(s) for s in self.starts]

    def rows(self, shard: int, which: np.ndarray) -> np.ndarray:
        """BOS-aligned rows `which` of a shard: int64 [len(which), seq + 1]."""
        idx = self.starts[shard][which, None] + np.arange(self.seq + 1)
        return np.asarray(self.arrays[shard][idx], dtype=np.int64)


class SequentialBatchIterator:
    """Fixed-shape sequential batches: (x, y), int64 tensors of exactly [batch, seq].

    `shards`: a shard path, a 1-D token array, or a list of them, read in order as one packed
    stream; `bos_id` makes rows BOS-aligned instead (document datasets, see the module doc).
    Iterating yields steps 0, 1, ... (`batch_at`): one pass, or with `loop=True` on past the
    end, wrapping; the iterator holds no position (batch k is a function of k). `vocab_size` checks every token up front;
    `fmt` is the shards' format (`read_shard`: headerless nanoGPT shards must say so).
    """

    def __init__(self, shards: Source | Sequence[Source], batch: int, seq: int, *,
                 rank: int = 0, world: int = 1, accum: int = 1, bos_id: int | None = None,
                 loop: bool = False, vocab_size: int | None = None, fmt: Format | None = None):
        owner = type(self).__name__
        _positive(owner, batch=batch, seq=seq, world=world, accum=accum)
        _check_rank(owner, rank, world)
        arrays, names = load_shards(shards, vocab_size, fmt)
        self.batch, self.seq, self.rank, self.world = batch, seq, rank, world
        self.bos_id, self.loop = bos_id, loop
        self.vocab_size = vocab_size  # every token was checked below it
        self.tokens = sum(len(a) for a in arrays)
        self.step_tokens = batch * world * seq  # the stream advances this much per step
        # One optimizer step reads `accum` steps: the data must hold that much, whatever the
        # split into processes and micro-batches.
        self._global = (batch * world * accum, f"batch {batch} x world {world}"
                        + (f" x {accum} micro-batches" if accum > 1 else ""))
        if bos_id is None:
            self._stream, self._rows = _Stream([np.asarray(a) for a in arrays]), None
            rows, why = self._global
            if self.tokens < rows * seq + 1:
                raise DataError(f"{', '.join(names)}: {self.tokens} tokens are too few for one "
                                f"step of {rows} rows of {seq} tokens ({why}), which reads "
                                f"{rows * seq + 1} tokens (rows packed end to end, plus the "
                                f"last row's last target)")
            self.steps_per_epoch = (self.tokens - 1) // self.step_tokens
            self.dropped_rows = 0 if loop else \
                (self.tokens - 1) // seq - self.steps_per_epoch * batch * world
        else:
            self._stream, self._rows = None, _Rows(arrays, seq, bos_id)
            self._init_bos_aligned(names)

    def _init_bos_aligned(self, names: list[str]) -> None:
        counts, per_step = self._rows.counts, self.batch * self.world
        self._first_row = np.cumsum([0] + counts)  # global index of each shard's first row
        self.rows_total = int(self._first_row[-1])
        self.dropped_rows = 0 if self.loop else self.rows_total % per_step
        rows, why = self._global
        if self.rows_total < rows:
            docs = sum(int(np.count_nonzero(a == self.bos_id)) for a in self._rows.arrays)
            raise DataError(f"{', '.join(names)}: too few BOS-aligned rows for one step of "
                            f"{rows} rows of {self.seq + 1} tokens ({why}): the "
                            f"{self.tokens} tokens hold {docs} BOS "
                            f"(document starts), of which {self.rows_total} start a row (a row "
                            f"starts at a BOS at least {self.seq} tokens after the previous "
                            f"row's and needs {self.seq + 1} tokens before its shard's end)")
        self.steps_per_epoch = self.rows_total // per_step

    def __len__(self) -> int:
        """Whole steps in one pass (looping, an epoch is tokens / step_tokens packed, rows /
        step rows BOS-aligned, and steps cross the wrap)."""
        return self.steps_per_epoch

    @property
    def optimizer_steps_per_epoch(self) -> float:
        """One pass in optimizer steps of `batch × world × accum` rows: the same however
        those rows are split into processes and micro-batches (a step here is one
        micro-batch of every process)."""
        rows = self._global[0]
        return self.tokens / (rows * self.seq) if self._rows is None else self.rows_total / rows

    def batch_at(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch `step`: (x, y), int64 [batch, seq]."""
        k = step if self.loop else step % self.steps_per_epoch
        if self._stream is not None:
            # one read of batch * seq + 1 tokens; x and y are views of one buffer (made by
            # numpy: a torch slice and view cost as much again as the read)
            begin = (k * self.world + self.rank) * self.batch * self.seq
            buf = self._stream.read(begin, self.batch * self.seq + 1)
            shape = (self.batch, self.seq)
            x = torch.from_numpy(buf[:-1].reshape(shape))
            y = torch.from_numpy(buf[1:].reshape(shape))
        else:
            first = (k * self.world + self.rank) * self.batch
            rows = torch.from_numpy(self._aligned_rows(first))
            x, y = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
        return x, y

    def _aligned_rows(self, first: int) -> np.ndarray:
        """Rows first … first + batch - 1 of the BOS-aligned stream (wrapping row by row over
        the shards' rows in order): int64 [batch, seq + 1]."""
        wanted = (first + np.arange(self.batch)) % self.rows_total
        shards = np.searchsorted(self._first_row, wanted, side="right") - 1
        out = np.empty((self.batch, self.seq + 1), dtype=np.int64)
        for s in np.unique(shards):
            mine = shards == s
            out[mine] = self._rows.rows(int(s), wanted[mine] - int(self._first_row[s]))
        return out

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        step = 0
        while self.loop or step < self.steps_per_epoch:
            yield self.batch_at(step)
            step += 1
