"""Configs and user paths: every bad value or path kind is one ConfigError naming it."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.config import load_dataclass, parse_set, read_json, setting
from pytyr.errors import ConfigError
from pytyr.paths import input_dir, input_file, output_dir, output_file, read_text


@dataclasses.dataclass(frozen=True)
class Inner:
    k: int = setting(1, ge=1)


@dataclasses.dataclass(frozen=True)
class Outer:
    n: int = setting(3, gt=0, le=10)
    x: float = setting(0.5, ge=0, lt=1)
    mode: Literal["a", "b"] = "a"
    flag: bool = False
    pair: tuple[float, float] = (0.9, 0.99)
    name: str | None = None
    inner: Inner = setting(factory=Inner)


@pytest.mark.parametrize("data,frag", [
    ({"m": 1}, "unknown key 'm' (known: n, x, mode, flag, pair, name, inner)"),
    ({"inner": {"j": 1}}, "unknown key 'inner.j' (known: k)"),
    ({"n": 0}, "'n' must be > 0, got 0"),
    ({"n": 11}, "'n' must be <= 10"),
    ({"n": True}, "'n' must be an integer, got True"),
    ({"n": 2**64}, "beyond the 64-bit range"),
    ({"n": 10**5000}, "an integer of 16610 bits"),
    ({"x": float("nan")}, "'x' must be a finite number"),
    ({"x": float("inf")}, "'x' must be a finite number"),
    ({"x": 10**400}, "'x' must be a finite number"),
    ({"x": "0.5"}, "'x' must be a number, got '0.5'"),
    ({"mode": "c"}, "'mode' must be one of 'a', 'b', got 'c'"),
    ({"flag": 1}, "'flag' must be true or false"),
    ({"pair": [1]}, "'pair' must be a list of 2"),
    ({"name": 3}, "'name' must be a string or null"),
    ({"inner": 3}, "'inner' must be a table"),
    ({"inner": {"k": 0}}, "'inner.k' must be >= 1"),
])
def test_the_loader_names_every_bad_value(data, frag):
    with pytest.raises(ConfigError) as e:
        load_dataclass(Outer, data, "cfg.json")
    assert str(e.value).startswith("cfg.json: ") and frag in str(e.value)


def test_the_loader_converts_and_defaults():
    o = load_dataclass(Outer, {"x": 0, "pair": [0.8, 0.95], "inner": {"k": 4}}, "c")
    assert o == Outer(x=0.0, pair=(0.8, 0.95), inner=Inner(4)) and isinstance(o.x, float)


@pytest.mark.parametrize("items,frag", [
    (["lr"], "--set expects KEY=VALUE"),
    (["=3"], "--set expects KEY=VALUE"),
    (["a..b=1"], "--set expects KEY=VALUE"),
    (["a=1", "a.b=2"], "'a' is already a value"),
    (["a.b=1", "a=2"], "'a' is already a table"),
    (["n=" + "[" * 100000], "nested too deeply"),
])
def test_set_errors(items, frag):
    with pytest.raises(ConfigError, match=frag):
        parse_set(items)


def test_numbers_of_any_size_are_read_and_rejected_by_their_key(tmp_path):
    huge = "9" * 5000  # past Python's 4300-digit int(str) limit
    assert parse_set([f"n={huge}"])["n"].bit_length() == 16610
    (tmp_path / "big.json").write_text('{"n": ' + huge + "}")
    with pytest.raises(ConfigError, match="'n' is an integer of 16610 bits, beyond the 64-bit"):
        load_dataclass(Outer, read_json(tmp_path / "big.json", "config"), "big.json")


def test_set_values_are_json_or_strings():
    assert parse_set(["a.b=1", "a.c=1e-3", "s=hello world", "t=true", "l=[1, 2]", "n=null"]) == {
        "a": {"b": 1, "c": 1e-3}, "s": "hello world", "t": True, "l": [1, 2], "n": None}


def test_json_files_of_every_bad_kind(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "bin.json").write_bytes(b"{\"a\": \"\xff\xfe\"}")
    (tmp_path / "list.json").write_text("[1]")
    (tmp_path / "bad.json").write_text("{\n  \"a\": 1,\n}")
    (tmp_path / "deep.json").write_text("[" * 100000)
    cases = {"dir": "is a directory, not a regular file",
             "bin.json": "is not UTF-8 text (byte 0xff at offset 7)",
             "list.json": "must be a JSON object, got list",
             "bad.json": ":3:1: not valid JSON",
             "deep.json": "nested too deeply",
             "missing.json": "config not found",
             "nodir/x.json": "not found (its directory"}
    for name, frag in cases.items():
        with pytest.raises(ConfigError, match=frag.replace("(", r"\(").replace(")", r"\)")):
            read_json(tmp_path / name, "config")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_named_and_never_blocks(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    code = ("import sys; from pytyr.config import read_json; from pytyr.errors import ConfigError\n"
            f"try: read_json(__import__('pathlib').Path({str(fifo)!r}), 'config')\n"
            "except ConfigError as e: print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert "is a FIFO, not a regular file" in out.stdout
    for check in (input_file, read_text):
        with pytest.raises(ConfigError, match="FIFO"):
            check(fifo)


def test_path_kinds(tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("x")
    assert input_file(f) == f and input_dir(tmp_path) == tmp_path
    assert output_dir(tmp_path / "new") == tmp_path / "new" and output_file(f) == f
    with pytest.raises(ConfigError, match="is a regular file, not a directory"):
        input_dir(f, "run directory")
    with pytest.raises(ConfigError, match="is a regular file, not a directory"):
        output_dir(f)
    with pytest.raises(ConfigError, match="is a directory, not a regular file"):
        output_file(tmp_path)
    with pytest.raises(ConfigError, match="f.txt is not a directory"):
        output_file(f / "out.safetensors")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["n", "x", "mode", "flag", "pair", "name", "inner", "zz"]),
                       st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                                    | st.text(max_size=5),
                                    lambda c: st.lists(c, max_size=3)
                                    | st.dictionaries(st.text(max_size=3), c, max_size=3),
                                    max_leaves=6)))
def test_any_table_loads_or_is_one_config_error(data):
    try:
        load_dataclass(Outer, data, "cfg")
    except ConfigError as e:
        assert "\n" not in str(e) and str(e).startswith("cfg: ")


def test_the_config_reference_is_current():
    from pathlib import Path

    from pytyr.train.reference import reference

    doc = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
    assert doc.read_text(encoding="utf-8") == reference(), \
        "docs/configuration.md is stale: python -m pytyr.train.reference > docs/configuration.md"


def test_atomic_writes_get_the_usual_file_mode(tmp_path):
    import stat as st

    from pytyr.atomic import atomic_write_text

    path = atomic_write_text(tmp_path / "f.txt", "x")
    mask = os.umask(0)
    os.umask(mask)
    assert st.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
