"""nanochat's own checkpoints as weights of `examples/nanochat/NanoChat.lean`, by key name.

nanochat's `base_train` writes `model_NNNNNN.pt` (`torch.save` of the model's `state_dict`,
bfloat16 tables included) beside `meta_NNNNNN.json`, whose `model_config` holds its
`GPTConfig` (`sequence_len`, `vocab_size`, `n_layer`, `n_head`, `n_kv_head`, `n_embd`,
`window_pattern`). `read_nanochat` reads them into the Lean model's config values and its
weights:

- the layout is today's (model `nanochat`: value embeddings, per-layer scalars, smear, backout)
  when the file has any of today's keys, else January's (`nanochatJan`, transformers'
  NanoChat);
- the config follows from `model_config` (a width nanochat rounded up to whole heads included;
  `window_pattern` `SSSL` or `L`, the short window a quarter of the context rounded up to 128
  as nanochat computes it), and the model's graph says which tensor every key must be;
- every key is matched by name, shape and dtype against that graph's parameters, with
  nanochat's names (`transformer.h.5.attn.c_q.weight`, `value_embeds.5.weight`) mapped to the
  Lean paths (`transformer.h.1.1.attn.c_q.weight`, `transformer.h.1.1.value_embed.weight`:
  layer `4 q + s` is slot `s` of group `q`), through the safetensors provider's matching
  (`fit_problems`): every missing, unexpected and mis-shaped key is listed in one error before
  any tensor is read (the `.pt` file is memory-mapped: its header gives names and shapes);
- then the tensors are read as float32 (a `torch.compile`d model's `_orig_mod.` prefix is
  dropped, as nanochat does).

`tyr import nanochat CHECKPOINT OUT` writes the result as `OUT/model.safetensors` (Lean paths)
and `OUT/config.json` (the run config's `model` table), for `tyr run --config --weights`; OUT
is checked and written whole as `tyr export`'s is (`output.Output`).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pytyr.errors import ConfigError, SafeTensorsError

PREFIX = "_orig_mod."  # a torch.compile'd module's keys
TODAY_KEYS = ("resid_lambdas", "x0_lambdas", "smear_gate.weight", "smear_lambda",
              "backout_lambda")
PAD_VOCAB_TO = 64  # nanochat's GPT(pad_vocab_size_to=64)
_MODEL_FILE = re.compile(r"model_([0-9]+)\.pt")
_GROUPED = re.compile(r"transformer\.(h|tail)\.([0-9]+)\.([0-9]+)\.(.+)")


def find_checkpoint(path: Path, step: int | None = None) -> tuple[Path, Path | None]:
    """(model file, meta file or None): `path` is a `model_NNNNNN.pt` (or any `.pt`) file, or
    a directory of them, whose last step is taken unless `step` is given."""
    if path.is_dir():
        steps = {int(m.group(1)): p for p in path.iterdir()
                 if (m := _MODEL_FILE.fullmatch(p.name))}
        if not steps:
            raise ConfigError(f"{path}: no nanochat checkpoint (model_NNNNNN.pt) in it")
        if step is not None and step not in steps:
            raise ConfigError(f"{path}: no checkpoint of step {step} (steps: "
                              f"{', '.join(map(str, sorted(steps)))})")
        path = steps[step if step is not None else max(steps)]
    elif not path.is_file():
        raise ConfigError(f"{path}: no such checkpoint file or directory")
    m = _MODEL_FILE.fullmatch(path.name)
    meta = path.with_name(f"meta_{m.group(1)}.json") if m else None
    return path, meta if meta is not None and meta.is_file() else None


def open_state(path: Path) -> dict[str, Any]:
    """The state dict of a nanochat `.pt` file, memory-mapped (nothing is read until a tensor
    is used), its keys without `_orig_mod.`."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    except Exception as err:  # a foreign or damaged file: one line, not torch's traceback
        raise SafeTensorsError(path, "not-a-checkpoint", f"cannot read it as a PyTorch "
                               f"state dict ({type(err).__name__}: {str(err)[:160]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                              for v in state.values()):
        raise SafeTensorsError(path, "not-a-checkpoint", "it holds no state dict of tensors")
    return {k.removeprefix(PREFIX): v for k, v in state.items()}


def layout(keys: Any) -> str:
    """`today` if any key is of today's nanochat, else `january`."""
    return "today" if any(k in TODAY_KEYS or k.startswith("value_embeds.") for k in keys) \
        else "january"


def config_values(model_config: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """NanoChat.lean's `NanoChatConfig` values for nanochat's `GPTConfig` fields."""
    need = ("sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd")
    missing = [k for k in need if not isinstance(model_config.get(k), int)]
    if missing:
        raise ConfigError(f"{where}: model_config lacks the integers {', '.join(missing)}")
    block, n, heads, dim = (model_config[k] for k in ("sequence_len", "n_layer", "n_head",
                                                       "n_embd"))
    if dim % heads or n <= 0:
        raise ConfigError(f"{where}: n_embd {dim} is not whole heads of n_head {heads}")
    head = dim // heads
    # NanoChat.lean derives heads = ceil(depth * aspect_ratio / head_dim): any aspect ratio
    # whose width rounds up to `dim` gives nanochat's width; the largest one is exact when
    # the width was not rounded
    aspect = dim // n
    if kind == "january" and dim % n:  # January's width is depth * aspect_ratio, as it is
        raise ConfigError(f"{where}: n_embd {dim} is no multiple of n_layer {n}, which "
                          f"January's layout needs (its width is depth × aspect ratio)")
    if -(-n * aspect // head) != heads:
        raise ConfigError(f"{where}: n_embd {dim} in {heads} heads of {head} is no width "
                          f"depth {n} × an aspect ratio rounds up to")
    pattern = str(model_config.get("window_pattern", "L")).upper()
    if kind == "today" and pattern not in ("SSSL", "L"):
        raise ConfigError(f"{where}: window_pattern {pattern!r}: NanoChat.lean has nanochat's "
                          f"'SSSL' (its default) and 'L'")
    if kind == "january" and pattern != "L":
        raise ConfigError(f"{where}: window_pattern {pattern!r} without today's keys: "
                          f"January's layout attends over the whole context ('L')")
    short = min(block, math.ceil(block / 4 / 128) * 128) if pattern == "SSSL" else block
    return {"vocab": model_config["vocab_size"], "pad_vocab_to": PAD_VOCAB_TO, "block": block,
            "depth": n, "aspect_ratio": aspect, "head_dim": head,
            "n_kv_head": model_config["n_kv_head"], "window": short,
            "rope_base": 100000.0 if kind == "today" else 10000.0,
            "qk_scale": 1.2 if kind == "today" else 1.0, "softcap": 15.0,
            "extras": 1 if kind == "today" else 0}


def key_map(paths: list[str], kind: str) -> dict[str, str]:
    """Lean path → nanochat key for every parameter of the model."""
    if kind == "january":
        fixed = {"wte": "transformer.wte.weight", "lm_head": "lm_head.weight"}
        return {p: fixed.get(p) or f"transformer.h.{p.removeprefix('blocks.')}.weight"
                for p in paths}
    quads = 1 + max((int(m.group(2)) for p in paths
                     if (m := _GROUPED.fullmatch(p)) and m.group(1) == "h"), default=-1)
    out = {}
    for p in paths:
        m = _GROUPED.fullmatch(p)
        if not m:
            out[p] = p
            continue
        group, k, slot, rest = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        layer = (4 * k if group == "h" else 4 * quads + 2 * k) + slot
        out[p] = (f"value_embeds.{layer}.weight" if rest == "value_embed.weight"
                  else f"transformer.h.{layer}.{rest}")
    return out


def read_nanochat(source: Any, path: Path, step: int | None = None
                  ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(model name, config values `{"c": …}`, weights by Lean path) of the nanochat checkpoint
    at `path`, for `source` (a `LeanModels` of NanoChat.lean); see the module doc."""
    import torch

    from pytyr.safetensors import DType, TensorSpec, fit_problems

    model_file, meta_file = find_checkpoint(path, step)
    if meta_file is None:
        raise ConfigError(f"{model_file}: no meta_NNNNNN.json beside it; nanochat writes its "
                          f"model_config there, which says the model's sizes")
    from pytyr.config import read_json

    meta = read_json(meta_file, "nanochat checkpoint metadata")
    state = open_state(model_file)
    kind = layout(state)
    c = config_values(meta.get("model_config") or {}, kind, str(meta_file))
    model = "nanochatLogits" if kind == "today" else "nanochatJanLogits"
    graph = source.graph(model, {"c": c, "b": 1, "t": 1})
    names = key_map([p.path for p in graph.params], kind)
    expected = {names[p.path]: (tuple(p.shape), DType.F32) for p in graph.params}
    actual = {k: TensorSpec(k, DType.from_torch(t.dtype) or DType.F32, tuple(t.shape))
              for k, t in state.items()}
    problems = fit_problems(expected, actual, cast=True)
    if problems:
        n = len(problems)
        raise SafeTensorsError(model_file, "model-mismatch",
                               f"the checkpoint does not fit NanoChat.lean's '{model}' "
                               f"({kind}'s layout, depth {c['depth']}; {n} problem"
                               f"{'s' * (n != 1)}); nothing was read", problems)
    weights = {p: state[k].to(torch.float32).clone() for p, k in names.items()}
    return model.removesuffix("Logits"), {"c": c}, weights


def import_nanochat(source: Any, path: Path, out: str, step: int | None = None,
                    overwrite: bool = False) -> Path:
    """`tyr import nanochat`: `out/model.safetensors` and `out/config.json`, written whole
    (`output.Output`: checked before the checkpoint is read, apart from it)."""
    from pytyr.export.output import Output

    dest = Output(out, "tyr import nanochat", overwrite=overwrite,
                  apart={"the checkpoint": path}, hint=f"{path.name or 'nanochat'}-tyr")
    model, values, weights = read_nanochat(source, path, step)
    with dest.writing(source=str(path.resolve())) as stage:
        stage.write_tensors("model.safetensors", weights, {"source": "nanochat", "model": model})
        stage.write_text("config.json", json.dumps({"model": values}, indent=1) + "\n")
    return Path(dest.shown)
