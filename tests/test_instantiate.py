"""Instantiating a @[model]: graph IR from Lean, argument values, parameter paths, errors."""
from __future__ import annotations

import json

import pytest

from pytyr.errors import ConfigError, LeanError
from pytyr.ir.validate import load_graph
from pytyr.lean import LeanSignatures, instantiate_model, load

MLP = "examples/mlp/MLP.lean"
VALUES = {"c": {"inputs": 2, "hidden": 16, "classes": 3}, "b": 8}


@pytest.fixture(scope="module")
def prog():
    return load(MLP)


def test_mlp_graph_has_inputs_params_nodes_outputs(prog):
    g = instantiate_model(prog, "mlp", VALUES)
    assert [(i.name, i.shape, i.dtype) for i in g.inputs] == [("x", (8, 2), "f32"), ("y", (8,), "i64")]
    assert [(p.path, p.shape) for p in g.params] == [
        ("w1", (16, 2)), ("b1", (16,)), ("w2", (16, 16)), ("b2", (16,)), ("w3", (3, 16)), ("b3", (3,))]
    assert g.params[0].init == {"kind": "normal", "std": 0.5}
    assert g.params[1].init == {"kind": "zeros"}
    assert [n.op for n in g.nodes] == ["linear_bias", "relu", "linear_bias", "relu", "linear_bias",
                                       "cross_entropy"]
    assert g.nodes[-1].shape == () and g.nodes[-2].shape == (8, 3)
    assert [o.ref for o in g.outputs] == ["%4", "%5"]
    assert g.nodes[0].loc and g.nodes[0].loc.startswith("examples/mlp/MLP.lean:")


def test_graph_round_trips_through_json_and_validator(prog):
    g = instantiate_model(prog, "mlp", VALUES)
    again = load_graph(g.to_json(), LeanSignatures(prog))
    assert again.to_dict() == g.to_dict()


def test_model_found_by_short_or_full_name(prog):
    assert instantiate_model(prog, "mlp", VALUES).model == "mlp"


@pytest.mark.parametrize("values,frag", [
    ({**VALUES, "q": 1}, "has no argument 'q'"),
    ({"c": VALUES["c"]}, "missing value for 'b'"),
    ({**VALUES, "b": -1}, "'b' must be a natural number"),
    ({**VALUES, "b": 2.5}, "'b' must be a natural number"),
    ({**VALUES, "c": {**VALUES["c"], "hiden": 3}}, "unknown key c.hiden"),
    ({**VALUES, "c": {"inputs": 2, "classes": 3}}, "missing value for 'c.hidden'"),
    ({**VALUES, "c": {**VALUES["c"], "hidden": "64"}}, "'c.hidden' must be a natural number"),
    ({"b": 8}, "missing config 'c'"),
])
def test_bad_values_are_named(prog, values, frag):
    with pytest.raises(ConfigError) as e:
        instantiate_model(prog, "mlp", values)
    assert frag in str(e.value)


def test_unknown_model_lists_the_models(prog):
    with pytest.raises(LeanError) as e:
        instantiate_model(prog, "gpt", VALUES)
    assert "no model named 'gpt'" in str(e.value) and "mlp" in str(e.value)


def test_nested_parameter_structures_get_dotted_paths(tmp_path):
    src = """import Tyr
open torch
structure Cfg where
  d : Nat
structure Layer (c : Cfg) where
  w : T #[c.d, c.d] := normal 0.02
  g : T #[c.d] := ones
structure Net (c : Cfg) where
  first : Layer c
  second : Layer c
def layer (c : Cfg) {b : Nat} (p : Layer c) (x : T #[b, c.d]) : T #[b, c.d] :=
  relu (linear x p.w)
@[model] def net (c : Cfg) {b : Nat} (p : Net c) (x : T #[b, c.d]) : T #[] :=
  sum (layer c p.second (layer c p.first x))
"""
    f = tmp_path / "Net.lean"
    f.write_text(src)
    g = instantiate_model(load(f), "net", {"c": {"d": 4}, "b": 2})
    assert [p.path for p in g.params] == ["first.w", "first.g", "second.w", "second.g"]
    assert g.nodes[0].inputs == ["x", "first.w"] and g.nodes[2].inputs == ["%1", "second.w"]


def test_reshape_records_its_closed_target(tmp_path):
    f = tmp_path / "R.lean"
    f.write_text("import Tyr\nopen torch\n"
                 "@[model] def flat (x : T #[2, 3]) : T #[3, 2] := transpose (reshape x #[2, 3] |> relu)\n"
                 .replace(" |> relu", ""))
    g = instantiate_model(load(f), "flat", {})
    assert g.nodes[0].op == "reshape" and g.nodes[0].attrs == {"target": [2, 3]}
    assert g.nodes[1].shape == (3, 2)


def test_parameter_without_initialiser_is_rejected(tmp_path):
    f = tmp_path / "P.lean"
    f.write_text("import Tyr\nopen torch\nstructure P where\n  w : T #[2, 2]\n"
                 "@[model] def m (p : P) (x : T #[1, 2]) : T #[1, 2] := linear x p.w\n")
    with pytest.raises(LeanError) as e:
        instantiate_model(load(f), "m", {})
    assert "parameter 'w' has no initialiser" in str(e.value)
    assert ":4:2:" in str(e.value)


