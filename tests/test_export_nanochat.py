"""`tyr export --format hf` of a nanochat run of January's layout: transformers'
`NanoChatForCausalLM` loads it and computes the Lean model's logits; `AutoTokenizer` loads the
run's BPE tokenizer, puts the BOS before a prompt as `tyr sample` does, and greedy `generate`
gives `tyr sample`'s text. A run of today's layout is refused naming each feature NanoChat has
no counterpart for, and a checkpoint with keys NanoChat has no place for is refused with every
problem listed."""
from __future__ import annotations

import json
import random
import shutil

import pytest
import torch

from integrity_runs import rerecord
from pytyr.cli import main
from pytyr.safetensors import load_file, write_file

transformers = pytest.importorskip("transformers")

LEAN = "examples/nanochat/NanoChat.lean"
JANUARY = "examples/nanochat/january.json"
WORDS = ("the of and to a in that is was he for it with as his on be at by had not are but "
         "from or have an they which one you were her all she there would their we him").split()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A nanochat run of 6 steps on a tiny BPE data set (its tokenizer has a BOS)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pytyr.data.prepare import prepare_parquet
    from pytyr.data.tokenizer import train_bpe

    root = tmp_path_factory.mktemp("nanochat-export")
    rng = random.Random(0)
    docs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80))).capitalize() + "."
            for _ in range(200)]
    pq.write_table(pa.table({"text": docs}), root / "docs.parquet")
    meta = prepare_parquet(root / "docs.parquet", train_bpe(docs, 300), root / "shards",
                           val_tokens=1000, progress=False)
    sets = {"model.c.vocab": meta["vocab_size"], "model.c.block": 16, "model.c.depth": 2,
            "model.c.aspect_ratio": 16, "model.c.head_dim": 16, "model.c.n_kv_head": 1,
            "task.data": root / "shards", "task.seq": 16, "train.batch": 8,
            "train.micro_batch": 8, "train.max_iters": 6, "train.warmdown_iters": 4,
            "train.eval_interval": 6, "train.eval_iters": 1, "train.device": "cpu",
            "sample.max_new_tokens": 0, "out": root / "run"}
    flat = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    assert main(["train", LEAN, "--model", "nanochatJan", "--config", JANUARY,
                 "--set", "model.c.window=16", *flat, "-q"]) == 0
    return root / "run"


@pytest.fixture(scope="module")
def exported(run, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "nanochat"
    assert main(["export", "--format", "hf", str(run), str(out)]) == 0
    return out


def test_nanochat_for_causal_lm_computes_the_lean_model_s_logits(run, exported, tmp_path):
    hf = transformers.AutoModelForCausalLM.from_pretrained(exported).eval()
    assert type(hf).__name__ == "NanoChatForCausalLM"
    cfg = hf.config
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size) == (2, 1, 32)
    idx = torch.tensor([[0, 5, 9, 1, 40, 2, 2, 7, 0, 99, 3, 11, 250, 17]])
    write_file({"idx": idx}, tmp_path / "idx.safetensors")
    assert main(["run", LEAN, "--model", "nanochatJanLogits", "--run", str(run), "--inputs",
                 str(tmp_path / "idx.safetensors"), "-o", str(tmp_path / "tyr.safetensors")]) == 0
    ours = load_file(tmp_path / "tyr.safetensors")["out"]
    with torch.no_grad():
        theirs = hf(idx).logits
    assert ours.shape == theirs.shape and ours.std() > 0
    torch.testing.assert_close(theirs, ours, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("prompt", ["the man", "She was", "It is not"])
def test_generate_gives_tyr_sample_s_greedy_text(run, exported, capsys, monkeypatch, prompt):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = transformers.AutoTokenizer.from_pretrained(exported)
    model = transformers.AutoModelForCausalLM.from_pretrained(exported).eval()
    enc = tok(prompt, return_tensors="pt")
    ids = enc["input_ids"][0].tolist()
    assert ids[0] == tok.bos_token_id == 0 and tok.bos_token == "<|bos|>"
    n = 16 - len(ids)
    out = model.generate(**enc, max_new_tokens=n, do_sample=False)
    capsys.readouterr()
    assert main(["sample", "--run", str(run), "--prompt", prompt, "--set", "sample.temperature=0",
                 "--set", f"sample.max_new_tokens={n}"]) == 0
    ours = capsys.readouterr().out[:-1]
    assert tok.decode(out[0], skip_special_tokens=True) == ours and ours.startswith(prompt)


def test_the_special_ids_and_sampling_defaults(run, exported):
    config = json.loads((exported / "config.json").read_text())
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (0, None, None)
    gen = json.loads((exported / "generation_config.json").read_text())
    assert gen == {"bos_token_id": 0, "do_sample": True, "temperature": 0.8, "top_k": 50}
    specials = json.loads((exported / "special_tokens_map.json").read_text())
    assert specials == {"bos_token": "<|bos|>"}


def test_keys_nanochat_has_no_place_for_are_refused(run, tmp_path, capsys):
    bad = tmp_path / "run"
    shutil.copytree(run, bad)
    ckpt = bad / "ckpt" / "model.safetensors"
    weights = dict(load_file(ckpt))
    weights["value_embeds.0"] = torch.zeros(300, 32)  # today's nanochat has these
    del weights["blocks.1.mlp.c_fc"]
    write_file(weights, ckpt)
    rerecord(bad / "ckpt")  # a deliberate change, recorded as a save would
    for fmt in ("hf", "hf-nanochat"):
        assert main(["export", "--format", fmt, str(bad), str(tmp_path / "o"),
                     "--checkpoint", "last"]) == 1
        err = capsys.readouterr().err
        assert "NanoChat's layout (2 problems)" in err
        assert "unexpected: 'value_embeds.0' [300, 32] (no NanoChatForCausalLM counterpart)" in err
        assert "missing: 'blocks.1.mlp.c_fc' (NanoChat needs [128, 32])" in err
        assert not (tmp_path / "o").exists()
    assert main(["export", "--format", "hf-gpt2", str(run), str(tmp_path / "o")]) == 1
    assert "not the GPT example's weights" in capsys.readouterr().err


def test_today_s_layout_is_refused_by_its_features(run, tmp_path, capsys):
    sets = {"model.c.vocab": 300, "model.c.block": 16, "model.c.depth": 2,
            "model.c.aspect_ratio": 16, "model.c.head_dim": 16, "model.c.n_kv_head": 1,
            "model.c.window": 3, "task.data": run.parent / "shards", "task.seq": 16,
            "train.batch": 8, "train.micro_batch": 8, "train.max_iters": 1,
            "train.warmup_iters": 0, "train.warmdown_iters": 1, "train.eval_interval": 1,
            "train.eval_iters": 1, "train.device": "cpu", "sample.max_new_tokens": 0,
            "out": tmp_path / "today"}
    flat = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    assert main(["train", LEAN, "--model", "nanochat", *flat, "-q"]) == 0
    capsys.readouterr()
    for fmt in ("hf", "hf-nanochat"):
        assert main(["export", "--format", fmt, str(tmp_path / "today"),
                     str(tmp_path / "o")]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no counterpart for: value embeddings; per-layer " \
            "residual scalars; per-layer x0 scalars; smear; backout; queries and keys scaled " \
            "by qk_scale 1.2" in err and "sliding windows of 3 in a context of 16" in err, err
        assert not (tmp_path / "o").exists()
