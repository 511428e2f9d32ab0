"""Op typing rules read from `Tyr/*.lean`: what the IR validator re-derives node shapes with.

Each query unifies the op's declared signature with the node's input types in a fresh
metavariable context (queries may run concurrently on one checked program); results are
remembered per (op, input types, attributes, implicit arguments), since a model repeats the
same node in every layer.
"""
from __future__ import annotations

import math
import threading
from typing import Any

from ..errors import Pos, TyrError
from ..ir.graph import TensorType
from .defeq import Normalizer, unify
from .evaluate import brief, closed_tensor_type
from .failure import Fail
from .numerals import float_of_nat
from .obligations import decide
from .terms import (
    FLOAT,
    NAT,
    App,
    Arr,
    Eq,
    FLit,
    Lit,
    Meta,
    MetaCtx,
    Rel,
    TensorV,
    Term,
    instantiate,
    is_closed,
    occurs,
    show,
    subst,
)

_GRAPH = Pos("<graph>", 0, 0)
# (id of the op's DefInfo, inputs, attrs, implicit) → (that DefInfo, result). Shared by every
# program of the process: the library's ops are the same checked declarations in each.
_MEMO: dict[tuple, tuple[Any, TensorType]] = {}
_MEMO_LOCK = threading.Lock()
_MEMO_MAX = 1 << 16


class LeanSignatures:
    """The typing rule of every op of a checked program (the Tyr library by default)."""

    def __init__(self, prog: Any = None):
        from .program import library
        self.prog = prog or library()
        self.table = self.prog.ops()

    def __contains__(self, op: str) -> bool:
        return op in self.table

    def infer(self, op: str, inputs: list[TensorType], attrs: dict[str, Any],
              implicit: dict[str, Any] | None = None) -> TensorType:
        info = self.table.get(op)
        try:
            key = (id(info), tuple(inputs), _frozen(attrs), _frozen(implicit or {}))
            hash(key)
        except TypeError:
            return self._infer(op, inputs, attrs, implicit)
        with _MEMO_LOCK:
            hit = _MEMO.get(key)
        if hit is not None and hit[0] is info:
            return hit[1]
        result = self._infer(op, inputs, attrs, implicit)
        with _MEMO_LOCK:
            if len(_MEMO) >= _MEMO_MAX:
                _MEMO.clear()
            _MEMO[key] = (info, result)
        return result

    def _infer(self, op: str, inputs: list[TensorType], attrs: dict[str, Any],
               implicit: dict[str, Any] | None) -> TensorType:
        info = self.table[op]
        assert info.op is not None
        if len(inputs) != len(info.op.tensors):
            raise TyrError(f"'{op}' takes {len(info.op.tensors)} tensor input"
                           f"{'s' if len(info.op.tensors) != 1 else ''}, got {len(inputs)}")
        want_attrs = {a for a, _ in info.op.attrs}
        extra = sorted(set(attrs) - want_attrs)
        if extra:
            raise TyrError(f"'{op}' has no attribute {', '.join(map(repr, extra))}")
        imps = {p.name for p in info.params if p.kind == "implicit"}
        extra = sorted(set(implicit or {}) - imps)
        if extra:
            raise TyrError(f"'{op}' has no implicit argument {', '.join(map(repr, extra))}")
        mctx = MetaCtx()
        norm = Normalizer(mctx, self.prog.env.unfold)
        m: dict[int, Term] = {}
        it = iter(inputs)
        try:
            for p in info.params:
                pty = subst(p.type, m)
                if p.kind == "implicit":
                    given = (implicit or {}).get(p.name)
                    m[p.uid] = (mctx.fresh(p.name) if given is None
                                else _attr_term(op, p.name, given, norm(pty)))
                elif p.name in info.op.tensors:
                    t = next(it)
                    gty = _graph_type(t)
                    if not unify(gty, pty, norm):
                        raise TyrError(f"input '{p.name}' of '{op}' has type {t} but "
                                       f"{show(norm(instantiate(pty, mctx)))} is expected")
                    m[p.uid] = TensorV(p.name)
                elif p.name in want_attrs:
                    if p.name not in attrs:
                        raise TyrError(f"'{op}' needs the attribute '{p.name}'")
                    m[p.uid] = _attr_term(op, p.name, attrs[p.name], norm(pty))
                elif p.tactic is not None or isinstance(norm(pty), (Eq, Rel)):
                    prop = instantiate(pty, mctx)
                    open_ = sorted({t.name for t in _metas(norm(prop))})
                    if open_:  # nothing in the node gives them: a graph made by older code
                        raise TyrError(f"'{op}' needs the implicit argument"
                                       f"{'s' if len(open_) > 1 else ''} "
                                       f"{', '.join(map(repr, open_))} in the node's `implicit` "
                                       f"to decide its hypothesis '{p.name}' : {show(norm(prop))}")
                    decide(norm, op, p, prop, _GRAPH)
            res = norm(instantiate(subst(info.result, m), mctx))
            if not is_closed(res):
                raise TyrError(f"'{op}': the result type {show(res)} is not determined by the "
                               f"inputs")
            return closed_tensor_type(res, _GRAPH, f"'{op}'")
        except Fail as err:
            raise TyrError(err.msg) from None


def _metas(t: Term) -> list[Meta]:
    found: list[Meta] = []

    def visit(x: Term) -> bool:
        if isinstance(x, Meta):
            found.append(x)
        return False  # keep looking

    occurs(t, visit)
    return found


def _graph_type(t: TensorType) -> Term:
    """A graph value's type as a Lean term: `T #[…]`, or `IT #[…] n` (an i64 value's bound)."""
    dims = Arr(tuple(Lit(d) for d in t.shape))
    if t.dtype == "f32":
        return App("torch.T", (dims,))
    if t.bound is None:
        raise TyrError(f"an i64 value of type {t} has no bound; its type IT #[…] n needs one")
    return App("torch.IT", (dims, Lit(t.bound)))


def _frozen(d: dict[str, Any]) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items()))


def _attr_term(op: str, name: str, v: Any, ty: Term) -> Term:
    if ty == NAT and isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return Lit(v)
    x = float_of_nat(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else v
    if ty == FLOAT and isinstance(x, float) and not isinstance(v, bool) and math.isfinite(x):
        return FLit(x)
    if isinstance(ty, App) and ty.head == "Array" and isinstance(v, list) and all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        return Arr(tuple(Lit(x) for x in v))
    raise TyrError(f"attribute '{name}' of '{op}' must be a {show(ty)}, got {brief(v)}")
