"""The element types of the safetensors format, with their bit sizes and torch equivalents.

The format names a tensor's element type with a string (`"F32"`, `"BF16"`, `"F8_E4M3"`);
`DType` is the closed set of those names. Sub-byte types (`F4`, `F6_*`) are packed: a tensor's
byte size is `numel × bits / 8` and must be a whole number of bytes. torch is imported lazily,
so that reading headers (`tyr safetensors inspect`) never loads it.
"""
from __future__ import annotations

import enum
import functools
from typing import Any

_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
}

# torch attribute names; a name missing from the installed torch means "no torch dtype".
# F4 is absent on purpose: torch's float4_e2m1fn_x2 packs two values per element, so a
# safetensors F4 shape is not a torch shape.
_TORCH = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8",
    "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn", "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "I16": "int16", "U16": "uint16", "F16": "float16", "BF16": "bfloat16",
    "I32": "int32", "U32": "uint32", "F32": "float32",
    "I64": "int64", "U64": "uint64", "F64": "float64", "C64": "complex64",
}

# numpy has no bfloat16 or float8: those are read as raw unsigned integers of the same width.
_NUMPY = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
    "F16": "float16", "I32": "int32", "U32": "uint32", "F32": "float32",
    "I64": "int64", "U64": "uint64", "F64": "float64", "C64": "complex64",
}


class DType(enum.Enum):
    """A safetensors element type; the value is the name written in headers.

    Declared in the format's own order (by size, then kind): writers lay tensors out in the
    reverse of this order, largest first, which keeps every tensor aligned to its item size.
    """

    BOOL = "BOOL"
    F4 = "F4"
    F6_E2M3 = "F6_E2M3"
    F6_E3M2 = "F6_E3M2"
    U8 = "U8"
    I8 = "I8"
    F8_E5M2 = "F8_E5M2"
    F8_E4M3 = "F8_E4M3"
    F8_E8M0 = "F8_E8M0"
    F8_E4M3FNUZ = "F8_E4M3FNUZ"
    F8_E5M2FNUZ = "F8_E5M2FNUZ"
    I16 = "I16"
    U16 = "U16"
    F16 = "F16"
    BF16 = "BF16"
    I32 = "I32"
    U32 = "U32"
    F32 = "F32"
    C64 = "C64"
    F64 = "F64"
    I64 = "I64"
    U64 = "U64"

    @property
    def bits(self) -> int:
        """Bits per element (4, 6, 8, 16, 32 or 64)."""
        return _BITS[self.value]

    @property
    def itemsize(self) -> int | None:
        """Bytes per element, or None for the packed sub-byte types."""
        return self.bits // 8 if self.bits % 8 == 0 else None

    def nbytes(self, numel: int) -> int | None:
        """Byte size of `numel` elements; None when that is not a whole number of bytes."""
        bits = numel * self.bits
        return bits // 8 if bits % 8 == 0 else None

    @property
    def torch(self) -> Any:
        """The torch dtype, or None where torch has no equivalent."""
        return _torch_dtype(self.value)

    @property
    def numpy(self) -> Any:
        """The numpy dtype (raw unsigned integers for bf16 / float8), None for sub-byte types."""
        import numpy as np

        name = _NUMPY.get(self.value)
        if name is None and self.itemsize is not None:
            name = f"uint{self.bits}"
        return np.dtype(name).newbyteorder("<") if name else None

    @classmethod
    def parse(cls, name: object) -> DType | None:
        """The DType written `name` in a header, or None if the format has no such type."""
        return _BY_NAME.get(name) if type(name) is str else None

    @classmethod
    def from_torch(cls, dtype: Any) -> DType | None:
        """The DType of a torch dtype, or None when the format cannot store it."""
        return _from_torch_table().get(dtype)

    @property
    def order(self) -> int:
        """Position in the format's declaration order (see the class docstring)."""
        return _ORDER[self]

    def __str__(self) -> str:
        return self.value


_BY_NAME = {d.value: d for d in DType}
_ORDER = {d: i for i, d in enumerate(DType)}


@functools.cache
def _torch_dtype(name: str) -> Any:  # cached: looked up once per tensor on every load
    import torch

    attr = _TORCH.get(name)
    return getattr(torch, attr, None) if attr else None


@functools.cache
def _from_torch_table() -> dict[Any, DType]:
    table = {}
    for d in DType:
        t = d.torch
        if t is not None:
            table[t] = d
    return table
