"""Build graph IR documents (plain dicts, as the Lean checker would emit) by hand."""
from __future__ import annotations

import copy
from typing import Any


class GraphBuilder:
    """Appends inputs, parameters and nodes; `node` returns the new value's name."""

    def __init__(self, model: str = "test"):
        self.doc: dict[str, Any] = {
            "format": "tyr.graph", "version": 2, "model": model, "source": None,
            "config": {}, "inputs": [], "params": [], "nodes": [], "outputs": [],
        }

    def input(self, name: str, shape: list[int], dtype: str = "f32",
              bound: int | None = None) -> str:
        """An input; an i64 one needs its `bound` (the `n` of its type `IT s n`)."""
        record: dict[str, Any] = {"name": name, "shape": list(shape), "dtype": dtype}
        if bound is not None:
            record["bound"] = bound
        self.doc["inputs"].append(record)
        return name

    def param(self, path: str, shape: list[int], init: dict | None = None) -> str:
        init = init or {"kind": "normal", "std": 0.02}
        self.doc["params"].append({"path": path, "shape": list(shape), "dtype": "f32", "init": init})
        return path

    def node(self, op: str, inputs: list[str], shape: list[int], dtype: str = "f32",
             loc: str | None = None, implicit: dict[str, Any] | None = None,
             bound: int | None = None, **attrs: Any) -> str:
        """A node; an i64 one (an op of `primI`) has the `bound` of its type `IT s n`."""
        name = f"%{len(self.doc['nodes'])}"
        self.doc["nodes"].append({
            "name": name, "op": op, "inputs": list(inputs), "attrs": attrs,
            "shape": list(shape), "dtype": dtype,
            "loc": loc or f"Test.lean:{len(self.doc['nodes']) + 1}:3",
        })
        if implicit:
            self.doc["nodes"][-1]["implicit"] = dict(implicit)
        if bound is not None:
            self.doc["nodes"][-1]["bound"] = bound
        return name

    def output(self, name: str, ref: str) -> None:
        self.doc["outputs"].append({"name": name, "ref": ref})

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.doc)


def mlp(batch: int, d_in: int = 2, hidden: int = 64, classes: int = 3) -> dict[str, Any]:
    """x: f32[batch, d_in], y: i64[batch] -> (logits [batch, classes], loss [])."""
    g = GraphBuilder("MLP")
    x = g.input("x", [batch, d_in])
    y = g.input("y", [batch], "i64", bound=classes)
    w1 = g.param("l1.w", [hidden, d_in], {"kind": "normal", "std": (2 / d_in) ** 0.5})
    b1 = g.param("l1.b", [hidden], {"kind": "zeros"})
    w2 = g.param("l2.w", [classes, hidden], {"kind": "normal", "std": (1 / hidden) ** 0.5})
    b2 = g.param("l2.b", [classes], {"kind": "zeros"})
    h = g.node("linear_bias", [x, w1, b1], [batch, hidden], loc="MLP.lean:12:5")
    a = g.node("relu", [h], [batch, hidden], loc="MLP.lean:13:5")
    logits = g.node("linear_bias", [a, w2, b2], [batch, classes], loc="MLP.lean:14:5")
    loss = g.node("cross_entropy", [logits, y], [], loc="MLP.lean:20:3")
    g.output("logits", logits)
    g.output("loss", loss)
    return g.build()
