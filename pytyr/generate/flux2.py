"""`tyr generate DIR --prompt TEXT`: FLUX.2 [klein] text to image, as `Flux2KleinPipeline`
computes it, through the pipeline's three models written in Lean.

Each component is its family's Lean model (`pytyr.hf.flux2`, the Qwen3 family) over its
folder's checkpoint, the tensors views of the files' maps (`Component`). The prompt is read
through the chat template and padded to `max_sequence_length` (`prompt`); Qwen3's hidden
states after the text layers (9, 18, 27 by default) side by side are the text tokens. The
latents start as the seed's Gaussian noise (the pipeline's draw with
`torch.Generator().manual_seed(seed)`) or the `latents` tensor of `--latents`, in the layout the
pipeline's `latents=` takes (`[1, in_channels, h, w]`, `h` a sixteenth of the height);
packed to `h w` tokens at their `(0, row, column, 0)` ids, they follow the velocity from sigma
1 to 0 over FLUX.2's shifted schedule (`schedule`), with classifier-free guidance against the
empty prompt where the scale is over 1 and the model is not step-distilled (`is_distilled`).
The autoencoder then undoes the latents' batch norm and patches and decodes; the image is
written as PNG, each pixel `round(255 · clamp(x / 2 + 0.5, 0, 1))` as diffusers' postprocess.
Every size and setting is checked before a tensor is read.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from pytyr.errors import ConfigError
from pytyr.generate.layout import PipelineDir
from pytyr.generate.prompt import PromptEncoder
from pytyr.generate.schedule import FlowSchedule, euler_step
from pytyr.hf import UnusedKeys
from pytyr.hf.config import family_model, read_hf_config
from pytyr.pipeline import LeanModels
from pytyr.train.forward import tensor_feeds
from pytyr.train.model import RunModel
from pytyr.train.pretrained import checkpoint_tensors, model_from_checkpoint
from pytyr.train.tasks.flow.packing import image_ids, text_ids

SCALE = 16  # pixels a latent token spans: the VAE's 8 (three halvings) times the 2 × 2 patch


@dataclass(frozen=True)
class GenerateOptions:
    prompt: str
    height: int = 1024
    width: int = 1024
    steps: int = 50
    guidance: float = 4.0
    seed: int = 0
    latents: Path | None = None
    text_layers: tuple[int, int, int] = (9, 18, 27)
    max_sequence_length: int = 512


class Component:
    """One model of the pipeline over the checkpoint in `folder` (mapped while `stack` is
    open): `model` of its family's Lean file, else the family's choice with `suffix`, its
    values the folder's config.json's and `extra`'s."""

    def __init__(self, folder: Path, stack: contextlib.ExitStack, *, suffix: str = "",
                 model: str | None = None, extra: dict[str, Any] | None = None) -> None:
        self.folder = folder
        self.hf = read_hf_config(folder / "config.json")
        lean, chosen = family_model(self.hf)
        values = model_from_checkpoint({}, self.hf, str(lean), extra or {}, say=lambda _: None)
        self.run = RunModel(LeanModels(lean), model or chosen + suffix, values["model"])
        self.tensors = stack.enter_context(checkpoint_tensors(str(folder)))
        self.unused = UnusedKeys(self.hf.family, [], self.tensors, str(folder))

    @property
    def config(self) -> dict[str, Any]:
        return self.run.values["c"]

    def __call__(self, **inputs: torch.Tensor) -> torch.Tensor:
        """The model's one output for these inputs (by name); a module built once a shape."""
        feeds, sizes = tensor_feeds(inputs)
        if self.run.weights is None:  # the checkpoint's tensors for this model's parameters
            graph = self.run.graph(feeds, sizes, str(self.folder))
            names = {p.path for p in graph.params}
            self.run = self.run.with_weights(self.unused.select(self.tensors, names),
                                             str(self.folder))
        (out,) = self.run.forward(feeds, sizes)(inputs)
        return out


def generate(pipe: PipelineDir, opts: GenerateOptions, out: Path,
             progress: Callable[[int], Any] = range,
             say: Callable[[str], None] = print) -> torch.Tensor:
    """The image of `opts` (module doc), written to `out`; returns it, `[1, 3, H, W]` in
    [-1, 1]. `progress` wraps the range of steps (a progress bar)."""
    schedule = FlowSchedule.from_config(pipe.scheduler, str(pipe.root / "scheduler"))
    prompts = PromptEncoder(pipe.folder("tokenizer"))
    with contextlib.ExitStack() as stack:
        k1, k2, k3 = opts.text_layers
        text = Component(pipe.folder("text_encoder"), stack, suffix="PromptFeatures",
                         extra={"k1": k1, "k2": k2, "k3": k3})
        dit = Component(pipe.folder("transformer"), stack)
        vae = Component(pipe.folder("vae"), stack, model="flux2Decode")
        noise = _initial_latents(opts, dit.config, vae.config, text.config)
        guided = opts.guidance > 1 and not pipe.distilled
        say(f"FLUX.2 [klein] {opts.width}×{opts.height}, {opts.steps} steps, "
            + (f"guidance {opts.guidance}" if guided else "no guidance"
               + (" (step-distilled)" if pipe.distilled else ""))
            + f", seed {opts.seed}" * (opts.latents is None))
        feats = _features(text, prompts, opts.prompt, opts.max_sequence_length)
        empty = _features(text, prompts, "", opts.max_sequence_length) if guided else None
        latents = _denoise(dit, schedule, noise, feats, empty, opts, progress)
        with torch.no_grad():
            image = vae(latents=latents)
    _write_png(image, out)
    return image