def test_float_attributes_are_evaluated(tmp_path):
    f = tmp_path / "S.lean"
    f.write_text("import Tyr\nopen torch\nstructure C where\n  n : Nat\n"
                 "structure P (c : C) where\n  w : T #[2] := normal (0.02 / Float.sqrt (2 * c.n.toFloat))\n"
                 "@[model] def m (c : C) (p : P c) (x : T #[2]) : T #[2] := scale (mul x p.w) 0.5\n")
    g = instantiate_model(load(f), "m", {"c": {"n": 8}})
    assert g.params[0].init == {"kind": "normal", "std": pytest.approx(0.005)}
    assert g.nodes[1].attrs == {"alpha": 0.5}


def test_graph_json_is_versioned(prog):
    doc = json.loads(instantiate_model(prog, "mlp", VALUES).to_json())
    assert doc["format"] == "tyr.graph" and doc["version"] == 2
    # the class targets carry their bound, the classes of the logits; the features none
    assert doc["inputs"][1]["bound"] == VALUES["c"]["classes"] and "bound" not in doc["inputs"][0]


def test_vector_of_blocks_is_named_by_index(tmp_path):
    src = """import Tyr
open torch
structure Cfg where
  d : Nat
  layers : Nat
structure Attn (c : Cfg) where
  w_q : T #[c.d, c.d] := normal 0.02
  deriving TensorStruct
structure Block (c : Cfg) where
  attn : Attn c
  ln : T #[c.d] := ones
  deriving TensorStruct
structure Net (c : Cfg) where
  blocks : Vector (Block c) c.layers
  head : T #[2, c.d] := normal 0.02
  deriving TensorStruct
@[model] def net (c : Cfg) {b : Nat} (p : Net c) (x : T #[b, c.d]) : T #[b, 2] := linear x p.head
"""
    f = tmp_path / "V.lean"
    f.write_text(src)
    g = instantiate_model(load(f), "net", {"c": {"d": 4, "layers": 3}, "b": 2})
    assert [p.path for p in g.params] == [
        "blocks.0.attn.w_q", "blocks.0.ln", "blocks.1.attn.w_q", "blocks.1.ln",
        "blocks.2.attn.w_q", "blocks.2.ln", "head"]
    assert g.params[1].init == {"kind": "ones"}


def test_an_index_proved_by_a_hypothesis_is_decided_on_the_values(tmp_path):
    # `p.blocks[0]` checks with `h : 0 < c.layers` in scope (Lean's `get_elem_tactic` by
    # `assumption`); instantiation decides the model's hypothesis on the values first.
    test_vector_of_blocks_is_named_by_index(tmp_path)
    f = tmp_path / "V.lean"
    f.write_text(f.read_text().replace(
        "@[model] def net (c : Cfg) {b : Nat} (p : Net c) (x : T #[b, c.d]) : T #[b, 2] := "
        "linear x p.head",
        "@[model] def net (c : Cfg) {b : Nat} (p : Net c) (h : 0 < c.layers) (x : T #[b, c.d]) "
        ": T #[b, c.d] := layerNorm x p.blocks[0].ln p.blocks[0].ln"))
    g = instantiate_model(load(f), "net", {"c": {"d": 4, "layers": 2}, "b": 2})
    assert g.nodes[0].op == "layer_norm" and "blocks.0.ln" in {p.path for p in g.params}
    with pytest.raises(ConfigError, match="violate the hypothesis 'h : 0 < c.layers'"):
        instantiate_model(load(f), "net", {"c": {"d": 4, "layers": 0}, "b": 2})


def test_vector_parameter_paths_are_the_module_state_dict_keys(tmp_path):
    from pytyr.pipeline import module_from_graph
    test_vector_of_blocks_is_named_by_index(tmp_path)
    g = instantiate_model(load(tmp_path / "V.lean"), "net", {"c": {"d": 4, "layers": 2}, "b": 2})
    keys = set(module_from_graph(g).state_dict())
    assert keys == {p.path for p in g.params}


def test_an_op_with_an_index_result_makes_a_bounded_i64_node(tmp_path):
    # `primI`: the router's ids are IT #[b, t, k] e, and the node carries the bound e
    f = tmp_path / "R.lean"
    f.write_text("import Tyr\nopen torch\n@[model] def route (z : T #[2, 3, 5]) : T #[2, 3, 2] "
                 ":=\n  routerWeights z (rotateIds (routerTopK z 2 (by decide))) 1 (by decide)\n")
    g = instantiate_model(load(f), "route", {})
    assert [(n.op, n.dtype, n.bound) for n in g.nodes] == [
        ("router_top_k", "i64", 5), ("rotate_ids", "i64", 5), ("router_weights", "f32", None)]
    assert load_graph(g.to_json(), LeanSignatures()) == g


@pytest.mark.parametrize("body,message", [
    ("def bad {s : Shape} (x : T s) : T s := primI \"bad_i\" [x.node]",
     "a `primI` op must return an index tensor `IT s n`"),
    ("def bad {s : Shape} {n : Nat} (x : T s) : IT s n := prim \"bad_f\" [x.node]",
     "a `prim` op must return a float tensor `T s`"),
])
def test_the_emitter_says_what_the_op_returns(tmp_path, body, message):
    f = tmp_path / "E.lean"
    f.write_text("import Tyr\nopen torch\n" + body + "\n")
    with pytest.raises(LeanError) as e:
        load(f)
    assert message in str(e.value)
