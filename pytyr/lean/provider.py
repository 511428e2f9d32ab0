"""`safetensors_type_provider "path" as Name`: Lean types from a checkpoint's header.

The checker declares what `Tyr/Meta/SafeTensors.lean` generates in Lean, with the same names:
`Name.Schema` for the root, `Name.a.b.Schema` for the subtree at the named path `a.b` (a
structure's field `f` is itself the declaration `S.f` in Lean, so types cannot live under
`Name.Schema`); children numbered `0 … n-1` whose subtrees agree make lists, whose elements
share one type, and other numbered children are fields (`«0»`, `«2»`); tensor fields are
`T #[…]` (float dtypes) or `IT #[…] k` (integer and bool dtypes, `k` from `INT_BOUNDS`), list
fields `Vector τ n`, and the constant `Name : Name.Schema`. Only the header is read (or a
`.schema.json` snapshot), so a model can be checked against a checkpoint's shapes without its
weights.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ..errors import Pos, TyrError
from .env import DefInfo, FieldInfo, StructInfo
from .terms import App, Arr, Lit, Term

FLOAT_DTYPES = ("F64", "F32", "F16", "BF16", "F4")
# The bound of an integer tensor's `IT` type: the header says nothing tighter than its dtype,
# so every non-negative value the dtype holds is below it. Such tensors are never graph values.
INT_BOUNDS = {"BOOL": 2, "U8": 2**8, "I8": 2**7, "U16": 2**16, "I16": 2**15, "U32": 2**32,
              "I32": 2**31, "U64": 2**64, "I64": 2**63}
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


def _seg_cmp(a: str, b: str) -> int:
    """`segLt` of Tyr/Meta/SafeTensors.lean: two indices of different values by value,
    otherwise by string (code points)."""
    if _is_index(a) and _is_index(b) and int(a) != int(b):
        return -1 if int(a) < int(b) else 1
    return (a > b) - (a < b)


def _name_cmp(x: str, y: str) -> int:
    for a, b in zip(x.split("."), y.split(".")):
        c = _seg_cmp(a, b)
        if c:
            return c
    return len(x.split(".")) - len(y.split("."))


_key = functools.cmp_to_key(_name_cmp)


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


def _is_list(node: dict[str, Any]) -> bool:
    """Children numbered exactly `0 … n-1` (canonical numerals) whose subtrees have the same
    names, dtypes and shapes make a list; any other children, numbered ones included, are the
    fields of a structure (`img_mlp.0`, `img_mlp.2`: an `nn.Sequential`'s layers around a
    parameter-free one, the Lean fields `«0»` and `«2»`)."""
    keys = list(node)
    if not keys or not all(_is_index(k) and k == str(int(k)) for k in keys):
        return False
    if sorted(int(k) for k in keys) != list(range(len(keys))):
        return False
    first = _signature(node["0"])
    return all(_signature(node[k]) == first for k in keys)


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
        dims = Arr(tuple(Lit(d) for d in shape))
        if dtype in FLOAT_DTYPES or dtype.startswith(("F8", "F6")):
            return App("torch.T", (dims,))
        if dtype in INT_BOUNDS:
            return App("torch.IT", (dims, Lit(INT_BOUNDS[dtype])))
        raise ProviderError(f"tensor '{where}' has dtype {dtype}, which has no Tyr tensor type")

    def field_type(node: Any, named: str, where: str) -> Term:
        """The type of the subtree `node` at the tensor path `where`, whose structure (if it is
        one) is named after `named`, the path without list indices."""
        if not isinstance(node, dict):
            return leaf_type(node, where)
        if _is_list(node):
            elem = field_type(node["0"], named, f"{where}.0")
            return App("Vector", (elem, Lit(len(node))))
        typename = f"{name}.{named}.Schema"
        struct(node, typename, named, where)
        return App(typename)

    def struct(node: dict[str, Any], typename: str, named: str, where: str) -> None:
        fields = []
        for key, child in node.items():
            path = f"{where}.{key}" if where else key
            if key in RESERVED_FIELDS:
                raise ProviderError(f"'{path}': a field cannot be named '{key}' in Lean")
            if key == "Schema" and isinstance(child, dict):
                raise ProviderError(f"'{path}': a subtree cannot be named 'Schema'")
            ftype = field_type(child, f"{named}.{key}" if named else key, path)
            fields.append(FieldInfo(key, fresh(), ftype, pos))
        decls[typename] = StructInfo(typename, (), fields, ["TensorStruct"], pos)

    tree = _trie(specs)
    if _is_list(tree):
        raise ProviderError(f"{path}: the top level of the checkpoint is a list; name it")
    struct(tree, root, "", "")
    decls[name] = DefInfo(name, pos, "def", (), App(root), native=True, tensor_level=True,
                          doc=f"the tensors of {path}", checkpoint=str(path.resolve()))
    return decls
