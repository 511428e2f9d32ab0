"""Weights as typed objects, and loading them into a model with every mismatch reported.

`open_weights(path)` takes a `.safetensors` file, a shard directory or a `.schema.json`
snapshot and gives a `Weights`: the specs, the tree (`w.model.layers[0].mlp.weight`), per
tensor and whole-checkpoint loaders. `load_model(module, path)` checks names, shapes and dtypes
against the module's `state_dict()` (or a graph's params, for `check_fit`) and raises one
`SafeTensorsError` listing every missing, unexpected, mis-shaped and mis-typed tensor before a
single value is copied, so a failed load never leaves a half-loaded model.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from pytyr.errors import SafeTensorsError

from .dtypes import DType
from .schema import Node, NodeList, TensorSpec, build_tree, read_schema, write_schema
from .sharded import Checkpoint, open_checkpoint

SCHEMA_SUFFIX = ".schema.json"
_GRAPH_DTYPES = {"f32": DType.F32, "i64": DType.I64}


def specs_of(checkpoint: Checkpoint) -> dict[str, TensorSpec]:
    """The specs of a checkpoint; `file` is the shard's path relative to the checkpoint."""
    base = checkpoint.root if checkpoint.root.is_dir() else checkpoint.root.parent
    return {name: TensorSpec(name, info.dtype, info.shape,
                             checkpoint.files[name].relative_to(base).as_posix())
            for name, info in checkpoint.tensors.items()}


