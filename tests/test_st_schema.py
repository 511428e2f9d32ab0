"""Typed specs and the tree of dotted names: lists and nodes, the errors that name the tensor,
subtree loaders with device and dtype, and `.schema.json` snapshots standing in for weights."""
from __future__ import annotations

import json

import pytest
import torch

from pytyr.safetensors import (
    DType,
    NodeList,
    SafeTensorsError,
    TensorRef,
    TensorSpec,
    build_tree,
    check_fit,
    open_weights,
    read_schema,
    save_sharded,
    write_file,
    write_schema,
)
from pytyr.safetensors.schema import py_name


def _llama(layers: int = 3) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    out = {"model.embed_tokens.weight": torch.randn(10, 4, generator=g),
           "lm_head.weight": torch.randn(10, 4, generator=g)}
    for i in range(layers):
        for p in ("q_proj", "k_proj"):
            out[f"model.layers.{i}.self_attn.{p}.weight"] = torch.randn(4, 4, generator=g)
        out[f"model.layers.{i}.input_layernorm.weight"] = torch.ones(4)
    return out


@pytest.fixture
def weights(tmp_path):
    save_sharded(_llama(12), tmp_path, max_shard_size=400)  # several shards
    with open_weights(tmp_path) as w:
        yield w


def _specs(*names: str) -> dict[str, TensorSpec]:
    return {n: TensorSpec(n, DType.F32, (2,)) for n in names}


def _no_loader(name, **kw):
    raise AssertionError("not loaded in these tests")


def test_tree_access_and_lists(weights):
    layers = weights.model.layers
    assert isinstance(layers, NodeList) and len(layers) == 12
    q = weights.model.layers[10].self_attn.q_proj.weight  # 10 after 9, not after 1
    assert isinstance(q, TensorRef) and q.name == "model.layers.10.self_attn.q_proj.weight"
    assert q.dtype is DType.F32 and q.shape == (4, 4)
    assert torch.equal(q.load(), _llama(12)[q.name])
    assert [x.path for x in layers][:3] == ["model.layers.0", "model.layers.1", "model.layers.2"]
    assert weights["lm_head"]["weight"].shape == (10, 4)
    assert "embed_tokens" in dir(weights.model)
    with pytest.raises(AttributeError, match="no tensor or subtree 'v_proj'"):
        weights.model.layers[0].self_attn.v_proj
    with pytest.raises(AttributeError, match="read-only"):
        weights.model.x = 1


def test_subtree_and_whole_loaders(weights):
    want = _llama(12)
    layer = weights.model.layers[3].load()
    assert set(layer) == {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                          "input_layernorm.weight"}  # relative: ready for the submodule
    assert torch.equal(layer["self_attn.q_proj.weight"],
                       want["model.layers.3.self_attn.q_proj.weight"])
    lst = weights.model.layers.load(dtype=torch.float64)
    assert "11.input_layernorm.weight" in lst
    assert lst["0.self_attn.k_proj.weight"].dtype == torch.float64
    everything = weights.load_all(device="cpu")
    assert everything.keys() == want.keys()
    assert all(torch.equal(everything[k], want[k]) for k in want)
    assert weights.tensor("lm_head.weight", dtype=torch.float16).dtype == torch.float16
    assert set(weights.model.specs()) == {k for k in want if k.startswith("model.")}


@pytest.mark.parametrize("names, rule, named", [
    (("a.0.w", "a.2.w"), "tree-list-gap", "'a.1'"),
    (("a.1.w",), "tree-list-gap", "'a.0'"),
    (("a.0.w", "a.x.w"), "tree-mixed-segments", "'a.x'"),
    (("a", "a.b"), "tree-leaf-and-node", "'a'"),
    (("a.b", "a"), "tree-leaf-and-node", "'a'"),
    (("a..b",), "tree-empty-segment", "'a..b'"),
    (("a.",), "tree-empty-segment", "'a.'"),
    (("a.00.w",), "tree-list-index", "'a.00'"),
    (("a.0.w", "a.1.v"), "tree-list-uneven", "'a.1'"),
    (("a.0.w", "a.1.w", "a.1.v"), "tree-list-uneven", "'a.1'"),
])
def test_tree_errors_name_the_tensor(names, rule, named):
    with pytest.raises(SafeTensorsError) as info:
        build_tree(_specs(*names), _no_loader, source="ckpt")
    assert info.value.rule == rule and named in str(info.value) and "ckpt" in str(info.value)


