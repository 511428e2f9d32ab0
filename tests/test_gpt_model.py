"""The GPT of examples/gpt/GPT.lean: it checks, and shape-buggy variants of it are rejected
at the line of the bug with both types named."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytyr.errors import ConfigError
from pytyr.lean import check_files, instantiate_model, load

GPT = Path("examples/gpt/GPT.lean")
TINY = {"c": {"vocab": 11, "block": 8, "n_layer": 2, "n_head": 2, "head_dim": 4, "dropout": 0.0},
        "b": 3, "t": 8}


def test_gpt_checks():
    assert check_files(GPT) == []


def _line_of(src: str, needle: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if needle in line)


# (bug, text replaced, replacement, line to blame (a fragment of it), message fragments)
BUGS = [
    ("wrong MLP width",
     "c_proj : T #[c.n_embd, 4 * c.n_embd] := normal c.residStd",
     "c_proj : T #[c.n_embd, 3 * c.n_embd] := normal c.residStd",
     "dropout (linearBias3 h p.c_proj p.c_proj_bias) c.dropout",
     ["argument 'M' of 'linearBias3'", "T #[c.n_embd, 3 * c.n_embd]",
      "?m := 4 * c.n_embd comes from argument 'x'"]),
    ("transposed projection",
     "c_fc : T #[4 * c.n_embd, c.n_embd] := normal 0.02",
     "c_fc : T #[c.n_embd, 4 * c.n_embd] := normal 0.02",
     "let h := gelu (linearBias3 x p.c_fc p.c_fc_bias)",
     ["argument 'M' of 'linearBias3'"]),
    ("wrong head split",
     "let q := splitHeads (third qkv 0)",
     "let q := splitHeads (h := c.head_dim) (third qkv 0)",
     "let y := mergeHeads (causalAttention q k v c.dropout)",
     # Lean propagates `splitHeads`'s expected argument type into `third qkv 0` first, where
     # `c.n_head * c.head_dim =?= c.head_dim * ?d` is stuck on `?d`: that mismatch waits, as
     # a postponed coercion, and the heads of `q` and `k` that differ are the error.
     ["argument 'k' of 'causalAttention'", "T #[b, c.n_head, t, c.head_dim]",
      "T #[?b, c.head_dim, ?t, ?d]"]),
    ("mismatched residual",
     "dropout (linearBias3 h p.c_proj p.c_proj_bias) c.dropout",
     "dropout h c.dropout",
     "dropout h c.dropout",
     ["T #[b, t, 4 * c.n_embd]", "T #[b, t, c.n_embd]"]),
]


@pytest.mark.parametrize("bug,old,new,blame,frags", BUGS, ids=[b[0] for b in BUGS])
def test_shape_bug_is_rejected_at_its_line(tmp_path, bug, old, new, blame, frags):
    src = GPT.read_text()
    assert old in src
    bad = src.replace(old, new, 1)
    f = tmp_path / "GPT.lean"
    f.write_text(bad)
    diags = check_files(f)
    assert len(diags) == 1, "\n".join(map(str, diags))
    assert diags[0].pos.line == _line_of(bad, blame), str(diags[0])
    for frag in frags:
        assert frag in diags[0].message, (frag, diags[0].message)


def test_gpt_parameters_follow_the_structure():
    g = instantiate_model(load(GPT), "gpt", TINY)
    paths = [p.path for p in g.params]
    assert paths[:2] == ["wte", "wpe"] and paths[-2:] == ["ln_f", "ln_f_bias"]
    assert "blocks.1.attn.c_attn" in paths and "blocks.2.attn.c_attn" not in paths
    shapes = {p.path: p.shape for p in g.params}
    assert shapes["blocks.0.attn.c_attn"] == (24, 8) and shapes["blocks.0.mlp.c_proj"] == (8, 32)
    inits = {p.path: p.init for p in g.params}
    assert inits["blocks.0.mlp.c_proj"]["std"] == pytest.approx(0.02 / 2)  # 0.02/√(2·2)
    assert inits["blocks.0.ln_1"] == {"kind": "ones"} and inits["ln_f_bias"] == {"kind": "zeros"}


def test_context_longer_than_the_block_is_rejected_before_training():
    with pytest.raises(ConfigError) as e:
        instantiate_model(load(GPT), "gpt", {**TINY, "t": 9})
    assert "'h : t ≤ c.block'" in str(e.value) and "9 ≤ 8 is false" in str(e.value)


def test_unknown_config_key_is_named():
    with pytest.raises(ConfigError) as e:
        instantiate_model(load(GPT), "gpt", {**TINY, "c": {**TINY["c"], "n_embd": 8}})
    assert "unknown key c.n_embd" in str(e.value)
