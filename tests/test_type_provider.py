"""`safetensors_type_provider`: a model is checked against a checkpoint's shapes, header only."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from pytyr.lean import check_files


@pytest.fixture
def ckpt(tmp_path):
    tensors = {
        "encoder.embed.weight": torch.zeros(100, 16),
        "encoder.layer.0.attention.query.weight": torch.zeros(16, 16),
        "encoder.layer.0.attention.query.bias": torch.zeros(16),
        "encoder.layer.1.attention.query.weight": torch.zeros(16, 16),
        "encoder.layer.1.attention.query.bias": torch.zeros(16),
        "encoder.position_ids": torch.zeros(1, 8, dtype=torch.int64),
        "pooler.dense.weight": torch.zeros(4, 16),
    }
    save_file(tensors, str(tmp_path / "model.safetensors"))
    return tmp_path


def _check(ckpt, body: str, provider: str = '"model.safetensors"'):
    f = ckpt / "M.lean"
    f.write_text(f"import Tyr\nopen torch\nsafetensors_type_provider {provider} as Bert\n{body}\n")
    return check_files(f)


def test_types_follow_the_header(ckpt):
    body = ("def q : T #[16, 16] := Bert.encoder.layer[1].attention.query.weight\n"
            "def e : T #[100, 16] := Bert.encoder.embed.weight\n"
            "def p : IT #[1, 8] 9223372036854775808 := Bert.encoder.position_ids\n"
            "def f (x : T #[3, 16]) : T #[3, 4] := linear x Bert.pooler.dense.weight")
    assert _check(ckpt, body) == []


@pytest.mark.parametrize("dtype,bound", [(torch.int64, 2**63), (torch.int32, 2**31),
                                         (torch.uint8, 2**8), (torch.bool, 2)])
def test_an_integer_tensor_is_bounded_by_its_dtype(tmp_path, dtype, bound):
    # the header says nothing tighter than the dtype: every non-negative value is below it
    save_file({"ids": torch.zeros(2, dtype=dtype), "w": torch.zeros(2)},
              str(tmp_path / "model.safetensors"))
    assert _check(tmp_path, f"def p : IT #[2] {bound} := Bert.ids") == []
    diags = _check(tmp_path, f"def p : IT #[2] {bound - 1} := Bert.ids")
    assert len(diags) == 1 and f"IT #[2] {bound}" in diags[0].message, diags


def test_a_shape_the_checkpoint_does_not_have_is_rejected(ckpt):
    diags = _check(ckpt, "def q : T #[16, 32] := Bert.encoder.layer[0].attention.query.weight")
    assert len(diags) == 1 and diags[0].pos.line == 4
    assert "T #[16, 16]" in diags[0].message and "T #[16, 32]" in diags[0].message


def test_index_out_of_range_and_unknown_field(ckpt):
    d1 = _check(ckpt, "def q : T #[16] := Bert.encoder.layer[2].attention.query.bias")
    assert "index 2 is out of bounds: the vector has 2 elements" in d1[0].message
    d2 = _check(ckpt, "def q : T #[16] := Bert.encoder.layer[0].attention.key.bias")
    assert "invalid field 'key'" in d2[0].message


def test_schema_snapshot_stands_in_for_the_weights(ckpt):
    snap = {"format": "tyr.safetensors.schema", "version": 1, "metadata": {},
            "tensors": {"blocks.0.w": {"dtype": "F32", "shape": [8, 4], "file": None},
                        "blocks.1.w": {"dtype": "F32", "shape": [8, 4], "file": None}}}
    (ckpt / "tiny.schema.json").write_text(json.dumps(snap))
    ok = "def w : T #[8, 4] := Tiny.blocks[1].w"
    assert _check(ckpt, ok.replace("Tiny", "Bert"), '"tiny.schema.json"') == []


def test_numbered_children_that_make_no_list_are_fields(ckpt):
    # An nn.Sequential numbers its layers: a parameter-free one leaves a gap (Flux's
    # `img_mlp.0`, `img_mlp.2`), layers of different shapes make no list: both are
    # structures whose fields are numerals, written `«0»` in Lean.
    save_file({"mlp.0.w": torch.zeros(4, 2), "mlp.2.w": torch.zeros(2, 4),
               "layers.0.w": torch.zeros(2, 2), "layers.1.w": torch.zeros(3, 2),
               "mixed.0.w": torch.zeros(1), "mixed.norm": torch.zeros(5)},
              str(ckpt / "odd.safetensors"))
    body = ("def a : T #[2, 4] := Odd.mlp.«2».w\n"
            "def b : T #[3, 2] := Odd.layers.«1».w\n"
            "def c : T #[5] := Odd.mixed.norm\n"
            "def d : T #[1] := Odd.mixed.«0».w")
    assert _check(ckpt, body.replace("Odd", "Bert"), '"odd.safetensors"') == []
    d = _check(ckpt, "def a : T #[4, 2] := Bert.mlp.«2».w", '"odd.safetensors"')
    assert len(d) == 1 and "T #[2, 4]" in d[0].message and d[0].pos.line == 4
    d = _check(ckpt, "def a : T #[4, 2] := Bert.mlp.«1».w", '"odd.safetensors"')
    assert len(d) == 1 and "invalid field '1'" in d[0].message


def test_a_top_level_list_and_missing_files_are_errors(ckpt):
    save_file({"0.w": torch.zeros(2), "1.w": torch.zeros(2)}, str(ckpt / "list.safetensors"))
    d = _check(ckpt, "", '"list.safetensors"')
    assert "the top level of the checkpoint is a list" in d[0].message and d[0].pos.line == 3
    d = _check(ckpt, "", '"nope.safetensors"')
    assert "checkpoint 'nope.safetensors' not found" in d[0].message


def test_a_corrupt_checkpoint_is_reported_with_the_reader_error(ckpt):
    (ckpt / "bad.safetensors").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{")
    d = _check(ckpt, "", '"bad.safetensors"')
    assert len(d) == 1 and d[0].pos.line == 3 and "bad.safetensors" in d[0].message


def test_generated_type_names_match_the_lean_provider(tmp_path):
    # Tyr/Meta/SafeTensorsTest.lean uses the same fixture and names in Lean.
    import shutil
    shutil.copy("Tyr/Meta/fixtures/tiny.schema.json", tmp_path / "tiny.schema.json")
    f = tmp_path / "N.lean"
    f.write_text("import Tyr\nopen torch\nsafetensors_type_provider \"tiny.schema.json\" as Tiny\n"
                 "def a (l : Tiny.layers.Schema) : Tiny.layers.attn.Schema := l.attn\n"
                 "def r : Tiny.Schema := Tiny\n")
    assert check_files(f) == []


def test_checkpoint_tensors_become_parameters_loaded_from_the_file(ckpt):
    from pytyr.pipeline import graph_from_lean, module_from_graph

    weights = {"head.weight": torch.randn(3, 4), "head.bias": torch.randn(3),
               "unused.weight": torch.randn(5, 5)}
    save_file(weights, str(ckpt / "head.safetensors"))
    f = ckpt / "H.lean"
    f.write_text("import Tyr\nopen torch\nsafetensors_type_provider \"head.safetensors\" as Head\n"
                 "@[model] def m {b : Nat} (x : T #[b, 4]) : T #[b, 3] :=\n"
                 "  linearBias x Head.head.weight Head.head.bias\n")
    g = graph_from_lean(f, "m", {"b": 2})
    assert [p.path for p in g.params] == ["Head.head.bias", "Head.head.weight"]
    assert g.params[1].init == {"kind": "checkpoint", "file": str((ckpt / "head.safetensors").resolve()),
                                "key": "head.weight"}
    module = module_from_graph(g)
    x = torch.randn(2, 4)
    (out,) = module(x)
    torch.testing.assert_close(out, x @ weights["head.weight"].T + weights["head.bias"])


def test_a_checkpoint_changed_after_checking_is_reported(ckpt):
    from pytyr.errors import ExecError
    from pytyr.pipeline import graph_from_lean, module_from_graph

    save_file({"w": torch.zeros(2, 2)}, str(ckpt / "w.safetensors"))
    f = ckpt / "W.lean"
    f.write_text("import Tyr\nopen torch\nsafetensors_type_provider \"w.safetensors\" as W\n"
                 "@[model] def m (x : T #[1, 2]) : T #[1, 2] := linear x W.w\n")
    g = graph_from_lean(f, "m", {})
    save_file({"w": torch.zeros(3, 2)}, str(ckpt / "w.safetensors"))
    with pytest.raises(ExecError) as e:
        module_from_graph(g)
    assert "holds 'w' with shape [3, 2]" in str(e.value) and "[2, 2]" in str(e.value)


def test_using_one_list_element_keeps_the_list_whole(ckpt):
    from pytyr.pipeline import graph_from_lean

    save_file({"a.0.w": torch.zeros(2, 2), "a.1.w": torch.ones(2, 2), "b": torch.zeros(2)},
              str(ckpt / "l.safetensors"))
    f = ckpt / "L.lean"
    f.write_text("import Tyr\nopen torch\nsafetensors_type_provider \"l.safetensors\" as C\n"
                 "@[model] def m (x : T #[1, 2]) : T #[1, 2] := linear x C.a[1].w\n")
    g = graph_from_lean(f, "m", {})
    assert [p.path for p in g.params] == ["C.a.0.w", "C.a.1.w"]


def test_a_model_checked_against_a_snapshot_cannot_run_without_weights(ckpt):
    from pytyr.errors import ExecError
    from pytyr.pipeline import graph_from_lean, module_from_graph

    snap = {"format": "tyr.safetensors.schema", "version": 1, "metadata": {},
            "tensors": {"w": {"dtype": "F32", "shape": [2, 2], "file": None}}}
    (ckpt / "s.schema.json").write_text(json.dumps(snap))
    f = ckpt / "S.lean"
    f.write_text("import Tyr\nopen torch\nsafetensors_type_provider \"s.schema.json\" as S\n"
                 "@[model] def m (x : T #[1, 2]) : T #[1, 2] := linear x S.w\n")
    g = graph_from_lean(f, "m", {})
    with pytest.raises(ExecError) as e:
        module_from_graph(g)
    assert "schema snapshot" in str(e.value) and "no weights" in str(e.value)


def test_names_sort_as_the_lean_provider_sorts_them():
    # `segLt` in Tyr/Meta/SafeTensors.lean: segment by segment, two indices by value,
    # anything else by code point (so a name may sort before a numeral: '-' < '0')
    from pytyr.lean.provider import _key
    names = ["b.10", "a-c", "b.9", "a.z", "b.-x", "b.02", "b.2", "a"]
    assert sorted(names, key=_key) == ["a", "a.z", "a-c", "b.-x", "b.02", "b.2", "b.9", "b.10"]
