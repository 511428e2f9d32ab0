"""GPT-2's checkpoint layout against the GPT example's (`examples/gpt/GPT.lean`), both ways,
and what the family's table computes from a GPT-2 config (`model_for`, `width`).

GPT-2 stores its projections as `Conv1D` weights of shape `[in, out]`, the transpose of ours
(`[out, in]`, as `linear` takes them); the heads split the width the same way (head-major),
so nothing else moves. `tyr export --format hf-gpt2` writes by `PER_BLOCK` and `TOP`;
`tyr run --weights` reads by `ours`, their inverse. (`examples/gpt2/GPT2.lean` has GPT-2's
own layout: its checkpoints are read by name, nothing renamed.)
"""
from __future__ import annotations

import re
from typing import Any

EXACT = ("gelu", "gelu_python")  # exact (erf) GELU; gelu_new is the tanh approximation


def width(raw: dict[str, Any]) -> Any:
    """The MLP's width where `n_inner` is null: 4 × `n_embd`."""
    return 4 * (raw.get("n_embd") or 768)


def model_for(raw: dict[str, Any]) -> str:
    """GPT2.lean's model for a config: by its MLP's activation."""
    return "gpt2Exact" if raw.get("activation_function") in EXACT else "gpt2"


# our name (in a block) -> (GPT-2's name, transposed)
PER_BLOCK = {
    "ln_1": ("ln_1.weight", False), "ln_1_bias": ("ln_1.bias", False),
    "ln_2": ("ln_2.weight", False), "ln_2_bias": ("ln_2.bias", False),
    "attn.c_attn": ("attn.c_attn.weight", True), "attn.c_attn_bias": ("attn.c_attn.bias", False),
    "attn.c_proj": ("attn.c_proj.weight", True), "attn.c_proj_bias": ("attn.c_proj.bias", False),
    "mlp.c_fc": ("mlp.c_fc.weight", True), "mlp.c_fc_bias": ("mlp.c_fc.bias", False),
    "mlp.c_proj": ("mlp.c_proj.weight", True), "mlp.c_proj_bias": ("mlp.c_proj.bias", False),
}
# our name -> GPT-2's name (under `transformer.` in a GPT2LMHeadModel)
TOP = {"wte": "wte.weight", "wpe": "wpe.weight", "ln_f": "ln_f.weight", "ln_f_bias": "ln_f.bias"}

_THEIRS_IN_BLOCK = {theirs: (ours, t) for ours, (theirs, t) in PER_BLOCK.items()}
_THEIRS_TOP = {theirs: ours for ours, theirs in TOP.items()}
_BLOCK = re.compile(r"h\.([0-9]+)\.(.+)")


def ours(key: str) -> tuple[str, bool] | None:
    """(our name, whether the tensor is transposed) of a GPT-2 key (without `transformer.`),
    or None for a key GPT.lean has no parameter for."""
    if key in _THEIRS_TOP:
        return _THEIRS_TOP[key], False
    m = _BLOCK.fullmatch(key)
    if m and m.group(2) in _THEIRS_IN_BLOCK:
        name, transposed = _THEIRS_IN_BLOCK[m.group(2)]
        return f"blocks.{m.group(1)}.{name}", transposed
    return None
