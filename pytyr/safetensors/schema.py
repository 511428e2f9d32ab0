"""Typed specs of a checkpoint's tensors and the tree their dotted names make.

`TensorSpec` is what a checker needs of a tensor: name, dtype, shape, and the shard holding it.
Dotted names make a tree: `model.layers.0.self_attn.q_proj.weight` is reached as
`w.model.layers[0].self_attn.q_proj.weight`. Numeric segments make lists (indices contiguous
from 0, every item of the same structure), other segments make nodes; a name that breaks
this (a gap, a mix of numbers and names, a tensor that is also a prefix) is an error naming it.
Leaves (`TensorRef`) load one tensor; nodes and lists load their subtree, keyed relative to it.

A `.schema.json` snapshot (`write_schema` / `read_schema`) keeps the specs without the data,
so that checks (a model fit, the Lean type provider) can run where the weights are not.
"""
from __future__ import annotations

import json
import keyword
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from pytyr.errors import SafeTensorsError

from .dtypes import DType
from .reader import MAX_HEADER, MAX_RANK, DuplicateKey, no_duplicate_pairs

SCHEMA_FORMAT = "tyr.safetensors.schema"
SCHEMA_VERSION = 1
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: "²".isdigit() is true
_INDEX = re.compile(r"0|[1-9][0-9]*")  # canonical list indices
_RESERVED = frozenset({"load", "specs", "keys", "path"})  # Node's own attributes


@dataclass(frozen=True)
class TensorSpec:
    """A tensor as the header declares it; `file` is the shard holding it, if known."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype.value, "shape": list(self.shape), "file": self.file}


Loader = Callable[..., Any]  # (name, device=..., dtype=...) -> torch.Tensor


def py_name(segment: str) -> str:
    """The attribute name of a segment: itself when a usable identifier, else a sanitised one
    (`lm-head` → `lm_head`, `class` → `class_`, `load` → `load_`, `2x` → `_2x`)."""
    name = re.sub(r"\W", "_", segment, flags=re.ASCII) or "_"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name) or name in _RESERVED or name.startswith("__"):
        name += "_"
    return name


class TensorRef:
    """A leaf: one tensor's spec and its loader."""

    def __init__(self, spec: TensorSpec, loader: Loader):
        self.spec, self._loader = spec, loader

    name = property(lambda self: self.spec.name)
    path = property(lambda self: self.spec.name)
    dtype = property(lambda self: self.spec.dtype)
    shape = property(lambda self: self.spec.shape)

    def load(self, *, device: Any = None, dtype: Any = None) -> Any:
        """The tensor (torch), on `device`, converted to `dtype` if given."""
        return self._loader(self.spec.name, device=device, dtype=dtype)

    def specs(self) -> dict[str, TensorSpec]:
        return {self.spec.name: self.spec}

    def __repr__(self) -> str:
        return f"TensorRef({self.spec.name!r}, {self.spec.dtype}, {list(self.spec.shape)})"


class _Subtree:
    """What a named level and a numbered level share: their path, specs and loaders."""

    _path: str

    @property
    def path(self) -> str:
        return self._path

    def specs(self) -> dict[str, TensorSpec]:
        """Every spec under this level, by full name."""
        return {r.name: r.spec for r in refs(self)}

    def load(self, *, device: Any = None, dtype: Any = None) -> dict[str, Any]:
        """The tensors under this level keyed relative to it (`weight`, or `0.weight` for a
        list): ready for a submodule's state_dict."""
        return _load_relative(self, device, dtype)


class Node(_Subtree):
    """A named level of the tree; children by attribute (`py_name`) or by segment (`n["x"]`)."""

    def __init__(self, path: str, children: dict[str, Any]):
        self.__dict__["_path"] = path
        self.__dict__["_children"] = children
        self.__dict__["_aliases"] = {py_name(k): k for k in children}

    def __getattr__(self, attr: str) -> Any:
        d = self.__dict__
        if "_children" in d:
            seg = d["_aliases"].get(attr, attr)
            if seg in d["_children"]:
                return d["_children"][seg]
        raise AttributeError(f"no tensor or subtree {attr!r} under {d.get('_path') or 'the root'}")

    def __getitem__(self, segment: str) -> Any:
        return self._children[segment]

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._aliases))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a weights tree is read-only")

    def keys(self) -> list[str]:
        return list(self._children)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._path or '<root>'!r}: {', '.join(self._children)})"


