"""examples/bert/Bert.lean against Hugging Face's `BertModel`: one Lean source, whose batch `b`
and length `t` are symbolic binders, loads an HF state dict by its own key names and computes
HF's `last_hidden_state` at every `(b, t)` the inputs have, padding included; its types refuse
a mask or token types of the wrong bound; a mis-shaped checkpoint, a sequence longer than the
position table and a provider-typed use of a checkpoint of other shapes are each refused with
the key, the hypothesis or the place named."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file
from transformers import BertConfig, BertModel

from pytyr.cli import main
from pytyr.errors import ConfigError, SafeTensorsError
from pytyr.lean import check_files
from pytyr.pipeline import LeanModels, module_from_graph
from pytyr.safetensors import load_file, load_model, write_file

ROOT = Path(__file__).resolve().parents[1]
BERT = ROOT / "examples" / "bert" / "Bert.lean"
# An odd MLP width and more heads than layers, so that no two sizes coincide.
TINY = {"vocab": 50, "max_position": 16, "type_vocab": 2, "n_layer": 2, "n_head": 4,
        "head_dim": 8, "intermediate": 37, "eps": 1e-12, "hidden_dropout": 0.1,
        "attn_dropout": 0.1}


def hf_config(c: dict) -> BertConfig:
    return BertConfig(vocab_size=c["vocab"], hidden_size=c["n_head"] * c["head_dim"],
                      num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
                      intermediate_size=c["intermediate"],
                      max_position_embeddings=c["max_position"],
                      type_vocab_size=c["type_vocab"], layer_norm_eps=c["eps"],
                      hidden_dropout_prob=c["hidden_dropout"],
                      attention_probs_dropout_prob=c["attn_dropout"], hidden_act="gelu",
                      attn_implementation="eager")


def hf_checkpoint(path: Path, seed: int = 0, **over) -> BertModel:
    """A random HF `BertModel` (no pooler), every tensor drawn, the LayerNorms' gains and biases
    too, so that no path is trivially one or zero; its state dict saved by `safetensors`."""
    model = BertModel(hf_config({**TINY, **over}), add_pooling_layer=False).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    save_file(model.state_dict(), str(path))
    return model


@pytest.fixture(scope="module")
def hf(tmp_path_factory) -> tuple[BertModel, Path]:
    path = tmp_path_factory.mktemp("bert") / "bert.safetensors"
    return hf_checkpoint(path), path


@pytest.fixture(scope="module")
def lean() -> LeanModels:
    return LeanModels(BERT)  # checked once; every (b, t) instantiates the same source


def feeds(b: int, lengths: list[int], t: int, seed: int = 1) -> dict[str, torch.Tensor]:
    """Ids, token types (a sentence pair: type 1 from the middle on) and a right-padding mask
    with `lengths[i]` real tokens in row `i`."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, TINY["vocab"], (b, t), generator=gen)
    types = (torch.arange(t) >= t // 2).long().expand(b, t).contiguous()
    mask = (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]).long()
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


