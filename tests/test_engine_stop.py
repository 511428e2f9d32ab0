"""A run stopped by SIGINT or SIGTERM writes its checkpoint and outputs at the end of the step
and resumes bit for bit; the best evaluation's weights are kept in `best/`; progress in a log
file is plain lines."""
from __future__ import annotations

import json
import os
import signal

import pytest
import torch

from pytyr import process
from pytyr.errors import Interrupted
from pytyr.safetensors import SafeTensorsFile
from pytyr.train.engine import Engine
from pytyr.train.task import TaskContext
from test_engine import CFG, BigramLM, CycleTask, _cfg, _losses, _train


@pytest.fixture(autouse=True)
def _as_in_a_terminal():
    """SIGINT handled as in a foreground `tyr` process, whose signals are tyr's (a shell's
    `cmd &` starts ignoring it, and a run then leaves it ignored:
    `test_an_ignored_sigint_stays_ignored`)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    owned = process.own_signals(True)
    yield
    process.own_signals(owned)
    signal.signal(signal.SIGINT, before)


class SignalTask(CycleTask):
    """Sends `signals` to this process while micro-batch `at` is being made."""

    def __init__(self, ctx: TaskContext, at: int, signals: tuple[str, ...]):
        super().__init__(ctx, noisy=True)
        self.at, self.signals, self.sent = at, signals, False

    def batch(self, k: int):
        if k == self.at and not self.sent:
            self.sent = True
            for name in self.signals:
                os.kill(os.getpid(), getattr(signal, name))
        return super().batch(k)


def _engine(module, out, task_at=None, signals=("SIGINT",), **over) -> Engine:
    cfg = _cfg(**over)
    ctx = TaskContext(cfg.batch, cfg.seed)
    task = CycleTask(ctx, noisy=True) if task_at is None else SignalTask(ctx, task_at, signals)
    return Engine(module, task, cfg, ["idx", "targets"], out, row_tokens=8)


def _weights(path) -> dict[str, torch.Tensor]:
    with SafeTensorsFile(path / "model.safetensors") as f:
        return {n: f.tensor(n).clone() for n in f.names()}


@pytest.mark.parametrize("name,code", [("SIGINT", 130), ("SIGTERM", 143)])
@pytest.mark.parametrize("at", [3, 13, 20])  # mid-interval, mid-run, on an eval's step
def test_a_signal_stops_at_the_step_end_with_everything_written(tmp_path, name, code, at):
    ref = _train(BigramLM(), tmp_path / "ref", noisy=True)
    with pytest.raises(Interrupted) as err:
        _engine(BigramLM(), tmp_path / "run", task_at=at, signals=(name,)).run(progress=False)
    assert err.value.exit_code == code
    assert f"stopped by {name} at step {at + 1} of 30" in str(err.value)
    assert "--resume" in str(err.value)
    state = json.loads((tmp_path / "run" / "ckpt" / "state.json").read_text())
    assert state["step"] == at + 1  # the step that was running finished, then the checkpoint
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["steps"] == at + 1
    assert (tmp_path / "run" / "loss.png").stat().st_size > 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    resumed = _train(BigramLM(seed=5), tmp_path / "run", resume=True, noisy=True)
    assert _losses(resumed) == _losses(ref)
    assert resumed["evals"] == ref["evals"]
    last_ref, last = _weights(tmp_path / "ref" / "ckpt"), _weights(tmp_path / "run" / "ckpt")
    assert all(torch.equal(last_ref[k], last[k]) for k in last_ref)


def test_a_second_signal_interrupts_at_once(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _engine(BigramLM(), tmp_path, task_at=5, signals=("SIGINT", "SIGINT")).run(progress=False)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_sigint_stays_ignored(tmp_path):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    hist = _engine(BigramLM(), tmp_path, task_at=5, signals=("SIGINT",)).run(progress=False)
    assert len(hist["steps"]) == 30  # not stopped: the signal was not for this process
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_run_in_a_program_whose_signals_are_not_tyr_s_is_interrupted_at_once(tmp_path):
    process.own_signals(False)  # a test suite, a notebook: their Ctrl-C is their own
    with pytest.raises(KeyboardInterrupt):
        _engine(BigramLM(), tmp_path, task_at=5, signals=("SIGINT",)).run(progress=False)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not (tmp_path / "metrics.json").exists()  # no outputs of a stop request


# A test file pytest runs in a process of its own: training in-process, as the suite's tests
# do (`main([...])`), then a test that must not run once Ctrl-C stopped the session.
CTRL_C_TESTS = """
from pytyr.cli import main

