"""Validate a graph IR document (untrusted input) and build a `Graph` from it.

The document may come from the Lean checker, from the C ABI or from a file someone edited,
so nothing in it is trusted: `load_graph` checks its size before parsing, then its
structure (keys, JSON types, names), then its meaning (every reference defined earlier,
every node's declared type equal to the one its op's signature gives). It gathers every
problem it finds and raises them together as one `IRError`; no other exception escapes.

The typing rules of ops are not written here: they come from a `Signatures` object, which
in production is read from the Lean library (`Tyr/*.lean`) by the checker.
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Protocol, runtime_checkable

from pytyr.errors import IRError, TyrError
from pytyr.ir.graph import (
    DTYPES,
    FORMAT,
    INIT_KINDS,
    INIT_SIGNED_FIELDS,
    INIT_STRING_FIELDS,
    VERSION,
    Graph,
    Input,
    Node,
    Output,
    Param,
    TensorType,
)

MAX_RANK = 8
MAX_NUMEL = 2**40
MAX_INT = 2**62  # attribute integers must fit an int64 with room to spare
MAX_BOUND = 2**63  # an i64 input's bound: every non-negative int64 is below it
MAX_PROBLEMS = 200  # a hostile document could otherwise produce millions of lines

_IDENT = r"[^\W\d]\w*"
_INPUT_NAME = re.compile(_IDENT + r"[\w'!?]*")
_SEGMENT = rf"(?:{_IDENT}|0|[1-9][0-9]*)"
_PARAM_PATH = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})*")
_NODE_NAME = re.compile(r"%[0-9]+")

# Keys of each record: required ones, and optional ones with their defaults (those of the
# dataclasses in `graph.py`). Unknown keys are reported: a misspelt key is a bug upstream.
_TOP_REQUIRED = ("format", "version", "model", "inputs", "params", "nodes", "outputs")
_TOP_OPTIONAL = ("config", "source")
_INPUT_KEYS = (("name", "shape"), ("dtype", "bound"))
_PARAM_KEYS = (("path", "shape"), ("dtype", "init"))
_NODE_KEYS = (("name", "op", "inputs", "attrs", "shape"), ("dtype", "loc", "implicit", "bound"))
_OUTPUT_KEYS = (("name", "ref"), ())


@runtime_checkable
class Signatures(Protocol):
    """The typing rules of ops, as declared in the Lean library."""

    def __contains__(self, op: str) -> bool: ...

    def infer(self, op: str, inputs: list[TensorType], attrs: dict,
              implicit: dict | None = None) -> TensorType:
        """Output type of `op` applied to `inputs` with `attrs`; a `TyrError` with a readable
        message when they don't fit (arity, shapes, dtypes, attribute names or types)."""
        ...


class _Problems:
    """Collects problem sentences, capped so that a hostile document stays cheap."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.dropped = 0

    def add(self, message: str) -> None:
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(message)
        else:
            self.dropped += 1

    def raise_if_any(self, source: str) -> None:
        if self.items:
            more = [f"... and {self.dropped} more problems"] if self.dropped else []
            raise IRError(list(self.items) + more, source)


def _show(value: Any, limit: int = 60) -> str:
    """A short rendering of a JSON value for a message."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):  # not JSON, or an integer too long to print
        try:
            text = repr(value)
        except ValueError:
            text = f"a {type(value).__name__} too large to show"
    return _short(text, limit)


