"""Fine-tuning a Hugging Face checkpoint: `tyr train --weights DIR` with no Lean file trains
the family's training model from the checkpoint's weights on the user's own shards, and each
step's loss equals a plain transformers training loop's on the same batches with the same
AdamW (the task's batches, drawn again here; decay on matrices only, the same clipping). The
run then samples over the KV cache (the family's step model, `sample.step_model` unless the
config names another) and resumes exactly."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers as tf
from safetensors.torch import load_file, save_file
from transformers.utils import logging as hf_logging

from pytyr.cli import main
from pytyr.data.prepare import prepare_parquet
from pytyr.data.tokenizer import CharTokenizer
from pytyr.train.task import TaskContext
from pytyr.train.tasks import task_class, task_options
from test_parquet import ALPHABET, write_dataset  # noqa: E402  (tests/ is on sys.path)

hf_logging.disable_progress_bar()
STEPS, BATCH, SEQ, LR = 4, 4, 16, 3e-3


def _config(tmp_path: Path, data: Path, **train) -> Path:
    cfg = {"task": {"name": "shard_lm", "data": str(data), "seq": SEQ},
           "train": {"max_iters": STEPS, "lr_decay_iters": STEPS, "batch": BATCH, "lr": LR,
                     "schedule": "constant",
                     "weight_decay": 0.1, "grad_clip": 1.0, "eval_interval": 100,
                     "eval_iters": 1, "log_interval": 1, "checkpoint_interval": 2,
                     "threads": 1, **train},
           "out": str(tmp_path / "run"),
           "sample": {"max_new_tokens": 6, "temperature": 0.0, "prompt": "abc"},
           "model": {"c": {"cache": SEQ}}}
    path = tmp_path / "tune.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune")
    tok = CharTokenizer(sorted(ALPHABET), bos="<|bos|>")
    write_dataset(root / "docs")
    prepare_parquet(root / "docs", tok, root / "data", shard_tokens=400, val_tokens=100,
                    progress=False)
    config = tf.Qwen3Config(vocab_size=tok.vocab_size, hidden_size=24, intermediate_size=40,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=8, max_position_embeddings=64, tie_word_embeddings=True)
    torch.manual_seed(0)
    tf.Qwen3ForCausalLM(config).save_pretrained(root / "ckpt")
    return root


def _reference_losses(root: Path, cfg_path: Path) -> list[float]:
    """The same steps in a plain transformers loop: the task's batches, torch's AdamW."""
    cfg = json.loads(cfg_path.read_text())
    cls = task_class(cfg["task"], "test")
    task = cls(task_options(cls, cfg["task"], "test"), TaskContext(BATCH, 1337))
    task.prepare()
    model = tf.Qwen3ForCausalLM.from_pretrained(root / "ckpt").train()
    params = list(model.parameters())  # the embedding once: it is the head too
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.99), eps=1e-8)
    losses = []
    for k in range(STEPS):
        batch = task.training_batch(k)
        logits = model(input_ids=batch["idx"]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 batch["targets"].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
    return losses


def _losses(run: Path) -> list[float]:
    history = json.loads((run / "metrics.json").read_text())["history"]
    return [s["loss"] for s in history["steps"]]


def test_each_step_equals_a_transformers_loop_from_the_same_weights(setup, tmp_path, capsys):
    cfg = _config(tmp_path, setup / "data")
    rc = main(["train", "--weights", str(setup / "ckpt"), "--config", str(cfg), "-q"])
    said = capsys.readouterr()
    assert rc == 0, said.err
    said = said.out
    assert "family qwen3" in said and "model qwen3TiedTrain" in said
    got, want = _losses(tmp_path / "run"), _reference_losses(setup, cfg)
    assert len(got) == STEPS and got[0] != got[-1]
    assert max(abs(a - b) for a, b in zip(got, want)) <= 1e-4, (got, want)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["init"] == str((setup / "ckpt").resolve()) and run["model"] == "qwen3TiedTrain"
    # the family's samples decode over its step model's caches without a word of config
    assert run["sample"]["step_model"] == "qwen3TiedStep"
    sample = (tmp_path / "run" / "sample.txt").read_text()
    assert sample.startswith("abc") and len(sample) == 3 + 6


def test_a_fine_tune_resumes_exactly(setup, tmp_path, capsys):
    cfg = _config(tmp_path, setup / "data")
    whole = tmp_path / "whole"
    assert main(["train", "--weights", str(setup / "ckpt"), "--config", str(cfg), "-q",
                 "--set", f"out={whole}"]) == 0
    assert main(["train", "--weights", str(setup / "ckpt"), "--config", str(cfg), "-q",
                 "--set", "train.max_iters=2"]) == 0
    assert main(["train", "--weights", str(setup / "ckpt"), "--config", str(cfg), "-q",
                 "--resume"]) == 0
    capsys.readouterr()
    assert _losses(tmp_path / "run") == _losses(whole)


def test_training_weights_that_do_not_fit_are_refused_before_any_step(setup, tmp_path, capsys):
    cfg = _config(tmp_path, setup / "data")
    rc = main(["train", "--weights", str(setup / "ckpt"), "--config", str(cfg), "-q",
               "--set", "model.c.intermediate=41"])
    err = capsys.readouterr().err
    assert rc == 1 and "model.layers.0.mlp.gate_proj.weight" in err, err
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_the_export_is_the_family_again_and_transformers_gives_the_same_logits(setup, tmp_path,
                                                                               capsys):
    cfg = _config(tmp_path, setup / "data")
    assert main(["train", "--weights", str(setup / "ckpt"), "--config", str(cfg), "-q"]) == 0
    assert main(["export", "--format", "hf", str(tmp_path / "run"), str(tmp_path / "hf")]) == 0
    capsys.readouterr()
    exported = tf.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(exported).__name__ == "Qwen3ForCausalLM" and exported.config.tie_word_embeddings
    tok = tf.AutoTokenizer.from_pretrained(tmp_path / "hf")
    x = torch.tensor([tok("abc ij")["input_ids"]])
    save_file({"input_ids": x}, tmp_path / "ids.safetensors")
    # the run's own weights through tyr, the export through transformers
    assert main(["run", "examples/llama/Llama.lean", "--model", "qwen3Tied", "--run",
                 str(tmp_path / "run"), "--inputs", str(tmp_path / "ids.safetensors"),
                 "-o", str(tmp_path / "tyr.safetensors")]) == 0
    with torch.no_grad():
        want = exported(input_ids=x).logits
    got = load_file(tmp_path / "tyr.safetensors")["out"]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    # and the export read back by tyr, with no Lean file
    assert main(["run", "--weights", str(tmp_path / "hf"), "--inputs",
                 str(tmp_path / "ids.safetensors"), "-o", str(tmp_path / "back.safetensors")]) == 0
    torch.testing.assert_close(load_file(tmp_path / "back.safetensors")["out"], want, rtol=0,
                               atol=1e-5)


@pytest.mark.parametrize("extra", [5, -1])
def test_a_table_padded_past_the_tokenizer_trains_and_samples_its_tokens(setup, tmp_path,
                                                                         capsys, extra):
    # a checkpoint's vocabulary may hold more rows than the tokenizer has tokens (Qwen3:
    # 151,936 for 151,669): ids below the data's vocabulary are below the model's, and the
    # sample draws from the data's rows only; fewer rows than tokens is refused
    vocab = json.loads((setup / "ckpt" / "config.json").read_text())["vocab_size"]
    config = tf.Qwen3Config(vocab_size=vocab + extra, hidden_size=24, intermediate_size=40,
                            num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=8, max_position_embeddings=64, tie_word_embeddings=True)
    torch.manual_seed(1)
    tf.Qwen3ForCausalLM(config).save_pretrained(tmp_path / "padded")
    cfg = _config(tmp_path, setup / "data")
    rc = main(["train", "--weights", str(tmp_path / "padded"), "--config", str(cfg), "-q",
               "--set", "sample.temperature=1.0", "--set", "sample.max_new_tokens=40"])
    err = capsys.readouterr().err
    if extra < 0:
        assert rc == 1 and f"vocab={vocab}" in err and f"model.c.vocab is {vocab - 1}" in err
        return
    assert rc == 0, err
    sample = (tmp_path / "run" / "sample.txt").read_text()
    assert 3 < len(sample) <= 3 + 40 and set(sample) <= set(ALPHABET)  # BOS draws decode to ""


def _family_checkpoint(path: Path, vocab: int, family: str) -> str:
    """A tiny random checkpoint of `family` over the data's vocabulary; its step model."""
    torch.manual_seed(2)
    if family == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=vocab, n_positions=32, n_embd=24,
                                                 n_layer=2, n_head=3, n_inner=40,
                                                 bos_token_id=0, eos_token_id=0))
    elif family == "mixtral":
        model = tf.MixtralForCausalLM(tf.MixtralConfig(
            vocab_size=vocab, hidden_size=24, intermediate_size=20, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
            num_local_experts=3, num_experts_per_tok=2))
    elif family in ("llama", "mistral", "qwen2"):
        cfg, cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
                    "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
                    "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM)}[family]
        model = cls(cfg(vocab_size=vocab, hidden_size=24, intermediate_size=40,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        max_position_embeddings=32, rope_theta=5e5,
                        **({"sliding_window": 5} if family == "mistral" else {})))
    else:
        model = tf.Qwen3MoeForCausalLM(tf.Qwen3MoeConfig(
            vocab_size=vocab, hidden_size=24, moe_intermediate_size=12, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=6, num_experts=4,
            num_experts_per_tok=2, norm_topk_prob=True, max_position_embeddings=32,
            tie_word_embeddings=True))
    model.save_pretrained(path)
    return {"gpt2": "gpt2Step", "mixtral": "mixtralStep", "qwen3_moe": "qwen3MoeTiedStep",
            "llama": "llamaStep", "mistral": "mistralStep", "qwen2": "qwen2Step"}[family]


