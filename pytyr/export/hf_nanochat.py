"""The nanochat example's checkpoint as a Hugging Face `NanoChatForCausalLM` directory.

transformers' NanoChat (model type `nanochat`) is nanochat's GPT as `examples/nanochat/
NanoChat.lean` has it, feature for feature: the embedding RMS-normalised before the blocks,
RMS norms without a gain, rotary embedding with nanochat's sign (its `rotate_half` flips
the halves' signs as nanochat rotates) applied before QK-norm, grouped-query attention, a
ReLU² MLP (`hidden_act = "relu2"`), no biases, an untied head and the logits soft-capped
(`final_logit_softcapping`). So the weights only move, none is transposed:

    wte [V, C]                   model.embed_tokens.weight
    blocks.i.attn.c_q / c_k / c_v  model.layers.i.self_attn.q_proj / k_proj / v_proj .weight
    blocks.i.attn.c_proj         model.layers.i.self_attn.o_proj.weight
    blocks.i.mlp.c_fc / c_proj   model.layers.i.mlp.fc1 / fc2 .weight
    lm_head [V, C]               lm_head.weight

The norms' eps is Tyr's `rmsNorm3`/`rmsNorm4` default, 1e-6. That is NanoChat.lean's
January layout (`nanochatJan`, config `extras = 0`); the rows of padded tables (`pad_vocab_to`)
are never read and are left out. Today's nanochat (`nanochat`, `extras = 1`) has no
counterpart there and is refused by name, feature by feature: its value embeddings, per-layer
residual and x0 scalars, smear and backout (transformers' `NanoChatModel` has none of them),
queries and keys scaled by `qk_scale` (its attention scales by `head_dim^-½` only) and sliding
windows (it attends over the whole context). So is a January config with `qk_scale ≠ 1`. A
checkpoint with any other key has no counterpart either and is refused with every problem
listed.
"""
from __future__ import annotations

import re
from typing import Any

from pytyr.errors import ConfigError, SafeTensorsError

RMS_EPS = 1e-6  # Tyr/NN.lean: rmsNorm3, rmsNorm4
_BLOCK = re.compile(r"blocks\.([0-9]+)\.(.+)")
_PER_BLOCK = {"attn.c_q": "self_attn.q_proj.weight", "attn.c_k": "self_attn.k_proj.weight",
              "attn.c_v": "self_attn.v_proj.weight", "attn.c_proj": "self_attn.o_proj.weight",
              "mlp.c_fc": "mlp.fc1.weight", "mlp.c_proj": "mlp.fc2.weight"}


# Today's features, each with what shows it in a run's weights or config values.
TODAY = {"value embeddings": "value_embed.weight", "per-layer residual scalars": "resid_lambdas",
         "per-layer x0 scalars": "x0_lambdas", "smear": "smear_lambda",
         "backout": "backout_lambda"}


def _refuse_today(weights: dict[str, Any], c: dict[str, Any], where: str) -> None:
    """A `ConfigError` naming every feature of today's nanochat in the run, which transformers'
    NanoChat has no place for."""
    found = [name for name, key in TODAY.items() if any(k.endswith(key) for k in weights)]
    if c.get("qk_scale", 1.0) != 1.0:
        found.append(f"queries and keys scaled by qk_scale {c['qk_scale']} (NanoChat scales "
                     f"attention by head_dim^-1/2 only)")
    if c.get("window", c.get("block")) != c.get("block"):
        found.append(f"sliding windows of {c['window']} in a context of {c['block']} (NanoChat "
                     f"attends over the whole context)")
    if found:
        raise ConfigError(f"{where}: the run has features of today's nanochat that "
                          f"transformers' NanoChatForCausalLM has no counterpart for: "
                          f"{'; '.join(found)}; export a run of January's layout (model "
                          f"nanochatJan, examples/nanochat/january.json)")


def _sizes(values: dict[str, Any], where: str) -> dict[str, Any]:
    """NanoChat.lean's derived sizes from the run's config values."""
    c = values.get("c") if isinstance(values, dict) else None
    keys = ("vocab", "block", "depth", "aspect_ratio", "head_dim", "n_kv_head", "rope_base",
            "softcap")
    if not isinstance(c, dict) or any(k not in c for k in keys):
        raise ConfigError(f"{where}: model.c needs {', '.join(keys)} (NanoChat.lean's config)")
    width = c["depth"] * c["aspect_ratio"]
    heads = -(-width // c["head_dim"])
    pad = c.get("pad_vocab_to", 1)
    rows = -(-c["vocab"] // pad) * pad if isinstance(pad, int) and pad > 0 else c["vocab"]
    return {"vocab": c["vocab"], "rows": rows, "width": width, "heads": heads,
            "kv_heads": c["n_kv_head"],
            "head": width // heads, "layers": c["depth"], "positions": c["block"],
            "rope_base": float(c["rope_base"]), "softcap": float(c["softcap"])}


def nanochat_tensors(weights: dict[str, Any], values: dict[str, Any], where: str
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(NanoChat state dict, sizes) from our weights; today's features refused by name, then
    every layout problem listed at once."""
    s = _sizes(values, where)
    _refuse_today(weights, values["c"], where)
    v, c, kv = s["rows"], s["width"], s["kv_heads"] * s["head"]
    block = {"attn.c_q": (c, c), "attn.c_k": (kv, c), "attn.c_v": (kv, c),
             "attn.c_proj": (c, c), "mlp.c_fc": (4 * c, c), "mlp.c_proj": (c, 4 * c)}
    expected = {"wte": (v, c), "lm_head": (v, c),
                **{f"blocks.{i}.{k}": shape for i in range(s["layers"])
                   for k, shape in block.items()}}
    problems = [f"missing: {k!r} (NanoChat needs {list(shape)})"
                for k, shape in expected.items() if k not in weights]
    problems += [f"unexpected: {k!r} {list(weights[k].shape)} (no NanoChatForCausalLM "
                 f"counterpart)" for k in weights if k not in expected]
    problems += [f"shape: {k!r} is {list(weights[k].shape)}, NanoChat needs {list(shape)}"
                 for k, shape in expected.items()
                 if k in weights and tuple(weights[k].shape) != shape]
    if problems:
        raise SafeTensorsError(where, "model-mismatch", f"the weights do not have NanoChat's "
                               f"layout ({len(problems)} problem{'s' * (len(problems) != 1)})",
                               problems)
    vocab = s["vocab"]  # the padding rows are never read
    out = {"model.embed_tokens.weight": weights["wte"][:vocab].contiguous(),
           "lm_head.weight": weights["lm_head"][:vocab].contiguous()}
    for k, t in weights.items():
        m = _BLOCK.fullmatch(k)
        if m:
            out[f"model.layers.{m.group(1)}.{_PER_BLOCK[m.group(2)]}"] = t
    return out, s


def nanochat_config(s: dict[str, Any], ids: dict[str, int | None]) -> dict[str, Any]:
    """config.json of a NanoChatForCausalLM of sizes `s` with the special ids `ids`."""
    return {
        "architectures": ["NanoChatForCausalLM"], "model_type": "nanochat",
        "vocab_size": s["vocab"], "hidden_size": s["width"], "intermediate_size": 4 * s["width"],
        "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
        "num_key_value_heads": s["kv_heads"], "max_position_embeddings": s["positions"],
        "hidden_act": "relu2", "rms_norm_eps": RMS_EPS, "attention_dropout": 0.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": s["rope_base"]},
        "final_logit_softcapping": s["softcap"], "attention_bias": False,
        "tie_word_embeddings": False, "torch_dtype": "float32", **ids,
    }