def test_tree_shapes_may_differ_across_items_and_nested_lists():
    specs = _specs("e.0.x.0.w", "e.0.x.1.w", "e.1.x.0.w")  # nested lists of other lengths
    tree = build_tree(specs, _no_loader)
    assert len(tree.e[0].x) == 2 and len(tree.e[1].x) == 1
    root_list = build_tree(_specs("0.weight", "1.weight"), _no_loader)  # nn.Sequential keys
    assert isinstance(root_list, NodeList) and root_list[1].weight.name == "1.weight"
    odd = build_tree(_specs("lm-head.w", "class.w", "load.w", "²"), _no_loader)
    assert odd.lm_head.w.name == "lm-head.w" and odd.class_.w.name == "class.w"
    assert odd.load_.w.name == "load.w" and odd["²"].name == "²"


def test_py_name():
    assert py_name("q_proj") == "q_proj" and py_name("lm-head") == "lm_head"
    assert py_name("class") == "class_" and py_name("2x") == "_2x" and py_name("specs") == "specs_"
    assert py_name("__init__") == "__init___" and py_name("") == "_"


def test_a_checkpoint_whose_names_make_no_tree_still_loads(tmp_path):
    write_file({"a": torch.ones(2), "a.b": torch.zeros(2)}, tmp_path / "x.safetensors")
    w = open_weights(tmp_path / "x.safetensors")
    assert torch.equal(w.tensor("a"), torch.ones(2)) and len(w.load_all()) == 2
    with pytest.raises(SafeTensorsError, match="tree-leaf-and-node"):
        w.tree


def test_schema_snapshot_round_trip(weights, tmp_path):
    path = weights.write_schema(tmp_path / "llama.schema.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "tyr.safetensors.schema" and doc["version"] == 1
    entry = doc["tensors"]["lm_head.weight"]
    assert entry["dtype"] == "F32" and entry["shape"] == [10, 4]
    assert entry["file"].startswith("model-0000")
    specs, meta = read_schema(path)
    assert specs == weights.specs and meta == {"format": "pt"}
    snap = open_weights(path)  # stands in for the weights: tree and checks, no data
    assert snap.model.layers[11].self_attn.q_proj.weight.shape == (4, 4)
    with pytest.raises(SafeTensorsError, match="no-data"):
        snap.model.layers[0].load()
    check_fit({k: v for k, v in _llama(12).items()}, path)


@pytest.mark.parametrize("doc, rule", [
    ("{", "schema-malformed"),
    ({"format": "other", "version": 1, "tensors": {}}, "schema-malformed"),
    ({"format": "tyr.safetensors.schema", "version": 2, "tensors": {}}, "schema-version"),
    ({"format": "tyr.safetensors.schema", "version": 1, "tensors": []}, "schema-malformed"),
    ({"format": "tyr.safetensors.schema", "version": 1,
      "tensors": {"a": {"dtype": "F32", "shape": [-1]}}}, "schema-malformed"),
    ({"format": "tyr.safetensors.schema", "version": 1,
      "tensors": {"a": {"dtype": "F99", "shape": [1]}}}, "unknown-dtype"),
    ({"format": "tyr.safetensors.schema", "version": 1, "metadata": {"a": 1},
      "tensors": {}}, "metadata-not-strings"),
])
def test_malformed_snapshots(tmp_path, doc, rule):
    p = tmp_path / "bad.schema.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(SafeTensorsError) as info:
        read_schema(p)
    assert info.value.rule == rule and "bad.schema.json" in str(info.value)


def test_write_schema_of_specs(tmp_path):
    specs = {"x": TensorSpec("x", DType.BF16, (3, 0), None)}
    specs_back, _ = read_schema(write_schema(specs, tmp_path / "s.schema.json"))
    assert specs_back == specs