def _initial_latents(opts: GenerateOptions, dit: dict[str, Any], vae: dict[str, Any],
                     text: dict[str, Any]) -> torch.Tensor:
    """The starting noise `[1, in_channels, h, w]`, once every size is checked."""
    for name, side in (("--height", opts.height), ("--width", opts.width)):
        if side < SCALE or side % SCALE:
            raise ConfigError(f"{name} {side} is not a positive multiple of {SCALE} (the "
                              f"pixels a latent token spans)")
    channels = dit["in_channels"]
    if channels != vae["latent"] * 4:
        raise ConfigError(f"the transformer takes {channels} channels a token, not the "
                          f"autoencoder's {vae['latent']} latent channels in 2 × 2 patches")
    if dit["joint_attention_dim"] != 3 * text["hidden"]:
        raise ConfigError(f"the transformer reads text tokens of {dit['joint_attention_dim']} "
                          f"features, not three of the text encoder's hidden states "
                          f"({text['hidden']} each)")
    if not opts.text_layers[2] < text["n_layer"]:
        raise ConfigError(f"--text-layers {','.join(map(str, opts.text_layers))}: the text "
                          f"encoder has {text['n_layer']} layers; each must be below that")
    shape = (1, channels, opts.height // SCALE, opts.width // SCALE)
    return initial_noise(shape, opts.seed, opts.latents, f"a {opts.width}×{opts.height} image")


def initial_noise(shape: tuple[int, ...], seed: int, latents: Path | None,
                  what: str) -> torch.Tensor:
    """The seed's Gaussian noise of `shape`, drawn as the pipeline draws it, or the one tensor
    `latents` of the file `latents`, which must have that shape (`what` starts from it)."""
    if latents is None:
        return torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    from pytyr.safetensors import SafeTensorsFile

    with SafeTensorsFile(latents) as f:
        names = list(f.names())
        if names != ["latents"]:
            raise ConfigError(f"{latents}: one tensor named 'latents' is needed, found "
                              f"{', '.join(names) or 'none'}")
        tensor = f.tensor("latents").clone()
    if tuple(tensor.shape) != shape or not tensor.is_floating_point():
        raise ConfigError(f"{latents}: 'latents' is {tensor.dtype} {list(tensor.shape)}; "
                          f"{what} starts from float {list(shape)}")
    return tensor.to(torch.float32)


def _features(text: Component, prompts: PromptEncoder, prompt: str, length: int) -> torch.Tensor:
    tokens = prompts.encode(prompt, length)
    return text(input_ids=torch.tensor([tokens.ids]), attention_mask=torch.tensor([tokens.mask]))


def _denoise(dit: Component, schedule: FlowSchedule, noise: torch.Tensor, feats: torch.Tensor,
             empty: torch.Tensor | None, opts: GenerateOptions,
             progress: Callable[[int], Any]) -> torch.Tensor:
    """Euler steps along the (guided) velocity; the latents `[1, c, h, w]` at sigma 0."""
    _, c, h, w = noise.shape
    latents = noise.reshape(1, c, h * w).permute(0, 2, 1)  # tokens in row-major order
    img_ids, txt_ids = image_ids(h, w), text_ids(feats.shape[1])
    sigmas = schedule.sigmas(opts.steps, h * w)
    timesteps = sigmas[:-1] * schedule.num_train_timesteps
    for i in progress(opts.steps):
        t = timesteps[i:i + 1] / 1000  # the pipeline's `timestep / 1000`, in float32

        def velocity(text: torch.Tensor) -> torch.Tensor:
            return dit(hidden_states=latents, encoder_hidden_states=text, timestep=t,
                       img_ids=img_ids, txt_ids=txt_ids)

        v = velocity(feats)
        if empty is not None:
            v_empty = velocity(empty)
            v = v_empty + opts.guidance * (v - v_empty)
        latents = euler_step(latents, v, sigmas[i], sigmas[i + 1])
    return latents.permute(0, 2, 1).reshape(1, c, h, w)


def _write_png(image: torch.Tensor, out: Path) -> None:
    """The image as diffusers' postprocess makes it: [-1, 1] to 8 bits, written atomically."""
    import numpy as np
    from PIL import Image

    from pytyr.atomic import atomic_write

    pixels = (image[0] / 2 + 0.5).clamp(0, 1).permute(1, 2, 0).numpy()
    rgb = Image.fromarray((pixels * 255).round().astype(np.uint8))
    atomic_write(out, lambda f: rgb.save(f, format="PNG"))
