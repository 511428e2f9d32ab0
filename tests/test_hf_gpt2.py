"""`tyr run --weights DIR` on tiny random GPT-2 checkpoints as transformers writes them, with no
Lean file named: the family (`model_type: gpt2`) runs `examples/gpt2/GPT2.lean`, its model by
`activation_function` (`gelu_new` → `gpt2`, exact `gelu` → `gpt2Exact`), its parameter paths
the checkpoint's keys, and the logits equal transformers' own. Released checkpoints' layout is
read too (keys without `transformer.`, the causal-mask buffers, no `lm_head.weight`); what the
model does not compute, and a config that contradicts the weights, are one line each."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file
from transformers.utils import logging as hf_logging

from hf_checkpoints import bpe_tokenizer, drawn, edit_config, reference, tyr_run  # noqa: E402
from pytyr.cli import main
from pytyr.hf import read_hf_config
from pytyr.pipeline import LeanModels

hf_logging.disable_progress_bar()
ROOT = Path(__file__).resolve().parents[1]
# No two sizes alike (the MLP not 4 × the width), so a field filled from the wrong key is a
# shape error.
SIZES = dict(vocab_size=53, n_positions=14, n_embd=24, n_layer=2, n_head=3, n_inner=40,
             bos_token_id=0, eos_token_id=0)




def checkpoint(path: Path, *, shard: str | None = None, seed: int = 1,
               **over) -> torch.nn.Module:
    """`save_pretrained` of a random GPT2LMHeadModel (gelu_new unless `over` says)."""
    config = tf.GPT2Config(**{**SIZES, **over})
    model = drawn(tf.GPT2LMHeadModel(config), seed, scale=0.3,
                  gain=lambda n: ".ln_" in n and n.endswith(".weight"))
    model.save_pretrained(path, **({"max_shard_size": shard} if shard else {}))
    return model


def ids(path: Path, b: int = 2, t: int = 11) -> torch.Tensor:
    x = torch.randint(0, SIZES["vocab_size"], (b, t), generator=torch.Generator().manual_seed(5))
    save_file({"input_ids": x}, path)
    return x








@pytest.mark.parametrize("over,model", [
    ({}, "gpt2"),  # gelu_new, an MLP of 40 (not 4 × 24)
    ({"n_inner": None, "layer_norm_epsilon": 1e-3}, "gpt2"),  # null: 4 × n_embd
    ({"activation_function": "gelu_pytorch_tanh"}, "gpt2"),
    ({"activation_function": "gelu"}, "gpt2Exact"),
])
def test_logits_equal_transformers_without_a_lean_file(tmp_path, capsys, over, model):
    hf = checkpoint(tmp_path / "ckpt", **over)
    x = ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    said = capsys.readouterr().out
    assert rc == 0, said
    assert f"examples/gpt2/GPT2.lean, model {model}" in said
    inner = over.get("n_inner", SIZES["n_inner"]) or 4 * SIZES["n_embd"]
    assert f"c.inner={inner}, c.eps={over.get('layer_norm_epsilon', 1e-5)}" in said, said
    assert "by GPT-2's names" not in said  # GPT2.lean's names are the keys: nothing renamed
    torch.testing.assert_close(load_file(out)["out"], reference(hf, x), rtol=0, atol=1e-5)


def test_the_models_differ_by_their_activation(tmp_path):
    # the same weights through gpt2 and gpt2Exact: the tanh approximation shows
    hf = checkpoint(tmp_path / "ckpt")
    x = ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt", "--model", "gpt2Exact")
    assert rc == 0
    diff = (load_file(out)["out"] - reference(hf, x)).abs().max().item()
    assert diff > 1e-4, diff


def test_a_sharded_checkpoint_reads_through_its_index(tmp_path):
    hf = checkpoint(tmp_path / "ckpt", shard="20KB")
    assert len(list((tmp_path / "ckpt").glob("model-*.safetensors"))) > 1
    x = ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    assert rc == 0
    torch.testing.assert_close(load_file(out)["out"], reference(hf, x), rtol=0, atol=1e-5)


def test_the_released_layout_reads_under_the_prefix(tmp_path, capsys):
    # the Hub's gpt2 and distilgpt2: a GPT2Model's keys (no `transformer.`), every block's
    # causal-mask buffers, and an lm_head.weight kept here too (it is wte's)
    hf = checkpoint(tmp_path / "ckpt", n_inner=None)
    state = load_file(tmp_path / "ckpt" / "model.safetensors")
    bare = {k.removeprefix("transformer."): v for k, v in state.items()}
    n = SIZES["n_positions"]
    for i in range(SIZES["n_layer"]):
        bare[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
        bare[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    bare["lm_head.weight"] = state["transformer.wte.weight"].clone()
    (tmp_path / "ckpt" / "model.safetensors").unlink()
    save_file(bare, tmp_path / "ckpt" / "model.safetensors", {"format": "pt"})
    x = ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    said = capsys.readouterr().out
    assert rc == 0, said
    assert "read the keys as under 'transformer.' (a checkpoint of the bare model)" in said
    assert ("ignored 5 keys the model does not use: h.0.attn.bias (a causal-mask buffer), "
            "h.0.attn.masked_bias (a buffer), h.1.attn.bias (a causal-mask buffer), "
            "h.1.attn.masked_bias (a buffer), lm_head.weight (the head, tied to wte)") in said
    torch.testing.assert_close(load_file(out)["out"], reference(hf, x), rtol=0, atol=1e-5)


def test_the_gpt_example_runs_an_exact_checkpoint_and_refuses_gelu_new(tmp_path, capsys):
    # naming examples/gpt/GPT.lean: its layout by the rename; what it does not compute, refused
    hf = checkpoint(tmp_path / "ckpt", activation_function="gelu", n_inner=None)
    x = ids(tmp_path / "ids.safetensors")
    gpt = str(ROOT / "examples" / "gpt" / "GPT.lean")
    save_file({"idx": x}, tmp_path / "idx.safetensors")
    out = tmp_path / "gpt.safetensors"
    args = ["run", gpt, "--model", "gptLogits", "--weights", str(tmp_path / "ckpt"),
            "--inputs", str(tmp_path / "idx.safetensors"), "-o", str(out)]
    assert main(args) == 0
    assert "read 28 keys by GPT-2's names" in capsys.readouterr().out
    torch.testing.assert_close(load_file(out)["out"], reference(hf, x), rtol=0, atol=1e-5)
    edit_config(tmp_path / "ckpt", activation_function="gelu_new")
    out.unlink()
    assert main(args) == 1 and not out.exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'activation_function' is 'gelu_new'" in err, err
    assert "examples/gpt2/GPT2.lean computes gelu_new" in err


@pytest.mark.parametrize("changes,message", [
    ({"activation_function": "relu"}, "'activation_function' is 'relu'; the gpt2 model here "
                                      "needs 'gelu_new' or 'gelu_pytorch_tanh' or 'gelu' or "
                                      "'gelu_python'"),
    ({"scale_attn_by_inverse_layer_idx": True}, "'scale_attn_by_inverse_layer_idx' is True"),
    ({"scale_attn_weights": False}, "'scale_attn_weights' is False"),
    ({"tie_word_embeddings": False}, "'tie_word_embeddings' is False"),
    ({"n_inner": 0}, "'n_inner' must be a positive integer, got 0"),
    ({"n_embd": 25}, "'n_embd' (25) is not a multiple of 'n_head' (3)"),
])
def test_what_the_model_does_not_compute_is_one_line_naming_the_key(tmp_path, capsys, changes,
                                                                     message):
    checkpoint(tmp_path / "ckpt")
    edit_config(tmp_path / "ckpt", **changes)
    ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    err = capsys.readouterr().err.strip()
    assert rc == 1 and not out.exists()
    assert len(err.splitlines()) == 1 and message in err, err
    assert str(tmp_path / "ckpt" / "config.json") in err


def test_a_config_that_contradicts_the_weights_names_the_tensors(tmp_path, capsys):
    checkpoint(tmp_path / "ckpt")
    edit_config(tmp_path / "ckpt", n_inner=41)
    ids(tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    err = capsys.readouterr().err
    assert rc == 1 and not out.exists()
    assert "the weights do not fit the model" in err
    assert "transformer.h.0.mlp.c_fc.weight" in err and "[24, 41]" in err, err


def test_a_context_longer_than_the_position_table_is_named(tmp_path, capsys):
    checkpoint(tmp_path / "ckpt")
    ids(tmp_path / "ids.safetensors", t=SIZES["n_positions"] + 1)
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    err = capsys.readouterr().err.strip()
    assert rc == 1 and not out.exists()
    assert "violate the hypothesis 'h : t ≤ c.block'" in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("over,model", [({}, "gpt2"), ({"activation_function": "gelu"},
                                                      "gpt2Exact")])
def test_greedy_decoding_over_the_cache_is_transformers_generate(tmp_path, over, model):
    # 16 greedy tokens through the step model (prefill, then a token a step over the typed
    # caches of n_positions) against transformers' own cached `generate`
    from pytyr.config import read_json
    from pytyr.hf import model_values
    from pytyr.safetensors import open_checkpoint
    from pytyr.train.model import RunModel
    from pytyr.train.tasks.lm.kvcache import generate_cached

    hf = checkpoint(tmp_path / "ckpt", n_positions=24, **over)
    lean = ROOT / "examples" / "gpt2" / "GPT2.lean"
    base = read_json(lean.parent / "config.json", "config")["model"]
    values = model_values(base, read_hf_config(tmp_path / "ckpt" / "config.json"), {})
    with open_checkpoint(str(tmp_path / "ckpt")) as ckpt:
        weights = {n: ckpt.tensor(n).clone() for n in ckpt.tensors}
    run = RunModel(LeanModels(lean), model, values)
    prompt = [5, 9, 2, 33, 7]
    got = generate_cached(run.with_weights(weights, "ckpt"), f"{model}Step", prompt, 16, 0.0,
                          block=24)
    with torch.no_grad():
        want = hf.generate(torch.tensor([prompt]), max_new_tokens=16, min_new_tokens=16,
                           do_sample=False)[0].tolist()
    assert got == want and len(got) == 21


def test_tyr_sample_of_a_checkpoint_decodes_over_the_position_tables_caches(tmp_path, capsys):
    # no run, no --set: the caches hold n_positions positions, the longest context
    hf = checkpoint(tmp_path / "ckpt", n_positions=20)
    tok = bpe_tokenizer(SIZES["vocab_size"])
    tok.save(str(tmp_path / "ckpt" / "tokenizer.json"))
    prompt = "a bad cab"
    rc = main(["sample", "--weights", str(tmp_path / "ckpt"), "--prompt", prompt,
               "--temperature", "0", "--max-new-tokens", "12"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    with torch.no_grad():
        want = hf.generate(torch.tensor([tok.encode(prompt).ids]), max_new_tokens=12,
                           min_new_tokens=12, do_sample=False,
                           suppress_tokens=list(range(tok.get_vocab_size(),
                                                      SIZES["vocab_size"])))[0]
    assert len(tok.encode(prompt).ids) + 12 <= 20
    assert out.out.rstrip("\n") == tok.decode(want.tolist())
    assert "model gpt2" in out.err


@pytest.mark.parametrize("over,model", [({}, "gpt2"), ({"activation_function": "gelu"},
                                                      "gpt2Exact")])
def test_padded_sequences_give_transformers_logits_at_every_real_token(tmp_path, capsys, over,
                                                                       model):
    hf = checkpoint(tmp_path / "ckpt", **over)
    x = torch.randint(0, SIZES["vocab_size"], (3, 8), generator=torch.Generator().manual_seed(5))
    mask = torch.ones(3, 8, dtype=torch.int64)
    mask[0, 5:] = 0
    mask[1, :3] = 0
    save_file({"input_ids": x, "attention_mask": mask}, tmp_path / "ids.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "ckpt")
    said = capsys.readouterr().out
    assert rc == 0 and f"model {model}Masked" in said, said
    with torch.no_grad():
        want = hf(input_ids=x, attention_mask=mask).logits
    real = mask.bool()
    torch.testing.assert_close(load_file(out)["out"][real], want[real], rtol=0, atol=1e-5)


def test_run_help_shows_how_the_model_is_picked(capsys):
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "n_inner → c.inner (absent: 4 * n_embd)" in text
    assert "gelu_new, gelu_pytorch_tanh → gpt2" in text
    assert "a model config without c.inner, c.eps (examples/gpt/GPT.lean's)" in text


@pytest.fixture(scope="module")
def lean() -> LeanModels:
    return LeanModels(ROOT / "examples" / "gpt2" / "GPT2.lean")


@settings(max_examples=8, deadline=None)
@given(n_head=st.integers(1, 4), head_dim=st.integers(1, 6), n_layer=st.integers(1, 3),
       vocab=st.integers(2, 40), inner=st.one_of(st.none(), st.integers(1, 30)),
       pos=st.integers(1, 12))
def test_the_mapped_config_gives_the_hf_state_dict_shapes(lean, tmp_path_factory, n_head,
                                                          head_dim, n_layer, vocab, inner, pos):
    config = tf.GPT2Config(vocab_size=vocab, n_embd=n_head * head_dim, n_layer=n_layer,
                           n_head=n_head, n_inner=inner, n_positions=pos)
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    config.to_json_file(path)
    hf = read_hf_config(path)
    graph = lean.graph(hf.model, {**hf.values, "b": 1, "t": 1})
    want = {k: tuple(v.shape) for k, v in tf.GPT2LMHeadModel(config).state_dict().items()
            if k != "lm_head.weight"}  # the head is wte
    assert {p.path: tuple(p.shape) for p in graph.params} == want
