"""`examples/flux2/transformer/Transformer.lean` against diffusers' `Flux2Transformer2DModel`
on tiny random models of both layouts (FLUX.2 [klein]'s, no guidance embedder; [dev]'s, with
one): the velocity equals diffusers' to 1e-5 with the module's parameters loaded from the
diffusers state dict by its keys, at the position ids the pipelines make and at random ids
on all four rotary axes. The types reject the mistakes they are there for, and a config that
diffusers could not build (rotary axes that miss the head width, an odd axis) is refused by
name."""
from __future__ import annotations

from pathlib import Path

import diffusers
import pytest
import torch
from diffusers import Flux2KleinPipeline

from pytyr.errors import ConfigError
from pytyr.lean import check_files
from pytyr.pipeline import LeanModels, module_from_graph

ROOT = Path(__file__).resolve().parents[1]
LEAN = ROOT / "examples" / "flux2" / "transformer" / "Transformer.lean"
# axes of unequal widths, so that an axis taken for another is seen
C = {"patch_size": 1, "in_channels": 8, "out_channels": 8, "num_layers": 2,
     "num_single_layers": 2, "attention_head_dim": 16, "num_attention_heads": 2,
     "joint_attention_dim": 12, "timestep_guidance_channels": 16, "mlp_ratio": 3,
     "axes_dims_rope_t": 2, "axes_dims_rope_h": 6, "axes_dims_rope_w": 4,
     "axes_dims_rope_l": 4, "rope_theta": 2000.0, "eps": 1e-6, "guidance_embeds": 0}
AXES = ("t", "h", "w", "l")
TOL = dict(rtol=1e-5, atol=1e-5)
B, H, W, TXT = 2, 2, 3, 5  # a 2 × 3 latent grid, 5 text tokens


def _diffusers(guided: bool) -> diffusers.Flux2Transformer2DModel:
    torch.manual_seed(0)
    m = diffusers.Flux2Transformer2DModel(
        patch_size=C["patch_size"], in_channels=C["in_channels"], out_channels=C["out_channels"],
        num_layers=C["num_layers"], num_single_layers=C["num_single_layers"],
        attention_head_dim=C["attention_head_dim"],
        num_attention_heads=C["num_attention_heads"],
        joint_attention_dim=C["joint_attention_dim"],
        timestep_guidance_channels=C["timestep_guidance_channels"],
        mlp_ratio=float(C["mlp_ratio"]), axes_dims_rope=tuple(C[f"axes_dims_rope_{a}"]
                                                              for a in AXES),
        rope_theta=int(C["rope_theta"]), eps=C["eps"], guidance_embeds=guided)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # every parameter drawn, the norm gains around 1
        for name, p in m.named_parameters():
            p.copy_(("norm" in name) + 0.3 * torch.randn(p.shape, generator=gen))
    return m.eval()


@pytest.fixture(scope="module")
def klein():
    return _diffusers(guided=False)


@pytest.fixture(scope="module")
def dev():
    return _diffusers(guided=True)


def _tyr(model: diffusers.Flux2Transformer2DModel, name: str, img: int, txt: int, **over):
    c = {**C, "guidance_embeds": int(model.config.guidance_embeds), **over}
    graph = LeanModels(LEAN).graph(name, {"c": c, "b": B, "img": img, "txt": txt})
    module = module_from_graph(graph, empty=True)
    module.load_state_dict(model.state_dict(), strict=True, assign=True)
    return module.eval()


def _pipeline_inputs(seed: int):
    """Latent tokens, text tokens and times, and the ids `Flux2KleinPipeline` makes for them
    (`[b, n, 4]`, int64)."""
    gen = torch.Generator().manual_seed(seed)
    latents = torch.randn(B, C["in_channels"], H, W, generator=gen)
    text = torch.randn(B, TXT, C["joint_attention_dim"], generator=gen)
    tokens = Flux2KleinPipeline._pack_latents(latents)
    img_ids = Flux2KleinPipeline._prepare_latent_ids(latents)
    txt_ids = Flux2KleinPipeline._prepare_text_ids(text)
    timestep = torch.rand(B, generator=gen)
    return tokens, text, timestep, img_ids, txt_ids


