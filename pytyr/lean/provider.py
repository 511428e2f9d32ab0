"""`safetensors_type_provider "path" as Name`: Lean types from a checkpoint's header.

The checker declares what `Tyr/Meta/SafeTensors.lean` generates in Lean, with the same names:
`Name.Schema` for the root, `Name.a.b.Schema` for the subtree at the named path `a.b` (a
structure's field `f` is itself the declaration `S.f` in Lean, so types cannot live under
`Name.Schema`); numeric segments make lists, whose elements share one type; tensor fields are
`T #[…]` (float dtypes) or `IT #[…]` (integer and bool dtypes), list fields `Vector τ n`, and
the constant `Name : Name.Schema`. Only the header is read (or a `.schema.json` snapshot), so a
model can be checked against a checkpoint's shapes without its weights.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import Pos, TyrError
from .env import DefInfo, FieldInfo, StructInfo
from .terms import App, Arr, Lit, Term

FLOAT_DTYPES = ("F64", "F32", "F16", "BF16", "F4")
INT_DTYPES = ("BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64")
# Declarations Lean makes for every structure: a field of one of these names would clash.
RESERVED_FIELDS = {"mk", "rec", "recOn", "casesOn", "noConfusion", "noConfusionType", "below",
                   "brecOn", "binductionOn", "ibelow", "ctorIdx", "toCtorIdx", "ctorElim",
                   "ctorElimType"}


def _is_index(seg: str) -> bool:
    return seg.isascii() and seg.isdigit()


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
    return tuple((0, int(s), "") if _is_index(s) else (1, 0, s) for s in name.split("."))


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
        return tuple((k if not _is_index(k) else "#", _signature(v)) for k, v in node.items())
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
        if dtype in FLOAT_DTYPES or dtype.startswith(("F8", "F6")):
            fam = "torch.T"
        elif dtype in INT_DTYPES:
            fam = "torch.IT"
        else:
            raise ProviderError(f"tensor '{where}' has dtype {dtype}, which has no Tyr tensor type")
        return App(fam, (Arr(tuple(Lit(d) for d in shape)),))

    def field_type(node: Any, typename: str, where: str) -> Term:
        if not isinstance(node, dict):
            return leaf_type(node, where)
        keys = list(node)
        numeric = [k for k in keys if _is_index(k)]
        if numeric and len(numeric) != len(keys):
            raise ProviderError(f"'{where}' mixes numbered and named children "
                                f"({', '.join(keys[:4])}…)")
        if numeric:
            idx = sorted(int(k) for k in keys)
            if idx != list(range(len(idx))) or any(k != str(int(k)) for k in keys):
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
            path = f"{where}.{key}" if where else key
            if key in RESERVED_FIELDS:
                raise ProviderError(f"'{path}': a field cannot be named '{key}' in Lean")
            if key == "Schema" and isinstance(child, dict):
                raise ProviderError(f"'{path}': a subtree cannot be named 'Schema'")
            named = ".".join(s for s in path.split(".") if not _is_index(s))
            ftype = field_type(child, f"{name}.{named}.Schema", path)
            fields.append(FieldInfo(key, fresh(), ftype, pos))
        decls[typename] = StructInfo(typename, (), fields, ["TensorStruct"], pos)

    tree = _trie(specs)
    if any(_is_index(k) for k in tree):
        raise ProviderError(f"{path}: the top level of the checkpoint is a list; name it")
    struct(tree, root, "")
    decls[name] = DefInfo(name, pos, "def", (), App(root), native=True, tensor_level=True,
                          doc=f"the tensors of {path}", checkpoint=str(path.resolve()))
    return decls