def _short(text: str, limit: int = 60) -> str:
    """A name as messages show it: hostile names can be megabytes long."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


_JSON_TYPES = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
               (list, "a list"), (dict, "an object"), (type(None), "null"))


def _json_type(value: Any) -> str:
    return next((name for t, name in _JSON_TYPES if isinstance(value, t)), type(value).__name__)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    """A JSON number that is a finite float (integers too large for a float are not)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _parse(doc: str | bytes | dict, max_bytes: int, problems: _Problems) -> Any:
    """The document as Python data, or None after reporting why it can't be read."""
    if isinstance(doc, dict):
        return doc
    if not isinstance(doc, (str, bytes, bytearray)):
        problems.add(f"the document is a {type(doc).__name__}; expected JSON text, bytes or a dict")
        return None
    # Check the size before parsing: json.loads of a huge document is the attack.
    size = len(doc)  # for text, characters <= bytes: a cheap first test before encoding
    if size <= max_bytes and isinstance(doc, str):
        size = len(doc.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        problems.add(f"the document is {size} bytes, over the limit of {max_bytes} bytes")
        return None

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                problems.add(f"duplicate key {_show(key)} in a JSON object")
            out[key] = value
        return out

    try:
        return json.loads(doc, parse_constant=no_constant, object_pairs_hook=pairs)
    except RecursionError:
        problems.add("the document nests too deeply to be a graph")
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, overlong integers
        problems.add(f"the document is not valid JSON: {e}")
    return None


class _Checker:
    """Checks one parsed document, gathering problems; `graph()` builds the result."""

    def __init__(self, signatures: Signatures, problems: _Problems):
        self.sigs = signatures
        self.add = problems.add
        # Every defined value by name: its type (None when its declaration is broken, so
        # that checks of its users don't cascade) and the label of its definition.
        self.env: dict[str, TensorType | None] = {}
        self.defined_by: dict[str, str] = {}

    # -- fields -----------------------------------------------------------------------

    def keys(self, obj: Any, where: str, spec: tuple[tuple[str, ...], tuple[str, ...]]) -> bool:
        """Is `obj` an object with the required keys? Also reports unknown keys."""
        required, optional = spec
        if not isinstance(obj, dict):
            self.add(f"{where}: expected an object, got {_json_type(obj)}")
            return False
        missing = [k for k in required if k not in obj]
        for key in missing:
            self.add(f"{where}: missing key {key!r}")
        for key in obj:
            if key not in required and key not in optional:
                self.add(f"{where}: unknown key {_show(key)}")
        return not missing

    def string(self, value: Any, where: str, field: str) -> str | None:
        if isinstance(value, str):
            return value
        self.add(f"{where}: {field} must be a string, got {_json_type(value)}")
        return None

    def shape(self, value: Any, where: str) -> tuple[int, ...] | None:
        if not isinstance(value, list):
            self.add(f"{where}: shape must be a list of integers, got {_json_type(value)}")
            return None
        if len(value) > MAX_RANK:
            self.add(f"{where}: shape has rank {len(value)}, over the limit of {MAX_RANK}")
            return None
        for i, d in enumerate(value):
            if not _is_int(d):
                self.add(f"{where}: shape dimension {i} is {_show(d)}; expected an integer")
                return None
            if d < 0:
                self.add(f"{where}: shape dimension {i} is negative ({_show(d)})")
                return None
        if (numel := math.prod(value)) > MAX_NUMEL:
            self.add(f"{where}: shape {_show(value)} has {_show(numel)} elements, over the "
                     f"limit of 2**40")
            return None
        return tuple(value)

    def dtype(self, obj: dict, where: str) -> str | None:
        if isinstance(value := obj.get("dtype", "f32"), str) and value in DTYPES:
            return value
        self.add(f"{where}: dtype is {_show(value)}; expected one of {', '.join(DTYPES)}")
        return None

    def bound(self, obj: dict, dtype: str | None, where: str) -> int | None:
        """An i64 input's bound (`IT s n`: every value in `[0, n)`); f32 inputs have none."""
        if dtype is None:
            return None
        value = obj.get("bound")
        if dtype != "i64":
            if "bound" in obj:
                self.add(f"{where}: only i64 inputs have a bound, this one is {dtype}")
            return None
        if "bound" not in obj:
            self.add(f"{where}: an i64 input needs its 'bound' (the n of its type IT s n: "
                     f"every value lies in [0, n))")
        elif not (_is_int(value) and 0 <= value <= MAX_BOUND):
            self.add(f"{where}: bound is {_show(value)}; expected an integer in 0..2**63")
        else:
            return value
        return None

    def init(self, value: Any, where: str) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.add(f"{where}: init must be an object, got {_json_type(value)}")
            return None
        kind = value.get("kind")
        if not isinstance(kind, str) or kind not in INIT_KINDS:
            self.add(f"{where}: init kind is {_show(kind)}; expected one of {', '.join(INIT_KINDS)}")
            return None
        out: dict[str, Any] = {"kind": kind}
        for key in value:
            if key != "kind" and key not in INIT_KINDS[kind]:
                self.add(f"{where}: init {kind!r} has unknown field {_show(key)}")
                out["bad"] = True
        for key in INIT_KINDS[kind]:
            x = value.get(key)
            if key in INIT_STRING_FIELDS:
                if key == "file" and isinstance(x, str) and not os.path.isabs(x):
                    self.add(f"{where}: init {kind!r} needs an absolute 'file' path, got {_show(x)}")
                    out["bad"] = True
                elif isinstance(x, str) and x and len(x) <= 4096:
                    out[key] = x
                else:
                    self.add(f"{where}: init {kind!r} needs {key!r} to be a non-empty string, "
                             f"got {_show(x)}")
                    out["bad"] = True
            elif _is_finite(x) and (x >= 0 or key in INIT_SIGNED_FIELDS):
                out[key] = float(x)
            else:
                sign = "" if key in INIT_SIGNED_FIELDS else " non-negative"
                self.add(f"{where}: init {kind!r} needs {key!r} to be a finite{sign} "
                         f"number, got {_show(x)}")
                out["bad"] = True
        if kind == "interval" and "bad" not in out and out["lo"] > out["hi"]:
            self.add(f"{where}: init 'interval' needs lo <= hi, got [{out['lo']}, {out['hi']}]")
            out["bad"] = True
        return None if "bad" in out else out

    def attrs(self, value: Any, where: str, field: str = "attrs") -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.add(f"{where}: {field} must be an object, got {_json_type(value)}")
            return None
        ok = True
        for key, x in value.items():
            if not _is_attr(x):
                what = "attribute" if field == "attrs" else "implicit argument"
                self.add(f"{where}: {what} {_show(key)} is {_show(x)}; expected an integer, "
                         f"a finite number or a list of integers")
                ok = False
        return dict(value) if ok else None

    def records(self, doc: dict, key: str) -> list[Any]:
        value = doc.get(key, [])
        if isinstance(value, list):
            return value
        self.add(f"{key!r} must be a list, got {_json_type(value)}")
        return []

    def define(self, name: str, where: str, t: TensorType | None) -> None:
        if name in self.defined_by:
            self.add(f"{where}: the name {_short(name)!r} is already used by {self.defined_by[name]}")
        else:
            self.defined_by[name] = where
            self.env[name] = t

    # -- records ----------------------------------------------------------------------

    def input(self, i: int, obj: Any) -> Input | None:
        name = obj.get("name") if isinstance(obj, dict) else None
        where = f"input {_short(name)!r}" if isinstance(name, str) else f"inputs[{i}]"
        if not self.keys(obj, where, _INPUT_KEYS):
            return None
        name = self.string(obj["name"], where, "name")
        shape, dtype = self.shape(obj["shape"], where), self.dtype(obj, where)
        bound = self.bound(obj, dtype, where)
        if name is not None and not _INPUT_NAME.fullmatch(name):
            self.add(f"{where}: the name is not an identifier")
            name = None
        ok = None not in (shape, dtype) and (bound is not None) == (dtype == "i64")
        if name is not None:
            self.define(name, where, TensorType(shape, dtype, bound) if ok else None)
        return Input(name, shape, dtype, bound)

    def param(self, i: int, obj: Any) -> Param | None:
        path = obj.get("path") if isinstance(obj, dict) else None
        where = f"parameter {_short(path)!r}" if isinstance(path, str) else f"params[{i}]"
        if not self.keys(obj, where, _PARAM_KEYS):
            return None
        path = self.string(obj["path"], where, "path")
        shape, dtype = self.shape(obj["shape"], where), self.dtype(obj, where)
        init = self.init(obj.get("init", {"kind": "normal", "std": 0.02}), where)
        if path is not None and not _PARAM_PATH.fullmatch(path):
            self.add(f"{where}: the path is not a dotted path of names and indices")
            path = None
        if dtype not in (None, "f32"):
            self.add(f"{where}: dtype is {dtype!r}, but parameters are trained and must be f32")
            dtype = None
        ok = None not in (shape, dtype)
        if path is not None:
            self.define(path, where, TensorType(shape, dtype) if ok else None)
        return Param(path, shape, dtype, init)

    def node(self, i: int, obj: Any, later: set[str]) -> Node | None:
        """Structural and type checks of nodes[i]; `later` holds every node's name, to tell
        a forward reference from a dangling one."""
        where = f"nodes[{i}]"
        if isinstance(obj, dict):
            where = _node_label(obj.get("name"), i, obj.get("op"), obj.get("loc"))
        if not self.keys(obj, where, _NODE_KEYS):
            return None
        name = self.string(obj["name"], where, "name")
        if name is not None and not _NODE_NAME.fullmatch(name):
            self.add(f"{where}: node names have the form %k, got {_show(name)}")
            name = None
        op = self.string(obj["op"], where, "op")
        if (loc := obj.get("loc")) is not None and not isinstance(loc, str):
            self.add(f"{where}: loc must be a string or null, got {_json_type(loc)}")
        shape, dtype = self.shape(obj["shape"], where), self.dtype(obj, where)
        attrs = self.attrs(obj["attrs"], where)
        implicit = self.attrs(obj.get("implicit", {}), where, "implicit")
        bound = obj.get("bound")  # an i64 result's (`primI`): compared with the signature's
        if bound is not None and not (_is_int(bound) and 0 <= bound <= MAX_BOUND):
            self.add(f"{where}: bound is {_show(bound)}; expected an integer in 0..2**63")
            shape = None

        refs = obj["inputs"]
        args: list[TensorType] | None = []
        if not isinstance(refs, list) or not all(isinstance(x, str) for x in refs):
            self.add(f"{where}: inputs must be a list of value names")
            refs, args = [], None
        for k, ref in enumerate(refs):
            t = self.env.get(ref)
            if t is None:
                args = None
            elif args is not None:
                args.append(t)
            if ref == name:
                self.add(f"{where}: input {k} refers to the node itself")
            elif ref in self.env:
                pass  # defined, possibly broken: its own problem is reported already
            elif ref in later:
                self.add(f"{where}: input {k} refers to {_short(ref)!r}, which is defined "
                         f"later (forward reference)")
            else:
                self.add(f"{where}: input {k} refers to {_short(ref)!r}, which is not "
                         f"defined (dangling reference)")

        if op is not None and op not in self.sigs:
            self.add(f"{where}: unknown op {_short(op)!r}")
            op = None
        ok = None not in (shape, dtype)
        if ok and None not in (op, args, attrs, implicit):
            self.check_type(where, op, args, attrs, TensorType(shape, dtype, bound), implicit)
        if name is not None:  # an i64 value without a bound has no type its users could check
            typed = ok and (dtype != "i64" or bound is not None)
            self.define(name, where, TensorType(shape, dtype, bound) if typed else None)
        return Node(name, op, list(refs), attrs, shape, dtype, loc, implicit or {}, bound)

    def check_type(self, where: str, op: str, args: list[TensorType], attrs: dict[str, Any],
                   declared: TensorType, implicit: dict[str, Any] | None = None) -> None:
        """Compare a node's declared type with the one its op's signature gives."""
        try:
            got = self.sigs.infer(op, list(args), dict(attrs), dict(implicit or {}))
        except TyrError as e:
            self.add(f"{where}: {_short(str(e), 500)}")
            return
        except Exception as e:  # a signature that chokes on odd input is still a problem here
            self.add(f"{where}: the signature of {op!r} failed on these inputs ({e!r})")
            return
        if not isinstance(got, TensorType):
            self.add(f"{where}: the signature of {op!r} gave {_show(got)}, not a tensor type")
            return
        if tuple(got.shape) != declared.shape:
            self.add(f"{where}: declared shape {list(declared.shape)} but the signature gives "
                     f"{list(got.shape)}")
        if got.dtype != declared.dtype:
            self.add(f"{where}: declared dtype {declared.dtype} but the signature gives {got.dtype}")
        elif got.bound != declared.bound:
            self.add(f"{where}: declared bound {declared.bound} but the signature gives {got.bound}")

    def output(self, i: int, obj: Any, seen: set[str]) -> Output | None:
        name = obj.get("name") if isinstance(obj, dict) else None
        where = f"output {_short(name)!r}" if isinstance(name, str) else f"outputs[{i}]"
        if not self.keys(obj, where, _OUTPUT_KEYS):
            return None
        name = self.string(obj["name"], where, "name")
        ref = self.string(obj["ref"], where, "ref")
        if name in seen:
            self.add(f"{where}: another output has the same name")
        seen.add(name)
        if ref is not None and ref not in self.defined_by:
            self.add(f"{where}: refers to {_short(ref)!r}, which is not an input, parameter or node")
        return Output(name, ref)

    # -- the document -----------------------------------------------------------------

    def graph(self, doc: Any) -> Graph | None:
        """The checked graph; None (with problems reported) when anything is wrong."""
        if not self.keys(doc, "the document", (_TOP_REQUIRED, _TOP_OPTIONAL)):
            if not isinstance(doc, dict):
                return None
        if "format" in doc and doc["format"] != FORMAT:
            self.add(f"format is {_show(doc['format'])}; expected {FORMAT!r}")
        version = doc.get("version", VERSION)
        if _is_int(version) and version == 1:
            self.add(f"version is 1; this harness reads version {VERSION}, in which every i64 "
                     f"input carries its bound (docs/ir.md): make the graph again from its Lean "
                     f"source (`tyr graph`), or rebuild the model library")
        elif not (_is_int(version) and version == VERSION):
            self.add(f"version is {_show(version)}; this harness reads version {VERSION}")
        model = self.string(doc.get("model", ""), "the document", "model")
        source = doc.get("source")
        if source is not None and not isinstance(source, str):
            self.add(f"source must be a string or null, got {_json_type(source)}")
        config = doc.get("config", {})
        if not isinstance(config, dict):
            self.add(f"config must be an object, got {_json_type(config)}")

        inputs = [self.input(i, o) for i, o in enumerate(self.records(doc, "inputs"))]
        params = [self.param(i, o) for i, o in enumerate(self.records(doc, "params"))]
        for message in _tree_problems([p.path for p in params if p and p.path]):
            self.add(message)
        raw = self.records(doc, "nodes")
        later = {o["name"] for o in raw if isinstance(o, dict) and isinstance(o.get("name"), str)}
        nodes = [self.node(i, o, later) for i, o in enumerate(raw)]
        seen: set[str | None] = set()
        outputs = [self.output(i, o, seen) for i, o in enumerate(self.records(doc, "outputs"))]
        if not outputs and isinstance(doc.get("outputs"), list):
            self.add("the graph has no outputs")
        parts = [*inputs, *params, *nodes, *outputs]
        if model is None or not isinstance(config, dict) or None in parts:
            return None
        return Graph(model, inputs, params, nodes, outputs, config=config, source=source)


def _is_attr(x: Any) -> bool:
    """An attribute value: an int64-sized integer, a finite float or a short list of ints."""
    if _is_int(x):
        return abs(x) <= MAX_INT
    if isinstance(x, float):
        return math.isfinite(x)
    return isinstance(x, list) and len(x) <= 64 and all(_is_int(e) and abs(e) <= MAX_INT for e in x)


def _node_label(name: Any, index: int, op: Any, loc: Any) -> str:
    """`node %3 (linear at MLP.lean:12:5)`: how messages name a node."""
    label = f"node {_short(name)}" if isinstance(name, str) else f"nodes[{index}]"
    detail = _short(op) if isinstance(op, str) else "?"
    if isinstance(loc, str):
        detail += f" at {_short(loc)}"
    return f"{label} ({detail})"


def _tree_problems(paths: list[str]) -> list[str]:
    """Parameter paths must form a tree: no leaf is also a subtree. Children that are the
    indices 0..n-1 are a list (a `Vector`); any others are a structure's fields, which may be
    numerals (Lean's `«2»`: Flux's `img_mlp.0`, `img_mlp.2`, an `nn.Sequential`'s layers)."""
    problems: list[str] = []
    leaves = set(paths)
    for path in paths:
        parts = path.split(".")
        for i in range(1, len(parts)):
            prefix = ".".join(parts[:i])
            if prefix in leaves:
                problems.append(
                    f"parameter {_short(path)!r}: its prefix {_short(prefix)!r} is itself a parameter"
                )
    return problems


def load_graph(
    doc: str | bytes | dict,
    signatures: Signatures,
    *,
    source: str = "<graph>",
    max_bytes: int = 64 * 2**20,
) -> Graph:
    """Parse and validate a graph IR document; raise `IRError` listing every problem.

    `doc` is JSON text or bytes (at most `max_bytes`) or an already parsed dict. `source`
    names the document in the error. Returns a `Graph` whose shapes are tuples and whose
    every node type agrees with `signatures`.
    """
    problems = _Problems()
    data = _parse(doc, max_bytes, problems)
    problems.raise_if_any(source)
    try:
        graph = _Checker(signatures, problems).graph(data)
    except Exception as e:  # a safety net: reported, never escaping as a KeyError
        problems.add(f"the validator failed on this document (a bug in pytyr): {e!r}")
        graph = None
    problems.raise_if_any(source)
    if graph is None:  # every path to None reports a problem; this is a safety net
        raise IRError(["the document could not be read as a graph"], source)
    return graph
