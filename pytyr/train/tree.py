"""Parameter trees: the Python mirror of Lean's `TensorStruct`.

A tree is a leaf (a tensor, or any value that is not a dict or list) or a container: a dict
from field names to trees, or a list of trees. Every leaf has a dotted path made of field
names and list indices, e.g. `blocks.0.attn.w_q`; these paths are the graph IR's parameter
paths and the checkpoint keys. Optimizers map and zip over trees; checkpoints flatten them.

Leaves are visited in a fixed order (dict insertion order, then list order), so `flatten`,
`leaves` and `fold` agree with each other and with `unflatten(flatten(t))`.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pytyr.errors import TyrError

Tree = Any  # dict[str, Tree] | list[Tree] | leaf

_INDEX = re.compile(r"[0-9]+")


def _is_node(x: Any) -> bool:
    return isinstance(x, (dict, list))


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _items(tree: Tree, prefix: str) -> Iterator[tuple[str, Any]]:
    """(key, child) of a container, checking that field names make unambiguous paths."""
    if isinstance(tree, list):
        yield from ((str(i), child) for i, child in enumerate(tree))
        return
    for key, child in tree.items():
        if not isinstance(key, str) or not key or "." in key or _INDEX.fullmatch(key):
            where = f"under {prefix!r}" if prefix else "at the top level"
            raise TyrError(
                f"tree key {key!r} {where} cannot be a path segment: field names must be "
                f"non-empty strings without '.' that are not list indices"
            )
        yield key, child


def iter_leaves(tree: Tree, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) for every leaf, in tree order. A bare leaf has path ''."""
    if not _is_node(tree):
        yield prefix, tree
        return
    for key, child in _items(tree, prefix):
        yield from iter_leaves(child, _join(prefix, key))


def flatten(tree: Tree) -> dict[str, Any]:
    """{path: leaf}, in tree order. Empty containers have no leaves and vanish."""
    return dict(iter_leaves(tree))


def paths(tree: Tree) -> list[str]:
    return [p for p, _ in iter_leaves(tree)]


def leaves(tree: Tree) -> list[Any]:
    return [x for _, x in iter_leaves(tree)]


def unflatten(flat: Mapping[str, Any]) -> Tree:
    """The tree whose `flatten` is `flat`: dotted paths become nested dicts, and a container
    whose keys are exactly the indices 0..n-1 becomes a list.

    Raises `TyrError` naming the path when the paths don't form a tree (`a` and `a.b`, an
    index set with gaps, indices mixed with field names).
    """
    if set(flat) == {""}:
        return flat[""]
    root: dict[str, Any] = {}
    for path, leaf in flat.items():
        if not isinstance(path, str) or not path or any(not s for s in path.split(".")):
            raise TyrError(f"tree path {path!r} is not a dotted path of non-empty segments")
        *parents, last = path.split(".")
        node = root
        for i, seg in enumerate(parents):
            child = node.setdefault(seg, {})
            if not isinstance(child, dict):
                raise TyrError(f"tree path {path!r} runs through the leaf {'.'.join(parents[:i + 1])!r}")
            node = child
        if last in node:
            raise TyrError(f"tree path {path!r} is both a leaf and a subtree")
        node[last] = _Leaf(leaf)
    return _finish(root, "")


class _Leaf:
    """Wraps leaves while building, so that a leaf that is itself a dict stays a leaf."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


def _finish(node: Any, prefix: str) -> Tree:
    if isinstance(node, _Leaf):
        return node.value
    digits = [k for k in node if _INDEX.fullmatch(k)]
    if digits:
        if len(digits) != len(node):
            raise TyrError(f"tree paths under {prefix or 'the root'!r} mix list indices and field names")
        if sorted(int(k) for k in digits) != list(range(len(digits))) or any(
            k != str(int(k)) for k in digits
        ):
            raise TyrError(f"tree paths under {prefix or 'the root'!r} have list indices that are not 0..n-1")
        return [_finish(node[str(i)], _join(prefix, str(i))) for i in range(len(digits))]
    return {k: _finish(v, _join(prefix, k)) for k, v in node.items()}


def map_with_path(fn: Callable[[str, Any], Any], tree: Tree, prefix: str = "") -> Tree:
    """The tree of the same structure with each leaf x at path p replaced by fn(p, x)."""
    if not _is_node(tree):
        return fn(prefix, tree)
    mapped = [(k, map_with_path(fn, child, _join(prefix, k))) for k, child in _items(tree, prefix)]
    if isinstance(tree, list):
        return [v for _, v in mapped]
    return dict(mapped)


def map(fn: Callable[[Any], Any], tree: Tree) -> Tree:  # noqa: A001 - mirrors TensorStruct.map
    """The tree of the same structure with each leaf x replaced by fn(x)."""
    return map_with_path(lambda _, x: fn(x), tree)


def zip_with(fn: Callable[..., Any], tree: Tree, *others: Tree) -> Tree:
    """Combine trees of the same structure leafwise: leaf at p is fn(t0[p], t1[p], ...).

    Raises `TyrError` naming the first path where the structures differ.
    """
    rest = [dict(iter_leaves(o)) for o in others]
    own = paths(tree)
    for k, flat in enumerate(rest, start=1):
        if list(flat) != own:
            missing = next((p for p in own if p not in flat), None)
            extra = next((p for p in flat if p not in set(own)), None)
            if missing is not None:
                detail = f"lacks the path {missing!r}"
            elif extra is not None:
                detail = f"has the extra path {extra!r}"
            else:
                detail = "orders its paths differently"
            raise TyrError(f"zip_with: tree {k} {detail}; trees must have the same structure")
    return map_with_path(lambda p, x: fn(x, *(flat[p] for flat in rest)), tree)


def fold(fn: Callable[[Any, Any], Any], tree: Tree, init: Any) -> Any:
    """fn(...fn(fn(init, x0), x1)..., xn) over the leaves in tree order (like functools.reduce)."""
    acc = init
    for _, x in iter_leaves(tree):
        acc = fn(acc, x)
    return acc


def from_module(module: Any) -> Tree:
    """The parameter tree of an `nn.Module` (e.g. a `TyrModule`), keyed by parameter path."""
    return unflatten(dict(module.named_parameters()))
