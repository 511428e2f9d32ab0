"""The README's "Train on your own data", end to end: a parquet file → `tyr tokenizer train`
→ `tyr data prepare` → `tyr train` of the Lean GPT on those shards → `tyr sample`, on real
text (the standard library's docstrings, ~100k tokens) at the README's settings, where every
train token is read each epoch; and at tiny size what the shard task refuses (corrupted
shards, a damaged header, a split too small for one step)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from pytyr.cli import main
from pytyr.data.shards import read_shard
from pytyr.train.task import TaskContext
from pytyr.train.tasks import make_task
from stdlib_corpus import module_documents  # noqa: E402  (tests/ is on sys.path)

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


@pytest.mark.parametrize("bos_aligned", [False, True])
def test_the_epoch_is_counted_in_optimizer_steps_on_any_split(shards, bos_aligned):
    # 8 rows of 16 tokens a step: one process, two, micro-batches of each; one figure
    meta = json.loads((shards / "meta.json").read_text())
    lines = set()
    for micro, world, accum in [(8, 1, 1), (4, 1, 2), (4, 2, 1), (2, 2, 2), (1, 2, 4)]:
        for rank in range(world):
            task = make_task({"name": "shard_lm", "data": str(shards), "seq": 16,
                              "bos_aligned": bos_aligned},
                             TaskContext(micro, 0, rank, world, accum=accum), "c")
            lines.add(task.prepare().rsplit(", ", 1)[1])
    assert len(lines) == 1, lines
    steps = float(lines.pop().split()[0])
    if bos_aligned:
        assert steps == round(task.train.rows_total / 8, 1)
    else:
        assert steps == round(meta["train_tokens"] / (8 * 16), 1)


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


def test_tyr_graph_takes_the_vocabulary_from_the_data_as_tyr_train(shards, tmp_path, capsys):
    # the README's own-data config leaves c.vocab to the data: tyr graph reads it there too
    out = tmp_path / "g.json"
    graph = ["graph", GPT, "--model", "gpt", "--config", "examples/gpt/shards.json",
             "--set", "task.seq=16", "--set", "model.c.block=16", "-o", str(out)]
    assert main([*graph, "--set", f"task.data={shards}"]) == 0
    doc = json.loads(out.read_text())
    assert doc["inputs"][0]["bound"] == _vocab(shards)
    assert {p["path"]: p["shape"] for p in doc["params"]}["wte"][0] == _vocab(shards)
    capsys.readouterr()
    # data it cannot read is one line naming it, no graph written
    out.unlink()
    assert main([*graph, "--set", f"task.data={tmp_path / 'none'}"]) == 1
    assert capsys.readouterr().err.strip() == f"tyr graph: {tmp_path / 'none'}: shard " \
                                              f"directory not found"
    assert not out.exists()
    # a vocabulary the config gives: the data is not read at all
    assert main([*graph, "--set", f"task.data={tmp_path / 'none'}",
                 "--set", "model.c.vocab=500"]) == 0
    assert json.loads(out.read_text())["inputs"][0]["bound"] == 500
    # tyr shapes takes its numbers the same way (the editor's hover never reads the data)
    cfg = json.loads(Path("examples/gpt/shards.json").read_text())
    cfg["task"].update(data=str(shards), seq=16)
    (tmp_path / "run.json").write_text(json.dumps(cfg))
    capsys.readouterr()
    assert main(["shapes", GPT, "--config", str(tmp_path / "run.json"), "--line", "104"]) == 0
    assert f"idx : IT #[b, t] c.vocab   [config: IT #[8, 16] {_vocab(shards)}]" in \
        capsys.readouterr().out


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


# -- real text at the README's settings ------------------------------------------------------

README_CONFIG = "examples/gpt/shards.json"
SMALL = ["--set", "model.c.n_layer=1", "--set", "model.c.n_head=2", "--set",
         "model.c.head_dim=16", "--set", "model.c.block=64", "--set", "task.seq=64",
         "--set", "train.max_iters=30", "--set", "train.lr_decay_iters=30",
         "--set", "train.warmup_iters=2", "--set", "train.eval_interval=15",
         "--set", "train.eval_iters=4", "--set", "sample.max_new_tokens=20", "-q"]


@pytest.fixture(scope="module")
def readme(tmp_path_factory):
    """The README's two data commands, as written, on ~100k tokens of real documents."""
    d = tmp_path_factory.mktemp("readme")
    pq.write_table(pa.table({"text": module_documents(420_000)}), d / "mine.parquet",
                   row_group_size=16)
    assert main(["tokenizer", "train", str(d / "mine.parquet"), "--vocab-size", "4096",
                 "--out", str(d / "data/mine-tok.json")]) == 0
    assert main(["data", "prepare", str(d / "mine.parquet"), "--tokenizer",
                 str(d / "data/mine-tok.json"), "--out", str(d / "data/mine")]) == 0
    return d