class Weights:
    """The tensors of a checkpoint (or only their specs, from a snapshot), typed and lazy.

    Attribute and item access go to the tree: `w.model.layers[3].load()`. The tree is built on
    first use, so a checkpoint whose names make no tree still loads by name.
    """

    def __init__(self, specs: dict[str, TensorSpec], checkpoint: Checkpoint | None,
                 metadata: Mapping[str, str], source: Path,
                 classes: Mapping[str, type[Node]] | None = None):
        self.specs = specs
        self.checkpoint = checkpoint
        self.metadata = dict(metadata)
        self.source = source
        self._classes = classes
        self._tree: Node | NodeList[Any] | None = None

    @property
    def tree(self) -> Node | NodeList[Any]:
        if self._tree is None:
            self._tree = build_tree(self.specs, self.tensor, classes=self._classes,
                                    source=self.source)
        return self._tree

    def __getattr__(self, attr: str) -> Any:
        # only called when normal lookup fails; during unpickling nothing is set yet
        if attr.startswith("__") or "_tree" not in self.__dict__:
            raise AttributeError(attr)
        return getattr(self.tree, attr)

    def __getitem__(self, key: Any) -> Any:
        return self.tree[key]

    def __len__(self) -> int:
        return len(self.specs)

    def __contains__(self, name: object) -> bool:
        return name in self.specs

    def tensor(self, name: str, *, device: Any = None, dtype: Any = None) -> Any:
        """One tensor by its full name (torch), on `device`, as `dtype` if given."""
        if name not in self.specs:
            raise KeyError(f"{self.source}: no tensor named {name!r}")
        if self.checkpoint is None:
            raise SafeTensorsError(self.source, "no-data",
                                   f"cannot load {name!r}: a schema snapshot holds no data")
        return self.checkpoint.tensor(name, device=device, dtype=dtype)

    def load_all(self, *, device: Any = None, dtype: Any = None) -> dict[str, Any]:
        """Every tensor by full name."""
        return {n: self.tensor(n, device=device, dtype=dtype) for n in self.specs}

    def write_schema(self, path: str | os.PathLike[str]) -> Path:
        """Snapshot the specs as `.schema.json` (names, dtypes, shapes, shard files)."""
        return write_schema(self.specs, path, self.metadata)

    def close(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint.close()

    def __enter__(self) -> Weights:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Weights({str(self.source)!r}, {len(self.specs)} tensors)"


def open_weights(path: str | os.PathLike[str], *,
                 classes: Mapping[str, type[Node]] | None = None) -> Weights:
    """Weights of a `.safetensors` file, a shard directory, or a `.schema.json` snapshot."""
    path = Path(path)
    if path.name.endswith(SCHEMA_SUFFIX):
        specs, meta = read_schema(path)
        return Weights(specs, None, meta, path, classes)
    cp = open_checkpoint(path)
    return Weights(specs_of(cp), cp, cp.metadata, path, classes)


def expected_specs(target: Any) -> dict[str, tuple[tuple[int, ...], DType | str]]:
    """name → (shape, dtype) a target needs: a module (its state_dict), a graph (its params),
    a mapping of tensors or of `TensorSpec`s. A dtype the format lacks stays a string."""
    if hasattr(target, "params") and not hasattr(target, "state_dict"):
        return {p.path: (tuple(p.shape), _GRAPH_DTYPES.get(p.dtype, p.dtype))
                for p in target.params}
    items = target.state_dict() if hasattr(target, "state_dict") else target
    out: dict[str, tuple[tuple[int, ...], DType | str]] = {}
    for name, v in items.items():
        if isinstance(v, TensorSpec):
            out[name] = (v.shape, v.dtype)
        else:
            out[name] = (tuple(v.shape), DType.from_torch(v.dtype) or str(v.dtype))
    return out


def _fmt(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def fit_problems(expected: Mapping[str, tuple[tuple[int, ...], DType | str]],
                 actual: Mapping[str, TensorSpec], *, strict: bool = True,
                 cast: bool = False) -> list[str]:
    """Every way `actual` (the file) fails `expected` (the model), one line each, sorted by
    kind: missing, unexpected, shape, dtype. `strict=False` allows missing and unexpected
    names; `cast=True` allows other dtypes (converted on copy)."""
    missing = [n for n in expected if n not in actual]
    unexpected = [n for n in actual if n not in expected]
    out = []
    if strict:
        out += [f"missing: {n!r} (the model expects {expected[n][1]} {_fmt(expected[n][0])})"
                for n in missing]
        out += [f"unexpected: {n!r} ({actual[n].dtype} {_fmt(actual[n].shape)} in the file)"
                for n in unexpected]
    both = [n for n in expected if n in actual]
    for n in both:
        if tuple(actual[n].shape) != tuple(expected[n][0]):
            out.append(f"shape: {n!r} is {_fmt(actual[n].shape)} in the file, "
                       f"{_fmt(expected[n][0])} in the model")
    for n in both:
        if actual[n].dtype != expected[n][1] and not cast:
            out.append(f"dtype: {n!r} is {actual[n].dtype} in the file, {expected[n][1]} in "
                       f"the model")
    return out


def check_fit(target: Any, weights: Weights | str | os.PathLike[str], *, strict: bool = True,
              cast: bool = False) -> Weights:
    """Raise one error listing every mismatch between `target` (module, graph, mapping) and
    the weights (a path, or `Weights`; a schema snapshot is enough); returns the weights."""
    w = weights if isinstance(weights, Weights) else open_weights(weights)
    problems = fit_problems(expected_specs(target), w.specs, strict=strict, cast=cast)
    if problems:
        n = len(problems)
        raise SafeTensorsError(w.source, "model-mismatch",
                               f"the weights do not fit the model ({n} problem{'s' * (n != 1)}); "
                               f"nothing was loaded", problems)
    return w


def load_model(module: Any, weights: Weights | str | os.PathLike[str], *, strict: bool = True,
               cast: bool = False) -> list[str]:
    """Check, then copy the weights into `module` in place (each on its parameter's device).
    Returns the names copied. Nothing is copied unless every check passes."""
    import torch

    w = check_fit(module, weights, strict=strict, cast=cast)
    state = module.state_dict()  # detached tensors sharing the parameters' storage
    done = []
    with torch.no_grad():
        for name, dst in state.items():
            if name in w.specs:
                src = w.tensor(name)
                if hasattr(dst, "device_mesh"):  # a shard (FSDP2): every rank read it whole
                    from torch.distributed.tensor import distribute_tensor

                    src = distribute_tensor(src.to(dst.device), dst.device_mesh,
                                            dst.placements, src_data_rank=None)
                dst.copy_(src)
                done.append(name)
    return done
