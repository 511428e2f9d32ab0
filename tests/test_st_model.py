"""Saving and loading models: keys are parameter paths, the round trip is exact (single file and
sharded), and a load that does not fit reports every problem at once and copies nothing."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from pytyr.pipeline import graph_from_lean, module_from_graph
from pytyr.safetensors import (
    SafeTensorsError,
    check_fit,
    expected_specs,
    fit_problems,
    load_model,
    open_weights,
    save_model,
    write_file,
)

ROOT = Path(__file__).resolve().parents[1]
MLP = ROOT / "examples" / "mlp" / "MLP.lean"
VALUES = {"c": {"inputs": 2, "hidden": 8, "classes": 3}, "b": 4}


@pytest.fixture(scope="module")
def graph():
    return graph_from_lean(MLP, "mlp", VALUES)


def _equal_states(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_tyr_module_round_trip(graph, tmp_path):
    src, dst = module_from_graph(graph, seed=1), module_from_graph(graph, seed=2)
    assert not _equal_states(src, dst)
    files = save_model(src, tmp_path)
    assert [p.name for p in files] == ["model.safetensors"]
    w = open_weights(tmp_path)
    assert set(w.specs) == {p.path for p in graph.params}  # keys are the parameter paths
    assert w.w1.shape == (8, 2)
    loaded = load_model(dst, tmp_path)
    assert sorted(loaded) == sorted(src.state_dict())
    assert _equal_states(src, dst)
    x, y = torch.randn(4, 2), torch.tensor([0, 1, 2, 0])
    assert torch.equal(src(x, y)[0], dst(x, y)[0])


def test_sharded_round_trip_of_a_module(tmp_path):
    torch.manual_seed(0)
    src = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    dst = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    files = save_model(src, tmp_path, max_shard_size=1024)
    assert files[-1].name == "model.safetensors.index.json" and len(files) == 5  # 4 shards
    load_model(dst, tmp_path)
    assert _equal_states(src, dst)
    # the ReLU at index 1 has no parameters: indices 0 and 2 make no list (a gap), which
    # the tree refuses by name, while loading by name (above) does not need the tree
    with pytest.raises(SafeTensorsError, match=r"'1' is missing.*tree-list-gap"):
        open_weights(tmp_path).tree


def test_graph_params_are_checked_before_any_module_exists(graph, tmp_path):
    save_model(module_from_graph(graph), tmp_path)
    check_fit(graph, tmp_path)
    assert expected_specs(graph)["w1"] == ((8, 2), open_weights(tmp_path).specs["w1"].dtype)
    bigger = graph_from_lean(MLP, "mlp", {"c": {"inputs": 2, "hidden": 16, "classes": 3}, "b": 4})
    with pytest.raises(SafeTensorsError) as info:
        check_fit(bigger, tmp_path)
    assert info.value.rule == "model-mismatch"
    assert "shape: 'w1' is [8, 2] in the file, [16, 2] in the model" in info.value.problems


def test_every_mismatch_is_reported_together_and_nothing_is_copied(graph, tmp_path):
    dst = module_from_graph(graph, seed=3)
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    bad = {k: v.clone() for k, v in module_from_graph(graph, seed=4).state_dict().items()}
    del bad["b2"]                                  # missing
    bad["extra.weight"] = torch.zeros(2)           # unexpected
    bad["w1"] = torch.zeros(8, 3)                  # mis-shaped
    bad["b1"] = bad["b1"].to(torch.float16)        # mis-typed
    write_file(bad, tmp_path / "bad.safetensors")
    with pytest.raises(SafeTensorsError) as info:
        load_model(dst, tmp_path / "bad.safetensors")
    err = info.value
    assert err.rule == "model-mismatch" and "bad.safetensors" in str(err)
    assert err.problems == [
        "missing: 'b2' (the model expects F32 [8])",
        "unexpected: 'extra.weight' (F32 [2] in the file)",
        "shape: 'w1' is [8, 3] in the file, [8, 2] in the model",
        "dtype: 'b1' is F16 in the file, F32 in the model",
    ]
    assert "4 problems" in str(err) and "nothing was loaded" in str(err)
    after = dst.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # untouched


def test_lenient_loads(graph, tmp_path):
    src = module_from_graph(graph, seed=5)
    state = {k: v.to(torch.float64) for k, v in src.state_dict().items() if k != "b2"}
    write_file(state, tmp_path / "partial.safetensors")
    dst = module_from_graph(graph, seed=6)
    with pytest.raises(SafeTensorsError):
        load_model(dst, tmp_path / "partial.safetensors")
    done = load_model(dst, tmp_path / "partial.safetensors", strict=False, cast=True)
    assert "b2" not in done and torch.equal(dst.state_dict()["w1"], src.state_dict()["w1"])
    assert dst.state_dict()["w1"].dtype == torch.float32


def test_fit_problems_of_plain_mappings():
    from pytyr.safetensors import DType, TensorSpec

    want = {"a": ((2,), DType.F32)}
    have = {"a": TensorSpec("a", DType.F32, (2,))}
    assert fit_problems(want, have) == []
    assert fit_problems(want, {}) == ["missing: 'a' (the model expects F32 [2])"]
    assert fit_problems(want, {}, strict=False) == []


def test_shared_weights_are_saved_under_both_paths(tmp_path):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 3)
            self.head = nn.Linear(3, 5, bias=False)
            self.head.weight = self.emb.weight

    src, dst = Tied(), Tied()
    save_model(src, tmp_path)
    load_model(dst, tmp_path)
    assert torch.equal(dst.head.weight, src.emb.weight)
    assert dst.head.weight.data_ptr() == dst.emb.weight.data_ptr()  # still tied
