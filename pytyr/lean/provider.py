"""`safetensors_type_provider "path" as Name`: Lean types from a checkpoint's header.

The checker declares what `Tyr/Meta/SafeTensors.lean` generates in Lean, with the same names:
`Name.Schema` for the root, `Name.Schema.a.b` for the subtree at the named path `a.b`
(numeric segments make lists, whose elements share one type), tensor fields `T #[…]` (float
dtypes) or `IT #[…]` (integer and bool dtypes), list fields `Vector (Name.Schema.p) n`, and the
constant `Name : Name.Schema`. Only the header is read (or a `.schema.json` snapshot), so a
model can be checked against a checkpoint's shapes without its weights.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import Pos, TyrError
from .env import DefInfo, FieldInfo, StructInfo
from .terms import App, Arr, Lit, Term

FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")


class ProviderError(Exception):
    def __init__(self, msg: str):
        super().__init__(msg)
        self.msg = msg


def read_specs(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name → (dtype, shape) from a safetensors file, a sharded directory or a snapshot."""
    from ..safetensors.schema import read_schema
    from ..safetensors.sharded import open_checkpoint

    try:
        if path.name.endswith(".schema.json"):
            specs, _ = read_schema(path)
        else:
            with open_checkpoint(path) as ck:
                specs = dict(ck.tensors)
    except TyrError as err:
        raise ProviderError(str(err)) from None
    return {name: (str(getattr(s.dtype, "name", s.dtype)), tuple(s.shape))
            for name, s in specs.items()}


def _key(name: str) -> tuple:
    return tuple((0, int(s), "") if s.isdigit() else (1, 0, s) for s in name.split("."))


def _trie(specs: dict[str, tuple[str, tuple[int, ...]]]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for name in sorted(specs, key=_key):
        node = root
        parts = name.split(".")
        for i, seg in enumerate(parts):
            if not seg:
                raise ProviderError(f"tensor '{name}' has an empty name segment")
            last = i == len(parts) - 1
            if last:
                if seg in node:
                    raise ProviderError(f"tensor '{name}' is also a prefix of other tensors")
                node[seg] = specs[name]
            else:
                nxt = node.setdefault(seg, {})
                if not isinstance(nxt, dict):
                    raise ProviderError(f"tensor '{'.'.join(parts[:i + 1])}' is also a prefix of "
                                        f"'{name}'")
                node = nxt
    return root


def _signature(node: Any) -> Any:
    if isinstance(node, dict):
        return tuple((k if not k.isdigit() else "#", _signature(v)) for k, v in node.items())
    return node


def declare(name: str, path: Path, pos: Pos) -> dict[str, Any]:
    """The declarations (name → info) for `safetensors_type_provider "path" as name`."""
    specs = read_specs(path)
    if not specs:
        raise ProviderError(f"{path}: the checkpoint holds no tensors")
    decls: dict[str, Any] = {}
    root = f"{name}.Schema"
    uid = [-1000]

    def fresh() -> int:
        uid[0] -= 1
        return uid[0]

    def leaf_type(spec: tuple[str, tuple[int, ...]], where: str) -> Term:
        dtype, shape = spec
        fam = "torch.T" if dtype in FLOAT_DTYPES or dtype.startswith("F8") else "torch.IT"
        return App(fam, (Arr(tuple(Lit(d) for d in shape)),))

    def field_type(node: Any, typename: str, where: str) -> Term:
        if not isinstance(node, dict):
            return leaf_type(node, where)
        keys = list(node)
        numeric = [k for k in keys if k.isdigit()]
        if numeric and len(numeric) != len(keys):
            raise ProviderError(f"'{where}' mixes numbered and named children "
                                f"({', '.join(keys[:4])}…)")
        if numeric:
            idx = sorted(int(k) for k in keys)
            if idx != list(range(len(idx))):
                raise ProviderError(f"'{where}' is a list whose indices are not 0…{len(idx) - 1}: "
                                    f"{idx[:8]}")
            first = node["0"]
            for k in keys:
                if _signature(node[k]) != _signature(first):
                    raise ProviderError(f"'{where}.{k}' differs from '{where}.0'; list elements "
                                        f"must have the same tensors, dtypes and shapes")
            elem = field_type(first, typename, f"{where}.0")
            return App("Vector", (elem, Lit(len(idx))))
        struct(node, typename, where)
        return App(typename)

    def struct(node: dict[str, Any], typename: str, where: str) -> None:
        fields = []
        for key, child in node.items():
            ftype = field_type(child, f"{typename}.{key}", f"{where}.{key}" if where else key)
            fields.append(FieldInfo(key, fresh(), ftype, pos))
        decls[typename] = StructInfo(typename, (), fields, ["TensorStruct"], pos)

    struct(_trie(specs), root, "")
    decls[name] = DefInfo(name, pos, "def", (), App(root), native=True, tensor_level=True,
                          doc=f"the tensors of {path}")
    return decls
