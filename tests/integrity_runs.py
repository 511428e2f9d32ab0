"""Tiny runs for the integrity tests: the Lean GPT on Shakespeare characters (`char_run`) and
on a byte-level BPE data set (`bpe_shards`, `bpe_run`), through the CLI as a user runs them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pytyr.cli import main

GPT = "examples/gpt/GPT.lean"
TINY = ["--set", "model.c.n_layer=1", "--set", "model.c.n_head=2", "--set", "model.c.head_dim=8",
        "--set", "model.c.block=16", "--set", "task.seq=16", "--set", "train.batch=4",
        "--set", "train.eval_interval=2", "--set", "train.eval_iters=1",
        "--set", "train.checkpoint_interval=2", "--set", "train.warmup_iters=1",
        "--set", "train.lr_decay_iters=8", "--set", "sample.max_new_tokens=8", "-q"]


def char_args(out: Path, cache: Path, *extra: str) -> list[str]:
    """`tyr train` of the tiny GPT on Shakespeare into `out` (corpus cache `cache`)."""
    return ["train", GPT, "--model", "gpt", *TINY, "--set", f"out={out}",
            "--set", f"task.cache_dir={cache}", *extra]


def char_run(out: Path, cache: Path, steps: int = 2, *extra: str) -> Path:
    assert main(char_args(out, cache, "--set", f"train.max_iters={steps}", *extra)) == 0
    return out


def bpe_shards(root: Path) -> Path:
    """A parquet file of seeded word documents → `tyr tokenizer train` → `tyr data prepare`."""
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "home"]
    docs = [" ".join(rng.choice(words, size=rng.integers(5, 30))).capitalize() + "."
            for _ in range(300)]
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": docs}), root / "docs.parquet", row_group_size=100)
    assert main(["tokenizer", "train", str(root / "docs.parquet"), "--vocab-size", "300",
                 "--out", str(root / "tok.json")]) == 0
    assert main(["data", "prepare", str(root / "docs.parquet"), "--tokenizer",
                 str(root / "tok.json"), "--out", str(root / "shards"), "--val-tokens", "600",
                 "--shard-tokens", "4000", "--no-progress"]) == 0
    return root / "shards"


def bpe_args(out: Path, shards: Path, *extra: str) -> list[str]:
    return ["train", GPT, "--model", "gpt", "--config", "examples/gpt/shards.json",
            "--set", f"task.data={shards}", *TINY, "--set", "sample.prompt=The",
            "--set", f"out={out}", *extra]


def bpe_run(out: Path, shards: Path, steps: int = 2) -> Path:
    assert main(bpe_args(out, shards, "--set", f"train.max_iters={steps}")) == 0
    return out


def rerecord(ckpt: Path) -> None:
    """After a test rewrote a checkpoint's files on purpose: its state.json records them again
    (sizes, SHA-256 and its own checksum), as a save would have."""
    import json

    from pytyr.digest import file_sha256, stamped

    state = json.loads((ckpt / "state.json").read_text())
    state.pop("checksum", None)
    for name in state["files"]:
        state["files"][name] = {"bytes": (ckpt / name).stat().st_size,
                                "sha256": file_sha256(ckpt / name)}
    (ckpt / "state.json").write_text(json.dumps(stamped(state), indent=1))
