"""Run directories that cannot overwrite each other: a fresh run over an existing one needs
`--resume` or `--overwrite`, `out` must name a directory of its own, one process at a time
holds a run directory (two trainings race: one trains, the other is refused at once), and
`tyr export` never writes into a checkpoint."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrity_runs import GPT, char_args, char_run
from pytyr.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("corpus")


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file()}


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_fresh_run_over_an_existing_one_is_refused_and_leaves_it(tmp_path, cache, capsys):
    run = char_run(tmp_path / "run", cache)
    before = _files(run)
    capsys.readouterr()
    assert main(char_args(run, cache, "--set", "train.max_iters=4")) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("tyr train: ") and str(run) in line
    assert "--resume" in line and "--overwrite" in line
    assert _files(run) == before  # not a byte changed


def test_overwrite_replaces_the_run(tmp_path, cache, capsys):
    run = char_run(tmp_path / "run", cache)
    (run / "notes.txt").write_text("mine")  # not a file of the run: kept
    assert main(char_args(run, cache, "--set", "train.max_iters=4", "--overwrite")) == 0
    state = json.loads((run / "ckpt" / "state.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    assert state["step"] == 4 and metrics["steps"] == 4
    assert (run / "notes.txt").read_text() == "mine"


def test_resume_and_overwrite_exclude_each_other(tmp_path, cache, capsys):
    with pytest.raises(SystemExit) as e:
        main(char_args(tmp_path / "run", cache, "--resume", "--overwrite"))
    assert e.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_resume_without_a_run_is_refused_before_work(tmp_path, cache, capsys):
    out = tmp_path / "none"
    assert main(char_args(out, cache, "--resume")) == 1
    line = _one_line(capsys.readouterr().err)
    assert "no checkpoint to resume from" in line and str(out) in line
    assert not (out / "run.json").exists()


@pytest.mark.parametrize("out", ["", " ", ".", "./", "..", "/", "~", "HOME", "CWD"])
def test_empty_or_unsafe_out_is_refused_before_work(tmp_path, cache, monkeypatch, capsys, out):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path))
    value = {"HOME": str(tmp_path), "CWD": str(work)}.get(out, out)
    args = char_args(Path("x"), cache, "--set", "train.max_iters=2")
    args[0:2] = ["train", str(ROOT / GPT)]
    args[args.index("out=x")] = f"out={value}"
    assert main(args) == 1
    line = _one_line(capsys.readouterr().err)
    assert "'out'" in line, line
    assert list(work.iterdir()) == [] and not (tmp_path / "run.json").exists()


@settings(max_examples=200, deadline=None)
@given(value=st.text(st.sampled_from("/.~ a\0"), max_size=8))
def test_any_out_is_a_directory_of_its_own_or_one_line(value):
    from pytyr.errors import ConfigError
    from pytyr.train.rundir import check_out

    try:
        path = check_out(value, "gpt", "cfg")
    except ConfigError as err:
        assert str(err).startswith("cfg: 'out' ") or "run directory" in str(err)
        assert "\n" not in str(err)
        return
    real = Path(os.path.realpath(path))
    cwd = Path(os.path.realpath(os.getcwd()))
    assert value.strip() and real != Path("/") and real != Path.home().resolve()
    assert real != cwd and real not in cwd.parents  # strictly inside or beside


def test_an_out_in_use_by_another_process_is_refused_at_once(tmp_path, cache, capsys):
    run = tmp_path / "busy"
    run.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"f = open({str(run / 'run.lock')!r}, 'a+')\n"
         "fcntl.flock(f, fcntl.LOCK_EX)\n"
         "f.seek(0); f.truncate(); f.write(str(os.getpid())); f.flush()\n"
         "print('held', flush=True)\n"
         "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        assert main(char_args(run, cache, "--set", "train.max_iters=2")) == 1
        assert time.monotonic() - t0 < 5  # at once, not after the data or the graph
        line = _one_line(capsys.readouterr().err)
        assert str(run) in line and f"pid {holder.pid}" in line
        assert not (run / "run.json").exists()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    # the holder gone, its lock file is no obstacle
    assert main(char_args(run, cache, "--set", "train.max_iters=2")) == 0


def test_two_trainings_into_one_directory_one_trains_one_is_refused(tmp_path, cache):
    run = tmp_path / "race"
    char_run(tmp_path / "warm", cache)  # the corpus cache exists: both start equally fast
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pytyr.cli",
           *char_args(run, cache, "--set", "train.max_iters=60", "--set",
                      "train.checkpoint_interval=5")]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    ended = []
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        results.append((p.returncode, out, err))
        ended.append(time.monotonic())
    codes = sorted(rc for rc, _, _ in results)
    assert codes == [0, 1], results
    loser = next(r for r in results if r[0] == 1)
    line = _one_line(loser[2])
    assert line.startswith("tyr train: ") and str(run) in line and "pid" in line, line
    winner_pid = procs[[r[0] for r in results].index(0)].pid
    assert f"pid {winner_pid}" in line
    # the run is the winner's, whole: 60 steps, a verified checkpoint, its run.json
    from pytyr.train.checkpoint import read_state

    assert read_state(run / "ckpt")["step"] == 60
    assert json.loads((run / "metrics.json").read_text())["steps"] == 60
    assert json.loads((run / "run.json").read_text())["train"]["max_iters"] == 60
    assert not (run / "run.lock").exists()


# -- export ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run(tmp_path_factory, cache):
    return char_run(tmp_path_factory.mktemp("export") / "run", cache)


@pytest.mark.parametrize("dest", ["ckpt", "ckpt/", "ckpt/sub", "ckpt/sub/deeper", "ckpt/../ckpt",
                                  "link", "link/sub", "other/ckpt", "other/ckpt/x"])
def test_export_never_writes_into_a_checkpoint(run, cache, tmp_path, capsys, dest):
    other = char_run(tmp_path / "other", cache) if dest.startswith("other") else None
    (run / "link").unlink(missing_ok=True)
    (run / "link").symlink_to(run / "ckpt")
    base = other.parent if other is not None else run
    before = _files(run / "ckpt"), _files(other / "ckpt") if other else {}
    capsys.readouterr()
    assert main(["export", "--format", "hf-gpt2", str(run), str(base / dest)]) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("tyr export: ") and "checkpoint" in line
    assert (_files(run / "ckpt"), _files(other / "ckpt") if other else {}) == before
    (run / "link").unlink()


def test_export_beside_the_run_still_works(run, tmp_path, capsys):
    assert main(["export", "--format", "hf-gpt2", str(run), str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "model.safetensors").is_file()


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(["ckpt", "ckpt.old", "ckpt.tmp", "x", "..", ".", "hf"]),
                      min_size=1, max_size=4))
def test_no_export_destination_changes_a_checkpoint(run, capsys, parts):
    dest = run.joinpath(*parts)
    before = _files(run / "ckpt")
    code = main(["export", "--format", "hf-gpt2", str(run), str(dest)])
    err = capsys.readouterr().err
    assert _files(run / "ckpt") == before
    inside = any(p.name.startswith("ckpt") for p in [dest.resolve(), *dest.resolve().parents]
                 if p.parent == run.resolve())
    if inside:
        assert code == 1 and "checkpoint" in _one_line(err)
