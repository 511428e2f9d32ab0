"""`tyr train` / `tyr sample` / `tyr run` for the GPT written in Lean: config and type checks
before training, a short run, exact resume, sampling and the forward command."""
from __future__ import annotations

import json

import pytest
import torch

from pytyr.cli import main

GPT = "examples/gpt/GPT.lean"
TINY = ["--set", "model.c.n_layer=1", "--set", "model.c.n_head=2", "--set", "model.c.head_dim=8",
        "--set", "model.c.block=16", "--set", "task.seq=16", "--set", "train.batch=4",
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
    # the logits' vocabulary against the corpus's, the config value that made it named
    ("model.c.vocab=65", "output 0 (logits) is T #[4, 16, 65] but task 'char_lm' expects "
                         "T [batch=4, seq=16, vocab=75] (model.c.vocab is 65)"),
    # a dim the task sets, given differently in the config
    ("model.b=7", "argument 'idx' : IT #[b, t] c.vocab with b = 7 (model.b) but task 'char_lm' "
                  "feeds idx : IT [batch=4, seq=16] vocab"),
    ("sample.temprature=1", "unknown key 'sample.temprature'"),
    ("train.lrr=1", "unknown key 'train.lrr'"),
    ("task.seq=17", "'h : t ≤ c.block'"),
    ("train.lr=-1", "'train.lr' must be > 0"),
    ("train.batch=0", "'train.batch' must be > 0"),
    ("sample.top_k=0", "'sample.top_k' must be"),
    ("sample.prompt=ROMEO€", "character '€' is not in the"),
    ("sample.model=gptLogit", "no model named 'gptLogit'"),
    ("task.name=char_llm", "unknown task 'char_llm' (known: bpb_lm, char_lm, classification"),
    ("task.name={}", "'task.name' must be a task's name, not {} (known: bpb_lm, char_lm"),
    ("task.name=[]", "'task.name' must be a task's name, not []"),
    # more evaluation batches than a split holds would repeat it, or run for ever
    ("train.eval_iters=9223372036854775807", "'train.eval_iters' is 9223372036854775807, more "
                                             "batches of 4 rows than the val split holds "
                                             "(119553); give at most 119553"),
    ("train.max_iters=99999999999999999999", "beyond the 64-bit range"),
    ("train.lr=1e999", "'train.lr' must be a finite number"),
    ("model.c.n_head=0", "parameter 'wte' has shape [75, 0]: a dimension of 0 cannot be "
                         "trained (model.c.n_head is 0)"),
    ("train.device=cpux", "'train.device' must be one of 'cpu', 'cuda', 'auto'"),
])
def test_bad_config_fails_before_training(tmp_path, cache, capsys, override, frag):
    assert _run(tmp_path, cache, "--set", "train.max_iters=2", "--set", override) == 1
    err = capsys.readouterr().err
    assert frag in err and err.count("\n") == 1, err
    assert not (tmp_path / "ckpt").exists()


def test_eval_iters_is_bounded_by_the_batches_of_the_smaller_split(tmp_path, capsys):
    # 2,000 characters: val is the last 200, 184 windows of 16 + 1, 46 batches of 4 rows
    text = tmp_path / "corpus.txt"
    text.write_text("".join(chr(97 + (i * 7) % 26) for i in range(2000)))
    common = ["--set", f"task.corpus={text}", "--set", f"task.cache_dir={tmp_path / 'c'}",
              "--set", "train.max_iters=1", "--set", "sample.prompt=a"]
    assert _run(tmp_path / "a", tmp_path / "c", *common, "--set", "train.eval_iters=47") == 1
    err = capsys.readouterr().err
    assert "'train.eval_iters' is 47, more batches of 4 rows than the val split holds (46)" in err
    assert not (tmp_path / "a" / "ckpt").exists()
    assert _run(tmp_path / "b", tmp_path / "c", *common, "--set", "train.eval_iters=46") == 0


def test_a_model_that_does_not_fit_the_task_is_named_with_its_place(tmp_path, cache, capsys):
    # The MLP takes x : T #[b, c.inputs] and y : IT #[b]; the LM task feeds idx and targets.
    assert main(["train", "examples/mlp/MLP.lean", "--model", "mlp", "--config",
                 "examples/gpt/config.json", "--set", f"task.cache_dir={cache}",
                 "--set", f"out={tmp_path / 'run'}", "-q"]) == 1
    err = capsys.readouterr().err
    assert "examples/mlp/MLP.lean:" in err and "model 'mlp' takes input 'x' : T #[b, c.inputs], " \
        "which task 'char_lm' does not feed (it feeds idx : IT [batch=12, seq=64]" in err