def _split_tokens(data: Path, split: str) -> np.ndarray:
    meta = json.loads((data / "meta.json").read_text())
    return np.concatenate([np.asarray(read_shard(data / s["file"])) for s in meta[split]])


def _task(data: Path, micro_batch: int, rank: int = 0, world: int = 1, **options):
    cfg = json.loads(Path(README_CONFIG).read_text())  # the README's task and batch
    table = {**cfg["task"], "data": str(data), **options}
    task = make_task(table, TaskContext(micro_batch, 0, rank, world), README_CONFIG)
    task.prepare()
    return task, cfg["train"]["batch"]


def test_the_readme_data_commands_split_a_real_corpus(readme):
    meta = json.loads((readme / "data/mine/meta.json").read_text())
    total = meta["tokens"]
    assert 90_000 <= total <= 200_000 and meta["vocab_size"] == 4096
    assert meta["val_tokens"] == total // 10 and meta["train_tokens"] == total - total // 10
    assert len(_split_tokens(readme / "data/mine", "train")) == meta["train_tokens"]


def test_every_train_token_is_read_each_epoch_at_the_readme_settings(readme):
    data = readme / "data/mine"
    train = torch.from_numpy(_split_tokens(data, "train").astype(np.int64))
    task, batch = _task(data, 8)
    steps = math.ceil(len(train) / task.train.step_tokens)  # one epoch, the last step wrapping
    xs = [task.batch(k) for k in range(steps)]
    flat = torch.cat([b["idx"].reshape(-1) for b in xs])
    targets = torch.cat([b["targets"].reshape(-1) for b in xs])
    assert torch.equal(flat[:len(train)], train)  # every token, in order, none skipped
    assert torch.equal(targets[:len(train) - 1], train[1:])
    assert torch.equal(flat[len(train):], train[:len(flat) - len(train)])  # then it wraps
    # under torchrun each rank reads its part of the same stream
    halves = [_task(data, batch // 2, r, 2)[0] for r in range(2)]
    both = torch.cat([h.batch(k)["idx"].reshape(-1) for k in range(steps) for h in halves])
    assert torch.equal(both, flat)
    # BOS-aligned rows stay an option: every row starts a document, and much is never read
    # (its val split does not even hold one step of 8 rows: its long documents start too few)
    aligned, _ = _task(data, 2, bos_aligned=True)
    bos = json.loads((data / "meta.json").read_text())["bos_id"]
    assert (aligned.batch(0)["idx"][:, 0] == bos).all()
    assert aligned.train.steps_per_epoch * aligned.train.step_tokens < len(train)


def test_the_readme_train_and_sample_commands_on_the_real_corpus(readme, tmp_path, capsys):
    out = tmp_path / "runs/gpt-mine"
    assert main(["train", "examples/gpt/GPT.lean", "--model", "gpt", "--config",
                 README_CONFIG, "--set", f"task.data={readme / 'data/mine'}", *SMALL,
                 "--set", f"out={out}"]) == 0
    assert "steps per epoch" in capsys.readouterr().out
    evals = json.loads((out / "metrics.json").read_text())["history"]["evals"]
    assert evals[-1]["val"] < evals[0]["val"] - 0.1  # it learns from the documents
    assert main(["sample", "--run", str(out), "--prompt", "The"]) == 0
    assert capsys.readouterr().out.startswith("The")


def test_the_issues_split_is_refused_and_a_tiny_split_is_named(readme, tmp_path, capsys):
    total = json.loads((readme / "data/mine/meta.json").read_text())["tokens"]
    assert main(["data", "prepare", str(readme / "mine.parquet"), "--tokenizer",
                 str(readme / "data/mine-tok.json"), "--out", str(tmp_path / "d"),
                 "--val-tokens", "100000"]) == 1
    err = capsys.readouterr().err
    assert (f"--val-tokens 100000 would hold out 100,000 of the corpus's {total:,} tokens"
            in err and f"give --val-tokens {total // 2} or fewer" in err)
    assert not (tmp_path / "d" / "meta.json").exists()
    assert main(["data", "prepare", str(readme / "mine.parquet"), "--tokenizer",
                 str(readme / "data/mine-tok.json"), "--out", str(tmp_path / "d"),
                 "--val-tokens", "1000"]) == 0
    capsys.readouterr()
    # 1,000 val tokens are too few for one step of the README's 8 rows of 256 (2,049 tokens)
    assert main(["train", "examples/gpt/GPT.lean", "--model", "gpt", "--config",
                 README_CONFIG, "--set", f"task.data={tmp_path / 'd'}", "--set",
                 f"out={tmp_path / 'run'}"]) == 1
    err = capsys.readouterr().err
    assert (f"the val split of {tmp_path / 'd'}: " in err
            and "1000 tokens are too few for one step of 8 rows of 256 tokens (batch 8 x world "
                "1), which reads 2049 tokens" in err and "lower train.batch or task.seq" in err)
    assert not (tmp_path / "run" / "ckpt").exists()
