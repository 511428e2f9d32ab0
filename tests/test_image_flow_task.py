"""`tyr train` / `tyr sample` of the Flux-style example on the digits through the one engine:
a flow-matching task, exact resume, the class grid written, and mismatches caught first."""
from __future__ import annotations

import json

import pytest
import torch

from pytyr.cli import main
from pytyr.train.task import StepRNG, TaskContext
from pytyr.train.tasks import task_class, task_options

LEAN = "examples/flux/Flux.lean"
TINY = ["--set", "model.c.depth_single_blocks=1", "--set", "train.batch=8",
        "--set", "train.max_iters=4", "--set", "train.lr_decay_iters=4",
        "--set", "train.warmup_iters=1", "--set", "train.eval_interval=2",
        "--set", "train.eval_iters=1", "--set", "train.checkpoint_interval=2",
        "--set", "sample.steps=2", "--set", "sample.per_class=1", "-q"]


def _run(out, *extra):
    return main(["train", LEAN, "--model", "flux", *TINY, "--set", f"out={out}", *extra])


def test_train_resume_and_sample(tmp_path, capsys):
    assert _run(tmp_path / "full") == 0
    assert "digits: 1618 training and 179 validation images" in capsys.readouterr().out
    assert (tmp_path / "full" / "samples.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _run(tmp_path / "part", "--set", "train.max_iters=2") == 0
    assert _run(tmp_path / "part", "--resume") == 0
    a, b = (json.loads((tmp_path / r / "metrics.json").read_text())["history"]
            for r in ("full", "part"))
    assert [s["loss"] for s in a["steps"]] == [s["loss"] for s in b["steps"]]
    trained = (tmp_path / "full" / "samples.png").read_bytes()
    capsys.readouterr()
    for n in (1, 2):  # each `tyr sample` writes a new directory, never over the training's
        assert main(["sample", "--run", str(tmp_path / "full"), "--set",
                     "sample.cfg_scale=1"]) == 0
        assert f"samples/00{n}/samples.png" in capsys.readouterr().err
        assert (tmp_path / "full" / "samples" / f"00{n}" / "samples.png").is_file()
    assert (tmp_path / "full" / "samples.png").read_bytes() == trained


@pytest.mark.parametrize("override,frag", [
    ("model.c.context_in_dim=9", "argument 'txt' is T #[8, 1, 9] but task 'image_flow' feeds txt : "
                                 "T [batch=8, txt_len=1, classes=10] (model.c.context_in_dim is 9)"),
    ("model.c.patch=3", "no input"),  # 3 does not tile the 8×8 digits: the image size is wrong
    ("task.label_dropout=1.5", "'task.label_dropout' must be <= 1"),
    ("sample.per_class=0", "'sample.per_class' must be >= 1"),
    ("sample.model=fluxVelocty", "no model named 'fluxVelocty'"),
])
def test_bad_configs_fail_before_training(tmp_path, capsys, override, frag):
    rc = _run(tmp_path, "--set", override)
    err = capsys.readouterr().err
    assert rc == 1 and not (tmp_path / "ckpt").exists()
    if frag != "no input":
        assert frag in err, err
    else:
        assert "argument 'img' is T #[8, 1, 12, 12]" in err, err


@pytest.mark.parametrize("condition", ["class", "prompt"])
def test_the_noise_is_drawn_for_the_global_batch(condition):
    table = {"name": "image_flow", "condition": condition}
    cls = task_class(table, "t")
    opts = task_options(cls, table, "t")
    one, ranks = cls(opts, TaskContext(4, 5)), [cls(opts, TaskContext(2, 5, r, 2)) for r in (0, 1)]
    x0 = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 3, 7, 9])
    whole = one.step_inputs({"x0": x0, "labels": labels}, StepRNG(5, 2))
    parts = [t.step_inputs({"x0": x0[2 * r:2 * r + 2], "labels": labels[2 * r:2 * r + 2]},
                           StepRNG(5, 2, r, 2)) for r, t in enumerate(ranks)]
    for key in whole:
        if key in ("img_ids", "txt_ids"):  # the tokens' positions, the same for every row
            assert all(torch.equal(p[key], whole[key]) for p in parts), key
        else:
            assert torch.equal(torch.cat([p[key] for p in parts]), whole[key]), key
