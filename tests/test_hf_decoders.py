"""`tyr run --weights DIR` on tiny random Llama, Mistral, Qwen2 and Qwen3 checkpoints as
transformers writes them (`save_pretrained`), with no Lean file named: the family comes from
`config.json`'s `model_type`, the model from `tie_word_embeddings`, and the logits equal
transformers' own. Both layouts of the rotary settings are read (transformers 5's
`rope_parameters`, the Hub's `rope_theta` and `rope_scaling`); what the Lean models do not
compute, a config that contradicts the weights and a missing shard are one line each."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers as tf
from safetensors.torch import load_file, save_file
from transformers.utils import logging as hf_logging

from hf_checkpoints import (  # noqa: E402
    bpe_tokenizer,
    edit_config,
    input_ids,
    reference,
    tyr_run,
    variant_checkpoint,
)
from pytyr.cli import main

hf_logging.disable_progress_bar()
ROOT = Path(__file__).resolve().parents[1]
# No two sizes alike, so that a field filled from the wrong key is a shape error.
SIZES = dict(vocab_size=61, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}
VARIANTS = {
    # name: (config class, model class, config overrides, the Lean model tyr picks)
    "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, {"rope_theta": 500000.0}, "llama"),
    "llama3": (tf.LlamaConfig, tf.LlamaForCausalLM, {"rope_scaling": LLAMA3}, "llama"),
    "llama-tied": (tf.LlamaConfig, tf.LlamaForCausalLM, {"tie_word_embeddings": True},
                   "llamaTied"),
    # a window of 3 positions over 9 tokens: every query past the third sees a part
    "mistral": (tf.MistralConfig, tf.MistralForCausalLM, {"sliding_window": 3}, "mistral"),
    "mistral-whole": (tf.MistralConfig, tf.MistralForCausalLM, {"sliding_window": None},
                      "mistral"),
    "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM, {}, "qwen2"),
    # heads of 10 (4 · 10 ≠ 24): Qwen3's head width is its own
    "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, {"head_dim": 10}, "qwen3"),
    "qwen3-tied": (tf.Qwen3Config, tf.Qwen3ForCausalLM,
                   {"head_dim": 6, "tie_word_embeddings": True}, "qwen3Tied"),
}




def checkpoint(path: Path, variant: str, **kw) -> torch.nn.Module:
    return variant_checkpoint(path, VARIANTS, SIZES, variant, **kw)


def ids(path: Path, b: int = 2, t: int = 9) -> torch.Tensor:
    return input_ids(path, SIZES["vocab_size"], b, t)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logits_equal_transformers_without_a_lean_file(tmp_path, capsys, variant):
    model = checkpoint(tmp_path / "ckpt", variant)
    x = ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    said = capsys.readouterr().out
    assert rc == 0, said
    assert f"Llama.lean, model {VARIANTS[variant][3]}" in said
    got = load_file(out)["out"]
    torch.testing.assert_close(got, reference(model, x), rtol=0, atol=1e-5)


def test_the_hubs_rotary_layout_reads_as_transformers_5s(tmp_path, capsys):
    # Llama 3.x on the Hub: `rope_theta` at the top, `rope_scaling` with the old name `type`
    model = checkpoint(tmp_path / "ckpt", "llama3")
    edit_config(tmp_path / "ckpt", rope_parameters=..., rope_theta=10000.0,
                rope_scaling={**{k: v for k, v in LLAMA3.items() if k != "rope_type"},
                              "type": "llama3"})
    x = ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    said = capsys.readouterr().out
    assert rc == 0 and "c.rope_factor=8.0" in said and "c.rope_original=16" in said, said
    torch.testing.assert_close(load_file(out)["out"], reference(model, x), rtol=0, atol=1e-5)


def test_a_sharded_checkpoint_reads_through_its_index(tmp_path):
    model = checkpoint(tmp_path / "ckpt", "qwen3", shard="20KB")
    assert len(list((tmp_path / "ckpt").glob("model-*.safetensors"))) > 1
    x = ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    assert rc == 0
    torch.testing.assert_close(load_file(out)["out"], reference(model, x), rtol=0, atol=1e-5)


@pytest.mark.parametrize("variant,changes,message", [
    ("llama", {"model_type": "qwen3_5"},
     "model_type 'qwen3_5' is not a family `tyr run` reads"),
    ("llama", {"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}},
     "'rope_parameters.rope_type' is 'yarn'"),
    ("llama", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, "factor": 4.0}},
     "a 'llama3' rotary scaling needs low_freq_factor, high_freq_factor, "
     "original_max_position_embeddings"),
    ("llama", {"hidden_act": "gelu"}, "'hidden_act' is 'gelu'"),
    ("llama", {"attention_bias": True}, "'attention_bias' is True"),
    ("qwen2", {"use_sliding_window": True}, "'use_sliding_window' is True"),
    ("qwen3", {"rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.5}},
     "'rope_parameters.partial_rotary_factor' is 0.5"),
    ("llama", {"num_key_value_heads": 0}, "'num_key_value_heads' must be a positive integer"),
])
def test_what_the_model_does_not_compute_is_one_line_naming_the_key(tmp_path, capsys, variant,
                                                                     changes, message):
    checkpoint(tmp_path / "ckpt", variant)
    edit_config(tmp_path / "ckpt", **changes)
    ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    err = capsys.readouterr().err.strip()
    assert rc == 1 and not out.exists()
    assert len(err.splitlines()) == 1 and message in err, err
    assert str(tmp_path / "ckpt" / "config.json") in err


def test_a_config_that_contradicts_the_weights_names_the_tensors(tmp_path, capsys):
    checkpoint(tmp_path / "ckpt", "qwen3")
    edit_config(tmp_path / "ckpt", intermediate_size=41)
    ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    err = capsys.readouterr().err
    assert rc == 1 and not out.exists()
    assert "the weights do not fit the model" in err
    assert "model.layers.0.mlp.gate_proj.weight" in err and "[41, 24]" in err, err


def test_a_missing_shard_is_named_before_the_model_is_built(tmp_path, capsys):
    checkpoint(tmp_path / "ckpt", "llama", shard="20KB")
    shards = sorted((tmp_path / "ckpt").glob("model-*.safetensors"))
    shards[-1].unlink()
    ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    err = capsys.readouterr().err.strip()
    assert rc == 1 and not out.exists()
    assert shards[-1].name in err and len(err.splitlines()) == 1, err


def test_naming_the_lean_file_runs_a_users_variant_of_the_family(tmp_path, capsys):
    # the same checkpoint through the file and model named on the command line
    model = checkpoint(tmp_path / "ckpt", "qwen2")
    x = ids(tmp_path / "ids.safetensors")
    lean = Path(__file__).resolve().parents[1] / "examples" / "llama" / "Llama.lean"
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt", str(lean), "--model", "qwen2")
    assert rc == 0 and "family qwen2" not in capsys.readouterr().out
    torch.testing.assert_close(load_file(out)["out"], reference(model, x), rtol=0, atol=1e-5)


def test_no_lean_file_and_no_checkpoint_config_says_what_to_give(tmp_path, capsys):
    ids(tmp_path / "ids.safetensors")
    rc = main(["run", "--inputs", str(tmp_path / "ids.safetensors")])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and "give a Lean file" in err and "--weights DIR" in err, err


@pytest.mark.parametrize("variant", ["llama3", "mistral", "qwen2", "qwen3", "qwen3-tied"])
def test_greedy_decoding_over_the_cache_is_transformers_generate(tmp_path, variant):
    # 16 greedy tokens through the family's step model (prefill, then one token a step over
    # the typed caches) against transformers' own cached `generate`
    from pytyr.config import read_json
    from pytyr.hf import family_model, model_values, read_hf_config
    from pytyr.pipeline import LeanModels
    from pytyr.safetensors import open_checkpoint
    from pytyr.train.model import RunModel
    from pytyr.train.tasks.lm.kvcache import generate_cached

    model = checkpoint(tmp_path / "ckpt", variant)
    hf = read_hf_config(tmp_path / "ckpt" / "config.json")
    lean, name = family_model(hf)
    base = read_json(lean.parent / "config.json", "config")["model"]
    with open_checkpoint(str(tmp_path / "ckpt")) as ckpt:
        weights = {n: ckpt.tensor(n).clone() for n in ckpt.tensors}
    run = RunModel(LeanModels(lean), name, model_values(base, hf, {"c": {"cache": 32}}))
    prompt = [5, 9, 2, 33, 7]
    got = generate_cached(run.with_weights(weights, "ckpt"), f"{name}Step", prompt, 16, 0.0,
                          block=32)
    with torch.no_grad():
        want = model.generate(torch.tensor([prompt]), max_new_tokens=16, min_new_tokens=16,
                              do_sample=False)[0].tolist()
    assert got == want and len(got) == 21


def test_a_bfloat16_checkpoint_runs_in_float32_and_says_so(tmp_path, capsys):
    # the Hub's checkpoints are bfloat16: read as the model's float32, as transformers does
    # when asked for float32
    model = checkpoint(tmp_path / "f32", "qwen3")
    model.to(torch.bfloat16).save_pretrained(tmp_path / "ckpt")
    x = ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    said = capsys.readouterr().out
    assert rc == 0 and "tensors of another dtype as the model's" in said, said
    f32 = tf.AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt", dtype=torch.float32)
    want = reference(f32.eval(), x)  # the bfloat16 weights, computed in float32
    torch.testing.assert_close(load_file(out)["out"], want, rtol=0, atol=1e-5)


def test_the_checkpoints_tensors_become_the_parameters_without_a_copy(tmp_path):
    # `tyr run` builds the module empty and assigns the checkpoint's (mapped) tensors
    from pytyr.config import read_json
    from pytyr.hf import model_values, read_hf_config
    from pytyr.pipeline import LeanModels, module_from_graph
    from pytyr.safetensors import open_checkpoint
    from pytyr.train.model import RunModel, load_weights
    from pytyr.train.task import Feed

    checkpoint(tmp_path / "ckpt", "llama")
    lean = Path(__file__).resolve().parents[1] / "examples" / "llama" / "Llama.lean"
    hf = read_hf_config(tmp_path / "ckpt" / "config.json")
    values = model_values(read_json(lean.parent / "config.json", "c")["model"], hf, {})
    feeds = {"input_ids": Feed("i64", ("b", "t"))}
    graph = RunModel(LeanModels(lean), "llama", values).graph(feeds, {"b": 1, "t": 4}, "test")
    module = module_from_graph(graph, empty=True)
    assert all(p.is_meta for p in module.parameters())  # nothing allocated, nothing drawn
    with open_checkpoint(tmp_path / "ckpt") as ckpt:
        weights = {n: ckpt.tensor(n) for n in ckpt.tensors}
        assert load_weights(module, weights, "ckpt", assign=True) == 0
        state = module.state_dict()
        assert all(state[k].data_ptr() == weights[k].data_ptr() for k in state)


@pytest.mark.parametrize("variant", ["qwen3-tied", "mistral"])
def test_tyr_sample_of_a_checkpoint_is_transformers_generate(tmp_path, capsys, variant):
    # no run: the family's step model, the checkpoint's tokenizer.json, greedy
    model = checkpoint(tmp_path / "ckpt", variant)
    tok = bpe_tokenizer(SIZES["vocab_size"])
    assert tok.get_vocab_size() <= SIZES["vocab_size"]
    tok.save(str(tmp_path / "ckpt" / "tokenizer.json"))
    prompt = "a bad cab"
    rc = main(["sample", "--weights", str(tmp_path / "ckpt"), "--prompt", prompt,
               "--temperature", "0", "--max-new-tokens", "12", "--set", "model.c.cache=32"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    with torch.no_grad():
        want = model.generate(torch.tensor([tok.encode(prompt).ids]), max_new_tokens=12,
                              min_new_tokens=12, do_sample=False,
                              suppress_tokens=list(range(tok.get_vocab_size(),
                                                         SIZES["vocab_size"])))[0]
    assert out.out.rstrip("\n") == tok.decode(want.tolist())
    assert f"model {VARIANTS[variant][3]}" in out.err


def test_tyr_sample_of_a_checkpoint_without_a_tokenizer_says_what_it_needs(tmp_path, capsys):
    checkpoint(tmp_path / "ckpt", "llama")
    rc = main(["sample", "--weights", str(tmp_path / "ckpt"), "--prompt", "a"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and "tokenizer.json: not found" in err[-1], err


@pytest.mark.parametrize("variant", ["llama3", "mistral", "qwen2", "qwen3-tied"])
def test_padded_sequences_give_transformers_logits_at_every_real_token(tmp_path, capsys,
                                                                       variant):
    # an attention_mask in the inputs picks the family's …Masked model; one sequence padded
    # on the right, one on the left, one not at all
    model = checkpoint(tmp_path / "ckpt", variant)
    x = torch.randint(0, SIZES["vocab_size"], (3, 8), generator=torch.Generator().manual_seed(5))
    mask = torch.ones(3, 8, dtype=torch.int64)
    mask[0, 5:] = 0
    mask[1, :3] = 0
    save_file({"input_ids": x, "attention_mask": mask}, tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    said = capsys.readouterr().out
    assert rc == 0 and f"model {VARIANTS[variant][3]}Masked" in said, said
    with torch.no_grad():
        want = model(input_ids=x, attention_mask=mask).logits
    real = mask.bool()
    torch.testing.assert_close(load_file(out)["out"][real], want[real], rtol=0, atol=1e-5)


def test_padded_inputs_for_a_family_without_a_masked_model_are_one_line(tmp_path, capsys,
                                                                       monkeypatch):
    # the family's Lean file without its …Masked models (as a user's variant of it may be)
    import pytyr.train.pretrained as pretrained

    checkpoint(tmp_path / "ckpt", "mistral")
    text = (ROOT / "examples" / "llama" / "Llama.lean").read_text()
    lean = tmp_path / "Llama.lean"
    lean.write_text(text[:text.index("/-! ## Padded batches")])
    (tmp_path / "config.json").write_text((ROOT / "examples" / "llama" / "config.json")
                                          .read_text())
    monkeypatch.setattr(pretrained, "family_model", lambda hf: (lean, "mistral"))
    x = torch.zeros(1, 4, dtype=torch.int64)
    save_file({"input_ids": x, "attention_mask": torch.ones_like(x)}, tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    err = capsys.readouterr().err.strip()
    assert rc == 1 and not out.exists() and "no model for padded sequences" in err, err
    assert len(err.splitlines()) == 1
