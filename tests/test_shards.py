"""Token shards: both formats round trip; every malformed file is a DataError naming it."""
from __future__ import annotations

import numpy as np
import pytest

from pytyr.data.shards import (
    HEADER_BYTES,
    HEADER_INTS,
    MAGIC,
    detect_format,
    read_shard,
    write_shard,
)
from pytyr.errors import DataError, TyrError


@pytest.mark.parametrize("fmt", ["nanogpt", "fineweb"])
def test_round_trip(tmp_path, fmt):
    tokens = np.array([0, 1, 65535, 42, 7], dtype=np.int64)
    path = write_shard(tmp_path / "s.bin", tokens, fmt)
    out = read_shard(path, fmt=fmt)
    assert isinstance(out, np.memmap) and out.dtype == np.uint16
    assert out.tolist() == tokens.tolist()
    if fmt == "fineweb":
        assert detect_format(path) == fmt and read_shard(path).tolist() == tokens.tolist()
    size = path.stat().st_size
    assert size == 2 * len(tokens) + (HEADER_BYTES if fmt == "fineweb" else 0)


def test_fineweb_header_layout(tmp_path):
    path = write_shard(tmp_path / "f.bin", [3, 4, 5], "fineweb")
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    assert header[:3].tolist() == [MAGIC, 1, 3] and not header[3:].any()
    assert np.fromfile(path, dtype="<u2", offset=HEADER_BYTES).tolist() == [3, 4, 5]


def test_write_is_atomic_and_leaves_no_temp(tmp_path):
    path = write_shard(tmp_path / "s.bin", [1, 2, 3])
    write_shard(path, [9, 9])
    assert read_shard(path, fmt="nanogpt").tolist() == [9, 9]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.bin"]


def test_failed_write_keeps_old_shard(tmp_path):
    path = write_shard(tmp_path / "s.bin", [1, 2, 3])
    with pytest.raises(DataError, match="65536 at position 1"):
        write_shard(path, [1, 65536])
    assert read_shard(path, fmt="nanogpt").tolist() == [1, 2, 3]


def _raw(tmp_path, data: bytes):
    path = tmp_path / "bad.bin"
    path.write_bytes(data)
    return path


def _header(magic=MAGIC, version=1, count=2) -> bytes:
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[:3] = (magic, version, count)
    return h.tobytes()


def _fail(path, match, **kw):
    with pytest.raises(DataError, match=match) as e:
        read_shard(path, **kw)
    assert str(path) in str(e.value)
    assert isinstance(e.value, TyrError)


def test_truncated_header(tmp_path):
    _fail(_raw(tmp_path, _header()[:100]), "truncated header")


def test_truncated_header_when_format_is_given(tmp_path):
    _fail(_raw(tmp_path, b"\x01\x00" * 10), "truncated header", fmt="fineweb")


def test_wrong_magic(tmp_path):
    _fail(_raw(tmp_path, _header(magic=123) + b"\x00" * 4), "wrong magic number 123", fmt="fineweb")


def test_wrong_version(tmp_path):
    _fail(_raw(tmp_path, _header(version=7) + b"\x00" * 4), "unsupported shard version 7")


@pytest.mark.parametrize("count", [1, 3, 1000])
def test_count_disagrees_with_size(tmp_path, count):
    _fail(_raw(tmp_path, _header(count=count) + b"\x00" * 4),
          f"header says {count} tokens but the file holds 2")


def test_odd_byte_length_nanogpt(tmp_path):
    _fail(_raw(tmp_path, b"\x00" * 7), "odd byte length 7", fmt="nanogpt")


def test_headerless_data_is_read_only_when_the_format_says_so(tmp_path):
    path = write_shard(tmp_path / "raw.bin", [5, 6, 7], "nanogpt")
    _fail(path, "no fineweb header .*give its format explicitly")
    assert read_shard(path, fmt="nanogpt").tolist() == [5, 6, 7]


@pytest.mark.parametrize("magic", [MAGIC ^ 1, MAGIC ^ (1 << 20), 0])
def test_a_damaged_magic_is_reported_not_read_as_tokens(tmp_path, magic):
    path = write_shard(tmp_path / "f.bin", list(range(10)), "fineweb")
    data = bytearray(path.read_bytes())
    data[:4] = np.array([magic], dtype="<i4").tobytes()
    path.write_bytes(bytes(data))  # same size: only the magic differs
    _fail(path, f"damaged shard header: the magic number is {magic}")


def test_odd_byte_length_fineweb(tmp_path):
    _fail(_raw(tmp_path, _header() + b"\x00" * 5), "odd byte length 5")


def test_empty_shards(tmp_path):
    _fail(_raw(tmp_path, b""), "empty shard", fmt="nanogpt")
    _fail(_raw(tmp_path, _header(count=0)), "empty shard")
    with pytest.raises(DataError, match="empty shard"):
        write_shard(tmp_path / "e.bin", [])


@pytest.mark.parametrize("fmt", ["nanogpt", "fineweb"])
def test_token_out_of_vocab(tmp_path, fmt):
    path = write_shard(tmp_path / "s.bin", [1, 2, 70, 3], fmt)
    assert read_shard(path, fmt=fmt, vocab_size=71).tolist() == [1, 2, 70, 3]
    _fail(path, "token 70 at position 2 is out of range for vocab_size 70", vocab_size=70,
          fmt=fmt)


def test_missing_file_and_bad_format(tmp_path):
    _fail(tmp_path / "nope.bin", "no such shard file")
    with pytest.raises(DataError, match="unknown shard format 'npy'"):
        write_shard(tmp_path / "x.bin", [1], "npy")
