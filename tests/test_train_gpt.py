"""`tyr train` / `tyr sample` for the GPT written in Lean: config checks, a short run, resume."""
from __future__ import annotations

import json

import pytest

from pytyr.cli import main

GPT = "examples/gpt/GPT.lean"
TINY = ["--set", "model.c.n_layer=1", "--set", "model.c.n_head=2", "--set", "model.c.head_dim=8",
        "--set", "model.c.block=16", "--set", "model.t=16", "--set", "model.b=4",
        "--set", "train.eval_interval=4", "--set", "train.eval_iters=2",
        "--set", "train.checkpoint_interval=4", "--set", "train.warmup_iters=2",
        "--set", "train.lr_decay_iters=8", "--set", "sample.max_new_tokens=20", "-q"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("corpus"))


def _run(tmp_path, cache, *extra):
    return main(["train", GPT, "--model", "gpt", *TINY, "--set", f"out={tmp_path}",
                 "--set", f"task.cache_dir={cache}", *extra])


@pytest.mark.parametrize("override,frag", [
    ("model.c.vocab=65", "model.c.vocab is 65 but the corpus has 75"),
    ("train.batch=7", "train.batch is 7 but the model is instantiated with 4"),
    ("sample.temprature=1", "unknown key 'sample.temprature'"),
    ("train.lrr=1", "unknown key lrr"),
    ("model.t=17", "'h : t ≤ c.block'"),
])
def test_bad_config_fails_before_training(tmp_path, cache, capsys, override, frag):
    assert _run(tmp_path, cache, "--set", override, "--set", "train.max_iters=2") == 1
    assert frag in capsys.readouterr().err
    assert not (tmp_path / "ckpt").exists()


def test_train_resume_and_sample(tmp_path, cache, capsys):
    full, part = tmp_path / "full", tmp_path / "part"
    assert _run(full, cache, "--set", "train.max_iters=8") == 0
    assert _run(part, cache, "--set", "train.max_iters=4") == 0
    assert _run(part, cache, "--set", "train.max_iters=8", "--resume") == 0
    a = json.loads((full / "metrics.json").read_text())
    b = json.loads((part / "metrics.json").read_text())
    losses = lambda m: [s["loss"] for s in m["history"]["steps"]]  # noqa: E731
    assert len(losses(a)) == 8 and losses(a) == losses(b)
    for name in ("loss.png", "sample.txt", "run.json", "ckpt/model.safetensors"):
        assert (full / name).is_file(), name
    capsys.readouterr()
    assert main(["sample", "--run", str(full), "--prompt", "ROMEO:", "--max-new-tokens", "30"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ROMEO:") and len(out.rstrip("\n")) >= 36
