"""Configs: JSON files, `--set KEY=VALUE` overrides, and one dataclass-driven loader.

Every command reads its settings the same way: a JSON object (the `config.json` beside a
model, or `--config FILE`), then `--set` overrides with dotted keys (`--set train.lr=3e-4`,
`--set model.c.n_layer=2`), then `load_dataclass` turns each table into a typed dataclass.
The loader names an unknown key together with the known ones, checks every value's type and
range (fields declare `setting(gt=0)`, `setting(ge=0, lt=1)`, ...), rejects what JSON lets
through but a run cannot use (NaN, infinities, integers beyond int64, booleans for numbers),
and runs the dataclass's own `check(where)` for rules between fields. All of it happens
before any work starts, so a typo costs a second, not an hour of training.
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

from .errors import ConfigError
from .paths import read_text

INT64 = (-(2**63), 2**63 - 1)
C = TypeVar("C")


def show(value: Any, limit: int = 60) -> str:
    """A short, always-printable `repr` (huge integers cannot even be turned into text)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = repr(value)
    except ValueError:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _json(raw: str, where: str) -> Any:
    try:
        return _loads(raw)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{where}:{err.lineno}:{err.colno}: not valid JSON: {err.msg}") from None
    except ValueError as err:  # e.g. an integer literal of more than 4300 digits
        raise ConfigError(f"{where}: a value cannot be read: {err}") from None
    except RecursionError:
        raise ConfigError(f"{where}: the JSON is nested too deeply") from None


