"""What a run leaves and what later commands take from it: Ctrl-C writes a checkpoint and
resumes bit for bit (a real `tyr train` process), `best/` vs `ckpt/` (`--checkpoint`),
`tyr sample` never over the training's sample, `tyr chat` without `--run`."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from integrity_runs import rerecord
from pytyr.cli import main
from pytyr.safetensors import SafeTensorsFile, write_file

GPT = "examples/gpt/GPT.lean"
TINY = ["--set", "model.c.n_layer=1", "--set", "model.c.n_head=2", "--set", "model.c.head_dim=8",
        "--set", "model.c.block=16", "--set", "task.seq=16", "--set", "train.batch=4",
        "--set", "train.eval_interval=20", "--set", "train.eval_iters=2",
        "--set", "train.checkpoint_interval=1000", "--set", "train.lr_decay_iters=400",
        "--set", "sample.max_new_tokens=20", "--set", "train.threads=1"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("corpus"))


def _args(out, cache, *extra):
    return ["train", GPT, "--model", "gpt", *TINY, "--set", f"out={out}",
            "--set", f"task.cache_dir={cache}", *extra]


def _tensors(path):
    with SafeTensorsFile(path) as f:
        return {n: f.tensor(n).clone() for n in f.names()}


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_tyr_train_writes_everything_and_resume_is_exact(tmp_path, cache, sig, code):
    steps = ["--set", "train.max_iters=400"]
    assert main(_args(tmp_path / "ref", cache, *steps, "-q")) == 0
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "pytyr.cli", *_args(run, cache, *steps)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in proc.stdout:  # non-terminal progress: a plain line every 20 steps
        if line.startswith("step 40/400"):
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    stopped = json.loads((run / "ckpt" / "state.json").read_text())["step"]
    assert 40 <= stopped < 400
    assert err.strip().splitlines()[-1] == (
        f"tyr train: stopped by {sig.name} at step {stopped} of 400; wrote {run}/ckpt, "
        "loss.png and metrics.json: run the same command with --resume to continue")
    assert "Traceback" not in err
    assert json.loads((run / "metrics.json").read_text())["steps"] == stopped
    assert (run / "loss.png").stat().st_size > 0
    assert main(_args(run, cache, *steps, "-q", "--resume")) == 0
    ref, got = (json.loads((d / "metrics.json").read_text())["history"] for d in (tmp_path / "ref", run))
    assert got == ref
    a, b = (_tensors(d / "ckpt" / "model.safetensors") for d in (tmp_path / "ref", run))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache):
    run = tmp_path_factory.mktemp("run") / "gpt"
    assert main(_args(run, cache, "--set", "train.max_iters=40", "-q")) == 0
    return run


def _sample(run, capsys, *extra):
    capsys.readouterr()
    assert main(["sample", "--run", str(run), "--max-new-tokens", "30", "--temperature", "0",
                 *extra]) == 0
    got = capsys.readouterr()
    return got.out, got.err


def test_sample_takes_best_and_says_so_and_never_overwrites(trained, capsys, tmp_path):
    run = tmp_path / "gpt"
    shutil.copytree(trained, run)
    train_sample = (run / "sample.txt").read_text()
    best_state = json.loads((run / "best" / "state.json").read_text())
    out1, err1 = _sample(run, capsys)
    assert f"weights: {run}/best (step {best_state['step']}, val " in err1
    out2, err2 = _sample(run, capsys, "--checkpoint", "last")
    assert f"weights: {run}/ckpt (step 40)" in err2
    assert (run / "samples" / "001" / "sample.txt").read_text() == out1.rstrip("\n")
    assert (run / "samples" / "002" / "sample.txt").read_text() == out2.rstrip("\n")
    assert (run / "sample.txt").read_text() == train_sample  # the training's, untouched


def test_best_and_last_are_different_weights_when_they_differ(trained, capsys, tmp_path):
    run = tmp_path / "gpt"
    shutil.copytree(trained, run)
    # Make best/ a different model: the last step's weights with the head scaled.
    weights = _tensors(run / "best" / "model.safetensors")
    weights = {k: v * 0 if "wte" in k else v for k, v in weights.items()}
    path = run / "best" / "model.safetensors"
    path.unlink()
    write_file(weights, path)
    rerecord(run / "best")  # a deliberate change, recorded as a save would
    best, _ = _sample(run, capsys)
    last, _ = _sample(run, capsys, "--checkpoint", "last")
    assert best != last
    inputs = tmp_path / "idx.safetensors"
    write_file({"idx": torch.zeros(1, 4, dtype=torch.int64)}, inputs)
    outs = {}
    for which in ("best", "last"):
        assert main(["run", GPT, "--model", "gptLogits", "--run", str(run), "--inputs",
                     str(inputs), "-o", str(tmp_path / f"{which}.safetensors"),
                     "--checkpoint", which]) == 0
        outs[which] = _tensors(tmp_path / f"{which}.safetensors")
    assert not torch.equal(*(next(iter(o.values())) for o in outs.values()))


def test_chat_without_run_takes_the_newest_language_model(trained, tmp_path, monkeypatch,
                                                          capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("older", "newer"):
        shutil.copytree(trained, runs / name)
        time.sleep(0.05)
        os.utime(runs / name / "run.json")
    (runs / "notarun").mkdir()
    (runs / "broken").mkdir()
    (runs / "broken" / "run.json").write_text("{")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("ROMEO\n"))
    assert main(["chat", "--max-new-tokens", "5", "--temperature", "0"]) == 0
    err = capsys.readouterr().err
    assert "chatting with runs/newer/best" in err and "newest language model under runs/" in err


def test_chat_without_run_and_without_runs_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["chat"]) == 1
    assert capsys.readouterr().err == ("tyr chat: no trained language model under runs/ to "
                                       "chat with: train one (`make train`) or give --run DIR\n")
