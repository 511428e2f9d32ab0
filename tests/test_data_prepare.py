"""`tyr data prepare` and `tyr tokenizer train`: parquet → token shards, via the CLI parser."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytyr.data.commands import register
from pytyr.data.iterators import SequentialBatchIterator
from pytyr.data.prepare import prepare_parquet
from pytyr.data.shards import file_sha256, read_shard
from pytyr.data.tokenizer import CharTokenizer, encode_documents, load_tokenizer
from pytyr.errors import ConfigError, DataError
from test_parquet import ALPHABET, write_dataset  # noqa: E402  (tests/ is on sys.path)

TOK = CharTokenizer(sorted(ALPHABET), bos="<|bos|>")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tyr")
    register(p.add_subparsers(dest="command", required=True))
    return p


def _run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    return args.fn(args)


@pytest.mark.parametrize("fmt", ["fineweb", "nanogpt"])
def test_prepare_writes_val_then_train_shards(tmp_path, fmt):
    texts = write_dataset(tmp_path / "ds")
    meta = prepare_parquet(tmp_path / "ds", TOK, tmp_path / "out", shard_tokens=300,
                           val_tokens=150, fmt=fmt, progress=False)
    expected = encode_documents(TOK, texts)
    assert meta["tokens"] == len(expected) and meta["documents"] == len(texts)
    assert [s["tokens"] for s in meta["val"]] == [150]
    assert all(s["tokens"] == 300 for s in meta["train"][:-1])
    files = [tmp_path / "out" / s["file"] for s in meta["val"] + meta["train"]]
    got = np.concatenate([read_shard(f, fmt=fmt, vocab_size=TOK.vocab_size) for f in files])
    assert got.tolist() == expected.tolist()
    assert json.loads((tmp_path / "out" / "meta.json").read_text()) == meta
    for s in meta["val"] + meta["train"]:  # each shard's checksum, for the trainer to verify
        assert s["sha256"] == file_sha256(tmp_path / "out" / s["file"])
    assert load_tokenizer(tmp_path / "out" / "tokenizer.json").vocab_size == TOK.vocab_size
    # the shards feed the iterators directly, BOS-aligned
    it = SequentialBatchIterator(files[1:], 2, 16, bos_id=TOK.bos_id, fmt=fmt)
    x, _ = it.batch_at(0)
    assert (x[:, 0] == TOK.bos_id).all()


def test_prepare_ranks_split_the_row_groups(tmp_path):
    texts = write_dataset(tmp_path / "ds")
    metas = [prepare_parquet(tmp_path / "ds", TOK, tmp_path / f"out{r}", shard_tokens=10_000,
                             rank=r, world=2, progress=False) for r in range(2)]
    assert sum(m["documents"] for m in metas) == len(texts)
    assert metas[1]["train"][0]["file"] == "data_r1_train_000000.bin"
    # one meta.json a data set: a rank is refused another rank's --out, which stays as it was
    before = _contents(tmp_path / "out0")
    with pytest.raises(ConfigError, match=r"out0: holds the data set of rank 0 of 2; each rank "
                                          r"prepares into its own --out \(e.g. .*out0/rank1\)"):
        prepare_parquet(tmp_path / "ds", TOK, tmp_path / "out0", rank=1, world=2,
                        progress=False)
    assert _contents(tmp_path / "out0") == before
    again = prepare_parquet(tmp_path / "ds", TOK, tmp_path / "out0", shard_tokens=10_000,
                            rank=0, world=2, progress=False)
    assert again["train"] == metas[0]["train"]


def test_prepare_errors(tmp_path):
    write_dataset(tmp_path / "ds", files=1)
    with pytest.raises(ConfigError, match="unknown shard format 'npy'"):
        prepare_parquet(tmp_path / "ds", TOK, tmp_path / "o", fmt="npy")
    big = CharTokenizer([chr(0x4E00 + i) for i in range(70000)])
    with pytest.raises(DataError, match="does not fit the uint16 ids"):
        prepare_parquet(tmp_path / "ds", big, tmp_path / "o")
    pq.write_table(pa.table({"text": ["", ""]}), tmp_path / "blank.parquet")
    with pytest.raises(DataError, match="empty dataset: no tokens"):
        prepare_parquet(tmp_path / "blank.parquet", CharTokenizer("ab"), tmp_path / "o",
                        progress=False)


def test_cli_tokenizer_train_then_data_prepare(tmp_path, capsys):
    texts = write_dataset(tmp_path / "ds")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts))
    tok_path = tmp_path / "tokenizer.json"
    assert _run(["tokenizer", "train", str(corpus), str(tmp_path / "ds"), "--vocab-size", "300",
                 "--out", str(tok_path)]) == 0
    tok = load_tokenizer(tok_path)
    assert tok.bos_id == 0 and tok.decode(tok.encode(texts[0])) == texts[0]
    out = tmp_path / "shards"
    assert _run(["data", "prepare", str(tmp_path / "ds"), "--tokenizer", str(tok_path),
                 "--out", str(out), "--val-tokens", "100", "--no-progress"]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["vocab_size"] == tok.vocab_size and meta["bos_id"] == 0
    assert read_shard(out / meta["val"][0]["file"])[0] == 0
    assert _run(["tokenizer", "train", str(corpus), "--kind", "char", "--out",
                 str(tmp_path / "c.json")]) == 0
    assert load_tokenizer(tmp_path / "c.json").itos == sorted(set("\n".join(texts)))
    assert "wrote" in capsys.readouterr().out


def test_cli_bad_input(tmp_path):
    with pytest.raises(DataError, match="no such corpus file"):
        _run(["tokenizer", "train", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "t.json")])
    with pytest.raises(SystemExit):
        _parser().parse_args(["data", "prepare", "x.parquet"])  # --tokenizer is required


def test_data_bench_runs(tmp_path):
    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from bench import data

    r = data.run(quick=True, scale=0.02)
    for key in ("sequential", "parquet"):
        s = r[key]
        assert s["tyr_tokens_per_s"] > 0 and s["plain_tokens_per_s"] > 0 and s["ratio"] > 0
        assert s["same_output"]
    rows = data.rows(r)
    assert len(rows) == 2 and all(row.goal and row.verdict in ("ok", "MISSED") for row in rows)
    json.dumps(r)


def test_a_full_disk_at_any_write_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    # every write of a prepare: the temporary tokens (`_append`), each shard, the tokenizer's
    # copy and meta.json (`atomic_write`); the k-th fails with ENOSPC part-way, as a full disk
    import errno

    import pytyr.atomic as atomic
    import pytyr.data.prepare as prepare
    from pytyr.cli import main

    write_dataset(tmp_path / "ds", files=1)
    TOK.save(tmp_path / "tok.json")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    argv = ["data", "prepare", str(tmp_path / "ds"), "--tokenizer", str(tmp_path / "tok.json"),
            "--out", str(out), "--val-tokens", "100", "--shard-tokens", "300", "--no-progress"]
    real_append, real_atomic = prepare._append, atomic.atomic_write
    calls = [0]

    def full(k):
        def append(f, tokens):
            calls[0] += 1
            if calls[0] - 1 == k:
                f.write(b"\0" * 8)
                raise OSError(errno.ENOSPC, "No space left on device")
            real_append(f, tokens)

        def atomic_write(path, write):
            calls[0] += 1
            if calls[0] - 1 != k:
                return real_atomic(path, write)

            def half(f):
                f.write(b"\0" * 8)
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_atomic(path, half)
        return append, atomic_write

    with monkeypatch.context() as m:
        append, write = full(-1)
        m.setattr(prepare, "_append", append)
        m.setattr(atomic, "atomic_write", write)
        assert main(argv) == 0
    writes, done = calls[0], sorted(p.name for p in out.iterdir())
    assert writes >= 6 and len(done) >= 5, done  # tokens, shards, tokenizer, meta.json
    for name in done:
        if name != "keep.txt":
            (out / name).unlink()
    capsys.readouterr()
    for k in range(writes):
        calls[0] = 0
        with monkeypatch.context() as m:
            append, write = full(k)
            m.setattr(prepare, "_append", append)
            m.setattr(atomic, "atomic_write", write)
            assert main(argv) == 1, f"write {k}"
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{out}/" in err and "No space left on device" in err, err
        assert "internal error" not in err
        assert sorted(p.name for p in out.iterdir()) == ["keep.txt"], f"write {k}"


def _contents(root: Path) -> dict[str, str]:
    """Every file under `root` (hidden ones included) by relative path, with its SHA-256."""
    return {str(p.relative_to(root)): file_sha256(p) for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_an_interrupted_prepare_leaves_the_data_set_already_there_unchanged(tmp_path,
                                                                            monkeypatch):
    # a data set is prepared, then prepared again from other documents and interrupted at
    # each of its writes (the tokens, every shard, the tokenizer's copy, meta.json): the
    # first data set is still there, every file the same, and nothing of the second is left
    import pytyr.atomic as atomic
    import pytyr.data.prepare as prepare

    write_dataset(tmp_path / "old", files=1)
    write_dataset(tmp_path / "new", files=2)
    out = tmp_path / "out"
    prepare_parquet(tmp_path / "old", TOK, out, shard_tokens=200, val_tokens=100,
                    progress=False)
    (out / "keep.txt").write_text("mine")
    before = _contents(out)
    real_append, real_atomic = prepare._append, atomic.atomic_write
    calls = [0]

    def interrupt_at(k):
        def count():
            calls[0] += 1
            if calls[0] - 1 == k:
                raise KeyboardInterrupt

        def append(f, tokens):
            count()
            real_append(f, tokens)

        def write(path, fn):
            count()
            return real_atomic(path, fn)
        return append, write

    k = 0
    while True:
        calls[0] = 0
        with monkeypatch.context() as m:
            append, write = interrupt_at(k)
            m.setattr(prepare, "_append", append)
            m.setattr(atomic, "atomic_write", write)
            try:
                prepare_parquet(tmp_path / "new", TOK, out, shard_tokens=200, val_tokens=100,
                                progress=False)
            except KeyboardInterrupt:
                assert _contents(out) == before, f"interrupted at write {k}"
                k += 1
                continue
        break
    assert k >= 6, k  # the tokens of each row group, three or more shards, tokenizer, meta
    # uninterrupted, the second data set replaces the first: fewer shards, none of the old
    # one's left over, the user's file kept
    assert len([n for n in before if n.endswith(".bin")]) > 3
    meta = prepare_parquet(tmp_path / "old", TOK, out, shard_tokens=10_000, val_tokens=100,
                           progress=False)
    listed = {s["file"] for s in meta["val"] + meta["train"]}
    assert set(_contents(out)) == listed | {"meta.json", "tokenizer.json", "keep.txt"}
