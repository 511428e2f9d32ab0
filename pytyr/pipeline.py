"""From a Lean model to a runnable module: instantiate → validate → lower.

The graph made by our own checker goes through the same validator as a graph from any other
front end (the C ABI), as JSON, so the harness only ever runs what it has checked itself.
`ModelDecl` is what a model's *declaration* says before any value is given: where it is, and
each tensor input's dtype and dims, so a task can be matched to a model by its types.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .ir.graph import Graph
from .ir.ranges import check_attributes
from .ir.validate import load_graph
from .lean import LeanSignatures, instantiate_model, load

Dim = str | int | tuple[str, str] | None
"""A dim of a declared type: a `Nat` binder's name, a literal, `(config, field)` for a
config's field (`c.vocab`), or None for any other expression."""


@dataclasses.dataclass(frozen=True)
class InputDecl:
    """A tensor argument of a model: `idx : IT #[b, t] c.vocab` → ("idx", "i64", ("b", "t"),
    "IT #[b, t] c.vocab", ("c", "vocab")). A dim is the name of one of the model's `Nat`
    binders, a literal, or None (an expression such as `c.inputs`, known only once the config
    is); the bound of an index tensor (`IT s n`) is a `Dim` (None for `T s`, and for an
    expression such as `c.vocab + 1`)."""

    name: str
    dtype: str
    dims: tuple[str | int | None, ...]
    text: str
    bound: Dim = None


@dataclasses.dataclass(frozen=True)
class ModelDecl:
    name: str
    where: str  # "file:line:col" of the declaration
    inputs: tuple[InputDecl, ...]
    dim_binders: tuple[str, ...]  # the model's own `Nat` arguments (`b`, `t`)
    outputs: tuple[tuple[Dim, ...] | None, ...] = ()  # dims of each result tensor


class LeanModels:
    """A checked Lean file whose models can be instantiated many times (one parse)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.prog = load(self.path)
        self.signatures = LeanSignatures(self.prog)

    @property
    def origin(self) -> dict[str, str]:
        return {"file": str(self.path)}

    def graph(self, model: str, values: dict[str, Any]) -> Graph:
        graph = instantiate_model(self.prog, model, values)
        checked = load_graph(graph.to_json(indent=None), self.signatures,
                             source=f"{self.path}:{model}")
        checked.stacks = graph.stacks  # the front end's knowledge, not in the IR's JSON
        check_attributes(checked, values, self.declaration(model).where)
        return checked

    def declaration(self, model: str) -> ModelDecl:
        return model_declaration(self.prog, model)


def model_declaration(prog: Any, model: str) -> ModelDecl:
    """What the declaration of `model` in the checked program `prog` says (see `ModelDecl`)."""
    from .lean.defeq import Normalizer
    from .lean.terms import App, Arr, Lit, MetaCtx, Prod, Proj, Var, show

    info = prog.find_model(model)
    whnf = Normalizer(MetaCtx(), prog.env.unfold)
    nats = {p.uid: p.name for p in info.params if whnf(p.type) == App("Nat")}
    names = {p.uid: p.name for p in info.params}

    def dim(d: object) -> Dim:
        d = whnf(d)
        if isinstance(d, Var):
            return nats.get(d.uid)
        if isinstance(d, Lit):
            return d.n
        if isinstance(d, Proj) and isinstance(d.e, Var) and d.e.uid in names:
            return (names[d.e.uid], d.field)
        return None

    def dims(ty: object) -> tuple[Dim, ...] | None:
        if not (isinstance(ty, App) and ty.head in ("torch.T", "torch.IT") and ty.args
                and isinstance(ty.args[0], Arr)):
            return None
        return tuple(dim(d) for d in ty.args[0].items)

    inputs = []
    for p in info.params:
        ty = whnf(p.type)
        ds = dims(ty)
        if ds is None:
            continue
        assert isinstance(ty, App)
        plain = tuple(d if isinstance(d, (str, int)) else None for d in ds)
        bound = dim(ty.args[1]) if ty.head == "torch.IT" and len(ty.args) == 2 else None
        inputs.append(InputDecl(p.name, "i64" if ty.head == "torch.IT" else "f32",
                                plain, show(ty).replace("torch.", ""), bound))
    results, res = [], whnf(info.result)
    while isinstance(res, Prod):
        results.append(dims(whnf(res.a)))
        res = whnf(res.b)
    results.append(dims(res))
    pos = info.pos
    return ModelDecl(info.name, f"{pos.file}:{pos.line}:{pos.col}", tuple(inputs),
                     tuple(nats.values()), tuple(results))


def graph_from_lean(path: str | Path, model: str, values: dict[str, Any]) -> Graph:
    """Check `path`, instantiate `model` with `values` (keyed by binder name), validate."""
    return LeanModels(path).graph(model, values)


def module_from_graph(graph: Graph, *, seed: int = 0, kernels: str | None = None,
                      checkpoint_blocks: bool = False, empty: bool = False) -> Any:
    """The executable `TyrModule` (torch is imported only here, not for checking); `kernels`
    is the Triton kernel mode (auto, off, interpret; default `$TYR_KERNELS` or auto);
    `checkpoint_blocks` recomputes each block of the model's block stack in the backward;
    `empty` leaves the parameters unallocated, for weights to be assigned."""
    from .exec.lower import build_module

    return build_module(graph, seed=seed, kernels=kernels, checkpoint_blocks=checkpoint_blocks,
                        empty=empty)
