"""A run of a Hugging Face family's own Lean model (examples/llama/Llama.lean's `qwen3Train`,
its step and logits twins; GPT2.lean's, MoE.lean's) written back as that family's checkpoint.

The parameter paths are the checkpoint's keys, so the weights are written as they are; the
config is the family's table read backwards: each `Field` from the run's values (`per`
multiplied back), each `Fixed` key at the value the model computes, the rotary settings as
transformers 5 writes them (`rope_parameters`: Llama 3's scaling where `c.rope_factor` is not
1), and the keys that pick the run's model (`Family.models_written`: the head tied or not,
GPT-2's activation). `family_of_run` says whether a run is one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytyr.config import flatten
from pytyr.errors import ConfigError
from pytyr.hf.families import FAMILIES, Family

_SUFFIXES = ("Train", "Step", "")
_SCALING = {"c.rope_factor": "factor", "c.rope_low": "low_freq_factor",
            "c.rope_high": "high_freq_factor", "c.rope_original": "original_max_position_embeddings"}


def family_of_run(run: dict[str, Any]) -> tuple[Family, dict[str, Any]] | None:
    """(the family, the config keys that pick the run's model) of a run whose model is a
    family's own, else None: its Lean file is the family's and its model one of the family's
    models (or their `…Train` and `…Step` twins)."""
    origin = run.get("origin", {}).get("file")
    root = Path(__file__).resolve().parents[2]
    for fam in FAMILIES:
        if fam.lean is None or not isinstance(origin, str):
            continue
        if Path(origin).resolve() != (root / fam.lean).resolve():
            continue
        for base, keys in fam.models_written().items():
            if any(run["model"] == base + s for s in _SUFFIXES):
                return fam, keys
    return None


def family_sizes(fam: Family, values: dict[str, Any]) -> dict[str, Any]:
    """The run's vocabulary and context (its longest: the tokenizer's `model_max_length`)."""
    flat = flatten(values)
    ours = {f.hf: f.ours for f in fam.fields}
    positions = ours.get("max_position_embeddings") or ours.get("n_positions")
    return {"vocab": flat.get(ours["vocab_size"]), "positions": flat.get(positions)}


def family_config(fam: Family, picks: dict[str, Any], values: dict[str, Any], where: str,
                  ids: dict[str, int | None]) -> dict[str, Any]:
    """config.json of `fam`'s checkpoint for the run's model values, with the keys `picks`
    (`family_of_run`'s) that pick its model."""
    flat = flatten(values)
    config: dict[str, Any] = {
        "architectures": [fam.architecture or f"{fam.architecture_prefix}ForCausalLM"],
        "model_type": fam.model_types[0], "torch_dtype": "float32", **ids}
    for x in fam.fixed:  # what the model computes (rotary's: transformers' defaults)
        if "." not in x.hf:
            _put(config, x.hf, x.allowed[0])
    config.update(picks)
    if any(f.hf.startswith("rope_parameters.") for f in fam.fields):
        config["rope_parameters"] = {"rope_type": "default"}
    for f in fam.fields:
        if f.ours in _SCALING:
            continue
        if f.ours not in flat:
            raise ConfigError(f"{where}: the run's values have no {f.ours} for '{f.hf}'")
        value = flat[f.ours]
        if f.per is not None:
            value *= flat[next(g.ours for g in fam.fields if g.hf == f.per)]
        _put(config, f.hf, bool(value) if f.kind is bool else value)
    if flat.get("c.rope_factor", 1.0) != 1.0:
        config["rope_parameters"].update({"rope_type": "llama3",
                                          **{k: flat[o] for o, k in _SCALING.items()}})
    return config


def _put(config: dict[str, Any], dotted: str, value: Any) -> None:
    *tables, last = dotted.split(".")
    for t in tables:
        config = config.setdefault(t, {})
    config[last] = value
