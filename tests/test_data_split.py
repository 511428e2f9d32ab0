"""The validation split of `tyr data prepare`: a fraction or a count, never more than half of
the tokens; refused, naming the numbers and the fix, before any shard is written."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.cli import main
from pytyr.data.iterators import SequentialBatchIterator
from pytyr.data.prepare import prepare_parquet
from pytyr.data.shards import read_shard
from pytyr.data.split import DEFAULT_VAL_FRACTION, ValSplit
from pytyr.data.tokenizer import CharTokenizer, encode_documents
from pytyr.errors import ConfigError, DataError

TOK = CharTokenizer("abcdefgh ", bos="<|bos|>")


@settings(max_examples=300, deadline=None)
@given(total=st.integers(1, 10**9), fraction=st.none() | st.floats(0, 0.5),
       count=st.integers(0, 2 * 10**9), by_count=st.booleans())
def test_a_split_is_refused_or_leaves_training_the_larger_part(total, fraction, count,
                                                               by_count):
    split = ValSplit(count=count) if by_count else ValSplit(fraction=fraction)
    try:
        n = split.tokens(total)
    except ConfigError as err:
        assert by_count or total < 2  # a fraction up to 1/2 always fits a corpus of 2 tokens
        assert f"{total:,}" in str(err) or f"holds {total} token" in str(err)
        if total >= 2:
            assert f"--val-tokens {count} would hold out" in str(err)
            assert f"give --val-tokens {total // 2} or fewer" in str(err)
            split_ok = ValSplit(count=total // 2).tokens(total)  # the fix it names works
            assert split_ok == total // 2
        return
    assert 0 <= n <= total - n  # training keeps at least as many tokens as validation
    asked = count if by_count else (DEFAULT_VAL_FRACTION if fraction is None else fraction)
    assert (n > 0) == (asked > 0)  # a split asked for holds at least one token
    if by_count:
        assert n == count
    else:
        assert n == max(1, int(total * asked)) if asked > 0 else n == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"fraction": 0.6}, "--val 0.6 must be a fraction of the tokens from 0 to 0.5"),
    ({"fraction": -0.1}, "--val -0.1 must be a fraction"),
    ({"fraction": True}, "--val True must be a fraction"),
    ({"count": -1}, "--val-tokens -1 must be a non-negative integer"),
    ({"count": 2.5}, "--val-tokens 2.5 must be a non-negative integer"),
    ({"fraction": 0.1, "count": 10}, "as a fraction (--val) or as a number of tokens"),
])
def test_bad_split_arguments_are_refused_before_any_work(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ValSplit(**kwargs)


def _docs(lengths: list[int]) -> list[str]:
    return ["".join("abcdefgh "[(i + j) % 9] for j in range(n)) for i, n in enumerate(lengths)]


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(0, 60), min_size=1, max_size=12),
       val=st.one_of(st.tuples(st.just("fraction"), st.floats(0, 0.5)),
                     st.tuples(st.just("count"), st.integers(0, 400))),
       seq=st.integers(1, 8), batch=st.integers(1, 3))
def test_prepare_splits_or_refuses_and_writes_nothing(tmp_path_factory, lengths, val, seq,
                                                     batch):
    tmp = tmp_path_factory.mktemp("split")
    docs = _docs(lengths)
    pq.write_table(pa.table({"text": docs}), tmp / "d.parquet", row_group_size=4)
    tokens = encode_documents(TOK, docs)
    kind, value = val
    kw = {"val_fraction": value} if kind == "fraction" else {"val_tokens": value}
    try:
        meta = prepare_parquet(tmp / "d.parquet", TOK, tmp / "out", shard_tokens=50,
                               progress=False, **kw)
    except ConfigError as err:
        assert f"{len(tokens):,}" in str(err) or f"holds {len(tokens)} token" in str(err)
        assert sorted(p.name for p in (tmp / "out").iterdir()) == []  # no shard, no scratch
        return
    n_val, n_train = meta["val_tokens"], meta["train_tokens"]
    assert n_val + n_train == meta["tokens"] == len(tokens) and 0 <= n_val <= n_train
    files = {s: [tmp / "out" / e["file"] for e in meta[s]] for s in ("val", "train")}
    got = {s: np.concatenate([read_shard(f) for f in fs]) if fs else np.zeros(0, np.uint16)
           for s, fs in files.items()}
    assert got["val"].tolist() == tokens[:n_val].tolist()  # the first tokens are held out
    assert got["train"].tolist() == tokens[n_val:].tolist()
    assert not list((tmp / "out").glob(".*"))  # the scratch file is gone
    # trainable: whatever batch and rows the val split can evaluate, the train split can train
    try:
        SequentialBatchIterator(files["val"], batch, seq)
    except DataError:
        return
    SequentialBatchIterator(files["train"], batch, seq)


def test_cli_refuses_a_split_that_would_eat_the_data(tmp_path, capsys):
    docs = _docs([40] * 30)
    pq.write_table(pa.table({"text": docs}), tmp_path / "d.parquet")
    TOK.save(tmp_path / "tok.json")
    total = len(encode_documents(TOK, docs))  # 30 documents of 40 characters and a BOS
    base = ["data", "prepare", str(tmp_path / "d.parquet"), "--tokenizer",
            str(tmp_path / "tok.json"), "--out", str(tmp_path / "out"), "--no-progress"]
    assert main([*base, "--val-tokens", "1000"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"tyr data prepare: --val-tokens 1000 would hold out 1,000 of the "
                   f"corpus's {total:,} tokens ({1000 / total:.0%}) for validation and leave "
                   f"{total - 1000:,} for training; at most half can be held out: give "
                   f"--val-tokens {total // 2} or fewer, or a fraction such as --val 0.1")
    assert not (tmp_path / "out" / "meta.json").exists()
    assert main([*base, "--val", "0.7"]) == 1
    assert "--val 0.7 must be a fraction of the tokens from 0 to 0.5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--val", "0.1", "--val-tokens", "5"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(base) == 0  # the default: a tenth
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["val_tokens"] == total // 10 and meta["train_tokens"] == total - total // 10
    assert f"{total - total // 10} train, {total // 10} val" in capsys.readouterr().out
    # a refused split leaves the data set already in the directory as it was, complete
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    assert main([*base, "--val-tokens", str(total)]) == 1
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
