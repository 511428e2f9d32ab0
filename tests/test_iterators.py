"""Sequential and dynamic batch iterators: shapes, shards, BOS packing, ranks, resume, graphs."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.data.graph_fit import check_against_graph
from pytyr.data.iterators import BatchIterator, SequentialBatchIterator, bos_aligned_starts
from pytyr.data.shards import HEADER_INTS, MAGIC, write_shard
from pytyr.errors import ConfigError, DataError
from pytyr.ir.graph import Graph, Input

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
    xs = [next(it)[0] for _ in range(13)]
    for k, x in enumerate(xs):  # step k reads tokens 16k.. of the stream, modulo its length
        assert x.reshape(-1).tolist() == [(16 * k + i) % 100 for i in range(16)]
    assert it.epoch == 13 * 16 // 100 == 2
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


@pytest.mark.parametrize("make", [
    lambda: SequentialBatchIterator(TOKENS, 3, 7, rank=1, world=2),
    lambda: SequentialBatchIterator(TOKENS % 50, 3, 7, loop=True, bos_id=0),
    lambda: BatchIterator(TOKENS, 5, 9, last="pad", rank=1, world=2),
    lambda: BatchIterator(TOKENS, 5, 9, last="short"),
])
def test_resume_continues_on_exactly_the_next_batch(make):
    ref = make()
    expected = [ref.batch_at(k) for k in range(min(len(ref), 8))]
    first = make()
    for _ in range(3):
        next(first)
    state = first.state_dict()
    import json
    resumed = make()
    resumed.load_state_dict(json.loads(json.dumps(state)))  # JSON-safe
    for k in range(3, len(expected)):
        got = next(resumed)
        assert all(torch.equal(g, e) for g, e in zip(got, expected[k]))


def test_resume_refuses_another_stream():
    state = SequentialBatchIterator(TOKENS, 4, 8).state_dict()
    with pytest.raises(ConfigError, match="batch: saved 4, here 2"):
        SequentialBatchIterator(TOKENS, 2, 8).load_state_dict(state)
    with pytest.raises(ConfigError, match="bad step"):
        SequentialBatchIterator(TOKENS, 4, 8).load_state_dict({**state, "step": -1})
    # a cursor of the other packing (or of a version before packing was recorded) is refused
    aligned = SequentialBatchIterator(TOKENS % 50, 4, 8, bos_id=0)
    with pytest.raises(ConfigError, match="packing: saved 'packed', here 'bos_aligned'"):
        aligned.load_state_dict({**state, "bos_id": 0, "shard_tokens": [1000]})
    old = {k: v for k, v in state.items() if k not in ("packing", "loop")}
    with pytest.raises(ConfigError, match="packing: saved None, here 'packed'"):
        SequentialBatchIterator(TOKENS, 4, 8).load_state_dict(old)


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
    x, y = next(it)
    assert x[:, 0].tolist() == [bos, bos] and y.tolist() == [[1, 2, 3, 0], [4, 5, 0, 6]]


def test_batch_iterator_last_batch_is_explicit():
    tokens = np.arange(100, dtype=np.uint16)  # 12 rows of seq 8 (+ a tail of 4 tokens)
    with pytest.raises(TypeError, match="last"):
        BatchIterator(tokens, 5, 8)  # type: ignore[call-arg]  (no silent default)
    with pytest.raises(ConfigError, match="last must be 'drop', 'short' or 'pad'"):
        BatchIterator(tokens, 5, 8, last="keep")  # type: ignore[arg-type]
    drop = BatchIterator(tokens, 5, 8, last="drop")
    assert [x.shape[0] for x, _ in drop] == [5, 5] and drop.dropped_rows == 2
    short = BatchIterator(tokens, 5, 8, last="short")
    assert [x.shape[0] for x, _ in short] == [5, 5, 2]
    assert short.shapes == [(5, 8), (2, 8)] and short.last_batch == 2
    pad = BatchIterator(tokens, 5, 8, last="pad")
    batches = list(pad)
    assert [len(b) for b in batches] == [3, 3, 3] and all(b[0].shape == (5, 8) for b in batches)
    x, y, mask = batches[-1]
    # rows 10, 11 full, row 12 the 4-token tail (3 targets), rows 13, 14 all padding
    assert mask.sum(1).tolist() == [8, 8, 3, 0, 0]
    assert x[2, :4].tolist() == [96, 97, 98, 99] and y[2, :3].tolist() == [97, 98, 99]
    assert torch.equal(y[mask], x[mask] + 1)
    pad.reset()
    assert len(list(pad)) == 3


def test_batch_iterator_ranks():
    tokens = np.arange(100, dtype=np.uint16)
    rows = [torch.cat([b[0] for b in BatchIterator(tokens, 2, 8, last="short", rank=r, world=3)])
            for r in range(3)]
    firsts = [set(r[:, 0].tolist()) for r in rows]
    assert firsts[0] == {0, 24, 48, 72} and set().union(*firsts) == set(range(0, 96, 8))
    drops = [len(BatchIterator(tokens, 2, 8, last="drop", rank=r, world=3)) for r in range(3)]
    pads = [len(BatchIterator(tokens, 3, 8, last="pad", rank=r, world=5)) for r in range(5)]
    assert len(set(drops)) == 1 and len(set(pads)) == 1  # ranks stay in step


def _graph(*inputs: Input) -> Graph:
    return Graph("gpt", list(inputs), [], [], [])


def test_check_against_graph():
    it = SequentialBatchIterator(TOKENS, 4, 8)
    check_against_graph(it, _graph(Input("x", (4, 8), "i64"), Input("y", (4, 8), "i64")))
    with pytest.raises(ConfigError) as e:
        check_against_graph(it, _graph(Input("idx", (12, 64), "i64")))
    assert "[4, 8]" in str(e.value) and "IT #[12, 64]" in str(e.value) and "'idx'" in str(e.value)
    with pytest.raises(ConfigError, match="no token input"):
        check_against_graph(it, _graph(Input("x", (4, 8))))
    with pytest.raises(ConfigError, match="no input 'tok'"):
        check_against_graph(it, _graph(Input("x", (4, 8), "i64")), input_name="tok")
    short = BatchIterator(np.arange(100, dtype=np.uint16), 5, 8, last="short")
    full = _graph(Input("x", (5, 8), "i64"))
    with pytest.raises(ConfigError, match=r"\[2, 8\]"):
        check_against_graph(short, full)
    check_against_graph(short, [full, _graph(Input("x", (2, 8), "i64"))])


def test_check_against_graph_compares_the_vocabulary_with_the_bound():
    it = SequentialBatchIterator(TOKENS, 4, 8, vocab_size=int(TOKENS.max()) + 1)
    vocab = it.vocab_size
    check_against_graph(it, _graph(Input("idx", (4, 8), "i64", vocab)))
    check_against_graph(it, _graph(Input("idx", (4, 8), "i64", vocab + 5)))  # room to spare
    with pytest.raises(ConfigError) as e:
        check_against_graph(it, _graph(Input("idx", (4, 8), "i64", vocab - 1)))
    assert str(e.value) == (f"SequentialBatchIterator yields ids below {vocab} (its vocab_size) "
                            f"but model 'gpt' input 'idx' : IT #[4, 8] {vocab - 1} takes ids "
                            f"below {vocab - 1}")
    # an iterator that was not told its vocabulary checks the shapes only
    check_against_graph(SequentialBatchIterator(TOKENS, 4, 8),
                        _graph(Input("idx", (4, 8), "i64", 1)))


def test_padding_must_be_an_id_of_the_vocabulary():
    tokens = np.arange(100, dtype=np.uint16) % 10
    BatchIterator(tokens, 5, 8, last="pad", pad_id=9, vocab_size=10)
    with pytest.raises(ConfigError, match=r"pad_id 10 is outside the vocabulary \(vocab_size 10\)"):
        BatchIterator(tokens, 5, 8, last="pad", pad_id=10, vocab_size=10)


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
        BatchIterator([], 1, 2, last="drop")
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
