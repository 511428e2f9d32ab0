"""The README's "Train on your own data", end to end at tiny size: a parquet file →
`tyr tokenizer train` → `tyr data prepare` → `tyr train` of the Lean GPT on those shards →
`tyr sample`; and what the shard task refuses (corrupted shards, a damaged header)."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytyr.cli import main

GPT = "examples/gpt/GPT.lean"
TINY = ["--set", "model.c.n_layer=1", "--set", "model.c.n_head=2", "--set", "model.c.head_dim=8",
        "--set", "model.c.block=16", "--set", "task.seq=16", "--set", "train.batch=4",
        "--set", "train.max_iters=6", "--set", "train.lr_decay_iters=6",
        "--set", "train.eval_interval=3",
        "--set", "train.eval_iters=2", "--set", "train.warmup_iters=1",
        "--set", "sample.max_new_tokens=12", "--set", "sample.prompt=The", "-q"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("own")
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "home"]
    docs = [" ".join(rng.choice(words, size=rng.integers(5, 30))).capitalize() + "."
            for _ in range(400)]
    docs[7] = None  # a null row: counted and reported, not a crash
    pq.write_table(pa.table({"text": docs}), d / "mine.parquet", row_group_size=100)
    assert main(["tokenizer", "train", str(d / "mine.parquet"), "--vocab-size", "300",
                 "--out", str(d / "tok.json")]) == 0
    assert main(["data", "prepare", str(d / "mine.parquet"), "--tokenizer", str(d / "tok.json"),
                 "--out", str(d / "shards"), "--val-tokens", "600",
                 "--shard-tokens", "4000", "--no-progress"]) == 0
    return d / "shards"


def _vocab(data) -> int:
    return json.loads((data / "meta.json").read_text())["vocab_size"]


def _train(out, data, *extra):
    # the README's config for one's own shards; the vocabulary comes from the data
    return main(["train", GPT, "--model", "gpt", "--config", "examples/gpt/shards.json",
                 "--set", f"task.data={data}", *TINY, "--set", f"out={out}", *extra])


def test_prepare_reports_null_rows(shards, capsys):
    meta = json.loads((shards / "meta.json").read_text())
    assert meta["null_rows"] == 1 and 256 < meta["vocab_size"] <= 300
    from pytyr.data.tokenizer import load_tokenizer

    assert main(["data", "prepare", str(shards.parent / "mine.parquet"), "--tokenizer",
                 str(shards.parent / "tok.json"), "--out", str(shards.parent / "again"),
                 "--no-progress"]) == 0
    assert "skipped 1 row whose 'text' is null" in capsys.readouterr().out
    assert load_tokenizer(shards / "tokenizer.json").vocab_size == meta["vocab_size"]
    assert all("sha256" in s for s in meta["train"] + meta["val"])


def test_a_lean_lm_trains_on_the_shards_and_samples(shards, tmp_path, capsys):
    assert _train(tmp_path / "run", shards) == 0
    out = capsys.readouterr().out
    assert "task shard_lm: shards" in out
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["values"]["c"]["vocab"] == _vocab(shards)  # filled from the data
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    first, last = metrics["history"]["evals"][0], metrics["history"]["evals"][-1]
    assert last["val"] < first["val"]  # it learns the little language
    assert main(["sample", "--run", str(tmp_path / "run"), "--prompt", "The cat"]) == 0
    assert capsys.readouterr().out.startswith("The cat")
    # resume exactly
    assert _train(tmp_path / "part", shards, "--set", "train.max_iters=3") == 0
    assert _train(tmp_path / "part", shards, "--resume") == 0
    part = json.loads((tmp_path / "part" / "metrics.json").read_text())
    assert [s["loss"] for s in part["history"]["steps"]] == \
        [s["loss"] for s in metrics["history"]["steps"]]


def test_the_model_must_fit_the_data_vocabulary(shards, tmp_path, capsys):
    assert _train(tmp_path / "run", shards, "--set", "model.c.vocab=75") == 1
    err = capsys.readouterr().err
    assert f"vocab={_vocab(shards)}] (model.c.vocab is 75)" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("damage", ["flip", "magic"])
def test_damaged_shards_are_refused_before_training(shards, tmp_path, capsys, damage):
    import shutil

    copy = tmp_path / "shards"
    shutil.copytree(shards, copy)
    meta = json.loads((copy / "meta.json").read_text())
    victim = copy / meta["train"][0]["file"]
    data = bytearray(victim.read_bytes())
    if damage == "flip":
        data[-3] ^= 0x01  # same size, one token changed
    else:
        data[0] ^= 0x10  # the header's magic
    victim.write_bytes(bytes(data))
    assert _train(tmp_path / "run", copy) == 1
    err = capsys.readouterr().err
    assert str(victim) in err and "checksum mismatch" in err
    assert not (tmp_path / "run" / "ckpt").exists()
