"""How `image_flow` conditions its model on a digit: the model's inputs besides the time.

* `ClassConditioning` (`condition = "class"`, Flux's example): the class as Flux's text tokens
  `txt` (`txt_len` copies of its one-hot) and pooled vector `y`, the image `img` as it is.
* `PromptConditioning` (`condition = "prompt"`, FLUX.2 [klein]'s way): the prompt of the
  digit (`prompt`, a template such as "the digit {}", `{}` the numeral) as character ids
  `input_ids` padded to `prompt_len` with its `attention_mask` (1 for a character, 0 for
  padding, whose id is 0), and the image packed as FLUX.2 packs latents (`packing`):
  `hidden_states` tokens at `img_ids`, text tokens at `txt_ids`, the names of diffusers'
  `Flux2Transformer2DModel.forward`. The vocabulary is the template's characters and the ten
  digits, sorted: a function of the template alone, so a run's record rebuilds it
  (`tyr generate RUN`).

The null label (classifier-free guidance's "no condition") is zeros for a class and the empty
prompt (all padding) for a prompt.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from pytyr.data.tokenizer import CharTokenizer
from pytyr.errors import ConfigError, DataError
from pytyr.train.task import Batch, Feed
from pytyr.train.tasks.flow import packing
from pytyr.train.tasks.flow import rectified as flow

IMAGE = ("batch", "channels", "height", "width")
TOKENS = ("batch", "tokens", "token_features")
PAD = 0  # the id of padding (masked out), as a tokenizer's pad token
AXES = 4  # FLUX.2's position ids: (t, h, w, l)


class ClassConditioning:
    """The class as Flux's conditioning tokens and pooled vector (module doc)."""

    def __init__(self, classes: int, txt_len: int) -> None:
        self.classes, self.txt_len = classes, txt_len

    def feeds(self) -> dict[str, Feed]:
        return {"img": Feed("f32", IMAGE), "timesteps": Feed("f32", ("batch",)),
                "txt": Feed("f32", ("batch", "txt_len", "classes")),
                "y": Feed("f32", ("batch", "classes"))}

    velocity_dims = IMAGE

    def sizes(self) -> dict[str, int]:
        return {"txt_len": self.txt_len}

    def image_sizes(self, image: tuple[int, int, int]) -> dict[str, int]:
        return {}

    def inputs(self, x: Tensor, t: Tensor, labels: Tensor) -> Batch:
        txt, y = flow.class_conditioning(labels, self.classes, self.txt_len)
        return {"img": x, "timesteps": t, "txt": txt, "y": y}

    def target(self, v: Tensor) -> Tensor:
        return v

    def images(self, out: Tensor, image: tuple[int, int, int]) -> Tensor:
        return out


class PromptConditioning:
    """The digit's prompt through a character tokenizer, the image packed (module doc)."""

    def __init__(self, template: str, prompt_len: int, classes: int = 10,
                 where: str = "task.prompt") -> None:
        if template.count("{}") != 1:
            raise ConfigError(f"{where} {template!r} must hold '{{}}' once, where the digit goes")
        self.template, self.prompt_len = template, prompt_len
        numerals = "".join(str(d) for d in range(classes))
        self.tokenizer = CharTokenizer(sorted(set(template.replace("{}", "") + numerals)),
                                       source=f"the prompts of {template!r}")
        prompts = ["", *(self.prompt(d) for d in range(classes))]  # the null label first
        self.table = self.encode(prompts, f"{where} {template!r}")

    def prompt(self, digit: int) -> str:
        return self.template.replace("{}", str(digit))

    def encode(self, prompts: list[str], where: str) -> tuple[Tensor, Tensor]:
        """`(input_ids, attention_mask)`, int64 `[n, prompt_len]`, the characters first; a
        prompt too long or with a character outside the vocabulary is refused, naming it."""
        ids = torch.full((len(prompts), self.prompt_len), PAD, dtype=torch.int64)
        mask = torch.zeros_like(ids)
        for i, text in enumerate(prompts):
            try:
                row = self.tokenizer.encode(text)
            except DataError:
                bad = next(c for c in text if c not in self.tokenizer.stoi)
                raise ConfigError(f"{where}: the character {bad!r} is not in the prompts' "
                                  f"vocabulary {''.join(self.tokenizer.itos)!r} (the "
                                  f"characters of {self.template!r} and the digits)") from None
            if len(row) > self.prompt_len:
                raise ConfigError(f"{where}: {text!r} is {len(row)} characters, longer than the "
                                  f"{self.prompt_len} the model reads (prompt_len)")
            ids[i, :len(row)] = torch.tensor(row, dtype=torch.int64)
            mask[i, :len(row)] = 1
        return ids, mask

    def feeds(self) -> dict[str, Feed]:
        text = ("batch", "prompt_len")
        return {"hidden_states": Feed("f32", TOKENS), "timestep": Feed("f32", ("batch",)),
                "input_ids": Feed("i64", text, bound="vocab"),
                "attention_mask": Feed("i64", text, bound="mask"),
                "img_ids": Feed("f32", ("tokens", "axes")),
                "txt_ids": Feed("f32", ("prompt_len", "axes"))}

    velocity_dims = TOKENS

    def sizes(self) -> dict[str, int]:
        return {"prompt_len": self.prompt_len, "vocab": self.tokenizer.vocab_size, "mask": 2,
                "axes": AXES}

    def image_sizes(self, image: tuple[int, int, int]) -> dict[str, int]:
        tokens, features = packing.packed_sizes(*image)
        return {"tokens": tokens, "token_features": features}

    def inputs(self, x: Tensor, t: Tensor, labels: Tensor) -> Batch:
        ids, mask = self.table
        row = labels + 1  # the null label -1 is the empty prompt, row 0
        return self.batch(x, t, ids[row], mask[row])

    def batch(self, x: Tensor, t: Tensor, ids: Tensor, mask: Tensor) -> Batch:
        """The model's inputs for images `x` at times `t` under encoded prompts."""
        _, _, h, w = x.shape
        return {"hidden_states": packing.pack(x), "timestep": t, "input_ids": ids,
                "attention_mask": mask,
                "img_ids": packing.image_ids(h // packing.PATCH, w // packing.PATCH),
                "txt_ids": packing.text_ids(self.prompt_len)}

    def target(self, v: Tensor) -> Tensor:
        return packing.pack(v)

    def images(self, out: Tensor, image: tuple[int, int, int]) -> Tensor:
        return packing.unpack(out, *image)


Conditioning = ClassConditioning | PromptConditioning


def conditioning(options: Any, classes: int) -> Conditioning:
    """The conditioning `image_flow`'s options name (`condition`)."""
    if options.condition == "prompt":
        return PromptConditioning(options.prompt, options.prompt_len, classes)
    return ClassConditioning(classes, options.txt_len)
