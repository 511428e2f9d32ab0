"""The FLUX.2 [klein] models diffusers writes, as rows of the family table: the autoencoder
(`AutoencoderKLFlux2`, `examples/flux2/VAE.lean`) and the transformer
(`Flux2Transformer2DModel`, `examples/flux2/transformer/Transformer.lean`). A diffusers config
names its class in `_class_name`, which the table reads as a transformers config's
`model_type`."""
from __future__ import annotations

from typing import Any

from .table import Family, Field, Fixed, Unused

_VAE_LEAN = "examples/flux2/VAE.lean"
_DOWN = ["DownEncoderBlock2D"] * 4
_UP = ["UpDecoderBlock2D"] * 4


def _last_level(raw: dict[str, Any]) -> Any:
    """The third level's width: the fourth is the same (FLUX.2's (128, 256, 512, 512))."""
    levels = raw.get("block_out_channels")
    return levels[2] if isinstance(levels, list) and len(levels) > 2 else 512


FLUX2_VAE = Family(
    name="flux2_vae",
    model_types=("AutoencoderKLFlux2",),
    architecture_prefix="AutoencoderKLFlux2",
    example=f"{_VAE_LEAN} (vaeDecode, vaeEncode, flux2Decode)",
    fields=(
        Field("in_channels", "c.in_ch", 3, int),
        Field("out_channels", "c.out_ch", 3, int),
        Field("block_out_channels.0", "c.ch0", 128, int),
        Field("block_out_channels.1", "c.ch1", 256, int),
        Field("block_out_channels.2", "c.ch2", 512, int),
        Field("latent_channels", "c.latent", 32, int),
        Field("norm_num_groups", "c.groups", 32, int),
        Field("batch_norm_eps", "c.bn_eps", 1e-4, float),
    ),
    fixed=(
        Fixed("block_out_channels.3", (), 512, "the last two levels are one width",
              also=_last_level, also_shown="block_out_channels[2]"),
        Fixed("block_out_channels.4", (None,), None, "the autoencoder has four levels"),
        Fixed("down_block_types", (_DOWN,), _DOWN, "four DownEncoderBlock2D levels"),
        Fixed("up_block_types", (_UP,), _UP, "four UpDecoderBlock2D levels"),
        Fixed("layers_per_block", (2,), 2, "two ResNet blocks a level down, three up"),
        Fixed("act_fn", ("silu",), "silu", "the activation is SiLU"),
        Fixed("decoder_block_out_channels", (None,), None, "the decoder mirrors the encoder"),
        Fixed("use_quant_conv", (True,), True, "the moments pass quant_conv"),
        Fixed("use_post_quant_conv", (True,), True, "the latents pass post_quant_conv"),
        Fixed("mid_block_add_attention", (True,), True, "the mid block has its attention"),
        Fixed("patch_size", ([2, 2],), [2, 2], "FLUX.2's latents are 2 × 2 patches"),
    ),
    inert=("sample_size", "batch_norm_momentum", "force_upcast", "scaling_factor",
           "shift_factor", "_name_or_path"),
    unused=(Unused("bn.num_batches_tracked", "the batch norm's count of updates"),),
    lean=_VAE_LEAN,
    pick=lambda raw: "vaeDecode",
    pick_note="vaeDecode (vaeEncode, flux2Decode with --model)",
)

_DIT_LEAN = "examples/flux2/transformer/Transformer.lean"
_AXES = ("t", "h", "w", "l")


def _whole_mlp_ratio(raw: dict[str, Any]) -> dict[str, Any]:
    """`mlp_ratio` as the Lean model's integer (diffusers writes FLUX.2's 3 as 3.0)."""
    ratio = raw.get("mlp_ratio")
    if isinstance(ratio, float) and ratio.is_integer():
        return {**raw, "mlp_ratio": int(ratio)}
    if isinstance(ratio, float):
        raise ValueError(f"'mlp_ratio' is {ratio}; the Lean model's MLP is a whole number of "
                         f"times the width (FLUX.2's 3.0)")
    return raw


FLUX2_TRANSFORMER = Family(
    name="flux2_transformer",
    model_types=("Flux2Transformer2DModel",),
    architecture_prefix="Flux2Transformer2DModel",
    example=f"{_DIT_LEAN} (flux2Velocity, flux2GuidedVelocity)",
    fields=(
        Field("patch_size", "c.patch_size", 1, int),
        Field("in_channels", "c.in_channels", 128, int),
        Field("out_channels", "c.out_channels", None, int, default_from="in_channels"),
        Field("num_layers", "c.num_layers", 8, int),
        Field("num_single_layers", "c.num_single_layers", 48, int),
        Field("attention_head_dim", "c.attention_head_dim", 128, int),
        Field("num_attention_heads", "c.num_attention_heads", 48, int),
        Field("joint_attention_dim", "c.joint_attention_dim", 15360, int),
        Field("timestep_guidance_channels", "c.timestep_guidance_channels", 256, int),
        Field("mlp_ratio", "c.mlp_ratio", 3, int),
        *(Field(f"axes_dims_rope.{i}", f"c.axes_dims_rope_{a}", 32, int)
          for i, a in enumerate(_AXES)),
        Field("rope_theta", "c.rope_theta", 2000.0, float),
        Field("eps", "c.eps", 1e-6, float),
        Field("guidance_embeds", "c.guidance_embeds", True, bool),
    ),
    fixed=(Fixed("axes_dims_rope.4", (None,), None, "rotary turns four axes (t, h, w, l)"),),
    inert=("_name_or_path",),
    unused=(),
    lean=_DIT_LEAN,
    pick=lambda raw: "flux2GuidedVelocity" if raw.get("guidance_embeds", True)
    else "flux2Velocity",
    pick_note="flux2Velocity, or flux2GuidedVelocity where guidance_embeds",
    normalised=_whole_mlp_ratio,
)

DIFFUSERS_FAMILIES = (FLUX2_VAE, FLUX2_TRANSFORMER)