def hf_hidden(model: BertModel, x: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model(**x).last_hidden_state


def tyr_hidden(lean: LeanModels, ckpt: Path, x: dict[str, torch.Tensor],
               c: dict = TINY) -> torch.Tensor:
    b, t = x["input_ids"].shape
    graph = lean.graph("bert", {"c": c, "b": b, "t": t})
    assert [tuple(i.shape) for i in graph.inputs] == [(b, t)] * 3
    module = module_from_graph(graph, seed=5)
    load_model(module, ckpt)
    with torch.no_grad():
        (y,) = module.eval()(x["input_ids"], x["token_type_ids"], x["attention_mask"])
    return y


def test_the_parameter_paths_are_the_hf_state_dict_keys(lean, hf):
    model, _ = hf
    graph = lean.graph("bert", {"c": TINY, "b": 1, "t": 1})
    ours = {p.path: tuple(p.shape) for p in graph.params}
    assert ours == {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert "encoder.layer.1.attention.self.query.weight" in ours
    assert "encoder.layer.0.attention.output.LayerNorm.bias" in ours


def assert_equal_to_hf(lean: LeanModels, hf, lengths: list[int], t: int) -> None:
    model, ckpt = hf
    x = feeds(len(lengths), lengths, t)
    y, ref = tyr_hidden(lean, ckpt, x), hf_hidden(model, x)
    # padded positions too: both mask keys only, so a padding query sees the real tokens
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    assert y.shape == (len(lengths), t, TINY["n_head"] * TINY["head_dim"])
    assert y.abs().max() > 0.1


@pytest.mark.parametrize("lengths,t", [([5, 3], 5), ([11, 6, 1, 9], 11)])
def test_one_source_computes_hf_last_hidden_state_at_two_shapes(lean, hf, lengths, t):
    assert_equal_to_hf(lean, hf, lengths, t)


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_one_source_computes_hf_last_hidden_state_at_any_shape(lean, hf, data):
    t = data.draw(st.integers(1, TINY["max_position"]), label="t")
    lengths = data.draw(st.lists(st.integers(1, t), min_size=1, max_size=4), label="lengths")
    assert_equal_to_hf(lean, hf, lengths, t)


def test_the_layer_norm_epsilon_is_the_configs(lean, tmp_path):
    # at HF's 1e-12 a forgotten eps (layerNorm3's default 1e-5) is invisible; at 1e-2 it is not
    c = {**TINY, "eps": 1e-2}
    model = hf_checkpoint(tmp_path / "eps.safetensors", eps=1e-2)
    x = feeds(2, [6, 4], 6)
    y = tyr_hidden(lean, tmp_path / "eps.safetensors", x, c)
    torch.testing.assert_close(y, hf_hidden(model, x), atol=1e-5, rtol=1e-5)


def test_a_sequence_with_no_real_token_is_the_one_divergence(lean, hf):
    # HF adds the dtype's minimum to every key's score, so an all-padding row attends
    # uniformly to all of them; paddedAttention gives such a row zeros. The other rows agree.
    model, ckpt = hf
    x = feeds(2, [4, 0], 4)
    y, ref = tyr_hidden(lean, ckpt, x), hf_hidden(model, x)
    torch.testing.assert_close(y[0], ref[0], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(y[1], ref[1], atol=1e-3)


def test_the_pooled_model_is_the_mean_of_hf_states_over_the_real_tokens(lean, hf):
    model, ckpt = hf
    x = feeds(3, [7, 2, 5], 7)
    graph = lean.graph("bertMeanPooled", {"c": TINY, "b": 3, "t": 7})
    module = module_from_graph(graph, seed=5)
    load_model(module, ckpt)
    with torch.no_grad():
        (y,) = module.eval()(x["input_ids"], x["token_type_ids"], x["attention_mask"])
    ref = hf_hidden(model, x)
    want = torch.stack([ref[i, :n].mean(0) for i, n in enumerate([7, 2, 5])])
    torch.testing.assert_close(y, want, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(y[1], ref[1].mean(0), atol=1e-3)  # padding is left out


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"model": {"c": TINY}}))
    return path


def test_tyr_run_loads_the_hf_checkpoint_and_writes_its_hidden_state(hf, tmp_path, capsys):
    model, ckpt = hf
    x = feeds(3, [7, 2, 5], 7)
    write_file(x, tmp_path / "x.safetensors")
    out = tmp_path / "y.safetensors"
    assert main(["run", str(BERT), "--model", "bert", "--config", str(_config(tmp_path)),
                 "--inputs", str(tmp_path / "x.safetensors"), "--weights", str(ckpt),
                 "-o", str(out)]) == 0
    assert "out [3, 7, 32]" in capsys.readouterr().out
    torch.testing.assert_close(load_file(out)["out"], hf_hidden(model, x), atol=1e-5, rtol=1e-5)


def test_a_mis_shaped_key_is_named_and_nothing_is_loaded(lean, tmp_path, capsys):
    bad = tmp_path / "wide.safetensors"
    hf_checkpoint(bad, intermediate=40)  # every MLP matrix and bias of another width
    module = module_from_graph(lean.graph("bert", {"c": TINY, "b": 1, "t": 3}))
    before = {k: v.clone() for k, v in module.state_dict().items()}
    with pytest.raises(SafeTensorsError) as info:
        load_model(module, bad)
    assert len(info.value.problems) == 3 * TINY["n_layer"]
    assert "shape: 'encoder.layer.1.intermediate.dense.weight' is [40, 32] in the file, " \
        "[37, 32] in the model" in info.value.problems
    assert all(torch.equal(v, before[k]) for k, v in module.state_dict().items())

    x = feeds(1, [3], 3)
    write_file(x, tmp_path / "x.safetensors")
    out = tmp_path / "y.safetensors"
    assert main(["run", str(BERT), "--model", "bert", "--config", str(_config(tmp_path)),
                 "--inputs", str(tmp_path / "x.safetensors"), "--weights", str(bad),
                 "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "'encoder.layer.0.output.dense.weight' is [32, 40] in the file, [32, 37]" in err
    assert "Traceback" not in err and not out.exists()


def test_a_sequence_longer_than_the_position_table_names_the_hypothesis(lean, hf, tmp_path,
                                                                         capsys):
    violated = "violate the hypothesis 'h : t ≤ c.max_position' of model 'bert': 17 ≤ 16"
    with pytest.raises(ConfigError, match=re.escape(violated)):
        lean.graph("bert", {"c": TINY, "b": 2, "t": 17})
    write_file(feeds(1, [17], 17), tmp_path / "x.safetensors")
    assert main(["run", str(BERT), "--model", "bert", "--config", str(_config(tmp_path)),
                 "--inputs", str(tmp_path / "x.safetensors"), "--weights", str(hf[1]),
                 "-o", str(tmp_path / "y.safetensors")]) == 1
    assert "'h : t ≤ c.max_position'" in capsys.readouterr().err


# Bugs written into Bert.lean: each is a type error at its use, naming the argument.
MODEL_SIG = "(attention_mask : IT #[b, t] 2) : T #[b, t, c.hidden] :=\n  let x := embed"
MUTATIONS = [
    # a mask typed with another bound than 2
    (MODEL_SIG, MODEL_SIG.replace("#[b, t] 2", "#[b, t] 3"),
     # the expected type, propagated at `mask` (the result's b, t come after `c`), fixes b, t
     ["argument 'mask' of 'layer' has type IT #[b, t] 3", "expected to have type IT #[b, t] 2"]),
    # token types typed by the vocabulary
    ("(token_type_ids : IT #[b, t] c.type_vocab)\n    (attention_mask",
     "(token_type_ids : IT #[b, t] c.vocab)\n    (attention_mask",
     ["argument 'token_type_ids' of 'embed'", "IT #[b, t] c.vocab", "IT #[b, t] c.type_vocab"]),
    # the ids given as the padding mask
    ("layer c attention_mask l x", "layer c input_ids l x",
     ["argument 'mask' of 'layer' has type IT #[b, t] c.vocab", "type IT #[b, t] 2"]),
    # the token types looked up in the word table
    ("(embedding2 token_type_ids p.token_type_embeddings.weight)",
     "(embedding2 token_type_ids p.word_embeddings.weight)",
     ["argument 'table' of 'embedding2'", "T #[c.vocab, c.hidden]", "T #[c.type_vocab, c.hidden]",
      "?v := c.type_vocab comes from argument 'idx'"]),
]


@pytest.mark.parametrize("old,new,frags", MUTATIONS, ids=[m[1][:32] for m in MUTATIONS])
def test_a_wrong_bound_in_bert_is_a_located_type_error(tmp_path, old, new, frags):
    # up to `bert`: the pooled model after it, a caller, would report a changed `bert` again
    src = BERT.read_text(encoding="utf-8").split("\n/-- A sentence embedding")[0]
    assert src.count(old) == 1, old
    mutated = tmp_path / "Bert.lean"
    mutated.write_text(src.replace(old, new), encoding="utf-8")
    diags = check_files(mutated)
    assert len(diags) == 1, diags
    assert all(f in diags[0].message for f in frags), diags[0].message
    assert diags[0].pos.line >= src[:src.index(old)].count("\n") + 1


def lean_access(name: str, key: str) -> str:
    """`encoder.layer.0.attention.self.query.weight` → `Name.encoder.layer[0].attention…`:
    the provider makes the numbered layers a list."""
    return name + "." + re.sub(r"\.(\d+)\.", r"[\1].", key)


def typing_file(lean: LeanModels, tmp_path: Path, ckpt: Path) -> tuple[Path, list[str]]:
    """Every parameter of the model (at TINY) typed by the checkpoint's header at the shape the
    model gives it, and two uses of provider-typed tensors in the model's own ops."""
    graph = lean.graph("bert", {"c": TINY, "b": 2, "t": 5})
    lines = ["import Tyr", "open torch", f'safetensors_type_provider "{ckpt}" as Ckpt']
    keys = [p.path for p in graph.params]
    for k, p in enumerate(graph.params):
        lines.append(f"def p{k} : T #[{', '.join(map(str, p.shape))}] := "
                     f"{lean_access('Ckpt', p.path)}")
    layer = "Ckpt.encoder.layer[1]"
    w = f"{layer}.attention.self.query"
    lines.append(f"def query (x : T #[2, 5, 32]) : T #[2, 5, 32] := "
                 f"linearBias3 x {w}.weight {w}.bias")
    w = f"{layer}.intermediate.dense"
    lines.append(f"def up (x : T #[2, 5, 32]) : T #[2, 5, 37] := "
                 f"gelu (linearBias3 x {w}.weight {w}.bias)")
    f = tmp_path / "Typed.lean"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f, keys


def test_the_checkpoint_header_types_the_model_and_its_uses(lean, hf, tmp_path):
    f, keys = typing_file(lean, tmp_path, hf[1])
    assert len(keys) == 5 + 16 * TINY["n_layer"]
    assert check_files(f) == []


def test_a_provider_typed_use_of_a_mis_shaped_checkpoint_is_located(lean, tmp_path):
    bad = tmp_path / "wide.safetensors"
    hf_checkpoint(bad, intermediate=40)
    f, keys = typing_file(lean, tmp_path, bad)
    lines = f.read_text(encoding="utf-8").splitlines()
    diags = check_files(f)
    wrong = {k for k in keys if re.search(r"intermediate\.dense|output\.dense\.weight", k)
             and "attention" not in k}
    assert len(wrong) == 3 * TINY["n_layer"]
    assert len(diags) == len(wrong) + 1  # and `up`, whose weight is [40, 32]
    for d in diags[:-1]:
        key = keys[int(re.match(r"def p(\d+)", lines[d.pos.line - 1]).group(1))]
        assert key in wrong, (key, d.message)
    last = diags[-1]
    assert lines[last.pos.line - 1].startswith("def up")
    assert "T #[40, 32]" in last.message, last.message