T = TypeVar("T")


class NodeList(_Subtree, Generic[T]):
    """A numbered level (`layers.0`, `layers.1`, ...): a list of subtrees of one structure."""

    def __init__(self, path: str, items: list[T]):
        self._path, self._items = path, items

    def __getitem__(self, i: int) -> T:
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def __repr__(self) -> str:
        return f"NodeList({self._path!r}, {len(self._items)} items)"


def _load_relative(node: Node | NodeList[Any], device: Any, dtype: Any) -> dict[str, Any]:
    cut = len(node.path) + 1 if node.path else 0
    return {ref.name[cut:]: ref.load(device=device, dtype=dtype) for ref in refs(node)}


def refs(node: Any) -> Iterator[TensorRef]:
    """The leaves of a subtree, in tree order."""
    if isinstance(node, TensorRef):
        yield node
    else:
        for child in (node if isinstance(node, NodeList) else node._children.values()):
            yield from refs(child)


def build_tree(specs: Mapping[str, TensorSpec], loader: Loader, *,
               classes: Mapping[str, type[Node]] | None = None, source: object = "<schema>"
               ) -> Node | NodeList[Any]:
    """The tree of `specs`; `classes` maps a pattern (`model.layers.*.mlp`, `""` for the root)
    to the Node subclass to build there (typed classes of a generated module)."""
    def bad(rule: str, what: str) -> SafeTensorsError:
        return SafeTensorsError(source, rule, what)

    trie: dict[str, Any] = {}
    for name in sorted(specs, key=_natural):  # layers.2 before layers.10; names alphabetical
        segs = name.split(".")
        if "" in segs:
            raise bad("tree-empty-segment", f"tensor name {name!r} has an empty segment")
        node = trie
        for k, seg in enumerate(segs[:-1]):
            child = node.setdefault(seg, {})
            if isinstance(child, TensorSpec):
                raise bad("tree-leaf-and-node", f"{child.name!r} is a tensor and also a prefix of "
                          f"{name!r}")
            node = child
        if segs[-1] in node:
            raise bad("tree-leaf-and-node", f"{name!r} is a tensor and also a prefix of "
                      f"{next(iter(specs_under(node[segs[-1]])))!r}")
        node[segs[-1]] = specs[name]
    return _make(trie, "", "", loader, classes or {}, bad)


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(s)) if _INDEX.fullmatch(s) else (1, s) for s in name.split("."))


def specs_under(trie: Any) -> Iterator[str]:
    if isinstance(trie, TensorSpec):
        yield trie.name
    else:
        for v in trie.values():
            yield from specs_under(v)


def _make(trie: Any, path: str, pattern: str, loader: Loader, classes: Mapping[str, type[Node]],
          bad: Callable[[str, str], SafeTensorsError]) -> Any:
    if isinstance(trie, TensorSpec):
        return TensorRef(trie, loader)
    join = (lambda s: f"{path}.{s}") if path else (lambda s: s)
    numeric = [k for k in trie if _DIGITS.fullmatch(k)]
    if numeric and len(numeric) != len(trie):
        named = next(k for k in trie if k not in numeric)
        raise bad("tree-mixed-segments", f"{join(numeric[0])!r} and {join(named)!r}: a level "
                  f"holds either list indices or names, not both")
    if not numeric:
        cls = classes.get(pattern, Node)
        kids = {k: _make(v, join(k), f"{pattern}.{k}" if pattern else k, loader, classes, bad)
                for k, v in trie.items()}
        return cls(path, kids)
    for k in numeric:
        if not _INDEX.fullmatch(k):
            raise bad("tree-list-index", f"{join(k)!r}: list index {k!r} is not canonical")
    n = len(numeric)
    missing = sorted(set(range(n)) - {int(k) for k in numeric})
    if missing:
        raise bad("tree-list-gap", f"{join(str(missing[0]))!r} is missing: indices under "
                  f"{path or 'the root'} must run from 0 to {n - 1}")
    item_pattern = f"{pattern}.*" if pattern else "*"
    shapes = [_structure(trie[str(i)]) for i in range(n)]
    for i in range(1, n):
        if shapes[i] != shapes[0]:
            raise bad("tree-list-uneven", f"{join(str(i))!r} differs in structure from "
                      f"{join('0')!r}: the items of a list must hold the same names")
    items = [_make(trie[str(i)], join(str(i)), item_pattern, loader, classes, bad)
             for i in range(n)]
    return NodeList(path, items)


