"""`load_graph` on good and hostile graph IR documents."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphs import GraphBuilder, mlp
from pytyr.errors import IRError
from pytyr.ir.graph import Graph, TensorType
from pytyr.ir.validate import Signatures, load_graph


def problems_of(doc, sigs, **kw) -> list[str]:
    with pytest.raises(IRError) as info:
        load_graph(doc, sigs, **kw)
    assert info.value.problems, "an IRError must list its problems"
    return info.value.problems


def one_problem(doc, sigs, *fragments: str, **kw) -> str:
    """The single problem of `doc`, which must contain every fragment."""
    problems = problems_of(doc, sigs, **kw)
    assert len(problems) == 1, problems
    for f in fragments:
        assert f in problems[0], (f, problems[0])
    return problems[0]


def test_fake_is_a_signatures(signatures):
    assert isinstance(signatures, Signatures)


def test_accepts_good_graph_and_round_trips(signatures):
    doc = mlp(8)
    g = load_graph(json.dumps(doc), signatures, source="mlp.json")
    assert isinstance(g, Graph)
    assert g.model == "MLP"
    assert [n.name for n in g.nodes] == ["%0", "%1", "%2", "%3"]
    assert g.nodes[0].shape == (8, 64) and g.nodes[0].loc == "MLP.lean:12:5"
    assert g.types()["%3"] == TensorType((), "f32")
    assert g.params[1].init == {"kind": "zeros"}
    again = load_graph(g.to_json(), signatures)
    assert again == g
    assert json.loads(again.to_json()) == json.loads(g.to_json())
    # bytes and dicts are accepted too
    assert load_graph(g.to_json().encode(), signatures) == g
    assert load_graph(doc, signatures) == g


def test_unknown_op(signatures):
    doc = mlp(8)
    doc["nodes"][1]["op"] = "swish"
    one_problem(doc, signatures, "node %1 (swish at MLP.lean:13:5)", "unknown op 'swish'")


def test_dangling_reference(signatures):
    doc = mlp(8)
    doc["nodes"][1]["inputs"] = ["%9"]
    one_problem(doc, signatures, "node %1 (relu", "'%9'", "not defined (dangling reference)")


def test_forward_reference(signatures):
    doc = mlp(8)
    doc["nodes"][1]["inputs"] = ["%2"]
    one_problem(doc, signatures, "node %1 (relu", "'%2'", "defined later (forward reference)")


def test_self_reference(signatures):
    doc = mlp(8)
    doc["nodes"][1]["inputs"] = ["%1"]
    one_problem(doc, signatures, "node %1 (relu", "refers to the node itself")


def test_wrong_arity(signatures):
    doc = mlp(8)
    doc["nodes"][0]["inputs"] = ["x", "l1.w"]
    one_problem(doc, signatures, "node %0 (linear_bias at MLP.lean:12:5)", "'linear_bias' takes 3 tensor inputs, got 2")


def test_shape_disagreement(signatures):
    doc = mlp(4, hidden=16)
    doc["nodes"][0]["shape"] = [4, 8]
    doc["nodes"][1]["shape"] = [4, 8]  # consistent with its declared input: no cascade
    p = problems_of(doc, signatures)
    assert p[0] == (
        "node %0 (linear_bias at MLP.lean:12:5): declared shape [4, 8] but the signature gives [4, 16]"
    )
    assert len(p) == 2 and p[1].startswith("node %2 (linear_bias")  # [4, 8] doesn't fit l2.w


def test_dtype_disagreement(signatures):
    doc = mlp(8)
    doc["nodes"][3]["dtype"] = "i64"
    one_problem(doc, signatures, "node %3 (cross_entropy", "declared dtype i64 but the signature gives f32")


def test_input_dtype_rejected_by_signature(signatures):
    doc = mlp(8)
    doc["inputs"][1]["dtype"] = "f32"
    del doc["inputs"][1]["bound"]
    one_problem(doc, signatures, "node %3 (cross_entropy",
                "input 'target' of 'cross_entropy' has type T #[8]", "IT #[8] 3 is expected")


def test_input_bound_must_fit_the_signature(signatures):
    # targets bounded by 4 against 3-class logits: the loss's `IT #[b] c` rejects them
    doc = mlp(8)
    doc["inputs"][1]["bound"] = 4
    one_problem(doc, signatures, "node %3 (cross_entropy",
                "input 'target' of 'cross_entropy' has type IT #[8] 4", "IT #[8] 3 is expected")


def test_embedding_ids_bounded_by_another_table_are_rejected(signatures):
    g = GraphBuilder()
    ids = g.input("ids", [2, 3], "i64", bound=10)
    table = g.param("wte", [11, 4])
    g.output("out", g.node("embedding2", [ids, table], [2, 3, 4]))
    # the ids fix v = 10 first (signature order), so the table of 11 rows is the mismatch
    one_problem(g.build(), signatures, "node %0 (embedding2",
                "input 'table' of 'embedding2' has type T #[11, 4] but T #[10, ?d] is expected")
    g.doc["inputs"][0]["bound"] = 11
    assert load_graph(g.build(), signatures).inputs[0].bound == 11


@pytest.mark.parametrize("change,fragment", [
    ({"bound": None}, "input 'y': an i64 input needs its 'bound'"),
    ({"bound": -1}, "input 'y': bound is -1; expected an integer in 0..2**63"),
    ({"bound": 2**63 + 1}, "bound is 9223372036854775809"),
    ({"bound": 3.0}, "bound is 3.0"),
    ({"bound": True}, "bound is true"),
    ({"bound": "3"}, "bound is \"3\""),
])
def test_bad_input_bound(signatures, change, fragment):
    doc = mlp(8)
    if change["bound"] is None:
        del doc["inputs"][1]["bound"]
    else:
        doc["inputs"][1].update(change)
    # the broken input is not checked again through its users: one problem
    one_problem(doc, signatures, fragment)


def test_float_input_with_a_bound(signatures):
    doc = mlp(8)
    doc["inputs"][0]["bound"] = 3
    one_problem(doc, signatures, "input 'x': only i64 inputs have a bound, this one is f32")


def test_bound_round_trips_and_only_integer_inputs_have_the_key(signatures):
    g = load_graph(mlp(8, classes=5), signatures)
    assert g.inputs[1].bound == 5 and g.inputs[1].type == TensorType((8,), "i64", 5)
    assert str(g.inputs[1].type) == "IT #[8] 5"
    records = json.loads(g.to_json())["inputs"]
    assert "bound" not in records[0] and records[1]["bound"] == 5


@pytest.mark.parametrize("field,index,value,fragment", [
    ("params", 1, "l1.w", "parameter 'l1.w': the name 'l1.w' is already used by parameter 'l1.w'"),
    ("inputs", 1, "x", "input 'x': the name 'x' is already used by input 'x'"),
    ("nodes", 2, "%1", "node %1 (linear_bias at MLP.lean:14:5): the name '%1' is already used"),
])
def test_duplicate_names(signatures, field, index, value, fragment):
    doc = mlp(8)
    doc[field][index]["path" if field == "params" else "name"] = value
    assert any(fragment in p for p in problems_of(doc, signatures))


def test_param_path_colliding_with_input(signatures):
    doc = mlp(8)
    doc["params"][0]["path"] = "x"
    doc["nodes"][0]["inputs"][1] = "x"
    assert any("parameter 'x': the name 'x' is already used by input 'x'" in p
               for p in problems_of(doc, signatures))


@pytest.mark.parametrize("key,value,fragment", [
    ("version", 3, "version is 3; this harness reads version 2"),
    ("version", 1, "version is 1; this harness reads version 2, in which every i64 input "
                   "carries its bound"),
    ("version", True, "version is true"),
    ("format", "onnx", "format is \"onnx\"; expected 'tyr.graph'"),
])
def test_bad_version_or_format(signatures, key, value, fragment):
    doc = mlp(8)
    doc[key] = value
    one_problem(doc, signatures, fragment)


def test_oversized_document(signatures):
    text = json.dumps(mlp(8))
    one_problem(text, signatures, f"{len(text)} bytes, over the limit of 100 bytes", max_bytes=100)
    one_problem("x" * 1000, signatures, "over the limit", max_bytes=999)


@pytest.mark.parametrize("doc,fragment", [
    (b"\xff\xfe\x00garbage", "not valid JSON"),
    (b"{\"format\": ", "not valid JSON"),
    ("{\"a\": NaN}", "not valid JSON"),
    ("[" * 100_000, "nests too deeply"),
    ("[1, 2]", "the document: expected an object, got a list"),
    (42, "the document is a int"),
])
def test_non_json(signatures, doc, fragment):
    one_problem(doc, signatures, fragment)


@pytest.mark.parametrize("init,fragment", [
    ({"kind": "xavier"}, "init kind is \"xavier\""),
    ({"kind": "normal"}, "init 'normal' needs 'std' to be a finite non-negative number, got null"),
    ({"kind": "normal", "std": -1.0}, "needs 'std'"),
    ({"kind": "uniform", "bound": "1"}, "needs 'bound'"),
    ({"kind": "zeros", "std": 1.0}, "init 'zeros' has unknown field \"std\""),
    ({"kind": "interval", "lo": 0.5, "hi": 0.1}, "init 'interval' needs lo <= hi"),
    ({"kind": "ramp", "first": 1.0}, "init 'ramp' needs 'last' to be a finite number"),
    ({"kind": "fill", "value": "x"}, "needs 'value'"),
    ([1], "init must be an object, got a list"),
])
def test_bad_init(signatures, init, fragment):
    doc = mlp(8)
    doc["params"][0]["init"] = init
    one_problem(doc, signatures, "parameter 'l1.w'", fragment)


def test_infinite_init_rejected(signatures):
    text = json.dumps(mlp(8)).replace('"std": 1.0', '"std": 1e999', 1)
    one_problem(text, signatures, "parameter 'l1.w'", "needs 'std'")


@pytest.mark.parametrize("shape,fragment", [
    ([8, -2], "shape dimension 1 is negative (-2)"),
    ([8, 2.0], "shape dimension 1 is 2.0; expected an integer"),
    ([8, True], "shape dimension 1 is true"),
    ([1] * 9, "rank 9, over the limit of 8"),
    ([2**21, 2**21], "4398046511104 elements, over the limit of 2**40"),
    ([10**4000] * 8, "too large to show elements, over the limit of 2**40"),
    ("8x2", "shape must be a list of integers, got a string"),
])
def test_bad_shapes(signatures, shape, fragment):
    doc = mlp(8)
    doc["inputs"][0]["shape"] = shape
    # dependents of a broken declaration are not checked further: one problem only
    one_problem(doc, signatures, "input 'x'", fragment)


def test_bad_dtype(signatures):
    doc = mlp(8)
    doc["inputs"][1]["dtype"] = "int32"
    one_problem(doc, signatures, "input 'y': dtype is \"int32\"; expected one of f32, i64")


@pytest.mark.parametrize("field,index,key", [
    ("nodes", 2, "op"), ("nodes", 0, "attrs"), ("params", 0, "shape"), ("inputs", 0, "name"),
    ("outputs", 0, "ref"),
])
def test_missing_key(signatures, field, index, key):
    doc = mlp(8)
    del doc[field][index][key]
    problems = problems_of(doc, signatures)
    assert any(f"missing key {key!r}" in p for p in problems), problems
    if field == "nodes" and key == "op":
        assert any(p.startswith("node %2 (? at MLP.lean:14:5): missing key 'op'") for p in problems)


def test_missing_top_level_key_and_unknown_key(signatures):
    doc = mlp(8)
    del doc["nodes"]
    doc["nodes_"] = []
    problems = problems_of(doc, signatures)
    assert "the document: missing key 'nodes'" in problems
    assert "the document: unknown key \"nodes_\"" in problems


def test_wrong_json_types(signatures):
    doc = mlp(8)
    doc["nodes"][1]["inputs"] = "%0"
    doc["nodes"][2]["attrs"] = {"alpha": "big"}
    doc["outputs"] = {"loss": "%3"}
    problems = problems_of(doc, signatures)
    assert any("node %1 (relu at MLP.lean:13:5): inputs must be a list of value names" in p for p in problems)
    assert any("node %2" in p and "attribute \"alpha\" is \"big\"" in p for p in problems)
    assert "'outputs' must be a list, got an object" in problems


def test_output_referencing_unknown_value(signatures):
    doc = mlp(8)
    doc["outputs"][1]["ref"] = "%17"
    one_problem(doc, signatures, "output 'loss': refers to '%17', which is not an input, parameter or node")


def test_bad_names(signatures):
    doc = mlp(8)
    doc["params"][0]["path"] = "l1..w"
    doc["nodes"][1]["name"] = "h"
    problems = problems_of(doc, signatures)
    assert any("parameter 'l1..w': the path is not a dotted path" in p for p in problems)
    assert any("node h (relu at MLP.lean:13:5): node names have the form %k" in p for p in problems)


def test_param_paths_must_form_a_tree(signatures):
    g = GraphBuilder()
    g.param("blocks.0.w", [2])
    g.param("blocks.2.w", [2])
    g.param("head", [2])
    g.param("head.w", [2])
    g.output("o", "head")
    problems = problems_of(g.build(), signatures)
    assert "parameter 'head.w': its prefix 'head' is itself a parameter" in problems
    # numbered children that are not 0..n-1 are a structure's fields (Lean's `«0»`, `«2»`)
    assert not any("blocks" in p for p in problems), problems


def test_attr_signature_failure_names_node(signatures):
    g = GraphBuilder()
    x = g.input("x", [2, 3])
    g.output("o", g.node("reshape", [x], [5], target=[5], loc="R.lean:1:1"))
    one_problem(g.build(), signatures, "node %0 (reshape at R.lean:1:1):", "numel #[2, 3] = numel #[5] is false (6 ≠ 5)")


@pytest.mark.parametrize("implicit,frag", [
    # rotary reads the first t rows of tables of n positions: t ≤ n is decided on the node
    ({"b": 1, "h": 1, "t": 6, "k": 4, "n": 5}, "the proposition 6 ≤ 5 is false"),
    # a graph without `n` (made before the positions were typed) is named, not guessed
    ({"b": 1, "h": 1, "t": 6, "k": 4},
     "'rotary' needs the implicit argument 'n' in the node's `implicit` to decide its "
     "hypothesis 'hT' : 6 ≤ ?n"),
])
def test_a_hypothesis_of_an_op_is_decided_on_the_node(signatures, implicit, frag):
    g = GraphBuilder()
    x = g.input("x", [1, 1, 6, 8])
    g.output("o", g.node("rotary", [x], [1, 1, 6, 8], implicit=implicit, base=1.0,
                         loc="R.lean:1:1"))
    one_problem(g.build(), signatures, "node %0 (rotary at R.lean:1:1):", frag)


def test_several_problems_gathered(signatures):
    doc = mlp(8)
    doc["version"] = 3
    doc["nodes"][0]["op"] = "lin"
    doc["nodes"][1]["inputs"] = ["%5"]
    doc["nodes"][3]["shape"] = [1]
    doc["outputs"][0]["ref"] = "nope"
    with pytest.raises(IRError) as info:
        load_graph(doc, signatures, source="bad.json")
    err = info.value
    assert len(err.problems) == 5, err.problems
    text = str(err)
    assert text.startswith("bad.json: invalid graph IR (5 problems):")
    for fragment in ("version is 3", "node %0 (lin at MLP.lean:12:5): unknown op",
                     "node %1 (relu", "node %3 (cross_entropy", "output 'logits'"):
        assert fragment in text


def test_signature_that_crashes_is_reported(signatures):
    class Broken:
        def __contains__(self, op):
            return True

        def infer(self, op, inputs, attrs, implicit=None):
            raise KeyError("oops")

    problems = problems_of(mlp(8), Broken())
    assert len(problems) == 4  # one per node
    assert problems[0].startswith("node %0 (linear_bias at MLP.lean:12:5): the signature of")
    assert "failed on these inputs (KeyError('oops'))" in problems[0]


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**41) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_mutations_raise_only_irerror(signatures, data):
    """Replace any one value anywhere in a good document by arbitrary JSON: the result is
    either a Graph or an IRError, never another exception."""
    doc = mlp(4, hidden=8)
    holders = []

    def walk(x):
        if isinstance(x, dict):
            holders.extend((x, k) for k in x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            holders.extend((x, i) for i in range(len(x)))
            for v in x:
                walk(v)

    walk(doc)
    holder, key = data.draw(st.sampled_from(holders))
    holder[key] = data.draw(_json)
    try:
        load_graph(json.dumps(doc), signatures)
    except IRError as e:
        assert e.problems
        assert not any("a bug in pytyr" in p for p in e.problems), e.problems


def _routed(bound: int | None = 5, rotated_bound: int | None = 5) -> dict:
    """logits [2, 3, 5] -> ids (an op of `primI`, IT #[2, 3, 2] 5) -> renumbered ids."""
    g = GraphBuilder("router")
    z = g.input("z", [2, 3, 5])
    ids = g.node("router_top_k", [z], [2, 3, 2], "i64", bound=bound, k=2)
    g.output("ids", g.node("rotate_ids", [ids], [2, 3, 2], "i64", bound=rotated_bound))
    return g.build()


def test_a_node_of_an_index_op_carries_its_bound(signatures):
    g = load_graph(_routed(), signatures)
    assert g.types()["%0"] == TensorType((2, 3, 2), "i64", 5) == g.nodes[1].type
    assert json.loads(g.to_json())["nodes"][0]["bound"] == 5
    assert load_graph(g.to_json(), signatures) == g
    assert "bound" not in json.loads(load_graph(mlp(4), signatures).to_json())["nodes"][0]


@pytest.mark.parametrize("bound,rotated,fragments", [
    (6, 6, ["node %0 (router_top_k", "declared bound 6 but the signature gives 5"]),
    (None, 5, ["node %0 (router_top_k", "declared bound None but the signature gives 5"]),
    (5, 4, ["node %1 (rotate_ids", "declared bound 4 but the signature gives 5"]),
    (-1, 5, ["node %0 (router_top_k", "bound is -1; expected an integer in 0..2**63"]),
])
def test_an_index_nodes_bound_is_the_signatures(signatures, bound, rotated, fragments):
    one_problem(_routed(bound, rotated), signatures, *fragments)
