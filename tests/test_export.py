"""`tyr export --format hf-gpt2` / `hf`: the Lean GPT's run as a Hugging Face GPT-2 that
`transformers` loads and that computes the same logits; with its character tokenizer, which
`AutoTokenizer` loads, so that `AutoModelForCausalLM` generates `tyr sample`'s greedy text;
a checkpoint of another layout, or a run of a task with no transformers class, is refused
with every problem listed and nothing written."""
from __future__ import annotations

import json

import pytest
import torch

from integrity_runs import rerecord
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


def replace_weights(run, out, change):
    """A copy of the run `run` at `out` whose checkpoints' weights (last and best) are
    `change(weights)`."""
    import shutil

    from pytyr.safetensors import load_file

    shutil.copytree(run, out)
    for which in ("ckpt", "best"):
        if not (out / which).is_dir():
            continue
        ckpt = out / which / "model.safetensors"
        write_file(change(dict(load_file(ckpt))), ckpt)
        rerecord(out / which)  # a deliberate change, recorded as a save would
    return out


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
    def damage(weights):
        del weights["ln_f_bias"]
        weights["blocks.0.attn.c_proj"] = torch.zeros(3, 3)
        weights["extra"] = torch.zeros(2)
        return weights

    bad = replace_weights(run, tmp_path / "run", damage)
    for fmt in ("hf-gpt2", "hf"):
        assert main(["export", "--format", fmt, str(bad), str(tmp_path / "o")]) == 1
        err = capsys.readouterr().err
        assert "(3 problems)" in err
        for part in ("missing: 'ln_f_bias'", "unexpected: 'extra' [2]",
                     "shape: 'blocks.0.attn.c_proj' is [3, 3], GPT-2 needs [16, 16]"):
            assert part in err
        assert not (tmp_path / "o").exists()


def tyr_greedy(run, prompt, n, capsys):
    """`tyr sample`'s text at temperature 0: the prompt and `n` tokens."""
    capsys.readouterr()
    assert main(["sample", "--run", str(run), "--prompt", prompt, "--set", "sample.temperature=0",
                 "--set", f"sample.max_new_tokens={n}"]) == 0
    return capsys.readouterr().out[:-1]  # print's newline


def hf_greedy(out, prompt, n):
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    enc = tok(prompt, return_tensors="pt")
    ids = model.generate(**enc, max_new_tokens=n, do_sample=False)
    return tok.decode(ids[0], skip_special_tokens=True)


PROMPTS = ["ROMEO:", "\n", "What is th", "Thou art, my"]


@pytest.mark.parametrize("weights", ["trained", "random"])
def test_auto_classes_load_the_export_and_generate_tyr_sample_s_greedy_text(
        run, tmp_path, capsys, monkeypatch, weights):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if weights == "random":  # a model whose greedy text is not one repeated character
        def randomise(w):
            gen = torch.Generator().manual_seed(0)  # the same weights for last and best
            return {k: torch.randn(v.shape, generator=gen) * (1.0 if v.ndim > 1 else 0.1)
                    for k, v in w.items()}

        run = replace_weights(run, tmp_path / "random", randomise)
    out = tmp_path / "hf"
    assert main(["export", "--format", "hf", str(run), str(out)]) == 0
    model = transformers.AutoModelForCausalLM.from_pretrained(out)
    assert type(model).__name__ == "GPT2LMHeadModel"
    texts = set()
    for prompt in PROMPTS:
        n = 16 - len(prompt)  # GPT-2 has no positions beyond the context; tyr slides instead
        ours = tyr_greedy(run, prompt, n, capsys)
        assert hf_greedy(out, prompt, n) == ours and ours.startswith(prompt)
        texts.add(ours[len(prompt):])
    if weights == "random":
        assert len(set("".join(texts))) >= 4, texts