def test_train_resume_sample_and_run(tmp_path, cache, capsys):
    full, part = tmp_path / "full", tmp_path / "part"
    assert _run(full, cache, "--set", "train.max_iters=8") == 0
    assert _run(part, cache, "--set", "train.max_iters=4") == 0
    capsys.readouterr()
    assert _run(part, cache, "--set", "train.max_iters=8", "--resume") == 0
    assert f"resuming from step 4 of 8 ({part / 'ckpt'})\n" in capsys.readouterr().out
    a = json.loads((full / "metrics.json").read_text())
    b = json.loads((part / "metrics.json").read_text())
    losses = lambda m: [s["loss"] for s in m["history"]["steps"]]  # noqa: E731
    assert len(losses(a)) == 8 and losses(a) == losses(b)
    assert a["history"]["evals"] == b["history"]["evals"]
    for name in ("loss.png", "sample.txt", "run.json", "ckpt/model.safetensors",
                 "ckpt/optimizer.safetensors"):
        assert (full / name).is_file(), name
    capsys.readouterr()
    assert main(["sample", "--run", str(full), "--prompt", "ROMEO:", "--max-new-tokens", "30"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ROMEO:") and len(out.rstrip("\n")) >= 36

    # tyr run: the sampling model's logits for a context, with the run's weights
    from pytyr.safetensors import load_file, write_file

    idx = torch.tensor([[3, 1, 4, 1, 5]])
    write_file({"idx": idx}, tmp_path / "idx.safetensors")
    argv = ["run", GPT, "--model", "gptLogits", "--run", str(full), "--inputs",
            str(tmp_path / "idx.safetensors"), "-o", str(tmp_path / "logits.safetensors")]
    assert main(argv) == 0
    logits = load_file(tmp_path / "logits.safetensors")["out"]
    assert list(logits.shape) == [1, 5, 75]
    # the same logits as the training model's first output on the same context
    write_file({"idx": idx, "targets": idx}, tmp_path / "both.safetensors")
    assert main(["run", GPT, "--model", "gpt", "--run", str(full), "--inputs",
                 str(tmp_path / "both.safetensors"), "-o", str(tmp_path / "o.safetensors")]) == 0
    assert torch.equal(load_file(tmp_path / "o.safetensors")["out0"], logits)
    # a context longer than the block violates the model's hypothesis: named
    write_file({"idx": torch.zeros(1, 17, dtype=torch.int64)}, tmp_path / "long.safetensors")
    capsys.readouterr()
    assert main([*argv[:-4], "--inputs", str(tmp_path / "long.safetensors"), "-o",
                 str(tmp_path / "x.safetensors")]) == 1
    assert "'h : t ≤ c.block'" in capsys.readouterr().err


def test_sampling_shares_the_weights_at_the_runs_thread_count(tmp_path, cache, capsys,
                                                              monkeypatch):
    # the closing sample and `tyr sample` decode over gptStep's caches: a module per prefill
    # length (not per context length), every one holding the run's tensors themselves, at the
    # thread count the training chose; the process's count is as it was afterwards
    from pytyr.train.tasks.lm.task import LanguageModelTask

    seen = []
    sample = LanguageModelTask.sample

    def spy(self, factory, options, out_dir):
        made = sample(self, factory, options, out_dir)
        mods = [f.module for f in factory._forwards.values()]
        ptrs = {t.data_ptr() for t in factory.weights.values()}
        seen.append((torch.get_num_threads(), sorted(factory._forwards),
                     all(p.data_ptr() in ptrs for m in mods for p in m.parameters())))
        return made

    monkeypatch.setattr(LanguageModelTask, "sample", spy)
    torch.set_num_threads(2)
    assert _run(tmp_path, cache, "--set", "train.max_iters=4", "--set", "train.threads=1") == 0
    assert main(["sample", "--run", str(tmp_path), "--max-new-tokens", "30"]) == 0
    capsys.readouterr()
    assert torch.get_num_threads() == 2
    for threads, shapes, shared in seen:  # 1 + 30 tokens over 16 positions: t = 1 and 8
        assert threads == 1 and shared
        assert shapes == [("gptStep", (("batch", 1), ("seq", 1))),
                          ("gptStep", (("batch", 1), ("seq", 8)))], shapes
    assert len(seen) == 2
