"""A Hugging Face checkpoint as the model of a command: `tyr run --weights DIR` and
`tyr train --weights DIR`, with or without a Lean file.

`checkpoint_model` reads the checkpoint's config.json (`pytyr.hf`) and, where no Lean file or
library is named, takes its family's (`Family.lean`) and model (the family's choice for the
head, `suffix` appended: `Train` for training); `initial_weights` loads the checkpoint into a
built module, its family's non-parameters left out by name (`pytyr.hf.UnusedKeys`), every
missing, unexpected or mis-shaped tensor listed at once before any is copied.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterator

from pytyr.config import read_json
from pytyr.errors import ConfigError, LeanError, TyrError
from pytyr.hf import HFConfig, UnusedKeys, checkpoint_config, family_model, model_values


def checkpoint_model(weights: str | None, hf_config: str | None, file: str | None,
                     lib: str | None, model: str | None, *, suffix: str = "",
                     inputs: str | None = None, say: Callable[[str], None] = print
                     ) -> tuple[HFConfig | None, str | None, str]:
    """(the checkpoint's HF config or None, the Lean file to use, the model to use). With
    `inputs` (a safetensors file) holding an `attention_mask`, the family's model for padded
    sequences (`…Masked`), where it has one."""
    hf = checkpoint_config(weights, hf_config, say=say)
    if file or lib:
        if not model:
            raise ConfigError("give the @[model] to use (--model NAME)")
        return hf, file, model
    lean, family_choice = family_model(hf)
    if model is None and inputs is not None and _padded(inputs):
        from pytyr.pipeline import LeanModels

        try:
            LeanModels(lean).declaration(family_choice + "Masked")
        except LeanError:
            raise ConfigError(f"{inputs}: an attention_mask, but the {hf.family.name} family "
                              f"has no model for padded sequences; give unpadded input_ids") from None
        family_choice += "Masked"
    model = model or family_choice + suffix
    say(f"family {hf.family.name} (from {hf.path}): {lean}, model {model}")
    return hf, str(lean), model


def model_from_checkpoint(cfg: dict[str, Any], hf: HFConfig | None, file: str | None,
                          explicit: dict[str, Any], say: Callable[[str], None] = print
                          ) -> dict[str, Any]:
    """`cfg` with its model table from the checkpoint's config over the values beside the
    Lean file, under `explicit` (the model table of --config and --set)."""
    if hf is None:
        return cfg
    if not isinstance(explicit, dict):
        raise ConfigError("the config's 'model' must be a table")
    beside = Path(file).parent / "config.json" if file else None
    base = read_json(beside, "config").get("model", {}) if beside and beside.is_file() else {}
    for line in hf.describe(explicit):
        say(line)
    return {**cfg, "model": model_values(base, hf, explicit)}


def _padded(inputs: str) -> bool:
    """Does the inputs file hold an `attention_mask` (its header only: nothing else read)?"""
    from pytyr.safetensors import read_header

    try:
        return "attention_mask" in read_header(inputs).tensors
    except TyrError:
        return False  # the run reads the file next and names what is wrong with it


@contextlib.contextmanager
def checkpoint_tensors(path: str) -> Iterator[dict[str, Any]]:
    """The tensors of a checkpoint while the block runs: Tyr's own (verified first), or any
    safetensors file or directory of shards (views over the files' maps, closed after)."""
    from pytyr.safetensors import open_checkpoint
    from pytyr.train.checkpoint import STATE_FILE, read_weights, resolve

    if (resolve(path) / STATE_FILE).is_file():
        yield read_weights(path)
        return
    with open_checkpoint(path) as checkpoint:
        yield {n: checkpoint.tensor(n) for n in checkpoint.tensors}


def initial_weights(module: Any, path: str, hf: HFConfig | None,
                    say: Callable[[str], None] | None = print) -> None:
    """Copy the checkpoint at `path` into `module` (a run's first step starts from it)."""
    from pytyr.train.model import load_weights

    with checkpoint_tensors(path) as weights:
        unused = UnusedKeys(hf.family if hf is not None else None, [], weights, path)
        cast = load_weights(module, unused.select(weights, set(module.state_dict())), path,
                            cast=True)
    if cast:
        unused.notes.append(f"read {cast} tensors of another dtype as the model's")
    for note in unused.notes if say is not None else []:
        say(note)

