"""Sharded checkpoints: the index followed and checked, shard paths confined to the directory,
index-less unions, and sharded saves (Hugging Face names, index last, stale shards removed)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import safetensors
import torch

from pytyr.atomic import atomic_write
from pytyr.safetensors import (
    INDEX_NAME,
    SHARD_RULES,
    SafeTensorsError,
    open_checkpoint,
    save_sharded,
    write_file,
)
from pytyr.safetensors import writer as writer_mod


def _tensors(n: int = 6) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {f"layers.{i}.weight": torch.randn(4, 4, generator=g) for i in range(n)}


@pytest.fixture
def sharded(tmp_path) -> Path:
    """Six 64-byte tensors in shards of at most 128 bytes: three shards and an index."""
    d = tmp_path / "ckpt"
    save_sharded(_tensors(), d, max_shard_size=128)
    return d


def _index(d: Path) -> dict:
    return json.loads((d / INDEX_NAME).read_text())


def _write_index(d: Path, wmap: dict, meta: dict | None = None) -> None:
    (d / INDEX_NAME).write_text(json.dumps({"metadata": meta or {}, "weight_map": wmap}))


def test_save_sharded_layout_is_hugging_face(sharded):
    names = sorted(p.name for p in sharded.iterdir())
    assert names == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)] + [INDEX_NAME]
    idx = _index(sharded)
    assert idx["metadata"] == {"total_size": 6 * 64}
    assert idx["weight_map"]["layers.0.weight"] == "model-00001-of-00003.safetensors"
    assert idx["weight_map"]["layers.5.weight"] == "model-00003-of-00003.safetensors"
    # the reference library reads every shard; metadata as Hugging Face loaders expect
    with safetensors.safe_open(str(sharded / "model-00002-of-00003.safetensors"), "pt") as f:
        assert sorted(f.keys()) == ["layers.2.weight", "layers.3.weight"]
        assert f.metadata() == {"format": "pt"}


def test_open_sharded_round_trip(sharded):
    cp = open_checkpoint(sharded)
    assert len(cp) == 6 and len(cp.shards()) == 3 and cp.nbytes == 6 * 64
    want = _tensors()
    got = cp.load()
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert cp.tensor("layers.1.weight", dtype=torch.float64).dtype == torch.float64


def test_only_referenced_shards_are_opened(sharded):
    (sharded / "junk.safetensors").write_bytes(b"not a safetensors file")
    assert len(open_checkpoint(sharded)) == 6  # the index does not name it: never read


def test_mapped_tensor_missing_from_its_shard(sharded):
    wmap = _index(sharded)["weight_map"]
    wmap["layers.9.weight"] = "model-00001-of-00003.safetensors"
    _write_index(sharded, wmap)
    with pytest.raises(SafeTensorsError, match=r"'layers\.9\.weight'.*tensor-missing-from-shard"):
        open_checkpoint(sharded)


def test_tensor_in_two_shards_with_index(sharded):
    wmap = _index(sharded)["weight_map"]
    # shard 1 also gets layers.2 (mapped to shard 2): both referenced shards hold it
    write_file({**{k: v for k, v in _tensors().items() if k in ("layers.0.weight",
                                                                 "layers.1.weight",
                                                                 "layers.2.weight")}},
               sharded / "model-00001-of-00003.safetensors")
    _write_index(sharded, wmap)
    with pytest.raises(SafeTensorsError) as info:
        open_checkpoint(sharded)
    assert info.value.rule == "tensor-in-two-shards" and "layers.2.weight" in str(info.value)


def test_unmapped_tensor_in_a_shard(sharded):
    wmap = _index(sharded)["weight_map"]
    del wmap["layers.0.weight"]
    _write_index(sharded, wmap)
    with pytest.raises(SafeTensorsError, match="tensor-not-in-index"):
        open_checkpoint(sharded)


def test_problems_are_gathered(sharded):
    wmap = _index(sharded)["weight_map"]
    del wmap["layers.0.weight"]
    wmap["ghost"] = "model-00003-of-00003.safetensors"
    _write_index(sharded, wmap)
    with pytest.raises(SafeTensorsError) as info:
        open_checkpoint(sharded)
    assert len(info.value.problems) == 2
    assert "tensor-missing-from-shard" in str(info.value)
    assert "tensor-not-in-index" in str(info.value)


@pytest.mark.parametrize("path, rule", [
    ("/etc/passwd", "shard-path-absolute"),
    ("C:\\model.safetensors", "shard-path-absolute"),
    ("sub\\model.safetensors", "shard-path-absolute"),
    ("", "shard-path-absolute"),
    ("../outside.safetensors", "shard-path-parent"),
    ("sub/../../outside.safetensors", "shard-path-parent"),
    ("nope.safetensors", "shard-missing"),
])
def test_bad_shard_paths(sharded, path, rule):
    wmap = _index(sharded)["weight_map"]
    wmap["layers.0.weight"] = path
    _write_index(sharded, wmap)
    with pytest.raises(SafeTensorsError) as info:
        open_checkpoint(sharded)
    assert info.value.rule == rule and INDEX_NAME in str(info.value)


def test_symlink_out_of_the_directory(sharded, tmp_path):
    outside = tmp_path / "outside.safetensors"
    write_file({"layers.0.weight": torch.zeros(4, 4)}, outside)
    os.symlink(outside, sharded / "link.safetensors")
    wmap = _index(sharded)["weight_map"]
    wmap["layers.0.weight"] = "link.safetensors"
    _write_index(sharded, wmap)
    with pytest.raises(SafeTensorsError, match="shard-path-escapes"):
        open_checkpoint(sharded)
    (sharded / INDEX_NAME).unlink()  # the index-less union refuses it too
    with pytest.raises(SafeTensorsError, match="shard-path-escapes"):
        open_checkpoint(sharded)


def test_symlink_inside_the_directory_is_fine(sharded):
    wmap = _index(sharded)["weight_map"]
    os.symlink("model-00001-of-00003.safetensors", sharded / "alias.safetensors")
    for k in ("layers.0.weight", "layers.1.weight"):
        wmap[k] = "alias.safetensors"
    _write_index(sharded, wmap)
    assert len(open_checkpoint(sharded)) == 6


@pytest.mark.parametrize("text, rule", [
    ("{", "index-not-json"),
    (b"\xff", "index-not-json"),
    ("[]", "index-malformed"),
    ('{"metadata": {}}', "index-malformed"),
    ('{"weight_map": {"a": 3}}', "index-malformed"),
    ('{"weight_map": {}, "metadata": []}', "index-malformed"),
    ('{"weight_map": {}, "metadata": {"total_size": -1}}', "index-malformed"),
    ('{"weight_map": {"a": "x", "a": "y"}}', "duplicate-name"),
])
def test_malformed_index(sharded, text, rule):
    p = sharded / INDEX_NAME
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(SafeTensorsError) as info:
        open_checkpoint(sharded)
    assert info.value.rule == rule


def test_union_without_index(sharded):
    (sharded / INDEX_NAME).unlink()
    assert len(open_checkpoint(sharded)) == 6
    write_file({"layers.0.weight": torch.zeros(4, 4)}, sharded / "extra.safetensors")
    with pytest.raises(SafeTensorsError) as info:
        open_checkpoint(sharded)
    assert info.value.rule == "tensor-in-two-shards" and "extra.safetensors" in str(info.value)


def test_empty_directory(tmp_path):
    with pytest.raises(SafeTensorsError, match="no-shards"):
        open_checkpoint(tmp_path)


@pytest.mark.parametrize("protocol", [2, 4, None])
def test_a_torch_pickle_is_refused_by_name(tmp_path, protocol):
    # torch.save's zip archive (protocol None here) and the bare pickles of old torch
    f = tmp_path / "pytorch_model.bin"
    if protocol is None:
        torch.save({"w": torch.zeros(2)}, f)
    else:
        torch.save({"w": torch.zeros(2)}, f, _use_new_zipfile_serialization=False,
                   pickle_protocol=protocol)
    with pytest.raises(SafeTensorsError) as info:
        open_checkpoint(f)
    assert info.value.rule == "pickle-not-read" and "torch.save" in str(info.value)
    with pytest.raises(SafeTensorsError) as info:
        open_checkpoint(tmp_path)  # a directory with no safetensors beside the pickle
    assert info.value.rule == "pickle-not-read" and "pytorch_model.bin" in str(info.value)
    assert "pickle-not-read" in SHARD_RULES


def test_a_header_whose_length_begins_like_a_pickle_still_opens(tmp_path):
    # a header of 640 bytes has the length bytes 80 02, a pickle's first two: the '{' after
    # them tells the two apart
    body = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})
    header = body.encode().ljust(640)
    f = tmp_path / "w.safetensors"
    f.write_bytes(len(header).to_bytes(8, "little") + header + b"\x00" * 4)
    assert f.read_bytes()[:2] == b"\x80\x02"
    assert list(open_checkpoint(f).tensors) == ["w"]


def test_a_bad_shard_names_itself(sharded):
    (sharded / "model-00002-of-00003.safetensors").write_bytes(b"\x00" * 4)
    with pytest.raises(SafeTensorsError, match=r"model-00002-of-00003.*file-too-small"):
        open_checkpoint(sharded)


def test_resave_removes_stale_shards_and_index(sharded):
    save_sharded(_tensors(), sharded, max_shard_size=256)  # 3 shards -> 2
    names = sorted(p.name for p in sharded.iterdir())
    assert names == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                     INDEX_NAME]
    save_sharded(_tensors(), sharded, max_shard_size="1MB")  # fits in one file: no index
    assert sorted(p.name for p in sharded.iterdir()) == ["model.safetensors"]
    assert len(open_checkpoint(sharded)) == 6
    save_sharded(_tensors(), sharded, max_shard_size=128)  # and back: the single file goes
    assert "model.safetensors" not in {p.name for p in sharded.iterdir()}


def test_index_is_written_last_and_nothing_temporary_remains(tmp_path, monkeypatch):
    order = []
    real = os.replace

    def record(src, dst):
        order.append(Path(dst).name)
        return real(src, dst)

    monkeypatch.setattr(writer_mod.os, "replace", record)
    save_sharded(_tensors(), tmp_path, max_shard_size=128)
    assert order[-1] == INDEX_NAME and len(order) == 4
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    class Boom(Exception):
        pass

    def write(f):
        f.write(b"partial")
        raise Boom

    with pytest.raises(Boom):
        atomic_write(tmp_path / "x.safetensors", write)
    assert list(tmp_path.iterdir()) == []


def test_shard_size_parsing():
    assert writer_mod.parse_size("5GB") == 5 * 10**9 and writer_mod.parse_size("2GiB") == 2**31
    assert writer_mod.parse_size(100) == 100 and writer_mod.parse_size("1.5 MB") == 1_500_000
    for bad in ("5 parsecs", "", -1, 0):
        with pytest.raises(ValueError):
            writer_mod.parse_size(bad)


def test_a_tensor_larger_than_the_limit_gets_its_own_shard(tmp_path):
    t = {"small": torch.zeros(2), "big": torch.zeros(100), "tail": torch.zeros(2)}
    save_sharded(t, tmp_path, max_shard_size=64)
    assert len(_index(tmp_path)["weight_map"]) == 3
    assert len(list(tmp_path.glob("model-*-of-00003.safetensors"))) == 3


def test_shard_rules_are_documented():
    assert {"shard-path-absolute", "shard-path-parent", "shard-path-escapes",
            "tensor-missing-from-shard", "tensor-in-two-shards"} <= set(SHARD_RULES)
