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

The norms' eps is Tyr's `rmsNorm3`/`rmsNorm4` default, 1e-6. A checkpoint with any other key
(value embeddings, per-layer scalars, … of later nanochat versions) has no counterpart there
and is refused with every problem listed.
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


def _sizes(values: dict[str, Any], where: str) -> dict[str, Any]:
    """NanoChat.lean's derived sizes from the run's config values."""
    c = values.get("c") if isinstance(values, dict) else None
    keys = ("vocab", "block", "depth", "aspect_ratio", "head_dim", "n_kv_head", "rope_base",
            "softcap")
    if not isinstance(c, dict) or any(k not in c for k in keys):
        raise ConfigError(f"{where}: model.c needs {', '.join(keys)} (NanoChat.lean's config)")
    width = c["depth"] * c["aspect_ratio"]
    heads = -(-width // c["head_dim"])
    return {"vocab": c["vocab"], "width": width, "heads": heads, "kv_heads": c["n_kv_head"],
            "head": width // heads, "layers": c["depth"], "positions": c["block"],
            "rope_base": float(c["rope_base"]), "softcap": float(c["softcap"])}


def nanochat_tensors(weights: dict[str, Any], values: dict[str, Any], where: str
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(NanoChat state dict, sizes) from our weights; every layout problem listed at once."""
    s = _sizes(values, where)
    v, c, kv = s["vocab"], s["width"], s["kv_heads"] * s["head"]
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
    out = {"model.embed_tokens.weight": weights["wte"], "lm_head.weight": weights["lm_head"]}
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
