"""Text from a trained masked diffusion model (examples/diffusion/Diffusion.lean): the piece
that the diffusion Task (after training) and `tyr sample` (from a run directory) share.

The `sample` table of the config, checked before any work (`sample_config`):
  model        the logits model, default `diffusionLogits`
  prompt       text at the start of the sequence ("" for none)
  suffix       text at the end: with a prompt, the model infills between them
  length       characters in the sequence (prompt and suffix included), <= c.block;
               default: the model's `t`
  steps        unmasking steps (`unmask.reveal_counts`)
  schedule     "linear" or "cosine"
  temperature  0 is the argmax
  seed         the sampler's generator seed

The `[MASK]` token of Diffusion.lean is the id `c.vocab`, one past the characters (`mask_id`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from pytyr.errors import ConfigError
from pytyr.pipeline import LeanModels, module_from_graph
from pytyr.train.unmask import SCHEDULES, OnStep, prompt_template, unmask

SAMPLE_KEYS: dict[str, type | tuple[type, ...]] = {
    "model": str, "prompt": str, "suffix": str, "length": (int, type(None)), "steps": int,
    "schedule": str, "temperature": (int, float), "seed": int}
SAMPLE_DEFAULTS: dict[str, Any] = {
    "model": "diffusionLogits", "prompt": "", "suffix": "", "length": None, "steps": 64,
    "schedule": "linear", "temperature": 1.0, "seed": 1337}


def mask_id(values: Mapping[str, Any], source: str = "config") -> int:
    """The `[MASK]` id of Diffusion.lean's models for these argument values: `c.vocab`."""
    c = values.get("c")
    vocab = c.get("vocab") if isinstance(c, Mapping) else None
    if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1:
        raise ConfigError(f"{source}: model.c.vocab must be a positive integer (the number of "
                          f"characters; [MASK] is the id after them), got {vocab!r}")
    return vocab


def sample_config(raw: Mapping[str, Any], values: Mapping[str, Any], itos: list[str],
                  source: str = "config") -> dict[str, Any]:
    """The `sample` table with defaults filled in; every key, type, range and prompt
    character checked against the model's `values` and the vocabulary `itos`."""
    for k, v in raw.items():
        if k not in SAMPLE_KEYS:
            raise ConfigError(f"{source}: unknown key 'sample.{k}' "
                              f"(known: {', '.join(SAMPLE_KEYS)})")
        if isinstance(v, bool) or not isinstance(v, SAMPLE_KEYS[k]):
            raise ConfigError(f"{source}: 'sample.{k}' has the wrong type: {v!r}")
    cfg = {**SAMPLE_DEFAULTS, **raw}
    if cfg["length"] is None:
        cfg["length"] = values.get("t")
    block = values.get("c", {}).get("block")
    length = cfg["length"]
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ConfigError(f"{source}: 'sample.length' must be a positive integer, got {length!r}")
    if isinstance(block, int) and length > block:
        raise ConfigError(f"{source}: 'sample.length' is {length} but the model's block is "
                          f"{block}")
    if len(cfg["prompt"]) + len(cfg["suffix"]) > length:
        raise ConfigError(f"{source}: 'sample.prompt' and 'sample.suffix' ({len(cfg['prompt'])} "
                          f"+ {len(cfg['suffix'])} characters) do not fit in 'sample.length' "
                          f"{length}")
    if cfg["steps"] < 1:
        raise ConfigError(f"{source}: 'sample.steps' must be >= 1, got {cfg['steps']}")
    if cfg["schedule"] not in SCHEDULES:
        raise ConfigError(f"{source}: 'sample.schedule' must be one of {', '.join(SCHEDULES)}, "
                          f"got {cfg['schedule']!r}")
    if not cfg["temperature"] >= 0:
        raise ConfigError(f"{source}: 'sample.temperature' must be >= 0, got {cfg['temperature']}")
    known = set(itos)
    bad = sorted({ch for ch in cfg["prompt"] + cfg["suffix"] if ch not in known})
    if bad:
        raise ConfigError(f"{source}: the prompt has characters outside the vocabulary: {bad}")
    return cfg


def sample_text(models: LeanModels, sample: Mapping[str, Any], values: Mapping[str, Any],
                weights: Mapping[str, torch.Tensor], itos: list[str], *,
                on_step: OnStep | None = None) -> str:
    """Generate one sequence with `sample` (checked by `sample_config`) from the logits model
    instantiated at `b = 1, t = sample["length"]` with `weights`; return it as text."""
    mask = mask_id(values)
    graph = models.graph(sample["model"], {**values, "b": 1, "t": sample["length"]})
    module = module_from_graph(graph)
    module.load_state_dict(dict(weights))
    module.eval()
    stoi = {ch: i for i, ch in enumerate(itos)}
    template = prompt_template(sample["length"], mask, [stoi[ch] for ch in sample["prompt"]],
                               [stoi[ch] for ch in sample["suffix"]])
    ids = unmask(module, template, mask, sample["steps"], temperature=sample["temperature"],
                 schedule=sample["schedule"], seed=sample["seed"], on_step=on_step)
    return "".join(itos[i] for i in ids.tolist())
