"""Parameter trees: flatten/unflatten, map, zip_with, fold."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphs import mlp
from pytyr.errors import TyrError
from pytyr.exec.lower import build_module
from pytyr.ir.validate import load_graph
from pytyr.train import tree


def sample():
    return {
        "embed": torch.ones(4, 2),
        "blocks": [
            {"attn": {"w_q": torch.full((2, 2), 1.0), "w_k": torch.full((2, 2), 2.0)}},
            {"attn": {"w_q": torch.full((2, 2), 3.0), "w_k": torch.full((2, 2), 4.0)}},
        ],
        "head": {"b": torch.zeros(3)},
    }


PATHS = ["embed", "blocks.0.attn.w_q", "blocks.0.attn.w_k", "blocks.1.attn.w_q",
         "blocks.1.attn.w_k", "head.b"]


def test_flatten_paths_in_order():
    flat = tree.flatten(sample())
    assert list(flat) == PATHS
    assert tree.paths(sample()) == PATHS
    assert torch.equal(flat["blocks.1.attn.w_k"], torch.full((2, 2), 4.0))


def test_unflatten_inverts_flatten_with_lists():
    t = tree.unflatten(tree.flatten(sample()))
    assert isinstance(t["blocks"], list) and len(t["blocks"]) == 2
    assert tree.paths(t) == PATHS
    assert torch.equal(t["blocks"][1]["attn"]["w_q"], torch.full((2, 2), 3.0))


def test_unflatten_sorts_indices():
    t = tree.unflatten({"l.1": "b", "l.0": "a", "l.10": "k", **{f"l.{i}": i for i in range(2, 10)}})
    assert t["l"][:2] == ["a", "b"] and t["l"][10] == "k"


@pytest.mark.parametrize("flat,fragment", [
    ({"a": 1, "a.b": 2}, "runs through the leaf 'a'"),
    ({"a.b": 2, "a": 1}, "'a' is both a leaf and a subtree"),
    ({"l.0": 1, "l.2": 2}, "under 'l' have list indices that are not 0..n-1"),
    ({"l.0": 1, "l.x": 2}, "under 'l' mix list indices and field names"),
    ({"l.00": 1}, "not 0..n-1"),
    ({"a..b": 1}, "not a dotted path"),
])
def test_unflatten_rejects_non_trees(flat, fragment):
    with pytest.raises(TyrError, match=fragment.replace(".", r"\.")):
        tree.unflatten(flat)


@pytest.mark.parametrize("bad", [{"a.b": 1}, {"0": 1}, {"": 1}, {1: 2}])
def test_flatten_rejects_ambiguous_keys(bad):
    with pytest.raises(TyrError, match="cannot be a path segment"):
        tree.flatten({"m": bad})


def test_map_and_map_with_path_keep_structure():
    doubled = tree.map(lambda x: x * 2, sample())
    assert isinstance(doubled["blocks"], list)
    assert torch.equal(doubled["blocks"][0]["attn"]["w_k"], torch.full((2, 2), 4.0))
    named = tree.map_with_path(lambda p, x: p, sample())
    assert named["blocks"][1]["attn"]["w_q"] == "blocks.1.attn.w_q"
    assert tree.leaves(named) == PATHS


def test_zip_with_combines_leafwise_and_checks_structure():
    a, b = sample(), tree.map(torch.ones_like, sample())
    c = tree.zip_with(lambda x, y, z: x + y - z, a, b, b)
    assert tree.flatten(c).keys() == tree.flatten(a).keys()
    for x, y in zip(tree.leaves(c), tree.leaves(a)):
        assert torch.equal(x, y)
    del b["head"]
    with pytest.raises(TyrError, match="tree 1 lacks the path 'head.b'"):
        tree.zip_with(torch.add, a, b)
    b2 = sample()
    b2["extra"] = torch.zeros(1)
    with pytest.raises(TyrError, match="tree 1 has the extra path 'extra'"):
        tree.zip_with(torch.add, a, b2)


def test_fold_in_tree_order():
    assert tree.fold(lambda acc, x: acc + x.numel(), sample(), 0) == 8 + 4 * 4 + 3
    assert tree.fold(lambda acc, p: acc + [p], tree.map_with_path(lambda p, _: p, sample()), []) == PATHS


def test_bare_leaf_and_empty():
    assert tree.flatten(5) == {"": 5}
    assert tree.unflatten({"": 5}) == 5
    assert tree.flatten({"a": [], "b": {}}) == {}


def test_from_module_matches_graph_paths(signatures):
    module = build_module(load_graph(mlp(4), signatures))
    t = tree.from_module(module)
    assert set(t) == {"l1", "l2"} and set(t["l1"]) == {"w", "b"}
    assert sorted(tree.flatten(t)) == sorted(module.state_dict())


_key = st.from_regex(r"[a-z_][a-z0-9_]{0,4}", fullmatch=True)
_trees = st.recursive(
    st.integers(),
    lambda inner: st.lists(inner, min_size=1, max_size=3)
    | st.dictionaries(_key, inner, min_size=1, max_size=3),
    max_leaves=15,
)


@settings(max_examples=200, derandomize=True, database=None)
@given(_trees)
def test_round_trip_property(t):
    assert tree.unflatten(tree.flatten(t)) == t
    assert tree.map(lambda x: x, t) == t
