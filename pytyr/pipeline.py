"""From a Lean model to a runnable module: instantiate → validate → lower.

The graph made by our own checker goes through the same validator as a graph from any other
front end (the C ABI), as JSON, so the harness only ever runs what it has checked itself.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .ir.graph import Graph
from .ir.validate import load_graph
from .lean import LeanSignatures, instantiate_model, load


class LeanModels:
    """A checked Lean file whose models can be instantiated many times (one parse)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.prog = load(self.path)
        self.signatures = LeanSignatures(self.prog)

    def graph(self, model: str, values: dict[str, Any]) -> Graph:
        graph = instantiate_model(self.prog, model, values)
        return load_graph(graph.to_json(indent=None), self.signatures,
                          source=f"{self.path}:{model}")


def graph_from_lean(path: str | Path, model: str, values: dict[str, Any]) -> Graph:
    """Check `path`, instantiate `model` with `values` (keyed by binder name), validate."""
    return LeanModels(path).graph(model, values)


def module_from_graph(graph: Graph, *, seed: int = 0, kernels: str | None = None) -> Any:
    """The executable `TyrModule` (torch is imported only here, not for checking); `kernels`
    is the Triton kernel mode (auto, off, interpret; default `$TYR_KERNELS` or auto)."""
    from .exec.lower import build_module

    return build_module(graph, seed=seed, kernels=kernels)
