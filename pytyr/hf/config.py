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
from typing import Any, Callable

from pytyr.config import flatten, merge, read_json, show
from pytyr.errors import ConfigError
from pytyr.paths import input_file, repository_file

from .families import FAMILIES, Family, Field, Fixed, family_named, family_of_architectures
from .flux2 import DIFFUSERS_FAMILIES

CONFIG_NAME = "config.json"


@dataclass
class HFConfig:
    path: Path
    family: Family
    values: dict[str, Any]  # the model's values it gives, nested (`{"c": {"vocab": …}}`)
    sources: dict[str, str] = field(default_factory=dict)  # our dotted path → HF key
    defaulted: list[str] = field(default_factory=list)  # HF keys absent: HF's default used
    not_read: list[str] = field(default_factory=list)  # keys in no table of the family
    model: str | None = None  # the family's Lean model for this config, where it has one
    raw: dict[str, Any] = field(default_factory=dict)  # the config as the tables read it

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


def checkpoint_config(weights: str | None, explicit: str | None,
                      say: Callable[[str], None]) -> HFConfig | None:
    """The HF config of a checkpoint (`--hf-config`, else config.json beside the weights), or
    None; a config.json beside them that is no HF config is said and not read."""
    path, named = find_hf_config(weights, explicit)
    hf = read_hf_config(path, named) if path is not None else None
    if path is not None and hf is None:
        say(f"{path} is not a Hugging Face config (no model_type, no architectures): not read")
    return hf


def is_hf_config(raw: dict[str, Any]) -> bool:
    """A transformers config (`model_type`, `architectures`) or a diffusers model's
    (`_class_name`)."""
    return "model_type" in raw or "architectures" in raw or "_class_name" in raw


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
    if fam.normalised is not None:
        try:
            raw = fam.normalised(raw)
        except ValueError as err:
            raise ConfigError(f"{path}: {err}") from None
    values: dict[str, Any] = {}
    out = HFConfig(path, fam, values, model=fam.model_for(raw), raw=raw)
    for f in fam.fields:
        value = _field_value(raw, f, fam, path, out)
        _put(values, f.ours, value)
        out.sources[f.ours] = f"{f.hf} / {f.per}" if f.per else f.hf
    _check_fixed(fam.fixed, raw, path, f"the {fam.name} model here")
    known = fam.known_keys()
    out.not_read = sorted(k for k in raw if k not in known)
    return out


def _check_fixed(fixed: tuple[Fixed, ...], raw: dict[str, Any], path: Path, who: str) -> None:
    for x in fixed:
        got = _lookup(raw, x.hf)
        got = x.default if got is None else got  # null: the default, as if absent
        if not any(_same(got, a) for a in x.allowed_in(raw)):
            allowed = " or ".join(show(a) for a in x.allowed_in(raw))
            raise ConfigError(f"{path}: '{x.hf}' is {show(got)}; {who} needs {allowed} "
                              f"({x.why})")


def _field_value(raw: dict[str, Any], f: Field, fam: Family, path: Path, out: HFConfig) -> Any:
    """The model's value of one field: the key's (checked), or its default as the field says,
    divided by `per`, at most `at_most`'s."""
    if _lookup(raw, f.hf) is None and f.default_from is not None:
        value = _number(raw, f.default_from, None, f.kind, path, None)
        out.defaulted.append(f"{f.hf}={f.default_from}")
    else:
        default = f.default(raw) if callable(f.default) else f.default
        value = _number(raw, f.hf, default, f.kind, path, None if f.quiet else out)
    if f.per is not None:
        per = _number(raw, f.per, next(g.default for g in fam.fields if g.hf == f.per),
                      int, path, None)
        if value % per:
            raise ConfigError(f"{path}: '{f.hf}' ({value}) is not a multiple of "
                              f"'{f.per}' ({per}): the heads would not split the width")
        value //= per
    if f.at_most is not None:
        value = min(value, _number(raw, f.at_most, None, f.kind, path, None))
    return value


def _lookup(raw: dict[str, Any], dotted: str) -> Any:
    """The value at `a.b` (key `b` of the table `a`; `a.0`, item 0 of the list `a`), or None
    where any part is absent."""
    for part in dotted.split("."):
        if isinstance(raw, list) and part.isdigit():
            raw = raw[int(part)] if int(part) < len(raw) else None
        elif isinstance(raw, dict):
            raw = raw.get(part)
        else:
            return None
    return raw


