"""The tutorials' code as written: `docs/first-model.md`'s model and config train and sample,
and `docs/own-data.md`'s task of one's own trains (the text of the docs, extracted)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytyr.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _blocks(doc: str, lang: str) -> list[str]:
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    return re.findall(rf"```{lang}\n(.*?)\n```", text, re.S)


@pytest.fixture(autouse=True)
def _registry(monkeypatch):
    from pytyr.train import tasks

    monkeypatch.setattr(tasks, "_REGISTRY", dict(tasks._REGISTRY))


def test_the_first_model_page_trains_and_samples(tmp_path, capsys):
    lean = [b for b in _blocks("first-model.md", "lean") if "WideConfig" not in b]
    assert lean[0].startswith("import Tyr")
    (tmp_path / "Tiny.lean").write_text("\n\n".join(lean) + "\n")
    [config] = [json.loads(b) for b in _blocks("first-model.md", "json") if "char_lm" in b]
    config["train"].update(max_iters=30, eval_interval=15, eval_iters=2, threads=1)
    config["sample"]["max_new_tokens"] = 20
    config["out"] = str(tmp_path / "runs" / "tiny")
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["check", str(tmp_path / "Tiny.lean")]) == 0
    assert main(["train", str(tmp_path / "Tiny.lean"), "--model", "tiny", "-q"]) == 0
    assert "9,984 parameters; task char_lm" in capsys.readouterr().out  # as the page shows
    metrics = json.loads((tmp_path / "runs" / "tiny" / "metrics.json").read_text())
    evals = metrics["history"]["evals"]
    assert evals[-1]["val"] < evals[0]["val"]
    assert main(["sample", "--run", str(tmp_path / "runs" / "tiny"), "--prompt", "JULIET:"]) == 0
    assert capsys.readouterr().out.startswith("JULIET:")


def test_the_fine_tune_config_of_the_first_model_page_is_a_valid_run_config():
    # the Llama section's tune.json: every key known, every value in range (the page's
    # commands run in tests/test_hf_finetune.py, which shows the step model the family picks)
    from pytyr.train.settings import load_run_config

    [tune] = [json.loads(b) for b in _blocks("first-model.md", "json") if "shard_lm" in b]
    cfg = load_run_config(tune, "docs/first-model.md")
    assert cfg.task["name"] == "shard_lm" and cfg.sample["prompt"] == "Once"


def test_the_own_task_of_the_own_data_page_trains(tmp_path, capsys):
    [task] = [b for b in _blocks("own-data.md", "python") if "class Xor(Task)" in b]
    (tmp_path / "xor_task.py").write_text(task)
    config = {"model": {"c": {"inputs": 2, "hidden": 16, "classes": 2}},
              "train": {"max_iters": 40, "batch": 32, "eval_interval": 20, "threads": 1}}
    (tmp_path / "xor.json").write_text(json.dumps(config))
    assert main(["train", str(ROOT / "examples/mlp/MLP.lean"), "--model", "mlp", "--config",
                 str(tmp_path / "xor.json"), "--set", f"task.module={tmp_path / 'xor_task.py'}",
                 "--set", "task.name=xor", "--set", f"out={tmp_path / 'run'}", "-q"]) == 0
    assert "task xor: xor: 512 rows" in capsys.readouterr().out
