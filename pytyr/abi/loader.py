"""Load a compiled Tyr model library through the C ABI of `cc/tyr.h`, with cffi.

The header is the one description of the ABI: the cffi declarations are the text between its
`tyr:cdef:begin`/`tyr:cdef:end` markers, comments and preprocessor lines removed, and
`TYR_ABI_VERSION` is read from its `#define`. Nothing here retypes a signature.

The library is untrusted in everything but its calling convention: its version is checked
before any other call, every symbol is looked up before one is used, every buffer it returns
is freed exactly once (even when the bytes are garbage), and every graph goes through
`load_graph`. Problems become `AbiError`s naming the library; the process keeps running.
"""
from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from ..errors import AbiError, IRError
from ..ir.graph import Graph
from ..ir.validate import Signatures, load_graph

BEGIN, END = "/* tyr:cdef:begin */", "/* tyr:cdef:end */"
SYMBOLS = ("tyr_abi_version", "tyr_list_models", "tyr_model_graph", "tyr_last_error",
           "tyr_free", "tyr_live_buffers")
MAX_GRAPH_BYTES = 64 * 2**20  # the validator's own limit
MAX_LIST_BYTES = 2**20
MAX_ERROR_CHARS = 4096


def header_path() -> Path:
    """`tyr.h`: inside the wheel (`pytyr/_abi/`) or in the repository (`cc/`)."""
    here = Path(__file__).resolve().parent.parent
    for cand in (here / "_abi" / "tyr.h", here.parent / "cc" / "tyr.h"):
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"the ABI header tyr.h was not found (looked in {here / '_abi'} "
                            f"and {here.parent / 'cc'})")


def cdef_from_header(text: str) -> str:
    """The declarations between the cdef markers, without comments or preprocessor lines."""
    try:
        body = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    except ValueError:
        raise AbiError(f"{header_path()}: the cdef markers {BEGIN} and {END} are missing") from None
    body = re.sub(r"/\*.*?\*/", " ", body, flags=re.S)
    body = re.sub(r"//[^\n]*", " ", body)
    lines = [ln for ln in body.splitlines() if not ln.lstrip().startswith("#")]
    return "\n".join(ln.rstrip() for ln in lines if ln.strip()) + "\n"


def abi_version_from_header(text: str) -> int:
    m = re.search(r"^\s*#\s*define\s+TYR_ABI_VERSION\s+(\d+)\s*$", text, flags=re.M)
    if m is None:
        raise AbiError(f"{header_path()}: no '#define TYR_ABI_VERSION <n>' line")
    return int(m.group(1))


_state_lock = threading.Lock()
_ffi: Any = None
_version: int | None = None
_open: dict[str, ModelLibrary] = {}


def _ffi_and_version() -> tuple[Any, int]:
    """One cffi instance for the process, declared from the header on first use."""
    global _ffi, _version
    with _state_lock:
        if _ffi is None:
            import cffi

            text = header_path().read_text(encoding="utf-8")
            ffi = cffi.FFI()
            ffi.cdef(cdef_from_header(text))
            _ffi, _version = ffi, abi_version_from_header(text)
        assert _version is not None
        return _ffi, _version


def abi_version() -> int:
    """The ABI version this pytyr speaks (`TYR_ABI_VERSION` of its `tyr.h`)."""
    return _ffi_and_version()[1]


def open_library(path: str | Path) -> ModelLibrary:
    """Open (once per process) and check the model library at `path`; raise `AbiError`."""
    ffi, version = _ffi_and_version()
    p = Path(path)
    if not p.is_file():
        what = "is a directory, not a library" if p.is_dir() else "does not exist"
        raise AbiError(f"{p}: cannot load the model library: the file {what}")
    key = str(p.resolve())
    with _state_lock:
        if key not in _open:
            _open[key] = ModelLibrary._load(ffi, version, p, key)
        return _open[key]


