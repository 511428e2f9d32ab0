"""`examples/flux2/VAE.lean` against diffusers' `AutoencoderKLFlux2` on a tiny random model
of FLUX.2's layout (four levels, the last two of one width, two ResNet blocks down and three
up, the mid attention): the encoder's moments, the decoder's image and FLUX.2's decode of
batch-normed, patched latents (the pipeline's last step) equal diffusers' to 1e-5, with the
module's parameters loaded from the diffusers state dict by its keys."""
from __future__ import annotations

from pathlib import Path

import diffusers
import pytest
import torch

from pytyr.pipeline import LeanModels, module_from_graph

ROOT = Path(__file__).resolve().parents[1]
LEAN = ROOT / "examples" / "flux2" / "VAE.lean"
C = {"in_ch": 3, "out_ch": 3, "ch0": 8, "ch1": 16, "ch2": 24, "latent": 4, "groups": 4,
     "bn_eps": 1e-4}
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def vae():
    torch.manual_seed(0)
    m = diffusers.AutoencoderKLFlux2(
        in_channels=C["in_ch"], out_channels=C["out_ch"],
        block_out_channels=(C["ch0"], C["ch1"], C["ch2"], C["ch2"]), layers_per_block=2,
        latent_channels=C["latent"], norm_num_groups=C["groups"], batch_norm_eps=C["bn_eps"],
        sample_size=32)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # every parameter drawn, norm gains around 1; the statistics too
        for name, p in m.named_parameters():
            p.copy_(("norm" in name and name.endswith("weight")) + 0.2 * torch.randn(
                p.shape, generator=gen))
        m.bn.running_mean.copy_(torch.randn(m.bn.running_mean.shape, generator=gen))
        m.bn.running_var.copy_(torch.rand(m.bn.running_var.shape, generator=gen) + 0.5)
    return m.eval()


def _tyr(vae, model: str, h: int, w: int):
    source = LeanModels(LEAN)
    module = module_from_graph(source.graph(model, {"c": C, "b": 2, "h": h, "w": w}),
                               empty=True)
    state = {k: v for k, v in vae.state_dict().items() if k != "bn.num_batches_tracked"}
    module.load_state_dict(state, strict=True, assign=True)
    return module.eval()


def test_the_encoders_moments_are_diffusers(vae):
    x = torch.randn(2, 3, 24, 16, generator=torch.Generator().manual_seed(2))
    (got,) = _tyr(vae, "vaeEncode", 3, 2)(x)
    with torch.no_grad():
        want = vae.encode(x).latent_dist.parameters
    torch.testing.assert_close(got, want, **TOL)


def test_the_decoders_image_is_diffusers(vae):
    z = torch.randn(2, 4, 3, 2, generator=torch.Generator().manual_seed(3))
    (got,) = _tyr(vae, "vaeDecode", 3, 2)(z)
    with torch.no_grad():
        want = vae.decode(z).sample
    assert got.shape == (2, 3, 24, 16)
    torch.testing.assert_close(got, want, **TOL)


def test_flux2s_latents_decode_as_the_pipeline_decodes_them(vae):
    from diffusers import Flux2KleinPipeline

    latents = torch.randn(2, 16, 2, 3, generator=torch.Generator().manual_seed(4))
    (got,) = _tyr(vae, "flux2Decode", 2, 3)(latents)
    with torch.no_grad():  # the pipeline's own steps after its denoising loop
        std = torch.sqrt(vae.bn.running_var.view(1, -1, 1, 1) + vae.config.batch_norm_eps)
        z = latents * std + vae.bn.running_mean.view(1, -1, 1, 1)
        want = vae.decode(Flux2KleinPipeline._unpatchify_latents(z)).sample
    assert got.shape == (2, 3, 32, 48)
    torch.testing.assert_close(got, want, **TOL)
