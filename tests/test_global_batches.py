"""Every task's data is a function of the optimizer step alone: one global batch of
`train.batch` rows per step (random inputs included), and the same evaluation rows, however
the batch is split into processes and micro-batches.

For each built-in task the micro-batches of every rank are put back together in row order
(micro-step, then rank) and compared across splits of a global batch of 8 rows: one process
of 8, one process of 2 micro-batches of 4, two processes of 4, two processes of 2 micro-batches
of 2, four processes of 1 micro-batch of 2 — over enough steps to wrap each data set's epoch.
"""
from __future__ import annotations

import random

import pytest
import torch

from pytyr.train.task import TaskContext
from pytyr.train.tasks import task_class, task_options

BATCH = 8
SPLITS = [(8, 1, 1), (4, 1, 2), (4, 2, 1), (2, 2, 2), (2, 4, 1), (1, 2, 4)]  # micro, world, accum
WORDS = "the of and to a in that is was he for it with as his on be at by had not".split()


def _tasks(table: dict, micro: int, world: int, accum: int) -> list:
    cls = task_class(table, "test")
    opts = task_options(cls, table, "test")
    out = []
    for r in range(world):
        t = cls(opts, TaskContext(micro, 3, r, world, "test", accum))
        t.prepare()
        out.append(t)
    return out


def _train(tasks: list, step: int) -> dict[str, torch.Tensor]:
    """The global batch of `step`: every micro-batch of every rank, in row order, with the
    per-step random inputs drawn as the engine draws them (`Task.training_batch`)."""
    c = tasks[0].ctx
    parts = [t.training_batch(step * c.accum + j) for j in range(c.accum) for t in tasks]
    return {n: torch.cat([p[n] for p in parts]) for n in parts[0]}


def _eval(tasks: list, split: str, iters: int) -> dict[str, torch.Tensor]:
    per_rank = [list(t.eval_batches(split, iters)) for t in tasks]
    assert len({len(b) for b in per_rank}) == 1  # every rank runs the same number
    parts = [b[k] for k in range(len(per_rank[0])) for b in per_rank]
    return {n: torch.cat([p[n] for p in parts]) for n in parts[0]}


def _check(table: dict, steps: range, iters: int = 2) -> None:
    ref = _tasks(table, *SPLITS[0])
    want = [_train(ref, s) for s in steps]
    evals = {split: _eval(ref, split, iters) for split in ref[0].splits}
    assert all(len(v) for e in evals.values() for v in e.values())
    for split in SPLITS[1:]:
        tasks = _tasks(table, *split)
        for s, w in zip(steps, want):
            got = _train(tasks, s)
            assert got.keys() == w.keys()
            for n in w:
                assert torch.equal(got[n], w[n]), (split, s, n)
        for name, w in evals.items():
            got = _eval(tasks, name, iters)
            for n in w:
                assert torch.equal(got[n], w[n]), (split, name, n)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    text = " ".join(random.Random(0).choice(WORDS) for _ in range(120))
    (root / "c.txt").write_text(text + "\n")
    return root


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pytyr.data.prepare import prepare_parquet
    from pytyr.data.tokenizer import train_bpe

    root = tmp_path_factory.mktemp("shards")
    rng = random.Random(1)
    docs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20))) + "."
            for _ in range(120)]
    pq.write_table(pa.table({"text": docs}), root / "docs.parquet")
    prepare_parquet(root / "docs.parquet", train_bpe(docs, 270), root / "shards",
                    val_tokens=400, shard_tokens=300, progress=False)
    return root / "shards"


def test_char_lm(corpus):
    _check({"name": "char_lm", "corpus": str(corpus / "c.txt"), "seq": 8,
            "cache_dir": str(corpus / "cache")}, range(0, 12, 3))


def test_mdlm(corpus):
    _check({"name": "mdlm", "corpus": str(corpus / "c.txt"), "seq": 8,
            "cache_dir": str(corpus / "cache")}, range(0, 12, 3))


@pytest.mark.parametrize("aligned", [False, True], ids=["packed", "bos_aligned"])
def test_shard_lm(shards, aligned):
    # a few hundred tokens: the steps below wrap the stream several times
    _check({"name": "shard_lm", "data": str(shards), "seq": 8, "bos_aligned": aligned},
           range(0, 40, 3))


def test_bpb_lm(shards):
    _check({"name": "bpb_lm", "data": str(shards), "seq": 8, "bos_aligned": True}, range(3))


def test_classification():
    # 100 training rows: an epoch is 12 global batches (4 rows dropped, the same for any split)
    _check({"name": "classification", "train_size": 100, "test_size": 20}, range(0, 40, 5))


def test_image_flow():
    _check({"name": "image_flow"}, range(0, 600, 97))
