"""`python -m bench.recipe --wall`: `make train` and the plain nanoGPT run, timed from one
command — again and again into the same directory, and never with an earlier run's figures."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench import recipe

ROOT = Path(__file__).resolve().parent.parent


def _tiny_recipe(tmp_path: Path) -> Path:
    """The recipe's config at smoke size: one narrow layer on a small text of its own."""
    cfg = json.loads(recipe.CONFIG.read_text())
    (tmp_path / "text.txt").write_text("ROMEO: But soft, what light through yonder window "
                                       "breaks?\nJULIET: Ay me!\n" * 300)
    cfg["model"]["c"].update(n_layer=1, n_head=2, head_dim=8, block=16)
    cfg["task"].update(corpus=str(tmp_path / "text.txt"), cache_dir=str(tmp_path / "cache"),
                       seq=16)
    cfg["train"].update(batch=4, eval_iters=1)
    cfg["sample"].update(max_new_tokens=4)
    (tmp_path / "tiny.json").write_text(json.dumps(cfg))
    return tmp_path / "tiny.json"


def test_the_wall_comparison_runs_twice_into_its_directory(tmp_path, monkeypatch, capsys):
    # at smoke size (`python -m bench.recipe --wall` times the recipe itself); both sides
    # take the config given
    config, out = _tiny_recipe(tmp_path), tmp_path / "wall"
    monkeypatch.chdir(ROOT)
    for _ in range(2):  # the second replaces the first's runs
        assert recipe.main(["--wall", "--iters", "2", "-q", "--config", str(config),
                            "--out", str(out)]) == 0
    report = json.loads((out / "wall.json").read_text())
    assert report["iters"] == 2
    for side in ("tyr", "plain"):
        assert report[side]["rc"] == 0 and report[side]["val"] > 0
    assert "plain/tyr wall time:" in capsys.readouterr().out
    for run in (out / "wall-tyr", out / "wall-plain" / "plain"):
        metrics = json.loads((run / "metrics.json").read_text())
        assert [e["step"] for e in metrics["history"]["evals"]] == [0, 2]
    trained = json.loads((out / "wall-tyr" / "run.json").read_text())
    assert trained["values"]["c"]["n_layer"] == 1 and trained["task"]["seq"] == 16


def test_a_failed_run_reports_no_figures_of_an_earlier_one(tmp_path, monkeypatch):
    stale = tmp_path / "wall-tyr"
    stale.mkdir()
    (stale / "metrics.json").write_text(json.dumps(
        {"history": {"evals": [{"step": 2, "val": 1.5}]}, "tokens_per_s": 9999.0}))
    monkeypatch.setattr(recipe, "timed_run",
                        lambda cmd, env: {"wall_s": 1.0, "rc": 1 if "train" in cmd else 0,
                                          "load": []})
    args = argparse.Namespace(iters=2, out=tmp_path, config=recipe.CONFIG)
    runs = recipe.wall(args, {"train": {"warmup_iters": 0}})
    assert runs["tyr"]["rc"] == 1
    assert runs["tyr"]["val"] is None and runs["tyr"]["tokens_per_s"] is None
