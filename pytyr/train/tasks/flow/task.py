"""`image_flow`: rectified flow on small real images under a class or a prompt, an engine task.

    {"task": {"name": "image_flow", "data": "digits", "label_dropout": 0.1}}
    {"task": {"name": "image_flow", "condition": "prompt", "prompt": "the digit {}"}}

The data are scikit-learn's handwritten digits (1797 images of 8×8, 10 classes, in [-1, 1];
`pytyr.data.digits`), split by class with a fixed seed. A batch is a shuffled slice of the
training images and their labels; the `step_inputs` hook turns it into a flow-matching batch
(`rectified.py`): Gaussian noise, a time per image (logit-normal by default), the point
`x_t` on the straight path and its velocity target, and the labels dropped to the null label
with `label_dropout` for classifier-free guidance, all drawn from the step's RNG over the
global batch. The conditioning (`conditioning.py`) makes the model's inputs: with
`condition = "class"` (the default) `img` (`x_t`), `timesteps`, `txt` and `y` (the class as
Flux's text tokens and pooled vector) and `target`; with `"prompt"` the digit's prompt as
characters and the images packed as FLUX.2's latents (`hidden_states`, `timestep`,
`input_ids`, `attention_mask`, `img_ids`, `txt_ids`, `target` packed too), the null label the
empty prompt. The model returns `(velocity, loss)`. Evaluation uses the validation images
with fixed noise and times.

Sampling integrates the flow with Euler steps and classifier-free guidance and writes
`samples.png`: one row per class.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import torch

from pytyr.config import setting
from pytyr.train.task import (
    Batch,
    Expect,
    Feed,
    ModelFactory,
    SampleOutput,
    StepRNG,
    Task,
    check_rows,
    epoch_rows,
)
from pytyr.train.tasks import register
from pytyr.train.tasks.flow import rectified as flow
from pytyr.train.tasks.flow.conditioning import Conditioning, conditioning

NOISE_SEED_OFFSET = 4_000_037  # evaluation noise apart from the training draws


@dataclasses.dataclass(frozen=True)
class ImageFlowOptions:
    data: Literal["digits"] = setting("digits", doc="scikit-learn's 8×8 handwritten digits")
    val_fraction: float = setting(0.1, gt=0, lt=1, doc="images held out per class")
    split_seed: int = setting(0, ge=0, lt=2**63)
    condition: Literal["class", "prompt"] = setting(
        "class", doc="the class as Flux's tokens, or a prompt as FLUX.2's text")
    txt_len: int = setting(1, ge=1, le=64, doc="conditioning tokens (the class, one-hot)")
    prompt: str = setting("the digit {}", doc="a digit's prompt, {} its numeral (condition "
                          "prompt)")
    prompt_len: int = setting(16, ge=1, le=1024, doc="characters a prompt is padded to")
    timesteps: Literal["logit_normal", "uniform"] = setting(
        "logit_normal", doc="how training times are drawn")
    label_dropout: float = setting(0.1, ge=0, le=1, doc="classifier-free guidance's rate")


@dataclasses.dataclass(frozen=True)
class ImageSampleOptions:
    model: str | None = setting(None, doc="the @[model] that gives velocities (default: the "
                                "trained one, fed a dummy target)")
    steps: int = setting(32, ge=1, le=10_000, doc="Euler steps")
    cfg_scale: float = setting(3.0, ge=0, le=100, doc="guidance; 1 is plain conditional")
    shift: float = setting(1.0, gt=0, le=100, doc="time shift towards the noise end")
    per_class: int = setting(8, ge=1, le=64, doc="images per class (one row per class)")
    seed: int = setting(0, ge=0, lt=2**63)


@register
class ImageFlow(Task):
    name = "image_flow"
    Options = ImageFlowOptions
    SampleOptions = ImageSampleOptions

    train_set: Any = None  # set by prepare()
    _conditioning: Conditioning | None = None

    @property
    def conditioning(self) -> Conditioning:
        if self._conditioning is None:
            self._conditioning = conditioning(self.options, self.classes)
        return self._conditioning

    def feeds(self) -> dict[str, Feed]:
        target = Feed("f32", self.conditioning.velocity_dims)
        return {**self.conditioning.feeds(), "target": target}

    def expects(self) -> list[Expect]:
        return [Expect(0, "velocity", self.conditioning.velocity_dims)]

    def sizes(self) -> dict[str, int]:
        return {"batch": self.ctx.micro_batch, **self.conditioning.sizes(),
                **self.conditioning.image_sizes(self.image)}

    def prepare(self) -> str:
        from pytyr.data.digits import load_digits_split

        o, c = self.options, self.ctx
        self.train_set, self.val_set = load_digits_split(o.val_fraction, o.split_seed)
        rows = c.global_batch
        check_rows(self.name, rows, len(self.train_set), "the training split", c.source)
        check_rows(self.name, rows, len(self.val_set), "the validation split", c.source)
        n, ch, h, w = self.train_set.images.shape
        return (f"digits: {n} training and {len(self.val_set)} validation images of "
                f"{ch}×{h}×{w}, {self.classes} classes")

    @property
    def classes(self) -> int:
        from pytyr.data.digits import CLASSES

        return CLASSES

    @property
    def image(self) -> tuple[int, int, int]:
        """(channels, height, width) of the images, known before they are loaded."""
        from pytyr.data.digits import SIDE

        return 1, SIDE, SIDE

    def data_sizes(self) -> dict[str, int]:
        _, ch, h, w = self.train_set.images.shape
        return {"channels": ch, "height": h, "width": w, "classes": self.classes}

    def batch(self, k: int) -> Batch:
        idx = epoch_rows(len(self.train_set), k, self.ctx, self.options.split_seed)
        return {"x0": self.train_set.images[idx], "labels": self.train_set.labels[idx]}

    def step_inputs(self, batch: Batch, rng: StepRNG, *, drop: bool = True) -> Batch:
        x0, labels = batch["x0"], batch["labels"]
        b = x0.shape[0]
        noise = rng.randn(b, *x0.shape[1:])
        kind = self.options.timesteps
        t = rng.global_draw(lambda n, g: flow.sample_timesteps(n, g, kind=kind), b)
        if drop:
            dropped = rng.rand(b) < self.options.label_dropout
            labels = torch.where(dropped, flow.NULL_LABEL, labels)
        cond = self.conditioning
        return {**cond.inputs(flow.interpolate(x0, noise, t), t, labels),
                "target": cond.target(flow.velocity_target(x0, noise))}

    def eval_batches(self, split: str, iters: int) -> Iterator[Batch]:
        c = self.ctx
        data = self.train_set if split == "train" else self.val_set
        for j in c.eval_micro_batches(min(iters, len(data) // c.global_batch)):
            idx = torch.arange(c.first_row(j), c.first_row(j) + c.micro_batch)
            yield self.step_inputs({"x0": data.images[idx], "labels": data.labels[idx]},
                                   c.step_rng(c.seed + NOISE_SEED_OFFSET, j), drop=False)

    def eval_batch_limit(self, split: str) -> int | None:
        data = self.train_set if split == "train" else self.val_set
        return max(1, len(data) // self.ctx.global_batch)

    # -- sampling -------------------------------------------------------------------------
    def _feeds(self, options: ImageSampleOptions) -> dict[str, Feed]:
        feeds = self.feeds()
        return feeds if options.model is None else {k: v for k, v in feeds.items() if k != "target"}

    def check_sampling(self, instantiate: ModelFactory, options: Any) -> None:
        if options is not None:
            instantiate(options.model, self._feeds(options),
                        {"batch": self.classes * options.per_class, **self.sizes()})

    def sample(self, factory: ModelFactory, options: Any, out_dir: Path) -> SampleOutput | None:
        from pytyr.train.tasks.flow.image_grid import class_grid_labels, write_grid

        if options is None:
            return None
        n = self.classes * options.per_class
        model = factory(options.model, self._feeds(options),
                        {**self.sizes(), **self.data_sizes(), "batch": n})
        trained, cond = options.model is None, self.conditioning

        def velocity(x: torch.Tensor, t: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            batch = cond.inputs(x, t, labels)
            if trained:
                batch["target"] = cond.target(torch.zeros_like(x))
            return cond.images(model(batch)[0], self.image)

        labels = class_grid_labels(self.classes, options.per_class)
        gen = torch.Generator().manual_seed(options.seed)
        noise = torch.randn((n, *self.train_set.images.shape[1:]), generator=gen)
        images = flow.euler_sample(velocity, noise, labels, steps=options.steps,
                                   cfg_scale=options.cfg_scale, shift=options.shift)
        path = write_grid(images, out_dir / "samples.png", rows=self.classes)
        return SampleOutput(None, [path])
