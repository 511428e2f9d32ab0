"""The sequential batch iterator: shapes, shards, BOS packing, ranks, epochs, bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.data.iterators import SequentialBatchIterator, bos_aligned_starts
from pytyr.data.shards import HEADER_INTS, MAGIC, write_shard
from pytyr.errors import ConfigError, DataError

TOKENS = np.arange(1000, dtype=np.uint16)


def _xs(it) -> list[torch.Tensor]:
    return [b[0] for b in it]


def test_sequential_shapes_shift_and_order():
    it = SequentialBatchIterator(TOKENS, 4, 8)
    batches = list(it)
    assert len(batches) == len(it) == (999 // 8) // 4
    for x, y in batches:
        assert x.shape == y.shape == (4, 8) and x.dtype == y.dtype == torch.int64
        assert torch.equal(y, x + 1)
    flat = torch.cat([x.reshape(-1) for x, _ in batches])
    assert torch.equal(flat, torch.arange(len(flat)))  # one sequential pass, nothing skipped
    assert it.dropped_rows == 999 // 8 - len(batches) * 4


@pytest.mark.parametrize("fmt", ["nanogpt", "fineweb"])
def test_packed_rows_run_across_shard_files(tmp_path, fmt):
    a = write_shard(tmp_path / "a.bin", np.arange(0, 100), fmt)
    b = write_shard(tmp_path / "b.bin", np.arange(1000, 1050), fmt)
    it = SequentialBatchIterator([a, b], 2, 10, fmt=fmt)
    xs = _xs(it)
    # one stream of 150 tokens: 7 steps of 20 (+1 target); row 10 starts in a, ends in b
    stream = np.concatenate([np.arange(0, 100), np.arange(1000, 1050)])
    assert len(xs) == 7 and it.dropped_rows == 0
    assert torch.cat([x.reshape(-1) for x in xs]).tolist() == stream[:140].tolist()
    assert xs[4][1].tolist() == list(range(90, 100))
    assert xs[5][0].tolist() == list(range(1000, 1010))


def test_loop_wraps_the_stream_so_every_epoch_reads_every_token():
    it = SequentialBatchIterator(TOKENS[:100], 2, 8, loop=True)
    assert len(it) == 99 // 16
    xs = [x for (x, _), _ in zip(it, range(13))]  # looping: the pass does not end
    for k, x in enumerate(xs):  # step k reads tokens 16k.. of the stream, modulo its length
        assert x.reshape(-1).tolist() == [(16 * k + i) % 100 for i in range(16)]
    assert len(xs) == 13 > 2 * len(it)  # past two passes: the stream wrapped twice
    assert xs[6][0].tolist() == [96, 97, 98, 99, 0, 1, 2, 3]  # the epoch boundary: a wrap
    y = it.batch_at(6)[1]
    assert y[0].tolist() == [97, 98, 99, 0, 1, 2, 3, 4]


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 120), min_size=1, max_size=4),
       batch=st.integers(1, 4), seq=st.integers(1, 16), world=st.integers(1, 3),
       data=st.data())
def test_packed_epoch_reads_every_token(sizes, batch, seq, world, data):
    """Under the default packing, the ranks' x of any ceil(tokens / step) consecutive steps
    hold every token of the stream, and each batch is the stream's window at its offset."""
    total, step = sum(sizes), batch * world * seq
    shards = [np.arange(sum(sizes[:i]), sum(sizes[:i + 1]), dtype=np.uint16)
              for i in range(len(sizes))]
    if total < step + 1:
        with pytest.raises(DataError, match=f"{total} tokens are too few for one step of "
                           f"{batch * world} rows of {seq} tokens .* reads {step + 1} tokens"):
            SequentialBatchIterator(shards, batch, seq, world=world, loop=True)
        return
    its = [SequentialBatchIterator(shards, batch, seq, rank=r, world=world, loop=True)
           for r in range(world)]
    first = data.draw(st.integers(0, 50), label="first step")
    seen = np.zeros(total, dtype=bool)
    for k in range(first, first + -(-total // step)):
        for r, it in enumerate(its):
            x, y = it.batch_at(k)
            at = ((k * world + r) * batch * seq + np.arange(batch * seq + 1)) % total
            assert x.reshape(-1).tolist() == at[:-1].tolist()
            assert y.reshape(-1).tolist() == at[1:].tolist()
            seen[x.reshape(-1).numpy()] = True
    assert seen.all()


def test_rank_sharding_disjoint_deterministic_and_complete():
    single = torch.cat([x.reshape(-1) for x in _xs(SequentialBatchIterator(TOKENS, 6, 8))])
    world = 3
    per_rank = [_xs(SequentialBatchIterator(TOKENS, 2, 8, rank=r, world=world))
                for r in range(world)]
    again = _xs(SequentialBatchIterator(TOKENS, 2, 8, rank=1, world=world))
    assert all(torch.equal(a, b) for a, b in zip(again, per_rank[1]))
    sets = [set(torch.cat([x.reshape(-1) for x in xs]).tolist()) for xs in per_rank]
    assert all(not (sets[i] & sets[j]) for i in range(world) for j in range(i + 1, world))
    # together the ranks read exactly what one process with batch * world reads
    assert set().union(*sets) == set(single.tolist())


def test_bos_aligned_packing():
    bos = 0
    docs = [[bos, 1, 2, 3], [bos, 4, 5], [bos, 6, 7, 8, 9, 10, 11], [bos, 12], [bos, 13, 14]]
    tokens = np.array([9, 9] + [t for d in docs for t in d], dtype=np.uint16)  # junk first
    starts = bos_aligned_starts(tokens, 4, bos)
    assert all(tokens[s] == bos for s in starts)
    rows = [tokens[s:s + 5].tolist() for s in starts]
    # a document cropped at a row's end (6, 7, ...) is not continued: the next row starts at
    # the first document no x has begun
    assert rows == [[0, 1, 2, 3, 0], [0, 4, 5, 0, 6], [0, 12, 0, 13, 14]]
    it = SequentialBatchIterator(tokens, 2, 4, bos_id=bos)
    x, y = next(iter(it))
    assert x[:, 0].tolist() == [bos, bos] and y.tolist() == [[1, 2, 3, 0], [4, 5, 0, 6]]


def test_bad_inputs_name_the_file(tmp_path):
    bad = tmp_path / "bad.bin"
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:3] = (MAGIC, 2, 4)
    bad.write_bytes(header.tobytes() + b"\0" * 8)
    with pytest.raises(DataError, match=f"{bad}: unsupported shard version 2"):
        SequentialBatchIterator(bad, 1, 2)
    good = write_shard(tmp_path / "g.bin", [1, 2, 50, 3], "fineweb")
    with pytest.raises(DataError, match=f"{good}: token 50 at position 2 is out of range"):
        SequentialBatchIterator(good, 1, 2, vocab_size=50)
    with pytest.raises(DataError) as e:
        SequentialBatchIterator(good, 2, 2)
    assert str(e.value) == (f"{good}: 4 tokens are too few for one step of 2 rows of 2 tokens "
                            f"(batch 2 x world 1), which reads 5 tokens (rows packed end to "
                            f"end, plus the last row's last target)")
    SequentialBatchIterator(good, 1, 2)  # one row of 2 + 1 fits (the bound is exact)
    with pytest.raises(DataError, match="empty dataset"):
        SequentialBatchIterator([], 1, 2)
    with pytest.raises(ConfigError, match="rank must be in 0..1"):
        SequentialBatchIterator(TOKENS, 1, 2, rank=2, world=2)


def test_too_few_bos_aligned_rows_are_counted_not_tokens():
    """The check of the issue: 40 tokens > 2 rows of 5, but the documents start one row."""
    doc = [0] + list(range(1, 20))  # a BOS and 19 tokens: one row of seq 4 per document
    tokens = np.array(doc * 2, dtype=np.uint16)
    with pytest.raises(DataError) as e:
        SequentialBatchIterator(tokens, 3, 4, bos_id=0)
    assert str(e.value) == ("<array 0>: too few BOS-aligned rows for one step of 3 rows of 5 "
                            "tokens (batch 3 x world 1): the 40 tokens hold 2 BOS (document "
                            "starts), of which 2 start a row (a row starts at a BOS at least 4 "
                            "tokens after the previous row's and needs 5 tokens before its "
                            "shard's end)")
    assert len(SequentialBatchIterator(tokens, 2, 4, bos_id=0)) == 1
    # the rows of all shards are one list: two shards of 2 rows hold a step of 3
    assert len(SequentialBatchIterator([tokens, tokens], 3, 4, bos_id=0)) == 1


@settings(max_examples=40, deadline=None)
@given(docs=st.lists(st.integers(1, 12), min_size=2, max_size=30), shards=st.integers(1, 3),
       batch=st.integers(1, 3), seq=st.integers(1, 6), world=st.integers(1, 3),
       first=st.integers(0, 40))
def test_bos_aligned_rows_are_one_stream_for_every_world_size(docs, shards, batch, seq, world,
                                                              first):
    """BOS-aligned, W ranks of batch b read at every step, wraps included, the rows one process
    reads with batch W·b: the shards' rows in order, then again, none dropped."""
    tokens = np.array([t for i, n in enumerate(docs) for t in [0] + [1 + i % 7] * n],
                      dtype=np.uint16)
    parts = np.array_split(tokens, shards)
    rows = [p[s:s + seq + 1].tolist() for p in parts for s in bos_aligned_starts(p, seq, 0)]
    if len(rows) < batch * world:
        with pytest.raises(DataError, match="too few BOS-aligned rows"):
            SequentialBatchIterator(parts, batch, seq, world=world, bos_id=0, loop=True)
        return
    ranks = [SequentialBatchIterator(parts, batch, seq, rank=r, world=world, bos_id=0,
                                     loop=True) for r in range(world)]
    one = SequentialBatchIterator(parts, batch * world, seq, bos_id=0, loop=True)
    for k in range(first, first + 3):
        got = torch.cat([torch.cat(it.batch_at(k)[:1] + (it.batch_at(k)[1][:, -1:],), 1)
                         for it in ranks])
        whole = torch.cat([one.batch_at(k)[0], one.batch_at(k)[1][:, -1:]], 1)
        assert torch.equal(got, whole)
        want = [rows[(k * batch * world + i) % len(rows)] for i in range(batch * world)]
        assert got.tolist() == want