def _velocity(model, tokens, text, timestep, img_ids, txt_ids, guidance=None):
    with torch.no_grad():
        return model(hidden_states=tokens, encoder_hidden_states=text, timestep=timestep,
                     img_ids=img_ids, txt_ids=txt_ids, guidance=guidance,
                     return_dict=False)[0]


def test_the_velocity_is_diffusers_at_the_pipelines_ids(klein):
    tokens, text, timestep, img_ids, txt_ids = _pipeline_inputs(2)
    assert img_ids.dtype == torch.int64 and img_ids.shape == (B, H * W, 4)
    want = _velocity(klein, tokens, text, timestep, img_ids, txt_ids)
    (got,) = _tyr(klein, "flux2Velocity", H * W, TXT)(
        tokens, text, timestep, img_ids[0].float(), txt_ids[0].float())
    assert got.shape == (B, H * W, C["out_channels"])
    assert want.abs().max() > 0.1  # nothing trivially zero
    torch.testing.assert_close(got, want, **TOL)


def test_the_velocity_is_diffusers_at_ids_on_every_axis(klein):
    # a reference image's time coordinate (the pipelines' 10, 20, …) and ids on all four axes
    tokens, text, timestep, _, _ = _pipeline_inputs(3)
    gen = torch.Generator().manual_seed(4)
    img_ids = torch.randint(0, 40, (H * W, 4), generator=gen)
    txt_ids = torch.randint(0, 40, (TXT, 4), generator=gen)
    want = _velocity(klein, tokens, text, timestep, img_ids, txt_ids)
    (got,) = _tyr(klein, "flux2Velocity", H * W, TXT)(
        tokens, text, timestep, img_ids.float(), txt_ids.float())
    torch.testing.assert_close(got, want, **TOL)
    # and the ids matter: the same tokens at other places move differently
    (moved,) = _tyr(klein, "flux2Velocity", H * W, TXT)(
        tokens, text, timestep, img_ids.flip(0).float(), txt_ids.float())
    assert (moved - got).abs().max() > 1e-3


def test_the_guided_velocity_is_diffusers(dev):
    tokens, text, timestep, img_ids, txt_ids = _pipeline_inputs(5)
    guidance = torch.tensor([4.0, 2.5])
    want = _velocity(dev, tokens, text, timestep, img_ids, txt_ids, guidance)
    (got,) = _tyr(dev, "flux2GuidedVelocity", H * W, TXT)(
        tokens, text, timestep, img_ids[0].float(), txt_ids[0].float(), guidance)
    torch.testing.assert_close(got, want, **TOL)
    unguided = _velocity(dev, tokens, text, timestep, img_ids, txt_ids)
    assert (unguided - want).abs().max() > 1e-3  # the guidance is used


def test_the_rotary_op_is_diffusers_pos_embed_bit_for_bit():
    from diffusers.models.embeddings import apply_rotary_emb
    from diffusers.models.transformers.transformer_flux2 import Flux2PosEmbed

    from pytyr.exec.dit_ops import rope_ids

    gen = torch.Generator().manual_seed(6)
    x = torch.randn(2, 3, 7, 16, generator=gen)  # [b, h, t, d]
    ids = torch.randint(0, 500, (7, 4), generator=gen)
    cos, sin = Flux2PosEmbed(theta=2000, axes_dim=[2, 6, 4, 4])(ids)
    want = apply_rotary_emb(x.transpose(1, 2), (cos, sin), sequence_dim=1).transpose(1, 2)
    assert torch.equal(rope_ids(x, ids.float(), (1, 3, 2, 2), 2000.0), want)


