"""Shared fixtures. `fake_signatures` stands in for the signatures the Lean checker reads
from `Tyr/*.lean`; it exists for tests only and implements the op table by hand."""
from __future__ import annotations

import math

import pytest

from pytyr.errors import TyrError
from pytyr.ir.graph import TensorType


def _need(cond: bool, message: str) -> None:
    if not cond:
        raise TyrError(message)


def _show(t: TensorType) -> str:
    return f"{t.dtype}{list(t.shape)}"


class FakeSignatures:
    """Typing rules of the op table, written out by hand. shape lists are [outermost, ...]."""

    ARITY = {
        "linear": 2, "linear_bias": 3, "matmul": 2, "bmm": 2, "add": 2, "sub": 2, "mul": 2,
        "scale": 1, "relu": 1, "gelu": 1, "tanh": 1, "softmax": 1, "sum": 1, "mean": 1,
        "reshape": 1, "transpose": 1, "transpose3": 1, "embedding": 2, "layer_norm": 3,
        "cross_entropy": 2,
    }
    ATTRS = {"scale": {"alpha": float}, "reshape": {"target": list}, "layer_norm": {"eps": float}}
    INT_INPUTS = {("embedding", 0), ("cross_entropy", 1)}

    def __contains__(self, op: str) -> bool:
        return op in self.ARITY

    def infer(self, op: str, inputs: list[TensorType], attrs: dict) -> TensorType:
        _need(op in self.ARITY, f"unknown op {op!r}")
        n = self.ARITY[op]
        _need(len(inputs) == n, f"{op} takes {n} inputs, got {len(inputs)}")
        for k, t in enumerate(inputs):
            want = "i64" if (op, k) in self.INT_INPUTS else "f32"
            _need(t.dtype == want, f"{op} input {k} must be {want}, got {_show(t)}")
        spec = self.ATTRS.get(op, {})
        _need(set(attrs) == set(spec), f"{op} takes attributes {sorted(spec)}, got {sorted(attrs)}")
        for key, kind in spec.items():
            ok = isinstance(attrs[key], (int, float)) if kind is float else isinstance(attrs[key], list)
            _need(ok and not isinstance(attrs[key], bool), f"{op}: attribute {key!r} must be a {kind.__name__}")
        s = [tuple(t.shape) for t in inputs]
        f32 = lambda *shape: TensorType(tuple(shape), "f32")  # noqa: E731

        if op in ("linear", "linear_bias"):
            _need(len(s[0]) == 2 and len(s[1]) == 2 and s[0][1] == s[1][1],
                  f"{op}: x {list(s[0])} and w {list(s[1])} don't fit [b, m], [n, m]")
            if op == "linear_bias":
                _need(s[2] == (s[1][0],), f"{op}: bias {list(s[2])} must be [{s[1][0]}]")
            return f32(s[0][0], s[1][0])
        if op == "matmul":
            _need(len(s[0]) == 2 and len(s[1]) == 2 and s[0][1] == s[1][0],
                  f"matmul: {list(s[0])} @ {list(s[1])} doesn't fit [a, b] @ [b, c]")
            return f32(s[0][0], s[1][1])
        if op == "bmm":
            _need(len(s[0]) == 3 and len(s[1]) == 3 and s[0][0] == s[1][0] and s[0][2] == s[1][1],
                  f"bmm: {list(s[0])}, {list(s[1])} don't fit [n, a, b], [n, b, c]")
            return f32(s[0][0], s[0][1], s[1][2])
        if op in ("add", "sub", "mul"):
            _need(s[0] == s[1], f"{op}: shapes {list(s[0])} and {list(s[1])} differ")
            return f32(*s[0])
        if op in ("scale", "relu", "gelu", "tanh", "softmax"):
            return f32(*s[0])
        if op in ("sum", "mean"):
            return f32()
        if op == "reshape":
            target = attrs["target"]
            _need(all(isinstance(d, int) and d >= 0 for d in target), "reshape: bad target")
            _need(math.prod(target) == math.prod(s[0]),
                  f"reshape: {list(s[0])} has a different number of elements from {target}")
            return f32(*target)
        if op == "transpose":
            _need(len(s[0]) == 2, f"transpose takes a matrix, got {list(s[0])}")
            return f32(s[0][1], s[0][0])
        if op == "transpose3":
            _need(len(s[0]) == 3, f"transpose3 takes a rank-3 tensor, got {list(s[0])}")
            return f32(s[0][0], s[0][2], s[0][1])
        if op == "embedding":
            _need(len(s[0]) == 1 and len(s[1]) == 2, "embedding: expected idx [b], table [v, d]")
            return f32(s[0][0], s[1][1])
        if op == "layer_norm":
            _need(len(s[0]) == 2 and s[1] == s[2] == (s[0][1],),
                  f"layer_norm: {list(s[0])}, {list(s[1])}, {list(s[2])} don't fit [b, n], [n], [n]")
            return f32(*s[0])
        assert op == "cross_entropy"
        _need(len(s[0]) == 2 and s[1] == (s[0][0],),
              f"cross_entropy: logits {list(s[0])} and target {list(s[1])} don't fit [b, c], [b]")
        return f32()


@pytest.fixture
def fake_signatures() -> FakeSignatures:
    return FakeSignatures()
