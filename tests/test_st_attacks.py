"""Hostile safetensors files: one per rejection rule (the rule asserted in the message), and
property tests that random corruptions of valid files never escape as anything but
`SafeTensorsError` (and that what is accepted really loads)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytyr.safetensors import RULES, SafeTensorsError, SafeTensorsFile, parse_bytes, read_header
from pytyr.safetensors.writer import write_file

F32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


def _st(header: dict | str | bytes, data: bytes = b"", length: int | None = None) -> bytes:
    """A file from a header (object, JSON text or raw bytes), data, and an optional lying N."""
    if isinstance(header, dict):
        header = json.dumps(header)
    raw = header.encode("utf-8") if isinstance(header, str) else header
    n = len(raw) if length is None else length
    return n.to_bytes(8, "little") + raw + data


def _entry(**kw) -> dict:
    return {**F32, **kw}


# name -> (file bytes, the rule it breaks)
ATTACKS: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "file-too-small"),
    "seven-bytes": (b"\x02" * 7, "file-too-small"),
    "header-too-large": (_st("{}", length=100_000_001), "header-too-large"),
    "header-huge-u64": (b"\xff" * 8 + b"{}", "header-too-large"),
    "header-past-eof": (_st("{}", length=64), "header-past-eof"),
    "header-not-utf8": (_st(b'{"\xff\xfe": 1}'), "header-not-utf8"),
    "header-leading-space": (_st(" {}"), "header-start"),
    "header-array": (_st("[]"), "header-start"),
    "header-empty": (_st(""), "header-start"),
    "header-truncated-json": (_st('{"a": {"dtype": '), "header-not-json"),
    "header-trailing-garbage": (_st("{} x"), "header-not-json"),
    "header-deep-nesting": (_st('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
                            "header-not-json"),
    "header-int-too-long": (_st('{"a": {"dtype": "F32", "shape": [1' + "0" * 5000 + "]}}"),
                            "header-not-json"),
    "duplicate-name": (_st('{"a": %s, "a": %s}' % (json.dumps(F32), json.dumps(F32)),
                           b"\0" * 8), "duplicate-name"),
    "duplicate-key-in-entry": (_st('{"a": {"dtype": "F32", "dtype": "I32", "shape": [2], '
                                   '"data_offsets": [0, 8]}}', b"\0" * 8), "duplicate-name"),
    "metadata-number": (_st({"__metadata__": {"k": 1}}), "metadata-not-strings"),
    "metadata-list": (_st({"__metadata__": ["k"]}), "metadata-not-strings"),
    "metadata-null": (_st({"__metadata__": None}), "metadata-not-strings"),
    "entry-not-object": (_st({"a": [1, 2]}), "malformed-entry"),
    "entry-no-dtype": (_st({"a": {"shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8),
                       "malformed-entry"),
    "entry-no-shape": (_st({"a": {"dtype": "F32", "data_offsets": [0, 8]}}, b"\0" * 8),
                       "malformed-entry"),
    "entry-no-offsets": (_st({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8),
                         "malformed-entry"),
    "entry-extra-key": (_st({"a": _entry(extra=1)}, b"\0" * 8), "malformed-entry"),
    "entry-dtype-number": (_st({"a": _entry(dtype=32)}, b"\0" * 8), "malformed-entry"),
    "entry-shape-string": (_st({"a": _entry(shape="2")}, b"\0" * 8), "malformed-entry"),
    "entry-shape-float": (_st({"a": _entry(shape=[2.0])}, b"\0" * 8), "malformed-entry"),
    "entry-shape-bool": (_st({"a": _entry(shape=[True, True])}, b"\0" * 8), "malformed-entry"),
    "entry-shape-nan": (_st('{"a": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 8]}}',
                            b"\0" * 8), "malformed-entry"),
    "entry-negative-dim": (_st({"a": _entry(shape=[-2, -1], data_offsets=[0, 8])}, b"\0" * 8),
                           "malformed-entry"),
    "entry-three-offsets": (_st({"a": _entry(data_offsets=[0, 4, 8])}, b"\0" * 8),
                            "malformed-entry"),
    "entry-negative-offset": (_st({"a": _entry(data_offsets=[-8, 0])}, b"\0" * 8),
                              "malformed-entry"),
    "entry-string-offsets": (_st({"a": _entry(data_offsets=["0", "8"])}, b"\0" * 8),
                             "malformed-entry"),
    "unknown-dtype": (_st({"a": _entry(dtype="F128")}, b"\0" * 8), "unknown-dtype"),
    "lowercase-dtype": (_st({"a": _entry(dtype="f32")}, b"\0" * 8), "unknown-dtype"),
    "rank-65": (_st({"a": _entry(shape=[1] * 65, data_offsets=[0, 4])}, b"\0" * 4),
                "shape-too-large"),
    "dim-2-pow-63": (_st({"a": _entry(shape=[2**63], data_offsets=[0, 8])}, b"\0" * 8),
                     "shape-too-large"),
    "numel-overflow": (_st({"a": _entry(shape=[2**32, 2**32, 2**32], data_offsets=[0, 8])},
                           b"\0" * 8), "shape-too-large"),
    "size-short": (_st({"a": _entry(data_offsets=[0, 4])}, b"\0" * 4), "byte-size-mismatch"),
    "size-long": (_st({"a": _entry(data_offsets=[0, 12])}, b"\0" * 12), "byte-size-mismatch"),
    # 2**62 x 8 bytes is 2**65, 0 modulo 2**64: a reader with wrapping u64 maths accepts it
    "size-wrapping": (_st({"a": _entry(dtype="C64", shape=[2**62], data_offsets=[0, 0])}),
                      "byte-size-mismatch"),
    "f4-half-byte": (_st({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}},
                         b"\0" * 2), "byte-size-mismatch"),
    "offsets-reversed": (_st({"a": _entry(data_offsets=[8, 0])}, b"\0" * 8), "invalid-offsets"),
    "offsets-not-from-0": (_st({"a": _entry(data_offsets=[8, 16])}, b"\0" * 16),
                           "invalid-offsets"),
    "offsets-gap": (_st({"a": F32, "b": _entry(data_offsets=[12, 20])}, b"\0" * 20),
                    "invalid-offsets"),
    "offsets-overlap": (_st({"a": F32, "b": _entry(data_offsets=[4, 12])}, b"\0" * 12),
                        "invalid-offsets"),
    "offsets-same-range": (_st({"a": F32, "b": F32}, b"\0" * 8), "invalid-offsets"),
    "trailing-bytes": (_st({"a": F32}, b"\0" * 9), "trailing-bytes"),
    "trailing-bytes-no-tensors": (_st({}, b"\0"), "trailing-bytes"),
    "data-past-eof": (_st({"a": F32}, b"\0" * 4), "data-past-eof"),
}


@pytest.fixture(scope="module")
def attacks(tmp_path_factory) -> Path:
    """The folder of hostile files, made here: `<name>.safetensors` per attack."""
    folder = tmp_path_factory.mktemp("attacks")
    for name, (data, _) in ATTACKS.items():
        (folder / f"{name}.safetensors").write_bytes(data)
    return folder


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_hostile_file_is_rejected_with_its_rule(attacks, name):
    path = attacks / f"{name}.safetensors"
    rule = ATTACKS[name][1]
    with pytest.raises(SafeTensorsError) as info:
        read_header(path)
    err = info.value
    assert err.rule == rule, str(err)
    msg = str(err)
    assert f"(rule {rule})" in msg and str(path) in msg and "\n" not in msg


def test_every_file_rule_has_a_hostile_file():
    exercised = {rule for _, rule in ATTACKS.values()}
    elsewhere = {"unreadable", "not-a-file", "file-changed", "no-torch-dtype"}  # tests below
    assert exercised | elsewhere == set(RULES)


def test_unreadable_paths(tmp_path):
    with pytest.raises(SafeTensorsError, match="unreadable"):
        read_header(tmp_path / "missing.safetensors")
    with pytest.raises(SafeTensorsError, match="not-a-file"):
        read_header(tmp_path)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "w.safetensors")
    with pytest.raises(SafeTensorsError, match="not-a-file"):
        read_header(tmp_path / "w.safetensors")  # opening it for reading would block


def test_valid_edge_cases_are_accepted():
    ok = [
        _st({}),
        _st("{}    "),  # padding with spaces
        _st({"__metadata__": {}}),
        _st({"z": _entry(shape=[0, 5], data_offsets=[0, 0]), "a": F32}, b"\0" * 8),
        _st({"s": _entry(shape=[], data_offsets=[0, 4])}, b"\0" * 4),
        _st({"b": _entry(data_offsets=[8, 16]), "a": F32}, b"\0" * 16),  # any header order
    ]
    for data in ok:
        parse_bytes(data)


def _valid_file() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "v.safetensors"
        write_file({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                    "i": torch.arange(3, dtype=torch.int64), "b": torch.ones(2, dtype=torch.bool),
                    "h": torch.tensor(1.5, dtype=torch.bfloat16), "e": torch.zeros(0, 2)},
                   p, metadata={"format": "pt"})
        return p.read_bytes()


VALID = _valid_file()


def _load_everything(data: bytes) -> None:
    """Accepted bytes must really load: every tensor through torch and numpy."""
    try:
        h = parse_bytes(data)
    except SafeTensorsError:
        return
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "c.safetensors"
        p.write_bytes(data)
        f = SafeTensorsFile(p)
        for name, info in h.tensors.items():
            try:
                t = f.tensor(name)
                arr = f.numpy(name)
            except SafeTensorsError as e:
                assert e.rule == "no-torch-dtype"
                continue
            assert tuple(t.shape) == info.shape and arr.shape == info.shape
        f.close()


_edit = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, len(VALID) - 1), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.integers(0, len(VALID)), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, len(VALID)), st.integers(0, 255)),
    st.tuples(st.just("length"), st.integers(0, 2**64 - 1), st.just(0)),
)


def _apply(data: bytes, edits: list[tuple[str, int, int]]) -> bytes:
    b = bytearray(data)
    for kind, pos, val in edits:
        if kind == "flip" and pos < len(b):
            b[pos] ^= val
        elif kind == "cut":
            del b[pos:]
        elif kind == "insert":
            b[pos:pos] = bytes([val])
        elif kind == "length":
            b[:8] = pos.to_bytes(8, "little")
    return bytes(b)


PROPS = settings(max_examples=400, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(st.lists(_edit, min_size=1, max_size=4))
def test_byte_corruptions_raise_only_safetensors_errors(edits):
    _load_everything(_apply(VALID, edits))


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids,
                                                              max_size=3),
    max_leaves=8)
_dtype = st.sampled_from(["F32", "I64", "BOOL", "F4", "F6_E2M3", "BF16", "U8", "C64", "X"])
_entry_st = st.one_of(
    st.fixed_dictionaries({"dtype": _dtype,
                           "shape": st.lists(st.integers(-1, 4), max_size=3),
                           "data_offsets": st.lists(st.integers(-1, 40), min_size=2,
                                                    max_size=2)}),
    _json)


@PROPS
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "__metadata__"]), _entry_st, max_size=3),
       st.binary(max_size=48), st.booleans())
def test_random_headers_raise_only_safetensors_errors(header, data, pad):
    text = json.dumps(header, allow_nan=True) + ("  " if pad else "")
    _load_everything(_st(text, data))