@pytest.mark.parametrize("over,hypothesis", [
    ({"attention_head_dim": 18}, "hrope"),             # the axes sum to 16
    ({"axes_dims_rope_t": 3, "axes_dims_rope_h": 5}, "heven"),  # 16, but odd axes
    ({"timestep_guidance_channels": 15}, "htime"),
])
def test_a_config_diffusers_cannot_build_is_refused_by_name(klein, over, hypothesis):
    with pytest.raises(ConfigError, match=f"hypothesis '{hypothesis} "):
        _tyr(klein, "flux2Velocity", H * W, TXT, **over)


def test_a_layout_of_the_other_kind_is_refused(klein, dev):
    with pytest.raises(ConfigError, match="hypothesis 'hg : c.guidance_embeds = 1'"):
        _tyr(klein, "flux2GuidedVelocity", H * W, TXT)
    with pytest.raises(ConfigError, match="hypothesis 'hg : c.guidance_embeds = 0'"):
        _tyr(dev, "flux2Velocity", H * W, TXT)


# Each edit plants a mistake in Transformer.lean that the types are there to catch.
MISTAKES = [
    # the rotary axes must fill the head: the row axis twice does not
    ("ropeIds c.rope_t c.rope_h c.rope_w c.rope_l x ids", "ropeIds c.rope_t c.rope_h c.rope_h "
     "c.rope_l x ids", "argument 'x' of 'ropeIds'"),
    # three axes are not FLUX.2's four
    ("(img_ids : T #[img, 4]) (txt_ids : T #[txt, 4]) : T #[b, img, c.out_dim] :=\n  let temb",
     "(img_ids : T #[img, 3]) (txt_ids : T #[txt, 4]) : T #[b, img, c.out_dim] :=\n  let temb",
     "argument 'img_ids' of 'transformer'"),
    # the ids of the joint sequence are the text's first, as its tokens are
    ("let ids := catFirst txt_ids img_ids", "let ids := catFirst img_ids txt_ids",
     "argument 'ids' of 'doubleBlock'"),
    # text features must be joint_attention_dim wide: the model's width is not
    ("(encoder_hidden_states : T #[b, txt, c.joint_attention_dim]) (timestep : T #[b])\n"
     "    (img_ids : T #[img, 4]) (txt_ids : T #[txt, 4]) : T #[b, img, c.out_dim] :=\n"
     "  let temb",
     "(encoder_hidden_states : T #[b, txt, c.inner_dim]) (timestep : T #[b])\n"
     "    (img_ids : T #[img, 4]) (txt_ids : T #[txt, 4]) : T #[b, img, c.out_dim] :=\n"
     "  let temb", "argument 'encoder_hidden_states' of 'transformer'"),
    # the QK-norm gains have a head's width, not the model's
    ("  norm_added_q : RMSNorm c.head_dim", "  norm_added_q : RMSNorm c.inner_dim",
     "argument 'n' of 'normedHeads'"),
    # the SwiGLU halves the MLP's projection: one of the MLP's width has no halves
    ("  linear_in : Linear (2 * c.mlp_hidden_dim) c.inner_dim",
     "  linear_in : Linear c.mlp_hidden_dim c.inner_dim", "argument 'l' of 'lin3'"),
    # a single block's fused projection is q, k, v then the MLP's: not the other way round
    ("  to_qkv_mlp_proj : Linear (3 * c.inner_dim + 2 * c.mlp_hidden_dim) c.inner_dim",
     "  to_qkv_mlp_proj : Linear (2 * c.mlp_hidden_dim + 3 * c.inner_dim) c.inner_dim",
     "argument 'x' of 'third'"),
]


@pytest.mark.parametrize("old,new,fragment", MISTAKES, ids=[m[2] for m in MISTAKES])
def test_the_types_reject_flux2_mistakes(tmp_path, old, new, fragment):
    src = LEAN.read_text()
    assert src.count(old) == 1, old
    bad = tmp_path / "Transformer.lean"
    bad.write_text(src.replace(old, new))
    diags = check_files(bad)
    assert diags, "the mistake was accepted"
    assert any(fragment in d.message for d in diags), [str(d) for d in diags]
