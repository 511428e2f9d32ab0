"""Reading one safetensors file: the header validated (`header.py`), the data memory-mapped.

`SafeTensorsFile` maps the data of a file whose header `read_header` has validated and hands
out tensors without copying where the dtype and the alignment allow (`torch.frombuffer` on a
copy-on-write `mmap`). The header's names are re-exported here.
"""
from __future__ import annotations

import mmap
import os
import sys
from typing import Any, Iterator

from pytyr.errors import SafeTensorsError

from .header import ENTRY_KEYS as ENTRY_KEYS
from .header import MAX_HEADER as MAX_HEADER
from .header import MAX_NUMEL as MAX_NUMEL
from .header import MAX_RANK as MAX_RANK
from .header import RULES as RULES
from .header import DuplicateKey as DuplicateKey
from .header import Header as Header
from .header import TensorInfo as TensorInfo
from .header import clear_header_cache as clear_header_cache
from .header import no_duplicate_pairs as no_duplicate_pairs
from .header import parse_bytes as parse_bytes
from .header import read_header as read_header


class SafeTensorsFile:
    """One validated file; tensors come from a memory map opened on first use.

    The map is copy-on-write (`ACCESS_COPY`): tensors are writable views that never write
    back to the file. A tensor keeps the map alive after `close()`.
    """

    def __init__(self, path: str | os.PathLike[str], header: Header | None = None):
        self.header = header or read_header(path)
        self.path = self.header.path
        self._map: mmap.mmap | None = None
        self._store: Any = None

    @property
    def metadata(self) -> dict[str, str]:
        return self.header.metadata

    def names(self) -> list[str]:
        return list(self.header.tensors)

    def info(self, name: str) -> TensorInfo:
        try:
            return self.header.tensors[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor named {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.header.tensors

    def __len__(self) -> int:
        return len(self.header.tensors)

    def __iter__(self) -> Iterator[str]:
        return iter(self.header.tensors)

    def __enter__(self) -> SafeTensorsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Forget the map; tensors already handed out keep it alive until they go."""
        self._map = self._store = None

    def _storage(self) -> Any:
        """One torch storage over the whole map (zero-copy); tensors are views into it."""
        if self._store is None:
            import torch

            self._store = torch.frombuffer(self._buffer(), dtype=torch.uint8).untyped_storage()
        return self._store

    def _buffer(self) -> mmap.mmap:
        if self._map is None:
            if sys.byteorder != "little":  # the format is little-endian; views would be wrong
                raise SafeTensorsError(self.path, "unreadable",
                                       "big-endian hosts are not supported")
            try:
                with open(self.path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size != self.header.file_size:
                        raise SafeTensorsError(
                            self.path, "file-changed",
                            f"the file has {size:,} bytes now, {self.header.file_size:,} when its "
                            f"header was checked")
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
            except OSError as e:
                raise SafeTensorsError(self.path, "unreadable", f"cannot map the file: {e}")
        return self._map

    def tensor(self, name: str, *, device: Any = None, dtype: Any = None) -> Any:
        """The tensor `name` as a torch tensor, zero-copy on CPU when aligned."""
        import torch

        info = self.info(name)
        tdt = info.dtype.torch
        if tdt is None:
            raise SafeTensorsError(self.path, "no-torch-dtype",
                                   f"tensor {name!r} is {info.dtype}, which torch cannot hold")
        numel = info.numel
        if numel == 0:
            t = torch.empty(info.shape, dtype=tdt)
        else:
            store, off = self._storage(), self.header.data_start + info.begin
            if off % info.dtype.itemsize == 0:
                # a view into the one storage over the map (measured faster to read through
                # than a torch.frombuffer export per tensor)
                t = torch.empty(0, dtype=tdt).set_(store, off // info.dtype.itemsize, info.shape)
            else:  # unaligned: one copy into fresh (aligned) memory
                raw = torch.empty(0, dtype=torch.uint8).set_(store, off, (info.nbytes,))
                t = raw.clone().view(tdt).view(info.shape)
        if device is not None or dtype is not None:
            t = t.to(device=device, dtype=dtype)
        return t

    def numpy(self, name: str) -> Any:
        """The tensor `name` as a numpy array over the map (bf16 / float8 as raw uints)."""
        import numpy as np

        info = self.info(name)
        npdt = info.dtype.numpy
        if npdt is None:
            raise SafeTensorsError(self.path, "no-torch-dtype",
                                   f"tensor {name!r} is {info.dtype}, which numpy cannot hold")
        if info.numel == 0:
            return np.empty(info.shape, dtype=npdt)
        return np.frombuffer(self._buffer(), dtype=npdt, count=info.numel,
                             offset=self.header.data_start + info.begin).reshape(info.shape)

    def load(self, names: list[str] | None = None, *, device: Any = None,
             dtype: Any = None) -> dict[str, Any]:
        """The named tensors (default: all, in header order) as a dict of torch tensors."""
        names = self.names() if names is None else names
        return {n: self.tensor(n, device=device, dtype=dtype) for n in names}


def load_file(path: str | os.PathLike[str], *, device: Any = None,
              dtype: Any = None) -> dict[str, Any]:
    """Every tensor of the file at `path`, validated first; zero-copy views on CPU."""
    return SafeTensorsFile(path).load(device=device, dtype=dtype)
