"""RandomBatches: nanoGPT's get_batch, a pure function of (seed, k), split across ranks."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pytyr.data.batches import RandomBatches
from pytyr.errors import ConfigError, DataError

TOKENS = np.arange(1000, dtype=np.uint16)


def test_shapes_dtype_and_shift():
    x, y = RandomBatches(TOKENS, 4, 16, seed=0).batch_at(0)
    assert x.shape == y.shape == (4, 16) and x.dtype == y.dtype == torch.int64
    assert torch.equal(y[:, :-1], x[:, 1:])
    # arange tokens: every window is consecutive and the target is the next token
    assert torch.equal(y, x + 1)
    assert int(x.max()) < 999


def test_windows_cover_the_last_token():
    small = np.arange(10, dtype=np.uint16)
    seen = {int(RandomBatches(small, 1, 4, seed=s).batch_at(0)[1][0, -1]) for s in range(200)}
    assert seen == set(range(4, 10))  # offsets 0..5 all occur, target never past the end


def test_same_seed_same_batches_other_seed_other_batches():
    a, b, c = (RandomBatches(TOKENS, 8, 8, seed=s) for s in (1, 1, 2))
    for k in range(3):
        xa, xb, xc = a.batch_at(k)[0], b.batch_at(k)[0], c.batch_at(k)[0]
        assert torch.equal(xa, xb) and not torch.equal(xa, xc)
        assert not torch.equal(xa, a.batch_at(k + 1)[0])


def test_ranks_are_disjoint_slices_of_one_global_stream():
    world = 3
    ranks = [RandomBatches(TOKENS, 2, 8, seed=7, rank=r, world=world) for r in range(world)]
    whole = RandomBatches(TOKENS, 2 * world, 8, seed=7)
    for k in range(4):
        parts = [r.batch_at(k)[0] for r in ranks]
        assert torch.equal(torch.cat(parts), whole.batch_at(k)[0])
        starts = [p[:, 0] for p in parts]
        assert not torch.equal(starts[0], starts[1]) and not torch.equal(starts[1], starts[2])


def test_bad_arguments():
    with pytest.raises(DataError, match="too few"):
        RandomBatches(np.arange(8), 2, 8, seed=0)
    with pytest.raises(ConfigError, match="rank must be in 0..1"):
        RandomBatches(TOKENS, 2, 8, seed=0, rank=2, world=2)
    with pytest.raises(ConfigError, match="batch must be a positive integer"):
        RandomBatches(TOKENS, 0, 8, seed=0)