@pytest.mark.parametrize("family,cls,model", [
    ("gpt2", "GPT2LMHeadModel", "gpt2"), ("mixtral", "MixtralForCausalLM", "mixtral"),
    ("qwen3_moe", "Qwen3MoeForCausalLM", "qwen3MoeTied"), ("llama", "LlamaForCausalLM", "llama"),
    ("mistral", "MistralForCausalLM", "mistral"), ("qwen2", "Qwen2ForCausalLM", "qwen2")])
def test_every_family_fine_tunes_samples_and_exports_as_itself(setup, tmp_path, capsys, family,
                                                               cls, model):
    # every family: trained from its checkpoint (the closing sample, and `tyr sample` of the
    # run, over the step model's caches), exported, loaded by transformers
    vocab = json.loads((setup / "ckpt" / "config.json").read_text())["vocab_size"]
    step = _family_checkpoint(tmp_path / "ckpt", vocab, family)
    cfg = _config(tmp_path, setup / "data", max_iters=2, lr_decay_iters=2)
    raw = json.loads(cfg.read_text())
    if family == "gpt2":  # its caches are its position table's: no c.cache
        del raw["model"]
    else:  # Mixtral's window (none: the context's 32) must fit the caches
        raw["model"]["c"]["cache"] = 32
    cfg.write_text(json.dumps(raw))
    rc = main(["train", "--weights", str(tmp_path / "ckpt"), "--config", str(cfg), "-q",
               "--set", f"sample.step_model={step}"])
    said = capsys.readouterr()
    assert rc == 0, said.err
    assert f"model {model}Train" in said.out
    losses = _losses(tmp_path / "run")
    assert len(losses) == 2 and all(0 < x < 10 for x in losses), losses
    sample = (tmp_path / "run" / "sample.txt").read_text()
    assert sample.startswith("abc") and len(sample) == 3 + 6
    assert main(["sample", "--run", str(tmp_path / "run"), "--temperature", "0",
                 "--max-new-tokens", "6"]) == 0  # the run's sample table: prompt "abc"
    assert capsys.readouterr().out.rstrip("\n") == sample
    assert main(["export", "--format", "hf", str(tmp_path / "run"), str(tmp_path / "hf")]) == 0
    capsys.readouterr()
    exported = tf.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(exported).__name__ == cls
    tok = tf.AutoTokenizer.from_pretrained(tmp_path / "hf")
    x = torch.tensor([tok("abc ij")["input_ids"]])
    save_file({"input_ids": x}, tmp_path / "ids.safetensors")
    lean = {"gpt2": "gpt2/GPT2.lean", "mixtral": "moe/MoE.lean",
            "qwen3_moe": "moe/MoE.lean"}.get(family, "llama/Llama.lean")
    assert main(["run", f"examples/{lean}", "--model", model, "--run", str(tmp_path / "run"),
                 "--inputs", str(tmp_path / "ids.safetensors"),
                 "-o", str(tmp_path / "tyr.safetensors")]) == 0
    with torch.no_grad():
        want = exported(input_ids=x).logits
    got = load_file(tmp_path / "tyr.safetensors")["out"]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
