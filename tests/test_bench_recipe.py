"""`python -m bench.recipe --wall`: `make train` and the plain nanoGPT run, timed from one
command — again and again into the same directory, and never with an earlier run's figures."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench import recipe

ROOT = Path(__file__).resolve().parent.parent


def test_the_wall_comparison_runs_twice_into_its_directory(tmp_path):
    for _ in range(2):  # the second replaces the first's runs
        done = subprocess.run([sys.executable, "-m", "bench.recipe", "--wall", "--iters", "2",
                               "-q", "--out", str(tmp_path)], cwd=ROOT, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-800:] + done.stderr[-800:]
    report = json.loads((tmp_path / "wall.json").read_text())
    assert report["iters"] == 2
    for side in ("tyr", "plain"):
        assert report[side]["rc"] == 0 and report[side]["val"] > 0
    assert "plain/tyr wall time:" in done.stdout


def test_a_failed_run_reports_no_figures_of_an_earlier_one(tmp_path, monkeypatch):
    stale = tmp_path / "wall-tyr"
    stale.mkdir()
    (stale / "metrics.json").write_text(json.dumps(
        {"history": {"evals": [{"step": 2, "val": 1.5}]}, "tokens_per_s": 9999.0}))
    monkeypatch.setattr(recipe, "timed_run",
                        lambda cmd, env: {"wall_s": 1.0, "rc": 1 if "train" in cmd else 0,
                                          "load": []})
    args = argparse.Namespace(iters=2, out=tmp_path)
    runs = recipe.wall(args, {"train": {"warmup_iters": 0}})
    assert runs["tyr"]["rc"] == 1
    assert runs["tyr"]["val"] is None and runs["tyr"]["tokens_per_s"] is None
