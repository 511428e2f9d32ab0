"""One process and two under torchrun agree at every step of a run of several epochs.

The global batch of step s is the same rows whatever the world size and the split into
micro-batches (wraps included), and evaluation runs over the same rows on every world size,
so a 2-process run (micro-batches of 2, 2 per step) and a 1-process run (micro-batches of 2,
4 per step) of a tiny data set log the same losses at every step to float rounding, over 3
epochs and more: shard_lm packed and BOS-aligned, char_lm on a text file of its own.
"""
from __future__ import annotations

import random

import pytest
import torch

from pytyr.cli import main
from torchrun_runs import history, losses, run_two_processes, torchrun_cli

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(),
                                reason="this torch build has no torch.distributed")

GPT = "examples/gpt/GPT.lean"
WORDS = "the of and to a in that is was he for it with as his on be at by had not".split()
BATCH, SEQ = 8, 8
SMALL = {"model.c.n_layer": 1, "model.c.n_head": 2, "model.c.head_dim": 8,
         "model.c.block": SEQ, "task.seq": SEQ, "train.batch": BATCH, "train.micro_batch": 2,
         "train.warmup_iters": 2, "train.eval_interval": 5, "train.eval_iters": 1,
         "train.checkpoint_interval": 1000, "train.device": "cpu", "train.threads": 1,
         "sample.max_new_tokens": 0}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """A tiny BPE data set: about 1,500 train tokens in 3 shards, 400 val tokens."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pytyr.data.prepare import prepare_parquet
    from pytyr.data.tokenizer import train_bpe

    root = tmp_path_factory.mktemp("epochs")
    rng = random.Random(1)
    docs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 30))) + "."
            for _ in range(160)]
    pq.write_table(pa.table({"text": docs}), root / "docs.parquet")
    meta = prepare_parquet(root / "docs.parquet", train_bpe(docs, 280), root / "shards",
                           val_tokens=400, shard_tokens=600, progress=False)
    return root / "shards", meta


def _args(out, task: dict, steps: int, extra: dict) -> list[str]:
    sets = {**SMALL, **{f"task.{k}": v for k, v in task.items()}, "train.max_iters": steps,
            "train.lr_decay_iters": steps, "out": out, **extra}
    config = ["--config", "examples/gpt/shards.json"] if task["name"] == "shard_lm" else []
    return ["train", GPT, "--model", "gpt", *config,
            *[a for k, v in sets.items() for a in ("--set", f"{k}={_text(v)}")], "-q"]


def _text(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _compare(tmp_path, task: dict, steps: int, extra: dict | None = None) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    run_two_processes(torchrun_cli(*_args(two, task, steps, extra or {})), timeout=300)
    assert main(_args(one, task, steps, extra or {})) == 0
    a, b = losses(one), losses(two)
    assert len(a) == len(b) == steps
    assert b == pytest.approx(a, rel=1e-5, abs=1e-6), [x - y for x, y in zip(a, b)]
    ea, eb = history(one)["evals"], history(two)["evals"]
    assert [e["step"] for e in ea] == [e["step"] for e in eb] and len(ea) > 3
    for x, y in zip(ea, eb):
        assert y == pytest.approx(x, rel=1e-5, abs=1e-6)
    assert ea[-1]["train"] < ea[0]["train"]  # it trained: the agreement is not of constants


@pytest.mark.parametrize("aligned", [False, True], ids=["packed", "bos_aligned"])
def test_shard_lm_agrees_over_three_epochs(tmp_path, shards, aligned):
    data, meta = shards
    train_tokens = sum(e["tokens"] for e in meta["train"])
    if aligned:  # BOS-aligned rows: an epoch is the rows that start at a document
        from pytyr.data.iterators import SequentialBatchIterator
        from pytyr.data.shards import read_shard

        files = [data / e["file"] for e in meta["train"]]
        it = SequentialBatchIterator([read_shard(f) for f in files], BATCH, SEQ,
                                     bos_id=meta["bos_id"], loop=True)
        per_epoch = it.rows_total / BATCH
        assert it.rows_total % BATCH  # the wrap falls inside a step
    else:
        per_epoch = train_tokens / (BATCH * SEQ)
    steps = int(3.5 * per_epoch) + 1
    assert steps >= 3 * per_epoch + 1
    _compare(tmp_path, {"name": "shard_lm", "data": data, "bos_aligned": aligned}, steps)


def test_char_lm_agrees_over_three_epochs(tmp_path):
    rng = random.Random(2)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(rng.choice(WORDS) for _ in range(150)) + "\n")
    n = len(corpus.read_text())
    steps = -(-3 * n // (BATCH * SEQ)) + 2  # three times the characters, in random windows
    _compare(tmp_path, {"name": "char_lm", "corpus": corpus, "cache_dir": tmp_path / "cache"},
             steps, {"model.c.vocab": len(set(corpus.read_text()))})
