"""The graph IR: the contract between front ends (Lean checker, C ABI) and the harness.

A graph is plain data: inputs, parameters, nodes in topological order, outputs. Every value
is referred to by name: inputs by their Lean binder name, parameters by their path
(``blocks.0.attn.w_q``, also the checkpoint key), nodes by ``%k``. See docs/ir.md.
This module only (de)serialises; `pytyr.ir.validate` decides whether a graph is sound.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

FORMAT = "tyr.graph"
VERSION = 2  # 2: an i64 input carries its bound (docs/ir.md, "Versioning")
DTYPES = ("f32", "i64")
INIT_KINDS = {"zeros": (), "ones": (), "normal": ("std",), "uniform": ("bound",),
              "interval": ("lo", "hi"), "fill": ("value",), "ramp": ("first", "last"),
              "checkpoint": ("file", "key")}
# Init fields that are strings (a checkpoint's file and tensor name); the others are numbers,
# non-negative (a std, a bound) but for values of the tensor itself, which may have any sign.
INIT_STRING_FIELDS = ("file", "key")
INIT_SIGNED_FIELDS = ("lo", "hi", "value", "first", "last")

AttrValue = int | float | list[int]


@dataclass(frozen=True)
class TensorType:
    """`T #[…]` (f32), or `IT #[…] bound` (i64, every value in `[0, bound)`)."""

    shape: tuple[int, ...]
    dtype: str = "f32"
    bound: int | None = None  # i64 values only: Lean's `IT s n` is bounded by `n`

    def __str__(self) -> str:
        dims = f"#[{', '.join(map(str, self.shape))}]"
        if self.dtype == "f32":
            return f"T {dims}"
        return f"IT {dims} {self.bound if self.bound is not None else '?'}"


@dataclass
class Input:
    name: str
    shape: tuple[int, ...]
    dtype: str = "f32"
    bound: int | None = None  # an i64 input's values lie in [0, bound); None for f32

    @property
    def type(self) -> TensorType:
        return TensorType(tuple(self.shape), self.dtype, self.bound)


@dataclass
class Param:
    path: str
    shape: tuple[int, ...]
    dtype: str = "f32"
    init: dict[str, Any] = field(default_factory=lambda: {"kind": "normal", "std": 0.02})

    @property
    def type(self) -> TensorType:
        return TensorType(tuple(self.shape), self.dtype)


@dataclass
class Node:
    name: str
    op: str
    inputs: list[str]
    attrs: dict[str, AttrValue]
    shape: tuple[int, ...]
    dtype: str = "f32"
    loc: str | None = None  # "file:line:col" of the Lean application that made the node
    # Implicit arguments of the op as solved when the model was elaborated (`h`, `d` of
    # `splitHeads`): the validator checks the node with them instead of inverting `h * d`.
    implicit: dict[str, AttrValue] = field(default_factory=dict)
    bound: int | None = None  # an i64 result's values lie in [0, bound) (an op of `primI`)

    @property
    def type(self) -> TensorType:
        return TensorType(tuple(self.shape), self.dtype, self.bound)


@dataclass
class Output:
    name: str
    ref: str


@dataclass(frozen=True)
class Stack:
    """A model's stack of blocks as its front end knows it: a `foldl` over a `Vector` of
    parameter structures (`p.blocks.foldl (fun x blk => block c blk x) x` over
    `Vector (Block c) n`). `type` is the element type's name, `path` the vector's parameter
    path, `spans` the names of the first and last node of each element's step. Not part of
    the IR's JSON (a graph read from a file has none): a hint for lowering options that work
    block by block, such as activation checkpointing (`build_module(checkpoint_blocks=...)`).
    """

    type: str
    path: str
    spans: tuple[tuple[str, str], ...]


@dataclass
class Graph:
    model: str
    inputs: list[Input]
    params: list[Param]
    nodes: list[Node]
    outputs: list[Output]
    config: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    # the front end's block stacks (see Stack); not serialised, not compared
    stacks: list[Stack] = field(default_factory=list, compare=False, repr=False)

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_dict(self) -> dict[str, Any]:
        def clean(obj: Any) -> dict[str, Any]:
            # `asdict` deep-copies through `copy.deepcopy`; the fields here are JSON data,
            # copied by `_plain` at a fraction of the cost (a model build does this per node).
            d = {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}
            if "shape" in d:
                d["shape"] = list(d["shape"])
            if d.get("bound", 0) is None:  # only integer values have the key
                del d["bound"]
            return d

        return {
            "format": FORMAT,
            "version": VERSION,
            "model": self.model,
            "source": self.source,
            "config": self.config,
            "inputs": [clean(i) for i in self.inputs],
            "params": [clean(p) for p in self.params],
            "nodes": [clean(n) for n in self.nodes],
            "outputs": [clean(o) for o in self.outputs],
        }

    def types(self) -> dict[str, TensorType]:
        """Type of every named value (inputs, parameters, nodes)."""
        env: dict[str, TensorType] = {i.name: i.type for i in self.inputs}
        env.update({p.path: p.type for p in self.params})
        env.update({n.name: n.type for n in self.nodes})
        return env


def _plain(v: Any) -> Any:
    """A copy of JSON-like data (lists, tuples, dicts of them), as `asdict` would return."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    return v