class ModelLibrary:
    """A loaded, version-checked model library. Never unloaded: a library that embeds the
    Lean runtime cannot be torn down safely, so it stays for the life of the process."""

    def __init__(self, ffi: Any, lib: Any, path: Path, version: int):
        self._ffi, self._lib, self.path, self.abi_version = ffi, lib, path, version

    @classmethod
    def _load(cls, ffi: Any, version: int, path: Path, key: str) -> ModelLibrary:
        try:
            lib = ffi.dlopen(key)
        except OSError as err:
            raise AbiError(f"{path}: cannot load the model library: {err}") from None
        # The version first: of all the symbols, only tyr_abi_version has a signature that
        # is the same in every ABI version, so nothing else may be called before it.
        try:
            get_version = lib.tyr_abi_version
        except AttributeError:
            raise AbiError(f"{path}: not a Tyr model library: it does not export "
                           "tyr_abi_version") from None
        got = int(get_version())
        if got != version:
            raise AbiError(f"{path}: the library speaks Tyr ABI version {got}, but this pytyr "
                           f"speaks version {version}; rebuild the library against this "
                           f"pytyr's cc/tyr.h")
        missing = [s for s in SYMBOLS if not _has(lib, s)]
        if missing:
            raise AbiError(f"{path}: the library does not export {', '.join(missing)}, which "
                           f"ABI version {version} requires (cc/tyr.h)")
        return cls(ffi, lib, path, version)

    # ---- raw calls -------------------------------------------------------------------
    def live_buffers(self) -> int:
        """Buffers the library has handed out and not had back: 0 when nothing leaks."""
        return int(self._lib.tyr_live_buffers())

    def _last_error(self) -> str:
        ptr = self._lib.tyr_last_error()
        if ptr == self._ffi.NULL:
            return ""
        raw = self._ffi.string(ptr, MAX_ERROR_CHARS * 4)
        return raw.decode("utf-8", errors="replace")[:MAX_ERROR_CHARS].strip()

    def _call(self, what: str, limit: int, fn: Any, *args: Any) -> bytes:
        """Call a function that returns a buffer; copy it out and free it, whatever it holds."""
        out = self._ffi.new("uint8_t **")
        out_len = self._ffi.new("size_t *")
        status = int(fn(*args, out, out_len))
        buf, size = out[0], int(out_len[0])
        try:
            if status != 0:
                text = self._last_error() or "it gave no error text (tyr_last_error is empty)"
                raise AbiError(f"{self.path}: {what} failed: {text}")
            if buf == self._ffi.NULL:
                raise AbiError(f"{self.path}: {what} reported success but returned no buffer")
            if size > limit:
                raise AbiError(f"{self.path}: {what} returned {size} bytes, more than the "
                               f"{limit} this pytyr accepts")
            return bytes(self._ffi.buffer(buf, size))
        finally:
            if buf != self._ffi.NULL:  # tyr.h: nothing to free on failure; free it anyway
                self._lib.tyr_free(buf)

    # ---- the API ---------------------------------------------------------------------
    def models(self) -> list[str]:
        """The names of the models the library exports."""
        data = self._call("listing its models (tyr_list_models)", MAX_LIST_BYTES,
                          self._lib.tyr_list_models)
        try:
            names = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise AbiError(f"{self.path}: tyr_list_models returned bytes that are not JSON "
                           f"text ({err})") from None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise AbiError(f"{self.path}: tyr_list_models must return a JSON array of strings, "
                           f"got {_preview(data)}")
        return names

    def graph_bytes(self, model: str, config: dict[str, Any]) -> bytes:
        """The raw graph IR of `model` for `config`, not yet validated."""
        if not isinstance(config, dict):
            raise AbiError(f"{self.path}: the config of model '{model}' must be a JSON object, "
                           f"got {type(config).__name__}")
        # Canonical JSON (sorted keys, no spaces, ASCII): equal configs are equal bytes.
        if "\0" in model:
            raise AbiError(f"{self.path}: a model name cannot contain a NUL character: {model!r}")
        try:
            cfg = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as err:
            raise AbiError(f"{self.path}: the config of model '{model}' is not JSON: "
                           f"{err}") from None
        raw = cfg.encode("ascii")
        return self._call(f"model '{model}' (tyr_model_graph)", MAX_GRAPH_BYTES,
                          self._lib.tyr_model_graph, model.encode("utf-8"), raw, len(raw))

    def graph(self, model: str, config: dict[str, Any],
              signatures: Signatures | None = None) -> Graph:
        """The validated graph of `model` for `config`: what the harness may run."""
        data = self.graph_bytes(model, config)
        sigs = signatures if signatures is not None else default_signatures()
        try:
            return load_graph(data, sigs, source=f"{self.path}:{model}",
                              max_bytes=MAX_GRAPH_BYTES)
        except IRError as err:
            raise AbiError(f"{self.path}: model '{model}' returned a graph that fails "
                           f"validation: {err}") from err


def _has(lib: Any, name: str) -> bool:
    try:
        getattr(lib, name)
    except AttributeError:
        return False
    return True


def _preview(data: bytes, n: int = 80) -> str:
    text = data[:n].decode("utf-8", errors="replace")
    return repr(text) + ("..." if len(data) > n else "")


_sigs: Signatures | None = None


def default_signatures() -> Signatures:
    """The op signatures of the shipped Lean library, read once per process."""
    global _sigs
    if _sigs is None:
        from ..lean import LeanSignatures

        _sigs = LeanSignatures()
    return _sigs


def load_model_graph(path: str | Path, model: str, config: dict[str, Any],
                     signatures: Signatures | None = None) -> Graph:
    """Open the library at `path` and return the validated graph of `model` for `config`."""
    return open_library(path).graph(model, config, signatures)
