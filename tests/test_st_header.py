"""The header's one-pass check (`header._fast`) against the rule-by-rule one (`header._parse`
without it): on any header, the same header or the same error; and the kept headers
(`read_header`'s cache): used only for a file unchanged since, never shared between calls."""
from __future__ import annotations

import json
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.safetensors import SafeTensorsError, read_header, write_file
from pytyr.safetensors import header as header_mod

DTYPES = ["F32", "F16", "I64", "BOOL", "F4", "F6_E2M3", "U8", "f32", "XX"]
BITS = {"F32": 32, "F16": 16, "I64": 64, "BOOL": 8, "F4": 4, "F6_E2M3": 6, "U8": 8}
dims = st.one_of(st.integers(0, 5), st.integers(0, 5), st.just(-1), st.just(True),
                 st.just(2.0), st.just(2**63), st.just("2"), st.just({"a": 1}))
shapes = st.one_of(st.lists(dims, max_size=3), st.lists(st.integers(0, 3), min_size=1, max_size=3),
                   st.just([1] * 65), st.just({"x": 1}), st.just("[]"))


def _json(pairs: list[tuple[str, object]]) -> str:
    """An object written pair by pair: repeated keys survive, unlike json.dumps of a dict."""
    return "{" + ",".join(f"{json.dumps(k)}:{v if isinstance(v, str) and v[:1] in '{[' else json.dumps(v)}"
                          for k, v in pairs) + "}"


@st.composite
def headers(draw) -> tuple[bytes, int]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "a.b", "__metadata__"]),
                          min_size=0, max_size=4))
    pos, pairs = 0, []
    for name in names:
        dtype = draw(st.one_of(st.sampled_from(DTYPES), st.just(7), st.just(None)))
        shape = draw(shapes)
        numel = 1
        for d in shape if isinstance(shape, list) else []:
            numel *= d if isinstance(d, int) and not isinstance(d, bool) else 1
        size = max(0, numel) * BITS.get(dtype, 32) // 8 if isinstance(dtype, str) else 4
        begin = pos + draw(st.sampled_from([0, 0, 0, 1, -1]))
        end = begin + size + draw(st.sampled_from([0, 0, 0, 1]))
        pos = max(pos, end)
        offsets = draw(st.sampled_from([[begin, end], [begin, end], [end, begin], [begin],
                                        [begin, float(end)], [True, end]]))
        entry = [("dtype", dtype), ("shape", shape), ("data_offsets", offsets)]
        entry = draw(st.permutations(entry))
        extra = draw(st.sampled_from([[], [], [], [("dtype", "F32")], [("x", 1)]]))
        if name == "__metadata__":
            value = draw(st.sampled_from([[("format", "pt")], [], [("a", "1"), ("a", "2")],
                                          [("n", 3)], [("a", "x"), ("b", "y"), ("c", "z")]]))
            pairs.append((name, _json(value)))
        else:
            pairs.append((name, _json(entry[:draw(st.integers(2, 3))] + extra
                                      if draw(st.booleans()) else entry)))
    text = _json(pairs) + " " * draw(st.integers(0, 3))
    raw = text.encode()
    return raw, 8 + len(raw) + pos + draw(st.sampled_from([0, 0, 1]))


def _outcome(raw: bytes, size: int) -> object:
    try:
        return header_mod._parse(raw, size, header_mod.Path("h.safetensors"))
    except SafeTensorsError as e:
        return ("error", str(e))


@settings(max_examples=400, deadline=None)
@given(headers())
def test_the_one_pass_check_decides_as_the_rules_do(case):
    raw, size = case
    fast = _outcome(raw, size)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(header_mod, "_fast", lambda text: None)
        slow = _outcome(raw, size)
    assert fast == slow


def test_a_usual_header_takes_the_one_pass(monkeypatch, tmp_path):
    import torch

    path = tmp_path / "m.safetensors"
    write_file({"w": torch.ones(3, 2), "b": torch.zeros(2, dtype=torch.int64),
                "s": torch.tensor(1.0)}, path, metadata={"format": "pt"})
    monkeypatch.setattr(header_mod, "_entry", lambda *a: pytest.fail("the slow path ran"))
    h = read_header(path)
    assert set(h.tensors) == {"w", "b", "s"} and h.metadata == {"format": "pt"}
    assert h.tensors["w"].shape == (3, 2) and h.tensors["w"].numel == 6


def _file(path, n: int = 2) -> None:
    import torch

    write_file({"w": torch.arange(n, dtype=torch.float32)}, path)


def _count_opens(monkeypatch) -> list[str]:
    opened: list[str] = []
    real = open

    def counting(p, mode="r", *a, **k):
        opened.append(str(p))
        return real(p, mode, *a, **k)

    monkeypatch.setattr(header_mod, "open", counting, raising=False)
    return opened


def test_an_unchanged_file_is_read_once_and_each_caller_gets_its_own_copy(monkeypatch, tmp_path):
    header_mod.clear_header_cache()
    path = tmp_path / "a.safetensors"
    _file(path)
    opened = _count_opens(monkeypatch)
    first = read_header(path)
    first.tensors.clear()
    first.metadata["x"] = "y"
    second = read_header(path)
    assert len(opened) == 1 and list(second.tensors) == ["w"] and second.metadata == {}


def test_a_changed_or_replaced_file_is_read_and_checked_again(monkeypatch, tmp_path):
    header_mod.clear_header_cache()
    path = tmp_path / "a.safetensors"
    _file(path)
    read_header(path)
    opened = _count_opens(monkeypatch)
    data = bytearray(path.read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    data[8:8 + n] = data[8:8 + n].replace(b'"F32"', b'"I32"')  # same size, other dtype
    path.write_bytes(bytes(data))
    st_ = path.stat()
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns + 1_000_000))
    assert read_header(path).tensors["w"].dtype.value == "I32" and len(opened) == 1
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(bytes(data).replace(b'"I32"', b'"I3X"'))
    os.replace(bad, path)  # another inode at the same path
    with pytest.raises(SafeTensorsError, match="unknown-dtype"):
        read_header(path)
    with pytest.raises(SafeTensorsError, match="unknown-dtype"):
        read_header(path)  # a rejected file is not kept: checked (and refused) again
    assert len(opened) == 3


def test_the_kept_headers_are_bounded(monkeypatch, tmp_path):
    header_mod.clear_header_cache()
    monkeypatch.setattr(header_mod, "HEADER_CACHE", 2)
    paths = [tmp_path / f"{i}.safetensors" for i in range(3)]
    for p in paths:
        _file(p)
        read_header(p)
    assert len(header_mod._CACHE) == 2
    opened = _count_opens(monkeypatch)
    read_header(paths[2])
    read_header(paths[0])  # the least recently used was dropped
    assert opened == [str(paths[0])]
