"""Data-parallel `tyr train` under torchrun (2 processes, gloo on CPU) on a tiny Lean GPT.

Two ranks with batch b each draw the two halves of one global batch of 2b windows, and DDP
averages their gradients, so their losses equal those of one process with batch 2b; rank 0
alone writes the run; a resumed 2-process run continues bit for bit (dropout included).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pytyr.cli import main
from pytyr.errors import ConfigError
from pytyr.safetensors import load_file
from pytyr.train import distributed
from test_train_gpt import GPT, TINY
from torchrun_runs import history, losses, run_two_processes, torchrun_cli

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(),
                                reason="this torch build has no torch.distributed")

ROOT = Path(__file__).resolve().parents[1]
GLOBAL_B = 8  # train.batch is the global batch: 4 windows per rank with 2 processes


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("corpus")  # built once, by the first run's rank 0


def _args(out: Path, cache: Path, *extra: str) -> list[str]:
    return ["train", GPT, "--model", "gpt", *TINY, "--set", f"train.batch={GLOBAL_B}",
            "--set", f"out={out}", "--set", f"task.cache_dir={cache}", *extra]


def _torchrun(out: Path, cache: Path, *extra: str, script: bool = False) -> str:
    """Run `tyr train` in 2 processes; return rank 0's and rank 1's stdout together."""
    args = _args(out, cache, *extra)
    if script:  # the launcher takes the same tyr train arguments after `--`
        return run_two_processes([str(ROOT / "scripts" / "torchrun-gpt.sh"), "2", "--",
                                  *args[4:]], timeout=120)
    return run_two_processes(torchrun_cli(*args), timeout=120)


def test_two_processes_train_like_one_with_the_global_batch(tmp_path, cache, capsys):
    two, one = tmp_path / "two", tmp_path / "one"
    out = _torchrun(two, cache, "--set", "train.max_iters=8", script=True)
    assert out.count("model gpt from") == 1 and out.count("wrote ") == 1  # rank 0 only
    assert "2 processes, batch 4 each" in out
    state = json.loads((two / "ckpt" / "state.json").read_text())
    assert state["step"] == 8 and state["config"]["batch"] == GLOBAL_B
    assert state["extra"]["world"] == 2 and len(state["extra"]["rank_rng"]) == 2
    assert sorted(p.name for p in two.iterdir()) == [
        "best", "ckpt", "loss.png", "metrics.json", "run.json", "sample.txt"]  # no .tmp/.old

    assert main(_args(one, cache, "--set", "train.max_iters=8")) == 0
    capsys.readouterr()
    assert len(losses(two)) == 8
    assert losses(two) == pytest.approx(losses(one), abs=1e-5)
    for a, b in zip(history(two)["evals"], history(one)["evals"]):
        assert a == pytest.approx(b, abs=1e-5)
    # A single process cannot resume the 2-process checkpoint: it says why.
    assert main(_args(two, cache, "--set", "train.max_iters=8", "--resume")) == 1
    assert "written by a run of 2 process(es) and this run has 1" in capsys.readouterr().err


def test_a_resumed_two_process_run_continues_exactly(tmp_path, cache):
    # With dropout, so that each rank must get its own RNG state back from the checkpoint.
    full, part = tmp_path / "full", tmp_path / "part"
    dropout = ("--set", "model.c.dropout=0.1")
    _torchrun(full, cache, *dropout, "--set", "train.max_iters=8")
    _torchrun(part, cache, *dropout, "--set", "train.max_iters=4")
    _torchrun(part, cache, *dropout, "--set", "train.max_iters=8", "--resume")
    assert len(losses(part)) == 8 and losses(part) == losses(full)
    assert history(part)["evals"] == history(full)["evals"]
    a, b = (load_file(r / "ckpt" / "model.safetensors") for r in (full, part))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_dist_env_and_batch_errors():
    assert distributed.DistEnv.from_env({}) == distributed.DistEnv()
    env = distributed.DistEnv.from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
                                        "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"})
    assert (env.rank, env.world, env.local_rank, env.distributed) == (1, 2, 1, True)
    with pytest.raises(ConfigError, match="WORLD_SIZE is 2 but MASTER_ADDR is not set"):
        distributed.DistEnv.from_env({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"})
    with pytest.raises(ConfigError, match="RANK must be in 0..1 for WORLD_SIZE 2, got 2"):
        distributed.DistEnv.from_env({"RANK": "2", "WORLD_SIZE": "2"})
    with pytest.raises(ConfigError, match="WORLD_SIZE must be an integer, got 'two'"):
        distributed.DistEnv.from_env({"WORLD_SIZE": "two"})


def test_alone_the_helpers_do_nothing():
    from torch import nn

    m = nn.Linear(2, 2)
    assert not distributed.active() and distributed.is_main() and distributed.world() == 1
    assert distributed.wrap(m) is m
    assert distributed.mean_over_ranks({"a": 1.5}) == {"a": 1.5}
    assert distributed.gather(3) is None
    with distributed.main_first():
        distributed.barrier()
    with pytest.raises(ConfigError, match="backend 'nosuch' is not available"):
        distributed.init("nosuch", distributed.DistEnv(world=2, master_addr="x", master_port=1))


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_ranks_exit_soon_after_the_launcher_dies(tmp_path, cache):
    import signal
    import time

    env = {**os.environ, "OMP_NUM_THREADS": "1", "TYR_DIST_BACKEND": "gloo"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "pytyr.cli", *_args(tmp_path / "run", cache, "--set", "train.max_iters=100000")]
    launcher = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while len(ranks := _children(launcher.pid)) < 2:
            assert time.monotonic() < deadline, "the ranks did not start"
            assert launcher.poll() is None, "torchrun ended early"
            time.sleep(0.2)
        time.sleep(3)  # well into start-up or training
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + 10
        while any(_alive(r) for r in ranks) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [r for r in ranks if _alive(r)]
        assert not left, f"ranks {left} outlived their launcher by 10 s"
    finally:
        for r in _children(launcher.pid) + [launcher.pid]:
            try:
                os.kill(r, signal.SIGKILL)
            except OSError:
                pass


def _rank_pids(launcher: int) -> dict[int, int]:
    """RANK → pid of the launcher's worker processes."""
    out = {}
    for pid in _children(launcher):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        rank = [v[5:] for v in env if v.startswith(b"RANK=")]
        if rank:
            out[int(rank[0])] = pid
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("victim", [1, 0])
def test_a_dead_rank_ends_the_other_with_one_line_naming_it(tmp_path, cache, victim):
    import signal
    import time

    env = {**os.environ, "OMP_NUM_THREADS": "1", "TYR_DIST_BACKEND": "gloo"}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    logs, run = tmp_path / "logs", tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "--log-dir", str(logs), "--redirects", "2", "-m", "pytyr.cli",
           *_args(run, cache, "--set", "train.max_iters=100000")]
    launcher = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (run / "run.json").exists():  # training under way on both ranks
            assert time.monotonic() < deadline and launcher.poll() is None, "no training"
            time.sleep(0.2)
        time.sleep(2)
        ranks = _rank_pids(launcher.pid)
        assert sorted(ranks) == [0, 1]
        os.kill(ranks[victim], signal.SIGKILL)
        launcher.wait(timeout=60)
    finally:
        for r in _children(launcher.pid) + [launcher.pid]:
            try:
                os.kill(r, signal.SIGKILL)
            except OSError:
                pass
    survivor = 1 - victim
    [log] = [p for p in logs.rglob("stderr.log") if p.parent.name == str(survivor)]
    err = log.read_text()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"rank {victim} (pid {ranks[victim]})" in lines[0] and "tyr train: " in lines[0]


