"""The GPT example's checkpoint as a Hugging Face `GPT2LMHeadModel` (`hf.py` writes the
directory, with the tokenizer files of `hf_tokenizer.py`).

The Lean GPT (`examples/gpt/GPT.lean`) is GPT-2's architecture: pre-LayerNorm blocks (eps
1e-5) of fused-qkv causal attention and a 4× exact-GELU MLP, learned positions, a head tied
to the token embedding. GPT-2 stores its projections as `Conv1D` weights of shape
`[in, out]`, the transpose of ours (`[out, in]`, as `linear` takes them), so those are
transposed; the heads split the width the same way (head-major), so nothing else moves.

    wte [V, C]                    transformer.wte.weight
    wpe [P, C]                    transformer.wpe.weight
    blocks.i.ln_1 / ln_1_bias     transformer.h.i.ln_1.weight / .bias   (ln_2 alike)
    blocks.i.attn.c_attn [3C, C]  transformer.h.i.attn.c_attn.weight [C, 3C]  (+ bias)
    blocks.i.attn.c_proj [C, C]   transformer.h.i.attn.c_proj.weight, transposed (+ bias)
    blocks.i.mlp.c_fc [4C, C]     transformer.h.i.mlp.c_fc.weight [C, 4C]  (+ bias)
    blocks.i.mlp.c_proj [C, 4C]   transformer.h.i.mlp.c_proj.weight [4C, C]  (+ bias)
    ln_f / ln_f_bias              transformer.ln_f.weight / .bias

Every key the layout needs is checked first (missing, unexpected, mis-shaped: all listed).
"""
from __future__ import annotations

import re
from typing import Any

from pytyr.errors import ConfigError, SafeTensorsError
from pytyr.hf.gpt2 import PER_BLOCK

_BLOCK = re.compile(r"blocks\.([0-9]+)\.(.+)")
_PER_BLOCK = PER_BLOCK  # our name -> (GPT-2 name, transposed); `tyr run` reads by its inverse


def _shapes(c: int, v: int, p: int) -> dict[str, tuple[int, ...]]:
    """Our key (for block 0, as `blocks.0.…`) → the shape the GPT-2 layout needs."""
    block = {"ln_1": (c,), "ln_1_bias": (c,), "ln_2": (c,), "ln_2_bias": (c,),
             "attn.c_attn": (3 * c, c), "attn.c_attn_bias": (3 * c,),
             "attn.c_proj": (c, c), "attn.c_proj_bias": (c,),
             "mlp.c_fc": (4 * c, c), "mlp.c_fc_bias": (4 * c,),
             "mlp.c_proj": (c, 4 * c), "mlp.c_proj_bias": (c,)}
    return {"wte": (v, c), "wpe": (p, c), "ln_f": (c,), "ln_f_bias": (c,),
            **{f"blocks.0.{k}": s for k, s in block.items()}}


def gpt2_tensors(weights: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, int]]:
    """(GPT-2 state dict, sizes) from our GPT weights; every layout problem listed at once."""
    problems: list[str] = []
    if "wte" not in weights or "wpe" not in weights or weights["wte"].ndim != 2:
        raise SafeTensorsError(where, "model-mismatch", "not the GPT example's weights: no "
                               "token/position embeddings 'wte' [vocab, width] and 'wpe'")
    v, c = weights["wte"].shape
    p = weights["wpe"].shape[0]
    layers = sorted({int(m.group(1)) for k in weights if (m := _BLOCK.fullmatch(k))})
    if layers != list(range(len(layers))):
        problems.append(f"blocks are numbered {layers}, not 0..{len(layers) - 1}")
    want = _shapes(c, v, p)
    expected = {k: s for k, s in want.items() if not k.startswith("blocks.")}
    for i in layers:
        expected.update({f"blocks.{i}.{k[9:]}": s for k, s in want.items()
                         if k.startswith("blocks.")})
    problems += [f"missing: {k!r} (GPT-2 needs {list(s)})" for k, s in expected.items()
                 if k not in weights]
    problems += [f"unexpected: {k!r} {list(weights[k].shape)} (no GPT-2 counterpart)"
                 for k in weights if k not in expected]
    problems += [f"shape: {k!r} is {list(weights[k].shape)}, GPT-2 needs {list(s)}"
                 for k, s in expected.items() if k in weights and tuple(weights[k].shape) != s]
    if problems:
        raise SafeTensorsError(where, "model-mismatch", f"the weights do not have GPT-2's "
                               f"layout ({len(problems)} problem{'s' * (len(problems) != 1)})",
                               problems)
    out = {"transformer.wte.weight": weights["wte"], "transformer.wpe.weight": weights["wpe"],
           "transformer.ln_f.weight": weights["ln_f"], "transformer.ln_f.bias": weights["ln_f_bias"]}
    for i in layers:
        for ours, (theirs, transpose) in _PER_BLOCK.items():
            t = weights[f"blocks.{i}.{ours}"]
            out[f"transformer.h.{i}.{theirs}"] = t.t().contiguous() if transpose else t
    return out, {"vocab": v, "width": c, "positions": p, "layers": len(layers)}


def gpt2_config(sizes: dict[str, int], values: dict[str, Any], where: str,
                ids: dict[str, int | None]) -> dict[str, Any]:
    """config.json of a GPT2LMHeadModel of `sizes`, its heads from the run's `model.c.n_head`,
    with the special ids `ids`."""
    c = values.get("c", {}) if isinstance(values, dict) else {}
    n_head = c.get("n_head") if isinstance(c, dict) else None
    if not isinstance(n_head, int) or n_head < 1 or sizes["width"] % n_head:
        raise ConfigError(f"{where}: model.c.n_head ({n_head!r}) must be a positive divisor "
                          f"of the width {sizes['width']}")
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": sizes["vocab"], "n_positions": sizes["positions"], "n_embd": sizes["width"],
        "n_layer": sizes["layers"], "n_head": n_head, "n_inner": 4 * sizes["width"],
        "activation_function": "gelu", "layer_norm_epsilon": 1e-5,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "initializer_range": 0.02, "tie_word_embeddings": True, "torch_dtype": "float32", **ids,
    }