def family_model(hf: HFConfig | None) -> tuple[Path, str]:
    """The Lean file and model that run a checkpoint named without a Lean file: its family's,
    the model by its head (`tie_word_embeddings`)."""
    if hf is None:
        raise ConfigError("give a Lean file (FILE.lean) or a model library (--lib LIB), or "
                          "--weights DIR of a Hugging Face checkpoint (its config.json names "
                          "the family)")
    fam = hf.family
    if fam.lean is None or hf.model is None:
        raise ConfigError(f"{hf.path}: the {fam.name} family has no Lean model of its own to "
                          f"run without a Lean file: give {fam.example.split(' ')[0]} and "
                          f"--model")
    return repository_file(fam.lean), hf.model


def model_values(base: dict[str, Any], hf: HFConfig | None, explicit: dict[str, Any]
                 ) -> dict[str, Any]:
    """The run's model values: `base` (the example's config), then the HF config's, then the
    command line's (`--config`, `--set`). A model that computes less than the family's own
    (`Family.narrower`: GPT.lean of GPT-2's), known by its config, gets the HF values without
    the fields it lacks, once the checkpoint is checked to need none of them."""
    if hf is None:
        return merge(base, explicit)
    values = hf.values
    narrower = hf.family.narrower
    if narrower is not None and _is_narrower(merge(base, explicit), hf, narrower.lacks):
        _check_fixed(narrower.fixed, hf.raw, hf.path,
                     f"the model here (a config without {', '.join(narrower.lacks)}: "
                     f"{narrower.example}'s)")
        flat = {k: v for k, v in flatten(values).items() if k not in narrower.lacks}
        values = {}
        for k, v in flat.items():
            _put(values, k, v)
    return merge(merge(base, values), explicit)


def _is_narrower(model: dict[str, Any], hf: HFConfig, lacks: tuple[str, ...]) -> bool:
    """Is the run's model config (beside FILE.lean, --config, a run's values) the narrower
    model's: every field of the family's but `lacks`, and none of those?"""
    given = set(flatten(model))
    ours = set(flatten(hf.values))
    return not (given & set(lacks)) and ours - set(lacks) <= given


def _family(raw: dict[str, Any], path: Path) -> Family:
    known = ", ".join(t for f in FAMILIES if f not in DIFFUSERS_FAMILIES for t in f.model_types)
    mt = raw.get("model_type")
    if mt is not None:
        if not isinstance(mt, str):
            raise ConfigError(f"{path}: 'model_type' must be a string, got {show(mt)}")
        fam = family_named(mt)
        if fam is None:
            raise ConfigError(f"{path}: model_type '{mt}' is not a family `tyr run` reads "
                              f"(it reads: {known})")
        return fam
    cls = raw.get("_class_name")  # a diffusers model's config names its class
    if cls is not None and "architectures" not in raw:
        fam = family_named(cls) if isinstance(cls, str) else None
        if fam is None:
            classes = ", ".join(t for f in DIFFUSERS_FAMILIES for t in f.model_types)
            raise ConfigError(f"{path}: '_class_name' {show(cls)} is not a diffusers model "
                              f"`tyr run` reads (it reads: {classes})")
        return fam
    archs = raw.get("architectures")
    fam = family_of_architectures(archs) if isinstance(archs, list) else None
    if fam is None:
        raise ConfigError(f"{path}: no 'model_type', and 'architectures' ({show(archs)}) names "
                          f"no family `tyr run` reads (it reads: {known})")
    return fam


def _number(raw: dict[str, Any], key: str, default: Any, kind: type, path: Path,
            out: HFConfig | None) -> Any:
    v = _lookup(raw, key)
    if v is None:  # absent or null: the default
        if default is None:
            raise ConfigError(f"{path}: '{key}' is needed and not given")
        if out is not None:
            out.defaulted.append(f"{key}={default}")
        return int(default) if kind is bool else default
    if kind is bool:  # a flag (Qwen3-MoE's norm_topk_prob), the model's 0 or 1
        if not isinstance(v, bool):
            raise ConfigError(f"{path}: '{key}' must be true or false, got {show(v)}")
        return int(v)
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
