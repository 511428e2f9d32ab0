"""`RunModel`: one `@[model]` of a model source with its config values (and, once trained,
its weights), the handle `tyr train`, `run`, `sample`, `chat` and `export` share.

A model source is a checked Lean file (`pytyr.pipeline.LeanModels`) or a compiled model
library (`pytyr.abi.LibraryModels`): both give `graph(model, values)`, `declaration(model)`
(None for a library, whose types are only seen in its graphs) and `origin` (for run.json).
A `RunModel` instantiates its model, or another `@[model]` of the same source, with the dims
that a task's feeds determine (`match.fill_dims`), and is the `ModelFactory` tasks sample
through (`task.py`).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Protocol

from pytyr.ir.graph import Graph
from pytyr.pipeline import ModelDecl, module_from_graph
from pytyr.train.match import fill_dims
from pytyr.train.task import Feed


class ModelSource(Protocol):
    origin: dict[str, str]

    def graph(self, model: str, values: dict[str, Any]) -> Graph: ...

    def declaration(self, model: str) -> ModelDecl | None: ...


class Forward:
    """A module called with a dict of named inputs (in the graph's input order)."""

    def __init__(self, module: Any, graph: Graph):
        self.module, self.names = module, [i.name for i in graph.inputs]
        self.inputs = graph.inputs  # names, shapes and dtypes, for callers that make inputs
        types = graph.types()
        self.outputs = [types[o.ref] for o in graph.outputs]

    def __call__(self, batch: dict[str, Any]) -> tuple[Any, ...]:
        import torch

        with torch.no_grad():
            return tuple(self.module(*[batch[n] for n in self.names]))


def load_weights(module: Any, weights: dict[str, Any], where: str, *, cast: bool = False,
                 assign: bool = False) -> int:
    """Copy `weights` (name → tensor) into `module`, after listing every mismatch at once.
    `cast`: tensors of another float dtype (a bf16 checkpoint) are converted to the model's;
    `assign`: the tensors become the parameters (no copy; an `empty` module's way to load).
    Returns the number of tensors cast."""
    from pytyr.errors import SafeTensorsError
    from pytyr.safetensors import DType, TensorSpec, expected_specs, fit_problems

    specs = {k: TensorSpec(k, DType.from_torch(t.dtype), tuple(t.shape))
             for k, t in weights.items()}
    problems = fit_problems(expected_specs(module), specs, cast=cast)
    if problems:
        raise SafeTensorsError(where, "model-mismatch", f"the weights do not fit the model "
                               f"({len(problems)} problem{'s' * (len(problems) != 1)})", problems)
    state = module.state_dict()
    chosen = {k: weights[k] for k in state}
    cast_names = [k for k, t in chosen.items() if t.dtype != state[k].dtype]
    for k in cast_names:
        chosen[k] = chosen[k].to(state[k].dtype)
    module.load_state_dict(chosen, strict=True, assign=assign)
    return len(cast_names)


@dataclasses.dataclass
class RunModel:
    """The `@[model]` `name` of `source` with the config's `values` (`{"c": {...}, "b": 4}`)
    and, where it has them, `weights` (name → tensor, from `weights_from`).

    Called as a task's `ModelFactory`, `model(name | None, feeds, sizes)` instantiates that
    `@[model]` of the source (None: this one) with its dims filled from the feeds' role sizes:
    a `Forward` holding the weights, in eval mode; without weights, the graph only (what
    `Task.check_sampling` builds, to fail before training)."""

    source: ModelSource
    name: str
    values: dict[str, Any]
    weights: dict[str, Any] | None = None
    weights_from: str = "the trained weights"
    _forwards: dict[Any, Forward] = dataclasses.field(default_factory=dict, init=False,
                                                      repr=False, compare=False)

    @classmethod
    def trained(cls, source: ModelSource, run: dict[str, Any], run_dir: Path,
                checkpoint: str = "best") -> RunModel:
        """The model of a finished run (`run`: its run.json) holding the weights of its
        `checkpoint` (`record.checkpoint_dir`), verified."""
        from pytyr.train.record import checkpoint_dir, run_weights

        return cls(source, run["model"], run["values"], run_weights(run_dir, checkpoint),
                   str(checkpoint_dir(run_dir, checkpoint)))

    @property
    def origin(self) -> str:
        """The source's file, for messages."""
        return next(iter(self.source.origin.values()))

    def declaration(self, model: str | None = None) -> ModelDecl | None:
        """The `pipeline.ModelDecl` of `model` (None: this one); None for a library's."""
        return self.source.declaration(model or self.name)

    @property
    def where(self) -> str:
        """The model's place for messages: its declaration's `file:line:col`."""
        decl = self.declaration()
        return decl.where if decl is not None else f"{self.origin}:{self.name}"

    def graph(self, feeds: dict[str, Feed], sizes: dict[str, int], who: str,
              model: str | None = None) -> Graph:
        """The graph of `model` (None: this one) with the dims `feeds` of `sizes` determine;
        `who` (a task, `inputs FILE`) names the feeder in errors."""
        name = model or self.name
        return self.source.graph(name, fill_dims(self.source.declaration(name), self.values,
                                                 feeds, sizes, who))

    def forward(self, feeds: dict[str, Feed], sizes: dict[str, int],
                model: str | None = None) -> Forward:
        """`graph` as a module holding the weights (the same tensors in every module: no
        copy per shape), in eval mode, built once per shape."""
        if self.weights is None:
            raise TypeError(f"model '{self.name}' holds no weights to run")
        name = model or self.name
        key = (name, tuple(sorted(sizes.items())))
        if key not in self._forwards:
            graph = self.graph(feeds, sizes, "sampler", name)
            # the weights become the parameters: every shape's module shares them
            module = module_from_graph(graph, empty=True)
            load_weights(module, self.weights, self.weights_from, cast=True, assign=True)
            self._forwards[key] = Forward(module.eval(), graph)
        return self._forwards[key]

    def __call__(self, model: str | None, feeds: dict[str, Feed], sizes: dict[str, int]
                 ) -> Forward | Graph:
        if self.weights is None:
            return self.graph(feeds, sizes, "sampler", model)
        return self.forward(feeds, sizes, model)

    def with_values(self, values: dict[str, Any]) -> RunModel:
        return RunModel(self.source, self.name, values, self.weights, self.weights_from)

    def with_weights(self, weights: dict[str, Any], weights_from: str) -> RunModel:
        return RunModel(self.source, self.name, self.values, weights, weights_from)
