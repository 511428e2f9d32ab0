"""A task's integer feeds name the role of their bound (`Feed.bound`): the engine fills the
model's bound from it (a config field or a `Nat` binder), refuses a graph whose bound is not
the data's, and the tasks check the ids they load against it."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.data.batches import RandomBatches
from pytyr.errors import ConfigError, DataError
from pytyr.pipeline import LeanModels
from pytyr.train.match import check_graph, fill_config_fields, fill_dims
from pytyr.train.task import Expect, Feed, check_ids

SRC = """import Tyr
open torch

structure C where
  vocab : Nat
  width : Nat

structure P (c : C) where
  wte : T #[c.vocab, c.width] := normal 0.02
  deriving TensorStruct

/-- The ids alone say the vocabulary: no output mentions it. -/
@[model]
def embed (c : C) {b t : Nat} (p : P c) (idx : IT #[b, t] c.vocab) :
    T #[b, t, c.width] × T #[] :=
  let x := embedding2 idx p.wte
  (x, mean x)

structure Q (v : Nat) where
  table : T #[v, 4] := normal 0.02
  deriving TensorStruct

/-- The vocabulary is a binder of the model, bounding its ids. -/
@[model]
def lookup {b t v : Nat} (p : Q v) (idx : IT #[b, t] v) : T #[b, t, 4] × T #[] :=
  let x := embedding2 idx p.table
  (x, mean x)
"""

IDS = {"idx": Feed("i64", ("batch", "seq"), bound="vocab")}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("match") / "M.lean"
    path.write_text(SRC, encoding="utf-8")
    return LeanModels(path)


def test_a_feed_shows_its_bound():
    assert IDS["idx"].show({"batch": 2, "seq": 3, "vocab": 5}) == "IT [batch=2, seq=3] vocab=5"
    assert IDS["idx"].show({"batch": 2}) == "IT [batch=2, seq] vocab"
    assert Feed("f32", ("batch",)).show({"batch": 2}) == "T [batch=2]"


def test_the_config_field_of_a_bound_waits_for_the_data_then_is_filled(source):
    decl = source.declaration("embed")
    assert decl.inputs[0].bound == ("c", "vocab")
    values, waiting = fill_config_fields(decl, {"c": {"width": 4}}, IDS, [], {"batch": 2})
    assert waiting == ["c.vocab"] and values == {"c": {"width": 4}}
    values, waiting = fill_config_fields(decl, {"c": {"width": 4}}, IDS, [], {"vocab": 7})
    assert waiting == [] and values == {"c": {"width": 4, "vocab": 7}}
    # a value the config gives is kept: the graph check says whether it fits
    values, _ = fill_config_fields(decl, {"c": {"width": 4, "vocab": 9}}, IDS, [], {"vocab": 7})
    assert values["c"]["vocab"] == 9


def test_a_binder_bound_is_filled_like_a_dim(source):
    decl = source.declaration("lookup")
    assert decl.inputs[0].bound == "v"
    values, waiting = fill_config_fields(decl, {}, IDS, [], {})
    assert waiting == ["v"] and values == {}
    sizes = {"batch": 2, "seq": 3, "vocab": 11}
    values, waiting = fill_config_fields(decl, {}, IDS, [], sizes)
    assert waiting == [] and values == {"v": 11}
    values = fill_dims(decl, {}, IDS, sizes, "lm")
    assert values == {"b": 2, "t": 3, "v": 11}
    with pytest.raises(ConfigError, match=r"argument 'idx' : IT #\[b, t\] v with v = 12 "
                                          r"\(model.v\) but task 'lm' feeds idx : "
                                          r"IT \[batch=2, seq=3\] vocab=11; leave model.v out"):
        fill_dims(decl, {"v": 12}, IDS, sizes, "lm")


def _check(source, model, values, sizes):
    graph = source.graph(model, fill_dims(source.declaration(model), values, IDS, sizes, "lm"))
    check_graph(graph, "M.lean:1:0", IDS, [], sizes, "lm", values)
    return graph


def test_the_graph_bound_must_be_the_data_s(source):
    sizes = {"batch": 2, "seq": 3, "vocab": 7}
    assert _check(source, "embed", {"c": {"vocab": 7, "width": 4}}, sizes).inputs[0].bound == 7
    with pytest.raises(ConfigError) as e:
        _check(source, "embed", {"c": {"vocab": 6, "width": 4}}, sizes)
    assert str(e.value) == ("M.lean:1:0: model 'embed': argument 'idx' is IT #[2, 3] 6 but task "
                            "'lm' feeds idx : IT [batch=2, seq=3] vocab=7 (model.c.vocab is 6)")
    # before the data, the bound's role is unknown: only the shape is checked
    _check(source, "embed", {"c": {"vocab": 6, "width": 4}}, {"batch": 2, "seq": 3})


def test_a_feed_without_a_bound_role_accepts_any_bound(source):
    plain = {"idx": Feed("i64", ("batch", "seq"))}
    sizes = {"batch": 2, "seq": 3, "vocab": 7}
    graph = source.graph("embed", {"c": {"vocab": 6, "width": 4}, "b": 2, "t": 3})
    check_graph(graph, "M.lean:1:0", plain, [Expect(0, "x", ("batch", "seq", "width"))],
                {**sizes, "width": 4}, "lm", {})


def test_check_ids_names_the_first_id_outside():
    check_ids(torch.tensor([[0, 4], [2, 3]]), 5, "labels")
    with pytest.raises(DataError, match=r"^labels: id 5 at \[1, 0\] is outside \[0, 5\)$"):
        check_ids(torch.tensor([[0, 4], [5, 9]]), 5, "labels")
    with pytest.raises(DataError, match=r"id -1 at \[0\]"):
        check_ids(torch.tensor([-1, 7]), 5, "labels")


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(-5, 20), min_size=1, max_size=12), st.integers(1, 16))
def test_check_ids_accepts_exactly_the_ids_below_the_bound(ids, bound):
    t = torch.tensor(ids)
    if all(0 <= i < bound for i in ids):
        check_ids(t, bound, "x")
    else:
        with pytest.raises(DataError):
            check_ids(t, bound, "x")


def test_random_batches_check_the_tokens_against_the_vocabulary():
    tokens = np.arange(40, dtype=np.uint16) % 10
    RandomBatches(tokens, 2, 4, seed=0, vocab_size=10)
    tokens[17] = 10
    with pytest.raises(DataError, match=r"RandomBatches: token 10 at position 17 is out of range "
                                        r"for vocab_size 10"):
        RandomBatches(tokens, 2, 4, seed=0, vocab_size=10)
    RandomBatches(tokens, 2, 4, seed=0)  # without a vocabulary nothing is checked
