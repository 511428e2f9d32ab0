"""A compiled model library as a model source of `tyr train`, `tyr run` and `tyr sample`.

A library's graphs carry their types, but the library states no declaration (argument types
and positions), so the task's roles cannot fill its dims: give them in the config
(`model.b`); every graph is still checked against the task before any work.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytyr.abi.loader import load_model_graph
from pytyr.ir.graph import Graph
from pytyr.ir.ranges import check_attributes


class LibraryModels:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.origin = {"lib": str(self.path)}

    def graph(self, model: str, values: dict[str, Any]) -> Graph:
        graph = load_model_graph(self.path, model, values)
        check_attributes(graph, values, str(self.path))
        return graph

    def declaration(self, model: str) -> None:
        return None
