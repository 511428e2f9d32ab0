"""`tyr run`'s weights: a checkpoint opened (its tensors over the file's map, copied once into
the model), the keys that are no parameter of the model left out by `pytyr.hf.UnusedKeys` and
named, and the forward. A load that fails on an unexpected key says how to leave it out."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pytyr.errors import ConfigError, SafeTensorsError
from pytyr.hf import HFConfig, UnusedKeys
from pytyr.train.run import ModelSource, forward


def forward_with_weights(source: ModelSource, model: str, values: dict[str, Any],
                         inputs: Path, out: Path, *, weights: dict[str, Any] | None,
                         weights_from: str, weights_path: str | None, hf: HFConfig | None,
                         ignore: list[str], seed: int, say: Callable[[str], None] = print
                         ) -> dict[str, Any]:
    """The outputs of `forward` with the weights of `weights_path` (a checkpoint) or
    `weights` (a run's); `say` gets each line naming what was left out."""
    checkpoint = None
    if weights_path:
        from pytyr.safetensors import open_checkpoint
        from pytyr.train.checkpoint import STATE_FILE, read_weights, resolve

        if (resolve(weights_path) / STATE_FILE).is_file():  # tyr's checkpoint: verified first
            weights = read_weights(weights_path)
        else:
            checkpoint = open_checkpoint(weights_path)
            weights = {n: checkpoint.tensor(n) for n in checkpoint.tensors}
        weights_from = weights_path
    if weights is None and ignore:
        raise ConfigError("--ignore-key needs weights (--weights or --run)")
    unused = None if weights is None else UnusedKeys(
        hf.family if hf is not None else None, ignore, weights, weights_from)
    try:
        return forward(source, model, values, inputs, out, weights=weights,
                       weights_from=weights_from, seed=seed, unused=unused)
    except SafeTensorsError as err:
        if err.rule != "model-mismatch" or not any(p.startswith("unexpected:")
                                                   for p in err.problems):
            raise
        hint = "; leave keys out with --ignore-key PATTERN"
        if hf is None:
            hint += (" (with the checkpoint's Hugging Face config.json beside it or named by "
                     "--hf-config, its family's buffers and heads are left out by name)")
        raise SafeTensorsError(err.file, err.rule, err.message + hint, err.problems) from None
    finally:
        for note in unused.notes if unused is not None else []:
            say(note)
        if checkpoint is not None:
            checkpoint.close()
