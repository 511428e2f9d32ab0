"""Random language-model batches from a token array (nanoGPT's `get_batch`).

Batch k of a stream is a pure function of (seed, k): its offsets come from a numpy generator
seeded with (seed, k), so a resumed run needs only the step to draw exactly the batches it
would have.

Ranks and micro-batches: batch k belongs to global batch `k // accum`, whose
`batch * world * accum` offsets are drawn once (seeded by it); micro-step `k % accum` of rank
r takes its slice (`TaskContext.first_row`). The ranks' streams are therefore disjoint slices
of one global stream, deterministic per rank, and together they equal a single process
drawing the same global batches, however they are split into processes and micro-batches.
"""
from __future__ import annotations

import numpy as np
import torch

from pytyr.data.shards import check_vocab
from pytyr.errors import ConfigError, DataError


class RandomBatches:
    """Batches (x, y), both int64 tensors of shape [batch, seq] (`batch_at(k)`), where
    x[b] = tokens[i_b : i_b + seq] and y[b] = tokens[i_b + 1 : i_b + seq + 1] for random
    offsets i_b in [0, len(tokens) - seq).

    `tokens` is any 1-D integer array (a shard memmap reads only the windows it needs). With
    `vocab_size`, every token is checked to be below it first (one pass): the ids are fed as
    `IT #[b, t] vocab`, and a token outside the vocabulary is a DataError naming its position.
    """

    def __init__(self, tokens: np.ndarray, batch: int, seq: int, *, seed: int,
                 rank: int = 0, world: int = 1, accum: int = 1, vocab_size: int | None = None):
        for name, value in (("batch", batch), ("seq", seq), ("world", world), ("accum", accum)):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ConfigError(f"RandomBatches: {name} must be a positive integer, "
                                  f"got {value!r}")
        if not (isinstance(rank, int) and 0 <= rank < world):
            raise ConfigError(f"RandomBatches: rank must be in 0..{world - 1}, got {rank!r}")
        if not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"RandomBatches: seed must be a non-negative integer, got {seed!r}")
        if getattr(tokens, "ndim", 1) != 1:
            raise DataError(f"RandomBatches: tokens must be 1-D, got shape {list(tokens.shape)}")
        if len(tokens) < seq + 1:
            raise DataError(f"RandomBatches: {len(tokens)} tokens are too few for windows of "
                            f"seq {seq} plus the shifted target (need at least {seq + 1})")
        if vocab_size is not None:
            check_vocab(tokens, vocab_size, "RandomBatches")
        self.tokens = tokens
        self.batch, self.seq, self.seed = batch, seq, seed
        self.rank, self.world, self.accum = rank, world, accum

    def global_batches(self) -> int:
        """How many global batches (over ranks and micro-batches) the windows fill without
        repeating one on average: more evaluation batches than that mean nothing more."""
        return max(1, (len(self.tokens) - self.seq) // (self.batch * self.world * self.accum))

    def offsets(self, step: int) -> np.ndarray:
        """This rank's window starts for batch `step`: int64 [batch]."""
        group, at = divmod(step, self.accum)
        rng = np.random.default_rng([self.seed, group])
        everyone = rng.integers(0, len(self.tokens) - self.seq,
                                size=self.batch * self.world * self.accum)
        start = (at * self.world + self.rank) * self.batch
        return everyone[start:start + self.batch]

    def batch_at(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch `step` of the stream: (x, y), int64 [batch, seq]."""
        starts = self.offsets(step)
        window = np.stack([np.asarray(self.tokens[i:i + self.seq + 1]) for i in starts])
        window = torch.from_numpy(window.astype(np.int64))
        return window[:, :-1].contiguous(), window[:, 1:].contiguous()
