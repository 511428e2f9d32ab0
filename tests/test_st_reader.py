"""The safetensors reader on valid files: golden bytes, every dtype, zero-copy maps, header-only
introspection, and the writer's byte-for-byte agreement with the reference library."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

from pytyr.safetensors import (
    DType,
    SafeTensorsError,
    SafeTensorsFile,
    load_file,
    parse_bytes,
    read_header,
    write_file,
)
from pytyr.safetensors import header as header_mod

# Written by safetensors.torch.save({"w": [[1., -2.]], "i": [7] (int64), "h": 0.5 (f16,
# rank 0)}, metadata={"format": "pt"}): the reference layout, frozen.
GOLDEN = (
    b'\xc8\x00\x00\x00\x00\x00\x00\x00{"__metadata__":{"format":"pt"},"i":{"dtype":"I64",'
    b'"shape":[1],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[1,2],"data_offsets":'
    b'[8,16]},"h":{"dtype":"F16","shape":[],"data_offsets":[16,18]}}     '
    b'\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80?\x00\x00\x00\xc0\x008'
)
GOLDEN_TENSORS = {"w": torch.tensor([[1.0, -2.0]]), "i": torch.tensor([7]),
                  "h": torch.tensor(0.5, dtype=torch.float16)}

TORCH_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.uint16, torch.float16,
                torch.bfloat16, torch.int32, torch.uint32, torch.float32, torch.int64,
                torch.uint64, torch.float64, torch.complex64, torch.float8_e5m2,
                torch.float8_e4m3fn]


def _sample(dtype: torch.dtype, shape: tuple[int, ...] = (3, 2)) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g) * 10
    if dtype == torch.bool:
        return x > 0
    if dtype == torch.complex64:
        return torch.complex(x, -x)
    if not dtype.is_floating_point:
        x = x.abs() if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else x
        return x.to(torch.int64).to(dtype)
    return x.to(dtype)


def test_golden_bytes_from_the_reference_writer(tmp_path):
    ref = safetensors.torch.save(GOLDEN_TENSORS, metadata={"format": "pt"})
    assert ref == GOLDEN  # the reference layout has not moved
    path = tmp_path / "golden.safetensors"
    path.write_bytes(GOLDEN)
    h = read_header(path)
    assert h.metadata == {"format": "pt"} and h.data_start == 8 + 200
    assert [(t.name, t.dtype, t.shape, t.begin, t.end) for t in h.tensors.values()] == [
        ("i", DType.I64, (1,), 0, 8), ("w", DType.F32, (1, 2), 8, 16), ("h", DType.F16, (), 16, 18)]
    got = load_file(path)
    for k, v in GOLDEN_TENSORS.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v)


def test_writer_matches_the_reference_byte_for_byte(tmp_path):
    tensors = {f"t{i}": _sample(d) for i, d in enumerate(TORCH_DTYPES)}
    tensors.update(GOLDEN_TENSORS)
    tensors["empty"] = torch.zeros(0, 4)
    for meta in (None, {"note": "é"}):  # one key: the reference orders keys by hash
        ours = tmp_path / "ours.safetensors"
        write_file(tensors, ours, metadata=meta)
        assert ours.read_bytes() == safetensors.torch.save(tensors, metadata=meta)


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_every_dtype_round_trips(tmp_path, dtype):
    t = _sample(dtype)
    path = tmp_path / "x.safetensors"
    write_file({"x": t, "s": t[0, 0].clone()}, path)
    got = load_file(path)
    assert got["x"].dtype == dtype and torch.equal(got["x"].view(torch.uint8), t.view(torch.uint8))
    assert got["s"].shape == ()
    assert torch.equal(got["s"].reshape(1).view(torch.uint8), t[0, 0].reshape(1).view(torch.uint8))
    ref = safetensors.torch.load_file(str(path))  # the reference reads what we wrote
    assert torch.equal(ref["x"].view(torch.uint8), t.view(torch.uint8))


def test_dtype_table_covers_the_format():
    names = {d.value for d in DType}
    for n in ("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32",
              "U32", "F32", "F64", "I64", "U64", "C64", "F4", "F6_E2M3", "F6_E3M2", "F8_E8M0"):
        assert n in names
    assert DType.F4.bits == 4 and DType.F4.itemsize is None and DType.F4.torch is None
    assert DType.F6_E2M3.nbytes(4) == 3 and DType.F6_E2M3.nbytes(3) is None
    assert DType.BF16.torch == torch.bfloat16 and DType.from_torch(torch.bfloat16) is DType.BF16
    assert DType.parse("F32") is DType.F32 and DType.parse("f32") is None
    assert DType.parse(["F32"]) is None  # untrusted JSON: not even hashable
    # the writer's layout order keeps alignment: item sizes never grow along it
    sizes = [d.bits for d in sorted(DType, key=lambda d: -d.order) if d.itemsize]
    assert sizes == sorted(sizes, reverse=True)


def test_zero_element_rank_zero_and_metadata(tmp_path):
    path = tmp_path / "z.safetensors"
    write_file({"e": torch.zeros(0, 3), "e2": torch.zeros(2, 0, dtype=torch.int64),
                "s": torch.tensor(3.0)}, path, metadata={"a": "b"})
    f = SafeTensorsFile(path)
    assert f.metadata == {"a": "b"} and len(f) == 3 and "e" in f
    assert f.tensor("e").shape == (0, 3) and f.tensor("e2").dtype == torch.int64
    assert f.tensor("s").shape == () and f.tensor("s").item() == 3.0
    assert f.numpy("e").shape == (0, 3)
    only_empty = tmp_path / "only_empty.safetensors"
    write_file({"e": torch.zeros(0)}, only_empty)
    assert load_file(only_empty)["e"].numel() == 0
    nothing = tmp_path / "nothing.safetensors"
    write_file({}, nothing)
    assert load_file(nothing) == {}


def test_tensors_are_zero_copy_views_and_copy_on_write(tmp_path):
    path = tmp_path / "v.safetensors"
    write_file({"a": torch.arange(16, dtype=torch.float32), "b": torch.ones(4, 4)}, path)
    before = path.read_bytes()
    f = SafeTensorsFile(path)
    a1, a2 = f.tensor("a"), f.tensor("a")
    assert a1.data_ptr() == a2.data_ptr()  # both are views of the one map, not copies
    a1 += 1  # writable, but private: the file is untouched
    assert path.read_bytes() == before
    f.close()
    assert a2[0].item() == 1.0  # the map outlives close() while tensors use it


def test_unaligned_data_is_copied_correctly(tmp_path):
    t = torch.arange(6, dtype=torch.float64)
    head = json.dumps({"x": {"dtype": "F64", "shape": [6], "data_offsets": [0, 48]}}).encode()
    assert (8 + len(head)) % 8 != 0  # the data starts misaligned for f64
    path = tmp_path / "u.safetensors"
    path.write_bytes(len(head).to_bytes(8, "little") + head + t.numpy().tobytes())
    got = load_file(path)["x"]
    assert torch.equal(got, t) and got.data_ptr() % 8 == 0


def test_numpy_view_and_load_options(tmp_path):
    path = tmp_path / "n.safetensors"
    x = torch.randn(3, 5)
    write_file({"x": x, "b": x.to(torch.bfloat16)}, path)
    f = SafeTensorsFile(path)
    assert np.array_equal(f.numpy("x"), x.numpy())
    assert f.numpy("b").dtype == np.uint16  # numpy has no bfloat16: raw bits
    assert f.tensor("x", dtype=torch.float64).dtype == torch.float64
    assert f.tensor("x", device="cpu").device.type == "cpu"
    assert set(f.load(["x"])) == {"x"} and f.load([]) == {}
    with pytest.raises(KeyError, match="no tensor named 'y'"):
        f.tensor("y")


def test_sub_byte_tensors_are_read_but_not_given_to_torch(tmp_path):
    head = json.dumps({"q": {"dtype": "F4", "shape": [2, 4], "data_offsets": [0, 4]}}).encode()
    path = tmp_path / "f4.safetensors"
    path.write_bytes(len(head).to_bytes(8, "little") + head + b"\x12\x34\x56\x78")
    h = read_header(path)
    assert h.tensors["q"].nbytes == 4
    with pytest.raises(SafeTensorsError, match="no-torch-dtype"):
        SafeTensorsFile(path).tensor("q")


def test_introspection_reads_only_the_header(tmp_path, monkeypatch):
    path = tmp_path / "big.safetensors"
    write_file({"big": torch.zeros(1 << 20), "small": torch.ones(3)}, path)
    real_open = open
    read_bytes = []

    class Counting:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            data = self.f.read(n)
            read_bytes.append(len(data))
            return data

        def __getattr__(self, a):
            return getattr(self.f, a)

        def __enter__(self):
            return self

        def __exit__(self, *e):
            self.f.close()

    monkeypatch.setattr(header_mod, "open", lambda p, m: Counting(real_open(p, m)), raising=False)
    h = read_header(path)
    assert set(h.tensors) == {"big", "small"}
    assert sum(read_bytes) == h.data_start < 1000


def test_parse_bytes_and_file_changed(tmp_path):
    assert set(parse_bytes(GOLDEN).tensors) == {"i", "w", "h"}
    path = tmp_path / "g.safetensors"
    path.write_bytes(GOLDEN)
    f = SafeTensorsFile(path)
    path.write_bytes(GOLDEN + b"\0")  # the file changed between the check and the map
    with pytest.raises(SafeTensorsError, match="file-changed"):
        f.tensor("w")


def test_bench_runs_small(tmp_path):
    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from bench import safetensors_load

    r = safetensors_load.run(size_mb=4, iters=1)
    assert r["benchmark"] == "safetensors" and r["headers"]["tensors"] == 1000
    for m in (r["open"], r["touch"], r["headers"], r["headers"]["cold"]):
        assert m["ratio"] > 0 and m["pair_ratio_median"] > 0
    rows = safetensors_load.rows(r)
    assert len(rows) == 8 and sum(1 for row in rows if row.verdict) == 3
    json.dumps(r)