def test_training(tmp_path):
    assert main(["train", {mlp!r}, "--model", "mlp", "-q", "--set", f"out={{tmp_path}}",
                 "--set", "train.max_iters=1000000", "--set", "train.checkpoint_interval=1",
                 "--set", "train.threads=1"]) == 0
    with open({started!r}, "w") as f:  # never reached: the run is interrupted
        f.write("done")

def test_after():
    with open({after!r}, "w") as f:
        f.write("ran")
"""


def test_ctrl_c_during_an_in_process_training_test_stops_pytest(tmp_path):
    import subprocess
    import sys
    import time
    from pathlib import Path

    mlp = Path(__file__).resolve().parents[1] / "examples" / "mlp" / "MLP.lean"
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_ctrl_c.py").write_text(CTRL_C_TESTS.format(
        mlp=str(mlp), started=str(tmp_path / "finished"), after=str(tmp_path / "after")))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--basetemp", str(tmp_path / "base"), "test_ctrl_c.py"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "base").rglob("ckpt/state.json")):  # in the loop
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, out  # pytest's exit code for an interrupted session
    assert "KeyboardInterrupt" in out and "stopped by SIGINT" not in out, out
    assert not (tmp_path / "finished").exists() and not (tmp_path / "after").exists()


def test_best_holds_the_weights_of_the_lowest_validation_loss(tmp_path):
    # A rate this high makes the validation loss go up again: the last weights are not the best.
    over = dict(lr=0.3, min_lr=0.3, warmup_iters=0, eval_interval=3, grad_clip=0.0)
    hist = _train(BigramLM(), tmp_path / "run", **over)
    evals = [e for e in hist["evals"] if e["step"] > 0]
    best = min(evals, key=lambda e: e["val"])
    assert best["step"] != 30, "the test needs a run whose last evaluation is not the best"
    state = json.loads((tmp_path / "run" / "best" / "state.json").read_text())
    assert state["step"] == best["step"] and state["extra"]["val"] == best["val"]
    # The same run stopped at the best step has the same weights (the schedule is fixed).
    _train(BigramLM(), tmp_path / "short", **{**over, "max_iters": best["step"],
                                               "lr_decay_iters": 30})
    got, want = _weights(tmp_path / "run" / "best"), _weights(tmp_path / "short" / "ckpt")
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert not (tmp_path / "run" / "best" / "optimizer.safetensors").exists()


def test_best_survives_a_resume(tmp_path):
    over = dict(lr=0.3, min_lr=0.3, warmup_iters=0, eval_interval=3, grad_clip=0.0)
    ref = _train(BigramLM(), tmp_path / "ref", noisy=True, **over)
    with pytest.raises(Interrupted):
        _engine(BigramLM(), tmp_path / "run", task_at=16, **over).run(progress=False)
    _train(BigramLM(), tmp_path / "run", resume=True, noisy=True, **over)
    assert (json.loads((tmp_path / "run" / "best" / "state.json").read_text())["step"]
            == json.loads((tmp_path / "ref" / "best" / "state.json").read_text())["step"])
    got, want = _weights(tmp_path / "run" / "best"), _weights(tmp_path / "ref" / "best")
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert min(e["val"] for e in ref["evals"][1:]) != ref["evals"][-1]["val"]


def test_progress_in_a_log_file_is_plain_lines(tmp_path, capsys):
    _train(BigramLM(), tmp_path, progress=True, max_iters=100, lr_decay_iters=100)
    out = capsys.readouterr()
    assert "\r" not in out.out + out.err  # no bar redrawn into the log
    lines = [ln for ln in out.out.splitlines() if ln.startswith("step ") and "/100" in ln]
    assert [ln.split(":")[0] for ln in lines] == [f"step {k}/100" for k in range(5, 101, 5)]
    assert all("ms/step" in ln and "left" in ln for ln in lines)
    assert CFG["eval_interval"] == 10 and out.out.count("step 10: train") == 1
