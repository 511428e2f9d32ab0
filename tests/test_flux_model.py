"""examples/flux/Flux.lean: it checks, its parameter paths are Flux's checkpoint keys, its
types reject the mistakes they are meant to, and it computes what the plain PyTorch Flux of
`bench/flux_plain.py` computes with the same state dict: the same forward bit for bit, the
same gradients up to summation order."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.flux_plain import Flux, FluxConfig  # noqa: E402
from pytyr.lean import check_files  # noqa: E402
from pytyr.pipeline import graph_from_lean, module_from_graph  # noqa: E402

FLUX = ROOT / "examples" / "flux" / "Flux.lean"
TINY = {"in_channels": 2, "patch": 2, "grid_h": 2, "grid_w": 3, "txt_len": 2,
        "context_in_dim": 5, "vec_in_dim": 3, "time_freqs": 4, "num_heads": 2,
        "rope_idx": 1, "rope_row": 1, "rope_col": 2, "mlp_ratio": 2, "depth": 2,
        "depth_single_blocks": 2, "theta": 100.0, "guidance_embed": 0}
# One block of each kind with the names of Black Forest Labs' Flux checkpoints (flux/model.py,
# flux/modules/layers.py), minus `guidance_in` (FLUX.1-schnell has none).
FLUX_KEYS = {
    "img_in", "txt_in", "time_in.in_layer", "time_in.out_layer", "vector_in.in_layer",
    "vector_in.out_layer", "final_layer.linear", "final_layer.adaLN_modulation.1",
    *(f"double_blocks.0.{s}_{k}" for s in ("img", "txt")
      for k in ("mod.lin", "attn.qkv", "attn.proj", "mlp.0", "mlp.2")),
    "single_blocks.0.linear1", "single_blocks.0.linear2", "single_blocks.0.modulation.lin",
}
FLUX_NORMS = {"double_blocks.0.img_attn.norm", "double_blocks.0.txt_attn.norm",
              "single_blocks.0.norm"}


def values(b: int = 3, **over) -> dict:
    return {"c": {**TINY, **over}, "b": b}


def pair(v: dict, seed: int = 0) -> tuple[torch.nn.Module, Flux]:
    """The Lean model and the plain one, every parameter random (zero-initialised ones too,
    so that no path is trivially zero) and the same on both sides."""
    tyr = module_from_graph(graph_from_lean(FLUX, "flux", v), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in tyr.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    plain = Flux(FluxConfig.from_tyr(v["c"]))
    plain.load_state_dict(tyr.state_dict())
    return tyr, plain


def inputs(v: dict, seed: int = 1) -> tuple[torch.Tensor, ...]:
    c, b = v["c"], v["b"]
    gen = torch.Generator().manual_seed(seed)
    side = (c["grid_h"] * c["patch"], c["grid_w"] * c["patch"])
    return (torch.randn(b, c["in_channels"], *side, generator=gen),
            torch.rand(b, generator=gen),
            torch.randn(b, c["txt_len"], c["context_in_dim"], generator=gen),
            torch.randn(b, c["vec_in_dim"], generator=gen),
            torch.randn(b, c["in_channels"], *side, generator=gen))


def test_flux_lean_checks_and_the_example_config_instantiates():
    assert check_files(FLUX) == []
    cfg = json.loads((ROOT / "examples" / "flux" / "config.json").read_text())
    values = {**cfg["model"], "b": cfg["train"]["batch"]}  # b: what tyr train fills in
    g = graph_from_lean(FLUX, "flux", values)
    assert [i.name for i in g.inputs] == ["img", "timesteps", "txt", "y", "target"]
    assert g.inputs[0].shape == (cfg["train"]["batch"], 1, 8, 8)
    assert [tuple(o.name for o in g.outputs)] == [("out0", "out1")]
    sample = graph_from_lean(FLUX, "fluxVelocity", values)
    assert [i.name for i in sample.inputs] == ["img", "timesteps", "txt", "y"]
    assert {p.path for p in sample.params} == {p.path for p in g.params}


def test_parameter_paths_are_flux_checkpoint_keys():
    g = graph_from_lean(FLUX, "flux", values())
    paths = {p.path for p in g.params}
    for key in FLUX_KEYS:
        assert {f"{key}.weight", f"{key}.bias"} <= paths, key
    for norm in FLUX_NORMS:
        assert {f"{norm}.query_norm.scale", f"{norm}.key_norm.scale"} <= paths, norm
    assert paths == set(Flux(FluxConfig.from_tyr(TINY)).state_dict())
    shapes = {p.path: p.shape for p in g.params}
    hidden, mlp = 2 * 2 * (1 + 1 + 2), 2 * 16
    assert shapes["double_blocks.1.img_mod.lin.weight"] == (6 * hidden, hidden)
    assert shapes["single_blocks.1.linear1.weight"] == (3 * hidden + mlp, hidden)
    assert shapes["single_blocks.1.linear2.weight"] == (hidden, hidden + mlp)
    assert shapes["single_blocks.0.norm.key_norm.scale"] == (8,)
    assert shapes["final_layer.linear.weight"] == (2 * 2 * 2, hidden)
    assert shapes["img_in.weight"] == (hidden, 2 * 2 * 2)
    assert shapes["time_in.in_layer.weight"] == (hidden, 8)


def test_adaln_zero_init_predicts_zero_and_starts_blocks_at_identity():
    g = graph_from_lean(FLUX, "flux", values())
    inits = {p.path: p.init["kind"] for p in g.params}
    assert all(inits[k] == "zeros" for k in inits if k.endswith(("mod.lin.weight",
               "modulation.lin.weight", "adaLN_modulation.1.weight", "final_layer.linear.weight")))
    assert inits["double_blocks.0.img_attn.norm.query_norm.scale"] == "ones"
    assert inits["img_in.weight"] == "uniform"
    tyr = module_from_graph(g, seed=0)
    v, loss = tyr(*inputs(values()))
    assert torch.count_nonzero(v) == 0 and loss > 0


@pytest.mark.parametrize("b", [3, 1])
def test_forward_is_the_plain_pytorch_flux_bit_for_bit(b):
    v = values(b=b)
    tyr, plain = pair(v)
    args = inputs(v)
    vt, lt = tyr(*args)
    vp, lp = plain(*args)
    assert vt.shape == args[0].shape and lt.shape == ()
    assert torch.equal(vt, vp) and torch.equal(lt, lp)
    assert vt.abs().max() > 0.1  # every block contributes: nothing is trivially zero


def test_gradients_match_the_plain_pytorch_flux():
    v = values()
    tyr, plain = pair(v, seed=2)
    args = inputs(v, seed=3)
    tyr(*args)[1].backward()
    plain(*args)[1].backward()
    grads = dict(plain.named_parameters())
    for path, p in tyr.named_parameters():
        q = grads[path].grad
        assert p.grad is not None and q is not None, path
        assert p.grad.abs().max() > 0, path
        torch.testing.assert_close(p.grad, q, rtol=1e-5, atol=1e-6, msg=path)


def test_velocity_model_is_the_training_model_without_the_loss():
    v = values()
    tyr, _ = pair(v)
    sampler = module_from_graph(graph_from_lean(FLUX, "fluxVelocity", v))
    sampler.load_state_dict(tyr.state_dict())
    args = inputs(v)
    (velocity,) = sampler(*args[:4])
    assert torch.equal(velocity, tyr(*args)[0])


# Each edit plants a mistake in Flux.lean that the types are there to catch.
MISTAKES = [
    # the rotary axes must sum to the head width: rotating the row axis twice does not fit
    ("c.rope_idx c.rope_row c.rope_col x c.theta", "c.rope_idx c.rope_row c.rope_row x c.theta",
     "argument 'x' of 'ropeGrid'"),
    # a patch must divide the image: an image one pixel taller is not `grid * patch` (the
    # reshape's `by decide` would fail too, but tactics run last, as in Lean)
    ("let x := catSeq3 (lin3 txt_in txt) (lin3 img_in (patchify img))",
     "let x := catSeq3 (lin3 txt_in txt) (lin3 img_in (patchify (reshape img "
     "#[b, c.in_channels, c.grid_h * c.patch + 1, c.grid_w * c.patch])))",
     "argument 'x' of 'patchify'"),
    # joint attention needs equal stream widths: a text stream of another width is caught
    ("  vector_in : MLPEmbedder c.vec_in_dim c.hidden\n  txt_in : Linear c.hidden c.context_in_dim",
     "  vector_in : MLPEmbedder c.vec_in_dim c.hidden\n  txt_in : Linear c.mlp_hidden c.context_in_dim",
     "argument 'txt_in' of 'transformer'"),
    # the guidance is embedded as the time is: an MLP of the time features' width
    ("  guidance_in : MLPEmbedder c.time_dim c.hidden",
     "  guidance_in : MLPEmbedder c.vec_in_dim c.hidden", "argument 'x' of 'mlpEmbedder'"),
    # the QK-norm gain has the head width, not the model width
    ("  norm : QKNorm c.head_dim\n  proj", "  norm : QKNorm c.hidden\n  proj",
     "argument 'n' of 'queries'"),
    # the text and the image stream must be taken apart at the conditioning length
    ("  let txt := frontSeq3 x\n  let img := backSeq3 x",
     "  let txt := backSeq3 x\n  let img := frontSeq3 x", "argument 'q' of 'attend'"),
]


@pytest.mark.parametrize("old,new,fragment", MISTAKES, ids=[m[2] for m in MISTAKES])
def test_the_types_reject_flux_mistakes(tmp_path, old, new, fragment):
    src = FLUX.read_text()
    assert src.count(old) == 1, old
    bad = tmp_path / "Flux.lean"
    bad.write_text(src.replace(old, new))
    diags = check_files(bad)
    assert diags, "the mistake was accepted"
    assert any(fragment in d.message for d in diags), [str(d) for d in diags]