def _structure(trie: Any) -> Any:
    if isinstance(trie, TensorSpec):
        return "T"
    if trie and all(_INDEX.fullmatch(k) for k in trie):  # list lengths may differ per item
        return ("list", _structure(trie["0"]) if "0" in trie else None)
    return tuple(sorted((k, _structure(v)) for k, v in trie.items()))


def write_schema(specs: Mapping[str, TensorSpec], path: str | os.PathLike[str],
                 metadata: Mapping[str, str] | None = None) -> Path:
    """Write the `.schema.json` snapshot of `specs` (atomically); returns its path."""
    from pytyr.atomic import atomic_write_bytes

    doc = {"format": SCHEMA_FORMAT, "version": SCHEMA_VERSION, "metadata": dict(metadata or {}),
           "tensors": {n: s.to_json() for n, s in specs.items()}}
    path = Path(path)
    atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
    return path


def read_schema(path: str | os.PathLike[str]) -> tuple[dict[str, TensorSpec], dict[str, str]]:
    """Read and validate a `.schema.json` snapshot: (specs by name, metadata)."""
    path = Path(path)

    def bad(rule: str, what: str) -> SafeTensorsError:
        return SafeTensorsError(path, rule, what)

    try:
        if path.stat().st_size > MAX_HEADER:
            raise bad("schema-malformed", f"the snapshot is over {MAX_HEADER:,} bytes")
        doc = json.loads(path.read_bytes().decode("utf-8"), object_pairs_hook=no_duplicate_pairs)
    except DuplicateKey as d:
        raise bad("duplicate-name", f"the key {d.key!r} appears twice in the snapshot")
    except OSError as e:
        raise bad("unreadable", f"cannot read the snapshot: {e.strerror or e}")
    except (ValueError, RecursionError) as e:
        raise bad("schema-malformed", f"not UTF-8 JSON: {str(e).splitlines()[0][:120]}")
    if not isinstance(doc, dict) or doc.get("format") != SCHEMA_FORMAT:
        raise bad("schema-malformed", f"not a schema snapshot (no format {SCHEMA_FORMAT!r})")
    if doc.get("version") != SCHEMA_VERSION:
        raise bad("schema-version", f"version {doc.get('version')!r} is not the supported "
                  f"{SCHEMA_VERSION}")
    meta, tensors = doc.get("metadata", {}), doc.get("tensors")
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise bad("metadata-not-strings", "'metadata' must map strings to strings")
    if not isinstance(tensors, dict):
        raise bad("schema-malformed", "'tensors' is not an object")
    specs = {}
    for name, e in tensors.items():
        ok = (isinstance(e, dict) and set(e) <= {"dtype", "shape", "file"}
              and isinstance(e.get("dtype"), str) and isinstance(e.get("shape"), list)
              and len(e["shape"]) <= MAX_RANK
              and all(type(d) is int and 0 <= d < 2**63 for d in e["shape"])
              and (e.get("file") is None or isinstance(e.get("file"), str)))
        if not ok:
            raise bad("schema-malformed", f"tensor {name!r}: expected {{dtype: str, shape: "
                      f"[int >= 0], file?: str}}")
        dtype = DType.parse(e["dtype"])
        if dtype is None:
            raise bad("unknown-dtype", f"tensor {name!r}: unknown dtype {e['dtype'][:40]!r}")
        specs[name] = TensorSpec(name, dtype, tuple(e["shape"]), e.get("file"))
    return specs, meta
