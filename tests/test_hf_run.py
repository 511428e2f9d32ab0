"""`tyr run` on Hugging Face BERT checkpoints as transformers writes them: a directory with its
config.json and every key (the pooler, the position_ids buffer of older checkpoints, the `bert.`
prefix and `cls.*` heads of a BertForMaskedLM, shards with an index), run at the example's
default config (bert-base: the config.json must fill it) and compared to transformers. Each
refusal (an activation or position scheme the model does not compute, a key that is neither
a parameter nor known, a malformed config or one of another family, an --ignore-key that
matches nothing, a pickle) is one line naming the file and the key."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertForMaskedLM, BertModel
from transformers.utils import logging as hf_logging

from pytyr.cli import main
from pytyr.hf import read_hf_config
from pytyr.pipeline import LeanModels

hf_logging.disable_progress_bar()  # save_pretrained's bar would be in every captured stderr
ROOT = Path(__file__).resolve().parents[1]
BERT = ROOT / "examples" / "bert" / "Bert.lean"
# No two sizes alike, so that a field filled from the wrong key is a shape error.
SIZES = {"vocab_size": 50, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 37, "max_position_embeddings": 16, "type_vocab_size": 3}


def drawn(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every parameter random, LayerNorm gains and biases too, so no path is trivially 1 or 0."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model.eval()


def bert_dir(path: Path, *, head: bool = False, shard: str | None = None,
             position_ids: bool = False, seed: int = 0, **over) -> torch.nn.Module:
    """`save_pretrained(safe_serialization=True)` of a BertModel (pooler included), or of a
    BertForMaskedLM with `head`; `shard` a max_shard_size; `position_ids` adds the buffer that
    checkpoints written before transformers 4.31 carry (bert-base-uncased's among them)."""
    config = BertConfig(**{**SIZES, **over}, attn_implementation="eager")
    model = drawn(BertForMaskedLM(config) if head else BertModel(config), seed)
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(path, safe_serialization=True, **kwargs)
    if position_ids:
        f = path / "model.safetensors"
        tensors = load_file(f)
        key = ("bert." if head else "") + "embeddings.position_ids"
        tensors[key] = torch.arange(config.max_position_embeddings)[None]
        save_file(tensors, f, {"format": "pt"})
    return model


def inputs(path: Path, b: int = 3, t: int = 7, seed: int = 1) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = {"input_ids": torch.randint(0, SIZES["vocab_size"], (b, t), generator=gen),
         "token_type_ids": torch.randint(0, SIZES["type_vocab_size"], (b, t), generator=gen),
         "attention_mask": (torch.arange(t)[None] < torch.tensor([t, 2, 5][:b])[:, None]).long()}
    save_file(x, path)
    return x


def hidden(model: torch.nn.Module, x: dict[str, torch.Tensor]) -> torch.Tensor:
    base = model.bert if isinstance(model, BertForMaskedLM) else model
    with torch.no_grad():
        return base(**x).last_hidden_state


def tyr_run(tmp_path: Path, weights: Path, *extra: str) -> tuple[int, Path]:
    out = tmp_path / "y.safetensors"
    rc = main(["run", str(BERT), "--model", "bert", "--weights", str(weights),
               "--inputs", str(tmp_path / "x.safetensors"), "-o", str(out), *extra])
    return rc, out


def test_a_full_bert_model_directory_runs_at_default_settings_and_matches_transformers(
        tmp_path, capsys):
    model = bert_dir(tmp_path / "bert", position_ids=True)
    x = inputs(tmp_path / "x.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "bert")
    text = capsys.readouterr().out
    assert rc == 0
    torch.testing.assert_close(load_file(out)["out"], hidden(model, x), atol=1e-5, rtol=1e-5)
    assert (f"model config from {tmp_path / 'bert' / 'config.json'} (bert): c.vocab=50, "
            "c.max_position=16, c.type_vocab=3, c.n_layer=2, c.n_head=4, c.head_dim=8, "
            "c.intermediate=37, c.eps=1e-12") in text
    assert ("ignored 3 keys the model does not use: embeddings.position_ids (a buffer, "
            "0 … 15), pooler.dense.bias, pooler.dense.weight (the pooler)") in text


def test_a_sharded_masked_lm_checkpoint_is_read_under_its_prefix(tmp_path, capsys):
    model = bert_dir(tmp_path / "mlm", head=True, shard="20KB", position_ids=False)
    assert (tmp_path / "mlm" / "model.safetensors.index.json").is_file()
    assert len(list((tmp_path / "mlm").glob("*.safetensors"))) > 2
    x = inputs(tmp_path / "x.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "mlm")
    text = capsys.readouterr().out
    assert rc == 0, text
    torch.testing.assert_close(load_file(out)["out"], hidden(model, x), atol=1e-5, rtol=1e-5)
    assert "read the keys under 'bert.' without it" in text
    assert "cls.predictions.transform.dense.weight" in text
    assert "(the pretraining heads)" in text


def test_a_file_with_its_config_beside_it_and_the_buffer_checked(tmp_path, capsys):
    # a position_ids buffer that is not 0 … n-1 is left out all the same (transformers
    # does not read it either), and the note says so
    model = bert_dir(tmp_path / "bert")
    tensors = load_file(tmp_path / "bert" / "model.safetensors")
    tensors["embeddings.position_ids"] = torch.arange(16).flip(0)[None]
    save_file(tensors, tmp_path / "bert" / "model.safetensors")
    x = inputs(tmp_path / "x.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "bert" / "model.safetensors")
    assert rc == 0
    torch.testing.assert_close(load_file(out)["out"], hidden(model, x), atol=1e-5, rtol=1e-5)
    assert "its values are not 0 … 15" in capsys.readouterr().out


def test_set_wins_over_the_hf_config_and_ignore_key_is_named(tmp_path, capsys):
    model = bert_dir(tmp_path / "bert")
    x = inputs(tmp_path / "x.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "bert", "--set", "model.c.n_layer=1")
    captured = capsys.readouterr()
    assert rc == 1 and not out.exists()
    assert "c.n_layer=1 (not 2 from num_hidden_layers)" in captured.out
    assert "unexpected: 'encoder.layer.1.attention.self.query.weight'" in captured.err
    assert "--ignore-key PATTERN" in captured.err and "Traceback" not in captured.err

    rc, out = tyr_run(tmp_path, tmp_path / "bert", "--set", "model.c.n_layer=1",
                      "--ignore-key", "encoder.layer.1.*")
    text = capsys.readouterr().out
    assert rc == 0
    assert "ignored 18 keys the model does not use: encoder.layer.1." in text
    assert "(--ignore-key encoder.layer.1.*), pooler.dense.bias, pooler.dense.weight " \
        "(the pooler)" in text
    model.encoder.layer = model.encoder.layer[:1]
    torch.testing.assert_close(load_file(out)["out"], hidden(model, x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("key,value,needs", [
    ("hidden_act", "gelu_new", "needs 'gelu' or 'gelu_python' (the MLP's activation is exact"),
    ("position_embedding_type", "relative_key", "needs 'absolute'"),
    ("is_decoder", True, "needs False (attention is bidirectional)"),
])
def test_a_config_value_the_model_does_not_compute_is_refused(tmp_path, capsys, key, value,
                                                              needs):
    bert_dir(tmp_path / "bert")
    cfg = tmp_path / "bert" / "config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), key: value}))
    inputs(tmp_path / "x.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "bert")
    err = capsys.readouterr().err.strip()
    assert rc == 1 and not out.exists()
    assert err.startswith(f"tyr run: {cfg}: '{key}' is {value!r}; the bert model here {needs}")
    assert len(err.splitlines()) == 1


def test_a_key_neither_a_parameter_nor_known_is_refused_with_every_problem(tmp_path, capsys):
    bert_dir(tmp_path / "bert")
    f = tmp_path / "bert" / "model.safetensors"
    tensors = load_file(f)
    tensors["encoder.adapter.weight"] = torch.zeros(3)
    del tensors["embeddings.LayerNorm.bias"]
    save_file(tensors, f)
    inputs(tmp_path / "x.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "bert")
    captured = capsys.readouterr()
    assert rc == 1 and not out.exists()
    assert "(2 problems)" in captured.err
    assert "missing: 'embeddings.LayerNorm.bias'" in captured.err
    assert "unexpected: 'encoder.adapter.weight' (F32 [3] in the file)" in captured.err
    assert "pooler.dense.weight (the pooler)" in captured.out  # the known ones still named


@pytest.mark.parametrize("text,message", [
    ('{"model_type": "bert", "hidden_size": 32,', "not valid JSON"),
    ('{"model_type": "roberta"}', "model_type 'roberta' is not a family `tyr run` reads "
                                  "(it reads: bert, gpt2, llama, mistral, qwen2, qwen3, "
                                  "mixtral, qwen3_moe)"),
    ('{"architectures": ["RobertaModel"]}', "no 'model_type', and 'architectures' "
                                            "(['RobertaModel']) names no family"),
    # known by its architectures alone: an activation no GPT-2 model computes is refused
    ('{"architectures": ["GPT2LMHeadModel"], "activation_function": "relu"}',
     "'activation_function' is 'relu'"),
    ('{"model_type": "bert", "hidden_size": 30, "num_attention_heads": 4}',
     "'hidden_size' (30) is not a multiple of 'num_attention_heads' (4)"),
    ('{"model_type": "bert", "num_hidden_layers": 2.5}',
     "'num_hidden_layers' must be a positive integer, got 2.5"),
])
def test_a_malformed_config_or_one_of_another_family_is_one_line(tmp_path, capsys, text,
                                                                 message):
    bert_dir(tmp_path / "bert")
    (tmp_path / "bert" / "config.json").write_text(text)
    inputs(tmp_path / "x.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "bert")
    err = capsys.readouterr().err.strip()
    assert rc == 1 and not out.exists()
    assert str(tmp_path / "bert" / "config.json") in err and message in err, err
    assert len(err.splitlines()) == 1


def test_hf_config_names_the_file_and_must_be_one(tmp_path, capsys):
    model = bert_dir(tmp_path / "bert")
    moved = tmp_path / "elsewhere.json"
    (tmp_path / "bert" / "config.json").rename(moved)
    x = inputs(tmp_path / "x.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "bert", "--hf-config", str(moved))
    assert rc == 0
    torch.testing.assert_close(load_file(out)["out"], hidden(model, x), atol=1e-5, rtol=1e-5)
    capsys.readouterr()
    tyr_cfg = tmp_path / "tyr.json"
    tyr_cfg.write_text('{"model": {"c": {"n_layer": 2}}}')
    rc, _ = tyr_run(tmp_path, tmp_path / "bert", "--hf-config", str(tyr_cfg))
    assert rc == 1
    assert "not a Hugging Face config: it has no 'model_type'" in capsys.readouterr().err


def test_a_tyr_config_beside_the_weights_is_named_and_not_read(tmp_path, capsys):
    bert_dir(tmp_path / "bert")
    cfg = json.loads((tmp_path / "bert" / "config.json").read_text())
    (tmp_path / "bert" / "config.json").write_text('{"model": {}}')
    tiny = {"vocab": 50, "max_position": 16, "type_vocab": 3, "n_layer": 2, "n_head": 4,
            "head_dim": 8, "intermediate": 37, "eps": cfg["layer_norm_eps"],
            "hidden_dropout": 0.1, "attn_dropout": 0.1}
    (tmp_path / "run.json").write_text(json.dumps({"model": {"c": tiny}}))
    inputs(tmp_path / "x.safetensors")
    rc, _ = tyr_run(tmp_path, tmp_path / "bert", "--config", str(tmp_path / "run.json"),
                    "--ignore-key", "pooler.*")
    text = capsys.readouterr().out
    assert rc == 0
    assert "config.json is not a Hugging Face config (no model_type, no architectures): " \
        "not read" in text
    assert "pooler.dense.bias, pooler.dense.weight (--ignore-key pooler.*)" in text


def test_an_ignore_key_that_matches_nothing_is_named(tmp_path, capsys):
    bert_dir(tmp_path / "bert")
    inputs(tmp_path / "x.safetensors")
    rc, out = tyr_run(tmp_path, tmp_path / "bert", "--ignore-key", "pooler.*",
                      "--ignore-key", "pooler.dense.gamma")
    err = capsys.readouterr().err
    assert rc == 1 and not out.exists()
    assert "--ignore-key 'pooler.dense.gamma' matches no key of" in err
    assert "embeddings.LayerNorm.bias" in err  # its keys are shown


def test_a_pickle_checkpoint_is_refused_by_name(tmp_path, capsys):
    model = bert_dir(tmp_path / "bert")
    (tmp_path / "bert" / "model.safetensors").unlink()
    torch.save(model.state_dict(), tmp_path / "bert" / "pytorch_model.bin")
    inputs(tmp_path / "x.safetensors")
    rc, _ = tyr_run(tmp_path, tmp_path / "bert")
    err = capsys.readouterr().err
    assert rc == 1 and len(err.strip().splitlines()) == 1
    assert "holds pytorch_model.bin and no *.safetensors file; tyr does not load pickles" in err
    assert "safe_serialization=True" in err and "(rule pickle-not-read)" in err
    rc, _ = tyr_run(tmp_path, tmp_path / "bert" / "pytorch_model.bin")
    err = capsys.readouterr().err
    assert rc == 1 and "a PyTorch pickle (torch.save), not safetensors" in err


def test_run_help_shows_the_mapping(capsys):
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "hidden_size / num_attention_heads → c.head_dim" in text
    assert "layer_norm_eps → c.eps" in text and "--ignore-key PATTERN" in text
    assert "pooler.dense.* (the pooler)" in text


@pytest.fixture(scope="module")
def lean() -> LeanModels:
    return LeanModels(BERT)


@settings(max_examples=8, deadline=None)
@given(n_head=st.integers(1, 4), head_dim=st.integers(1, 6), n_layer=st.integers(1, 3),
       vocab=st.integers(2, 40), inter=st.integers(1, 20), pos=st.integers(1, 12),
       types=st.integers(1, 3))
def test_the_mapped_config_gives_the_hf_state_dict_shapes(lean, tmp_path_factory, n_head,
                                                          head_dim, n_layer, vocab, inter, pos,
                                                          types):
    config = BertConfig(vocab_size=vocab, hidden_size=n_head * head_dim,
                        num_hidden_layers=n_layer, num_attention_heads=n_head,
                        intermediate_size=inter, max_position_embeddings=pos,
                        type_vocab_size=types)
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    config.to_json_file(path)
    hf = read_hf_config(path)
    graph = lean.graph("bert", {**hf.values, "b": 1, "t": 1})
    want = {k: tuple(v.shape) for k, v in BertModel(config, add_pooling_layer=False)
            .state_dict().items()}
    assert {p.path: tuple(p.shape) for p in graph.params} == want


# -- GPT-2: another layout (names, Conv1D weights transposed) read into examples/gpt/GPT.lean

GPT = ROOT / "examples" / "gpt" / "GPT.lean"
GPT2_SIZES = {"vocab_size": 45, "n_positions": 12, "n_embd": 24, "n_layer": 2, "n_head": 3,
              "bos_token_id": 0, "eos_token_id": 0}


def gpt2_dir(path: Path, *, lm_head: bool = True, buffers: bool = False, **over):
    """A GPT2LMHeadModel (or a bare GPT2Model) with exact GELU, the activation GPT.lean has;
    `buffers` adds the causal-mask buffers that old GPT-2 checkpoints (gpt2's own) carry."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

    config = GPT2Config(**{**GPT2_SIZES, "activation_function": "gelu", **over},
                        attn_implementation="eager")
    model = drawn((GPT2LMHeadModel if lm_head else GPT2Model)(config), 3)
    model.save_pretrained(path, safe_serialization=True)
    if buffers:
        f = path / "model.safetensors"
        tensors = load_file(f)
        n = GPT2_SIZES["n_positions"]
        for i in range(GPT2_SIZES["n_layer"]):
            pre = "transformer." if lm_head else ""
            tensors[f"{pre}h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
        save_file(tensors, f, {"format": "pt"})
    return model


def gpt2_run(tmp_path: Path, weights: Path, idx: torch.Tensor) -> tuple[int, Path]:
    save_file({"idx": idx}, tmp_path / "idx.safetensors")
    out = tmp_path / "logits.safetensors"
    rc = main(["run", str(GPT), "--model", "gptLogits", "--weights", str(weights),
               "--inputs", str(tmp_path / "idx.safetensors"), "-o", str(out)])
    return rc, out


def test_a_gpt2_lm_directory_runs_in_the_gpt_example_and_matches_transformers(tmp_path,
                                                                              capsys):
    model = gpt2_dir(tmp_path / "gpt2", buffers=True)
    idx = torch.randint(0, GPT2_SIZES["vocab_size"], (2, 9),
                        generator=torch.Generator().manual_seed(4))
    rc, out = gpt2_run(tmp_path, tmp_path / "gpt2", idx)
    text = capsys.readouterr().out
    assert rc == 0, text
    with torch.no_grad():
        want = model(idx).logits
    torch.testing.assert_close(load_file(out)["out"], want, atol=1e-5, rtol=1e-5)
    assert "(gpt2): c.vocab=45, c.block=12, c.n_layer=2, c.n_head=3, c.head_dim=8" in text
    assert "read the keys under 'transformer.' without it" in text
    assert "h.0.attn.bias, h.1.attn.bias (a causal-mask buffer)" in text
    assert "read 28 keys by GPT-2's names" in text  # 12 a block, wte, wpe, ln_f, ln_f_bias


def test_a_bare_gpt2_model_needs_no_prefix(tmp_path, capsys):
    model = gpt2_dir(tmp_path / "gpt2", lm_head=False)
    idx = torch.tensor([[1, 44, 0, 7, 7]])
    rc, out = gpt2_run(tmp_path, tmp_path / "gpt2", idx)
    assert rc == 0
    with torch.no_grad():
        want = model(idx).last_hidden_state @ model.wte.weight.T
    torch.testing.assert_close(load_file(out)["out"], want, atol=1e-5, rtol=1e-5)
    assert "without it" not in capsys.readouterr().out


# GPT.lean computes less than the family's own GPT2.lean (exact GELU, a 4× MLP, epsilon 1e-5):
# named with a checkpoint that needs more, it is refused in one line naming the key and the
# file that does compute it.
_GPT_LEAN = "the model here (a config without c.inner, c.eps: examples/gpt/GPT.lean's) needs"


@pytest.mark.parametrize("over,message", [
    ({"activation_function": "gelu_new"},
     f"'activation_function' is 'gelu_new'; {_GPT_LEAN} 'gelu' or 'gelu_python' (GPT.lean's "
     f"GELU is exact; examples/gpt2/GPT2.lean computes gelu_new"),
    ({"activation_function": "gelu_pytorch_tanh"}, "'activation_function' is "
                                                   "'gelu_pytorch_tanh'; " + _GPT_LEAN),
    ({"n_inner": 50}, f"'n_inner' is 50; {_GPT_LEAN} None or 96"),
    ({"layer_norm_epsilon": 1e-6}, f"'layer_norm_epsilon' is 1e-06; {_GPT_LEAN} 1e-05"),
    ({"scale_attn_by_inverse_layer_idx": True}, "no layer scales its scores by 1/layer"),
])
def test_a_gpt2_config_the_example_does_not_compute_is_refused(tmp_path, capsys, over,
                                                               message):
    gpt2_dir(tmp_path / "gpt2", **over)
    rc, out = gpt2_run(tmp_path, tmp_path / "gpt2", torch.tensor([[1, 2]]))
    err = capsys.readouterr().err.strip()
    assert rc == 1 and not out.exists()
    assert message in err and len(err.splitlines()) == 1, err


def test_a_gpt2_checkpoint_in_the_bert_example_is_named(tmp_path, capsys):
    gpt2_dir(tmp_path / "gpt2")
    inputs(tmp_path / "x.safetensors")
    rc, _ = tyr_run(tmp_path, tmp_path / "gpt2")
    captured = capsys.readouterr()
    assert rc == 1
    assert "(gpt2): c.vocab=45" in captured.out
    assert "unknown keys c.block, c.dropout, c.inner for BertConfig" in captured.err
