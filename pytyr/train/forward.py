"""`tyr run`: a model's outputs for the tensors of a safetensors file.

The inputs are keyed by the model's input names; the model's dims follow from their shapes.
The weights are a run's (`RunModel.trained`) or a checkpoint's (`weights_path`: Tyr's own,
verified first, or any safetensors file or sharded index, its tensors over the file's map
copied once into the model); the keys that are no parameter of the model are left out by
`pytyr.hf.UnusedKeys` and named, and a load that fails on an unexpected key says how to leave
it out. The outputs are written as safetensors `out0`, `out1`... (the model's output names).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pytyr.errors import ConfigError, SafeTensorsError
from pytyr.hf import HFConfig, UnusedKeys
from pytyr.paths import input_file, output_file
from pytyr.pipeline import module_from_graph
from pytyr.train.model import Forward, RunModel, load_weights
from pytyr.train.task import Feed


def forward_with_weights(model: RunModel, inputs: Path, out: Path, *,
                         weights_path: str | None, hf: HFConfig | None, ignore: list[str],
                         seed: int, say: Callable[[str], None] = print) -> dict[str, Any]:
    """The outputs of `forward` with the weights of `weights_path` (a checkpoint) or the
    model's own (a run's); `say` gets each line naming what was left out."""
    checkpoint = None
    if weights_path:
        from pytyr.safetensors import open_checkpoint
        from pytyr.train.checkpoint import STATE_FILE, read_weights, resolve

        if (resolve(weights_path) / STATE_FILE).is_file():  # tyr's checkpoint: verified first
            weights = read_weights(weights_path)
        else:
            checkpoint = open_checkpoint(weights_path)
            weights = {n: checkpoint.tensor(n) for n in checkpoint.tensors}
        model = model.with_weights(weights, weights_path)
    if model.weights is None and ignore:
        raise ConfigError("--ignore-key needs weights (--weights or --run)")
    unused = None if model.weights is None else UnusedKeys(
        hf.family if hf is not None else None, ignore, model.weights, model.weights_from)
    try:
        return forward(model, inputs, out, seed=seed, unused=unused)
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


def forward(model: RunModel, inputs_path: Path, out_path: Path, *, seed: int = 0,
            unused: Any = None) -> dict[str, Any]:
    """The model's outputs for the tensors of `inputs_path`, written to `out_path`, with the
    model's weights (freshly initialised from `seed` when it has none). `unused` (a
    `pytyr.hf.UnusedKeys`) leaves out the weights' keys that are no parameter of the model,
    before the load checks the rest. Returns the outputs."""
    import torch

    from pytyr.safetensors import SafeTensorsFile, write_file

    input_file(inputs_path, "inputs file")
    output_file(out_path, "outputs file")
    with SafeTensorsFile(inputs_path) as f:
        tensors = {n: f.tensor(n).clone() for n in f.names()}
    feeds, sizes = tensor_feeds(tensors)
    graph = model.graph(feeds, sizes, f"inputs {inputs_path}")
    batch = {}
    for i in graph.inputs:
        if i.name not in tensors:
            raise ConfigError(f"{inputs_path}: no tensor '{i.name}' for the input "
                              f"{i.name} : {i.type} of model '{graph.model}' ({model.where})")
        t = tensors[i.name]
        if tuple(t.shape) != tuple(i.shape):
            raise ConfigError(f"{inputs_path}: tensor '{i.name}' has shape {list(t.shape)}, the "
                              f"model's input {i.name} : {i.type} ({model.where})")
        batch[i.name] = t.to(torch.int64 if i.dtype == "i64" else torch.float32)
    extra = sorted(set(tensors) - {i.name for i in graph.inputs})
    if extra:
        raise ConfigError(f"{inputs_path}: tensor '{extra[0]}' is no input of model "
                          f"'{graph.model}' (its inputs: {', '.join(i.name for i in graph.inputs)})")
    # with weights, the module is built empty and the checkpoint's tensors become its
    # parameters (views over the files' maps: no second copy; another dtype is converted)
    module = module_from_graph(graph, seed=seed, empty=model.weights is not None)
    if model.weights is not None:
        weights = model.weights
        if unused is not None:
            weights = unused.select(weights, set(module.state_dict()))
        cast = load_weights(module, weights, model.weights_from, cast=True, assign=True)
        if cast and unused is not None:
            unused.notes.append(f"read {cast} tensors of another dtype as the model's")
    outputs = Forward(module.eval(), graph)(batch)
    named = {o.name: t.contiguous() for o, t in zip(graph.outputs, outputs)}
    write_file(named, out_path, {"model": graph.model})
    return named


def tensor_feeds(tensors: dict[str, Any]) -> tuple[dict[str, Feed], dict[str, int]]:
    """Feeds of named tensors as a model's inputs of those names: each axis its own role
    (`x[0]`), its size the tensor's, so that `fill_dims` reads the model's dims from them."""
    feeds, sizes = {}, {}
    for name, t in tensors.items():
        roles = tuple(f"{name}[{i}]" for i in range(t.ndim))
        feeds[name] = Feed("f32" if t.is_floating_point() else "i64", roles)
        sizes.update(zip(roles, t.shape))
    return feeds, sizes