def test_the_launchers_sigterm_after_a_peers_death_is_one_line_naming_it():
    # The agent may stop a rank (SIGTERM) before its collective fails: the same one line.
    code = ("import os, signal, socket, subprocess, sys, time\n"
            "from pytyr import process\n"
            "peer = subprocess.Popen([sys.executable, '-c', 'pass'])\n"
            "peer.wait()\n"  # reaped: gone, as the agent leaves a dead rank
            "process.set_command('tyr train')\n"
            "process.note_peers([(socket.gethostname(), os.getpid()),"
            " (socket.gethostname(), peer.pid)], 0)\n"
            "print(peer.pid, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "time.sleep(5)\n"
            "print('not ended', flush=True)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    pid = res.stdout.split()[0]
    assert res.returncode == 1 and "not ended" not in res.stdout
    assert res.stderr.strip() == f"tyr train: rank 1 (pid {pid}) died; rank 0 stops too"


def test_a_sigterm_without_a_dead_peer_ends_as_before_and_forgotten_peers_are_no_news():
    code = ("import os, signal, socket, sys, time\n"
            "from pytyr import process\n"
            "process.note_peers([(socket.gethostname(), os.getpid()),"
            " (socket.gethostname(), os.getppid())], 0)\n"
            "assert process.dead_peer() is None\n"
            "process.forget_peers()\n"
            "assert process.dead_peer(wait=5) is None\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "time.sleep(5)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert res.returncode == -15 and res.stderr == "", res.stderr


@pytest.mark.slow
def test_ctrl_c_under_torchrun_stops_every_rank_after_one_step_and_resumes(tmp_path, cache):
    """Ctrl-C in a terminal signals the launcher and every rank: the ranks agree on the step,
    rank 0 writes the checkpoint and outputs, and a resume continues as one process would."""
    import signal
    import time

    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TYR_DIST_BACKEND": "gloo",
           "PYTHONUNBUFFERED": "1"}
    launcher = subprocess.Popen([str(ROOT / "scripts" / "torchrun-gpt.sh"), "2", "--",
                                 *_args(run, cache, "--set", "train.max_iters=3000")[4:]],
                                cwd=ROOT, env={**env, "PYTHON": sys.executable},
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # into the loop: its first checkpoint (every 2 steps) is on disk; a fixed sleep after
        # the model line once landed before the first step on a slow host
        deadline = time.monotonic() + 120
        while not (run / "ckpt" / "state.json").exists():
            assert launcher.poll() is None, launcher.communicate()[1]
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.05)
        os.killpg(launcher.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        out, err = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    state = json.loads((run / "ckpt" / "state.json").read_text())
    stopped = state["step"]
    assert 0 < stopped < 3000 and state["extra"]["world"] == 2
    assert err.count(f"stopped by SIGINT at step {stopped} of 3000") == 1  # rank 0 says it
    assert err.strip().splitlines()[-1].startswith("torchrun: stopped by SIGINT")
    assert launcher.returncode == 130
    assert json.loads((run / "metrics.json").read_text())["steps"] == stopped
    assert "Traceback" not in err, err
    # The rest as one process would have run it (TINY's schedule ends at step 8).
    end = str(stopped + 6)
    run_two_processes(torchrun_cli(*_args(run, cache, "--set", f"train.max_iters={end}",
                                          "--resume")), timeout=120)
    assert main(_args(tmp_path / "one", cache, "--set", f"train.max_iters={end}")) == 0
    assert losses(run) == pytest.approx(losses(tmp_path / "one"), abs=1e-5)
