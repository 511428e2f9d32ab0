"""`tyr train` / `tyr sample` of the masked diffusion example through the one engine: the
MDLM noise comes from the task's per-step hook, so a run resumes exactly; bad configs and
sampling tables fail before training."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pytyr.cli import main
from pytyr.train.task import StepRNG, TaskContext
from pytyr.train.tasks import task_class, task_options

LEAN = "examples/diffusion/Diffusion.lean"
TINY = ["--set", "model.c.n_layer=1", "--set", "model.c.n_head=2", "--set", "model.c.head_dim=8",
        "--set", "model.c.block=16", "--set", "task.seq=16", "--set", "train.batch=4",
        "--set", "train.max_iters=6", "--set", "train.lr_decay_iters=6",
        "--set", "train.warmup_iters=1", "--set", "train.eval_interval=3",
        "--set", "train.eval_iters=2", "--set", "train.checkpoint_interval=3",
        "--set", "sample.steps=4", "--set", "sample.view=lines", "-q"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("corpus"))


def _run(out, cache, *extra):
    return main(["train", LEAN, "--model", "diffusion", *TINY, "--set", f"out={out}",
                 "--set", f"task.cache_dir={cache}", *extra])


def test_train_resume_and_sample(tmp_path, cache, capsys):
    assert _run(tmp_path / "full", cache) == 0
    out = capsys.readouterr()
    assert "vocab 75 + [MASK]" in out.out and "val_bpc" in out.out
    assert "step 4/4:" in out.err  # the unmasking, one plain line per step (not a terminal)
    assert _run(tmp_path / "part", cache, "--set", "train.max_iters=3") == 0
    assert _run(tmp_path / "part", cache, "--resume") == 0
    a, b = (json.loads((tmp_path / r / "metrics.json").read_text())["history"]
            for r in ("full", "part"))
    assert [s["loss"] for s in a["steps"]] == [s["loss"] for s in b["steps"]]
    assert a["evals"] == b["evals"]
    assert a["evals"][-1]["val_bpc"] == pytest.approx(a["evals"][-1]["val"] / 0.6931471805599453)
    text = (tmp_path / "full" / "sample.txt").read_text()
    assert text.startswith("ROMEO:") and len(text) == 16
    capsys.readouterr()
    assert main(["sample", "--run", str(tmp_path / "full"), "--prompt", "JULIET:",
                 "--set", "sample.suffix=.", "--set", "sample.view=off"]) == 0
    sampled = capsys.readouterr().out.rstrip("\n")
    assert sampled.startswith("JULIET:") and sampled.endswith(".") and len(sampled) == 16
    for sampler in ("ancestral", "confidence"):  # the default, and the one it replaced
        assert main(["sample", "--run", str(tmp_path / "full"), "--prompt", "JULIET:",
                     "--set", f"sample.sampler={sampler}", "--set", "sample.view=off"]) == 0
        assert capsys.readouterr().out.startswith("JULIET:")


@pytest.mark.parametrize("override,frag", [
    ("model.c.vocab=70", "output 0 (logits) is T #[4, 16, 70] but task 'mdlm' expects "
                         "T [batch=4, seq=16, vocab=75] (model.c.vocab is 70)"),
    ("task.eps=0", "'task.eps' must be > 0"),
    ("task.seq=17", "'h : t ≤ c.block'"),
    ("sample.length=40", "'sample.length' is 40, longer than the sequences"),
    ("sample.prompt=ROMEO€", "character '€' is not in the"),
    ("sample.schedule=square", "'sample.schedule' must be one of 'linear', 'cosine'"),
    ("sample.sampler=greedy", "'sample.sampler' must be one of 'ancestral', 'confidence'"),
    ("sample.top_k=3", "unknown key 'sample.top_k'"),
])
def test_bad_configs_fail_before_training(tmp_path, cache, capsys, override, frag):
    assert _run(tmp_path, cache, "--set", override) == 1
    err = capsys.readouterr().err
    assert frag in err and err.count("\n") == 1, err
    assert not (tmp_path / "ckpt").exists()


def test_a_model_that_cannot_embed_the_mask_is_refused_before_training(tmp_path, cache, capsys):
    # ids typed below c.vocab: the task feeds [MASK] too (vocab + 1 ids)
    src = Path(LEAN).read_text(encoding="utf-8")
    src = src.replace("wte : T #[c.mask + 1,", "wte : T #[c.vocab,")
    lean = tmp_path / "Diffusion.lean"
    lean.write_text(src.replace("IT #[b, t] (c.mask + 1)", "IT #[b, t] c.vocab"), encoding="utf-8")
    assert main(["train", str(lean), "--model", "diffusion", "--config",
                 "examples/diffusion/config.json", *TINY, "--set", f"out={tmp_path / 'run'}",
                 "--set", f"task.cache_dir={cache}"]) == 1
    err = capsys.readouterr().err
    assert "model 'diffusion': argument 'ids' is IT #[4, 16] 75 but task 'mdlm' feeds " \
           "ids : IT [batch=4, seq=16] vocab_and_mask=76" in err and err.count("\n") == 1, err
    assert not (tmp_path / "run" / "ckpt").exists()


def test_the_noise_is_drawn_for_the_global_batch():
    # Two ranks with 2 rows each draw exactly the rows one process with 4 would.
    cls = task_class({"name": "mdlm"}, "t")
    opts = task_options(cls, {"name": "mdlm", "seq": 8}, "t")
    one = cls(opts, TaskContext(4, 5))
    ranks = [cls(opts, TaskContext(2, 5, r, 2)) for r in (0, 1)]
    for t in [one, *ranks]:
        t.data = type("D", (), {"vocab_size": 10})()
    x = torch.randint(0, 10, (4, 8), generator=torch.Generator().manual_seed(0))
    whole = one.step_inputs({"targets": x}, StepRNG(5, 3))
    parts = [t.step_inputs({"targets": x[2 * r:2 * r + 2]}, StepRNG(5, 3, r, 2))
             for r, t in enumerate(ranks)]
    for key in ("ids", "weights"):
        assert torch.equal(torch.cat([p[key] for p in parts]), whole[key])
    masked = whole["ids"] == 10
    assert torch.equal(masked, whole["weights"] > 0) and bool((whole["weights"][masked] >= 1).all())