def _json_int(text: str) -> int:
    """A JSON integer of any length: Python's `int(str)` stops at 4,300 digits."""
    digits = text.lstrip("-")
    value = 0
    for i in range(0, len(digits), 4000):
        chunk = digits[i:i + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return -value if text.startswith("-") else value


def _loads(text: str) -> Any:
    """JSON, integers of any size included: a huge number is rejected by the key that reads
    it (`beyond the 64-bit range`), not by the parser."""
    return json.loads(text, parse_int=_json_int)


def parse_set(items: list[str]) -> dict[str, Any]:
    """`--set c.hidden=64 --set train.lr=3e-4` → nested dict; a value is JSON if it parses
    (numbers, true, null, lists), else the string itself."""
    out: dict[str, Any] = {}
    for item in items:
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as err:  # bytes of the command line that are not UTF-8
            raise ConfigError(f"--set {show(item.partition('=')[0])}: not UTF-8 text (character "
                              f"{err.start} of the argument)") from None
        key, sep, raw = item.partition("=")
        parts = key.split(".")
        if not sep or not all(parts):
            raise ConfigError(f"--set expects KEY=VALUE with a dotted KEY, got {show(item)}")
        try:
            value = _loads(raw)
        except json.JSONDecodeError:  # not JSON: the string itself
            value = raw
        except ValueError as err:  # an integer of more than 4300 digits
            raise ConfigError(f"--set {key}: the value {show(raw)} cannot be read: {err}") from None
        except RecursionError:
            raise ConfigError(f"--set {key}: the value is nested too deeply") from None
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: '{part}' is already a value, not a table")
        if isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
            raise ConfigError(f"--set {key}: '{parts[-1]}' is already a table, not a value")
        node[parts[-1]] = value
    return out


def flatten(values: Any, prefix: str = "") -> dict[str, Any]:
    """A nested table's leaves by dotted key: `{"c": {"vocab": 65}}` → `{"c.vocab": 65}`
    (under `prefix`: `model.c.vocab`)."""
    if not isinstance(values, dict):
        return {prefix: values} if prefix else {}
    out: dict[str, Any] = {}
    for k, v in values.items():
        out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, tables merged key by key."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from the regular file `path`; errors name the file, the place and `what`
    it is (missing, a directory or FIFO, not UTF-8, not JSON, not an object)."""
    data = _json(read_text(path, what), f"{path}: {what}")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {what} must be a JSON object, got {type(data).__name__}")
    return data


# -- the dataclass loader -------------------------------------------------------------------

def setting(default: Any = dataclasses.MISSING, *, gt: float | None = None,
            ge: float | None = None, lt: float | None = None, le: float | None = None,
            factory: Any = dataclasses.MISSING, doc: str = "") -> Any:
    """A dataclass field with range bounds (checked by `load_dataclass`) and a one-line doc."""
    meta = {"gt": gt, "ge": ge, "lt": lt, "le": le, "doc": doc}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _name(tp: Any) -> str:
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is bool:
        return "true or false"
    if tp is str:
        return "a string"
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(map(show, typing.get_args(tp)))
    if dataclasses.is_dataclass(tp) or typing.get_origin(tp) in (dict, Mapping):
        return "a table"
    if typing.get_origin(tp) in (list, tuple):
        return "a list"
    return str(tp)


def _convert(tp: Any, value: Any, key: str, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in (o for o in options if o is not type(None)):
            try:
                return _convert(option, value, key, where)
            except ConfigError as err:
                errors.append(err)
        names = " or ".join(_name(o) for o in options if o is not type(None))
        if type(None) in options:
            names += " or null"
        raise ConfigError(f"{where}: '{key}' must be {names}, got {show(value)}")
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: '{key}' must be true or false, got {show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: '{key}' must be an integer, got {show(value)}")
        if not INT64[0] <= value <= INT64[1]:
            raise ConfigError(f"{where}: '{key}' is {show(value)}, beyond the 64-bit range")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: '{key}' must be a number, got {show(value)}")
        try:
            out = float(value)
        except OverflowError:
            out = math.inf
        if not math.isfinite(out):
            raise ConfigError(f"{where}: '{key}' must be a finite number, got {show(value)}")
        return out
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: '{key}' must be a string, got {show(value)}")
        return value
    if origin is Literal:
        if value not in typing.get_args(tp) or isinstance(value, bool):
            raise ConfigError(f"{where}: '{key}' must be {_name(tp)}, got {show(value)}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"{where}: '{key}' must be a list, got {show(value)}")
        args = typing.get_args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise ConfigError(f"{where}: '{key}' must be a list of {len(args)}, "
                                  f"got {show(value)}")
            return tuple(_convert(a, v, f"{key}.{i}", where)
                         for i, (a, v) in enumerate(zip(args, value)))
        item = args[0] if args else Any
        out_list = [_convert(item, v, f"{key}.{i}", where) for i, v in enumerate(value)]
        return tuple(out_list) if origin is tuple else out_list
    if origin in (dict, Mapping):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: '{key}' must be a table, got {show(value)}")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: '{key}' must be a table, got {show(value)}")
        return load_dataclass(tp, value, where, prefix=f"{key}.")
    raise TypeError(f"load_dataclass: unsupported field type {tp!r} for {key}")


def _check_range(f: dataclasses.Field, value: Any, key: str, where: str) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    m = f.metadata
    for bound, ok, text in (("gt", lambda v, b: v > b, "> "), ("ge", lambda v, b: v >= b, ">= "),
                            ("lt", lambda v, b: v < b, "< "), ("le", lambda v, b: v <= b, "<= ")):
        b = m.get(bound)
        if b is not None and not ok(value, b):
            raise ConfigError(f"{where}: '{key}' must be {text}{b}, got {show(value)}")


def load_dataclass(cls: type[C], data: Mapping[str, Any], where: str, prefix: str = "") -> C:
    """An instance of the dataclass `cls` from the table `data` (see the module doc).
    `where` names the source (a file, "the command line"); `prefix` the table (`train.`)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: '{prefix.rstrip('.') or 'config'}' must be a table, "
                          f"got {show(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise ConfigError(f"{where}: unknown key '{prefix}{unknown[0]}' "
                          f"(known: {', '.join(fields) or 'none'})")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        key = prefix + name
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{where}: missing key '{key}'"
                                  + (f" ({f.metadata['doc']})" if f.metadata.get("doc") else ""))
            continue
        value = _convert(hints[name], data[name], key, where)
        _check_range(f, value, key, where)
        values[name] = value
    obj = cls(**values)
    check = getattr(obj, "check", None)
    if callable(check):
        check(where)
    return obj


def describe(cls: type) -> list[tuple[str, str, str]]:
    """(key, default, doc) of every field of a dataclass, nested tables flattened: the
    reference tables of the docs and of `--help` come from here."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            out += [(f"{f.name}.{k}", d, doc) for k, d, doc in describe(tp)]
            continue
        default = (f.default if f.default is not dataclasses.MISSING else
                   f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        out.append((f.name, "required" if default is None and f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING else json.dumps(default),
                    f.metadata.get("doc", "")))
    return out


def refuse_unread(sets: list[str] | None, command: str, tables: tuple[str, ...]) -> None:
    """Refuse a `--set` of a table `command` does not read: it would be ignored."""
    for item in sets or []:
        key = item.partition("=")[0]
        if key.split(".")[0] not in tables:
            uses = " and ".join(f"{t}.*" for t in tables)
            raise ConfigError(f"--set {key}: `tyr {command}` uses only {uses} settings, so "
                              f"this one would be ignored; remove it")