def test_generate_stops_at_the_context_and_the_export_says_so(run, tmp_path, capsys,
                                                              monkeypatch):
    # GPT-2's positions are a table of block (16) rows: transformers' generate has no word
    # for running past it but an IndexError; the export's generation_config stops it there
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "hf"
    capsys.readouterr()
    assert main(["export", "--format", "hf", str(run), str(out)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0] == (f"note: {out}: the model has 16 positions (config.json n_positions): "
                       f"generation_config.json's max_length 16 stops generate there, the "
                       f"prompt included; a longer max_length or max_new_tokens feeds it "
                       f"positions it has not got, and transformers fails (IndexError)")
    assert json.loads((out / "config.json").read_text())["n_positions"] == 16
    assert json.loads((out / "generation_config.json").read_text())["max_length"] == 16
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    enc = tok("ROMEO:", return_tensors="pt")
    assert model.generation_config.max_length == 16
    for kw in ({}, {"do_sample": False}):  # as written (sampling), and greedy
        assert model.generate(**enc, **kw).shape == (1, 16)  # the context, not 20 new tokens
    with pytest.raises(IndexError):  # what the note warns of: transformers' own failure
        model.generate(**enc, do_sample=False, max_new_tokens=12)  # feeds position 16


def test_the_tokenizer_maps_characters_as_tyr_does(run, capsys):
    from pytyr.data import shakespeare

    out = run.parent / "hf-tokenizer"
    assert main(["export", "--format", "hf", str(run), str(out)]) == 0
    cfg = json.loads((run / "run.json").read_text())
    data = shakespeare.prepare(cfg["task"]["cache_dir"])
    tok = transformers.AutoTokenizer.from_pretrained(out)
    every = "".join(data.itos)
    text = "ROMEO:\nBut, soft! what light through yonder window breaks?\n\n"
    for t in (every, text, every[::-1]):
        ids = tok(t)["input_ids"]
        assert ids == data.encode(t)
        assert tok.decode(ids) == data.decode(ids) == t
    assert len(tok) == len(data.itos) == 75 and tok.bos_token_id is None
    assert tok.eos_token_id is None
    config = transformers.AutoConfig.from_pretrained(out)
    assert config.bos_token_id is None and config.eos_token_id is None
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen == {"do_sample": True, "temperature": 0.8, "top_k": 200, "max_length": 16}


def test_a_run_with_no_transformers_class_is_refused_in_one_line(tmp_path, capsys):
    diffusion = ["--set", "model.c.n_layer=1", "--set", "model.c.n_head=2", "--set",
                 "model.c.head_dim=8", "--set", "model.c.block=16", "--set", "task.seq=16",
                 "--set", "train.batch=4", "--set", "train.max_iters=1", "--set",
                 "train.eval_iters=1", "--set", "sample.steps=1", "--set", "sample.view=off",
                 "-q", "--set", f"out={tmp_path / 'run'}", "--set",
                 f"task.cache_dir={tmp_path / 'cache'}"]
    assert main(["train", "examples/diffusion/Diffusion.lean", "--model", "diffusion",
                 *diffusion]) == 0
    capsys.readouterr()
    assert main(["export", "--format", "hf", str(tmp_path / "run"), str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "task 'mdlm' (model 'diffusion') is not a language model's" in err
    assert err.count("\n") == 1 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["chars", "bpe"])
def test_a_tokenizer_with_a_bos_is_written_so_that_the_bos_comes_first(tmp_path, kind):
    from pytyr.data.tokenizer import CharTokenizer, train_bpe
    from pytyr.export.hf_tokenizer import write_tokenizer_files
    from pytyr.export.output import Stage

    text = "to be or not to be\nthat is the question"
    tok = (CharTokenizer.from_text(text, bos="<|bos|>") if kind == "chars"
           else train_bpe([text] * 20, 280))
    ids = write_tokenizer_files(Stage(tmp_path), tok, tok.bos_id, None, 32)
    assert ids == {"bos_token_id": tok.bos_id, "eos_token_id": None, "pad_token_id": None}
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert hf.bos_token == "<|bos|>" and hf.bos_token_id == tok.bos_id
    for t in ("not to be", "question\nis"):
        enc = hf(t)["input_ids"]
        assert enc == [tok.bos_id] + tok.encode(t)
        assert hf.decode(enc, skip_special_tokens=True) == tok.decode(enc, skip_special=True) == t
    assert json.loads((tmp_path / "generation_config.json").read_text()) == {
        "bos_token_id": tok.bos_id}


def test_the_export_runs_again_from_its_directory_with_its_config(run, tmp_path, capsys):
    # export → `tyr run --weights DIR`: GPT-2's names and config read back into GPT.lean, at
    # the example's default config (block 64, 4 layers: the export's config.json must fill it)
    from pytyr.safetensors import load_file

    out = tmp_path / "gpt2"
    assert main(["export", "--format", "hf-gpt2", str(run), str(out)]) == 0
    idx = torch.tensor([[5, 9, 1, 40, 2, 2, 7, 0, 74, 3, 11], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0]])
    write_file({"idx": idx}, tmp_path / "idx.safetensors")
    common = [GPT, "--model", "gptLogits", "--inputs", str(tmp_path / "idx.safetensors")]
    assert main(["run", *common, "--run", str(run), "-o", str(tmp_path / "a.safetensors")]) == 0
    assert main(["run", *common, "--weights", str(out),
                 "-o", str(tmp_path / "b.safetensors")]) == 0
    text = capsys.readouterr().out
    assert "(gpt2): c.vocab=75, c.block=16, c.n_layer=2, c.n_head=2, c.head_dim=8" in text
    assert "read 28 keys by GPT-2's names" in text
    torch.testing.assert_close(load_file(tmp_path / "b.safetensors")["out"],
                               load_file(tmp_path / "a.safetensors")["out"], atol=1e-6, rtol=0)


def test_the_export_runs_without_a_lean_file_in_gpt2_lean(run, tmp_path, capsys):
    # export → `tyr run --weights DIR` alone: the family's own model (exact GELU: gpt2Exact),
    # GPT-2's keys as its names, the run's logits again
    from pytyr.safetensors import load_file

    out = tmp_path / "gpt2"
    assert main(["export", "--format", "hf-gpt2", str(run), str(out)]) == 0
    idx = torch.tensor([[5, 9, 1, 40, 2, 2, 7, 0, 74, 3, 11]])
    write_file({"idx": idx}, tmp_path / "idx.safetensors")
    write_file({"input_ids": idx}, tmp_path / "ids.safetensors")
    assert main(["run", GPT, "--model", "gptLogits", "--run", str(run), "--inputs",
                 str(tmp_path / "idx.safetensors"), "-o", str(tmp_path / "a.safetensors")]) == 0
    assert main(["run", "--weights", str(out), "--inputs", str(tmp_path / "ids.safetensors"),
                 "-o", str(tmp_path / "b.safetensors")]) == 0
    text = capsys.readouterr().out
    assert "examples/gpt2/GPT2.lean, model gpt2Exact" in text and "c.inner=64" in text, text
    assert "by GPT-2's names" not in text
    torch.testing.assert_close(load_file(tmp_path / "b.safetensors")["out"],
                               load_file(tmp_path / "a.safetensors")["out"], atol=1e-5, rtol=0)
