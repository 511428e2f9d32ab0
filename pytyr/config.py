"""Configs from JSON files and `--set KEY=VALUE` overrides, shared by every command."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import ConfigError


def _json_int(text: str) -> int:
    """A JSON integer of any length: Python's `int(str)` stops at 4,300 digits."""
    digits = text.lstrip("-")
    value = 0
    for i in range(0, len(digits), 4000):
        chunk = digits[i:i + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return -value if text.startswith("-") else value


def _loads(text: str) -> Any:
    """JSON, numbers of any size included (a huge number is the model's to reject)."""
    try:
        return json.loads(text, parse_int=_json_int)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


def parse_set(items: list[str]) -> dict[str, Any]:
    """`--set c.hidden=64 --set b=128` → nested dict; values are JSON (numbers) or strings."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            value = _loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: '{part}' is already a value, not a table")
        node[parts[-1]] = value
    return out


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, tables merged key by key."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from `path`; errors name the file, the place and `what` it is."""
    try:
        data = _loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}:{err.lineno}:{err.colno}: {what} is not valid JSON: "
                          f"{err.msg}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: {what} is not UTF-8 text (byte {err.start})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {what} must be a JSON object")
    return data
