"""A Hugging Face `config.json` read into a Lean model's config values, by its family's table.

`find_hf_config` finds the file (`--hf-config`, else `config.json` in the weights' directory
or beside the weights file); `read_hf_config` recognises the family (`model_type`, else
`architectures`), checks every mapped value's type and range and every fixed key's value,
and returns the values with what it read and what it did not. Every refusal is one line that
names the file and the key. The values go under the command line's `--config`/`--set`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytyr.config import flatten, merge, read_json, show
from pytyr.errors import ConfigError
from pytyr.paths import input_file

from .families import FAMILIES, Family, family_named, family_of_architectures

CONFIG_NAME = "config.json"


@dataclass
class HFConfig:
    path: Path
    family: Family
    values: dict[str, Any]  # the model's values it gives, nested (`{"c": {"vocab": …}}`)
    sources: dict[str, str] = field(default_factory=dict)  # our dotted path → HF key
    defaulted: list[str] = field(default_factory=list)  # HF keys absent: HF's default used
    not_read: list[str] = field(default_factory=list)  # keys in no table of the family

    def describe(self, explicit: dict[str, Any]) -> list[str]:
        """Lines for the output: what was read, and which values `explicit` (the command
        line's model table) overrides."""
        flat = flatten(self.values)
        shown = ", ".join(f"{k}={flat[k]}" for k in flat)
        lines = [f"model config from {self.path} ({self.family.name}): {shown}"]
        if self.defaulted:
            lines.append(f"  absent there, HF's defaults used: {', '.join(self.defaulted)}")
        over = [f"{k}={show(v)} (not {flat[k]} from {self.sources[k]})"
                for k, v in flatten(explicit).items() if k in flat and v != flat[k]]
        if over:
            lines.append(f"  --config/--set override: {', '.join(over)}")
        if self.not_read:
            lines.append(f"  keys of {self.path.name} not read (in no table of the "
                         f"{self.family.name} family): {', '.join(self.not_read)}")
        return lines


def find_hf_config(weights: str | None, explicit: str | None) -> tuple[Path | None, bool]:
    """(the config.json to read, whether it was named explicitly); (None, False) if none."""
    if explicit:
        input_file(explicit, "Hugging Face config (--hf-config)")
        return Path(explicit), True
    if not weights:
        return None, False
    p = Path(weights)
    candidate = (p if p.is_dir() else p.parent) / CONFIG_NAME
    return (candidate, False) if candidate.is_file() else (None, False)


def is_hf_config(raw: dict[str, Any]) -> bool:
    return "model_type" in raw or "architectures" in raw


def read_hf_config(path: Path, explicit: bool = True) -> HFConfig | None:
    """The model values `path` gives. A config.json found beside the weights that is no HF
    config (no model_type, no architectures) gives None; named with --hf-config, an error."""
    raw = read_json(path, "Hugging Face config")
    if not is_hf_config(raw):
        if not explicit:
            return None
        raise ConfigError(f"{path}: not a Hugging Face config: it has no 'model_type' and no "
                          f"'architectures'")
    fam = _family(raw, path)
    values: dict[str, Any] = {}
    out = HFConfig(path, fam, values)
    for f in fam.fields:
        value = _number(raw, f.hf, f.default, f.kind, path, out)
        if f.per is not None:
            per = _number(raw, f.per, next(g.default for g in fam.fields if g.hf == f.per),
                          int, path, None)
            if value % per:
                raise ConfigError(f"{path}: '{f.hf}' ({value}) is not a multiple of "
                                  f"'{f.per}' ({per}): the heads would not split the width")
            value //= per
        _put(values, f.ours, value)
        out.sources[f.ours] = f"{f.hf} / {f.per}" if f.per else f.hf
    for x in fam.fixed:
        got = raw.get(x.hf)
        got = x.default if got is None else got  # null: the default, as if absent
        if not any(_same(got, a) for a in x.allowed_in(raw)):
            allowed = " or ".join(show(a) for a in x.allowed_in(raw))
            raise ConfigError(f"{path}: '{x.hf}' is {show(got)}; the {fam.name} model here "
                              f"needs {allowed} ({x.why})")
    known = fam.known_keys()
    out.not_read = sorted(k for k in raw if k not in known)
    return out


def model_values(base: dict[str, Any], hf: HFConfig | None, explicit: dict[str, Any]
                 ) -> dict[str, Any]:
    """The run's model values: `base` (the example's config), then the HF config's, then the
    command line's (`--config`, `--set`)."""
    values = merge(base, hf.values) if hf is not None else base
    return merge(values, explicit)


def _family(raw: dict[str, Any], path: Path) -> Family:
    known = ", ".join(t for f in FAMILIES for t in f.model_types)
    mt = raw.get("model_type")
    if mt is not None:
        if not isinstance(mt, str):
            raise ConfigError(f"{path}: 'model_type' must be a string, got {show(mt)}")
        fam = family_named(mt)
        if fam is None:
            raise ConfigError(f"{path}: model_type '{mt}' is not a family `tyr run` reads "
                              f"(it reads: {known})")
        return fam
    archs = raw.get("architectures")
    fam = family_of_architectures(archs) if isinstance(archs, list) else None
    if fam is None:
        raise ConfigError(f"{path}: no 'model_type', and 'architectures' ({show(archs)}) names "
                          f"no family `tyr run` reads (it reads: {known})")
    return fam


def _number(raw: dict[str, Any], key: str, default: Any, kind: type, path: Path,
            out: HFConfig | None) -> Any:
    if key not in raw:
        if out is not None:
            out.defaulted.append(f"{key}={default}")
        return default
    v = raw[key]
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ConfigError(f"{path}: '{key}' must be a positive integer, got {show(v)}")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ConfigError(f"{path}: '{key}' must be a finite number >= 0, got {show(v)}")
    return float(v)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _put(values: dict[str, Any], dotted: str, value: Any) -> None:
    *tables, last = dotted.split(".")
    for t in tables:
        values = values.setdefault(t, {})
    values[last] = value
