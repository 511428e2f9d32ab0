"""`tyr export --format hf-gpt2`: the Lean GPT's checkpoint as a Hugging Face GPT-2 that
`transformers` loads and that computes the same logits; a checkpoint of another layout is
refused with every problem listed."""
from __future__ import annotations

import json

import pytest
import torch

from pytyr.cli import main
from pytyr.safetensors import write_file

transformers = pytest.importorskip("transformers")

GPT = "examples/gpt/GPT.lean"
TINY = ["--set", "model.c.n_layer=2", "--set", "model.c.n_head=2", "--set", "model.c.head_dim=8",
        "--set", "model.c.block=16", "--set", "task.seq=16", "--set", "train.batch=4",
        "--set", "train.max_iters=3", "--set", "train.eval_iters=1", "--set", "train.lr=0.01",
        "--set", "sample.max_new_tokens=0", "-q"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("export")
    assert main(["train", GPT, "--model", "gpt", *TINY, "--set", f"out={d / 'run'}",
                 "--set", f"task.cache_dir={d / 'cache'}"]) == 0
    return d / "run"


def test_transformers_loads_the_export_and_computes_the_same_logits(run, tmp_path, capsys):
    out = tmp_path / "gpt2"
    assert main(["export", "--format", "hf-gpt2", str(run), str(out)]) == 0
    hf = transformers.GPT2LMHeadModel.from_pretrained(out).eval()
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["vocab_size"]) == (2, 2, 16, 75)

    idx = torch.tensor([[5, 9, 1, 40, 2, 2, 7, 0, 74, 3, 11]])
    write_file({"idx": idx}, tmp_path / "idx.safetensors")
    assert main(["run", GPT, "--model", "gptLogits", "--run", str(run), "--inputs",
                 str(tmp_path / "idx.safetensors"), "-o", str(tmp_path / "tyr.safetensors")]) == 0
    from pytyr.safetensors import load_file

    ours = load_file(tmp_path / "tyr.safetensors")["out"]
    with torch.no_grad():
        theirs = hf(idx).logits
    assert ours.shape == theirs.shape
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=1e-5)


def test_a_checkpoint_of_another_layout_is_refused_with_every_problem(run, tmp_path, capsys):
    import shutil

    from pytyr.safetensors import load_file
    from pytyr.train.checkpoint import save_checkpoint
    from pytyr.train.distributed import StateView

    bad = tmp_path / "run"
    shutil.copytree(run, bad)
    weights = dict(load_file(bad / "ckpt" / "model.safetensors"))
    del weights["ln_f_bias"]
    weights["blocks.0.attn.c_proj"] = torch.zeros(3, 3)
    weights["extra"] = torch.zeros(2)
    save_checkpoint(bad / "ckpt", module=StateView(weights), optimizers=None, step=3)
    assert main(["export", "--format", "hf-gpt2", str(bad), str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "(3 problems)" in err
    for part in ("missing: 'ln_f_bias'", "unexpected: 'extra' [2]",
                 "shape: 'blocks.0.attn.c_proj' is [3, 3], GPT-2 needs [16, 16]"):
        assert part in err
    assert not (tmp_path / "o").exists()
