"""Running a checked model: the core terms of `terms.py` evaluated with concrete values.

Values are closed terms: numbers, shapes, configs (`StructV`), graph values (`TensorV`),
closures. A `Call` of a typed op emits a graph node whose shape is the op's result type with
the arguments substituted (closed now); a tensor-level def runs its checked body; `Vector.foldl`
unrolls over a known vector. Nothing is type-checked again: every implicit argument was solved
when the caller was checked, and evaluation only substitutes values into those solutions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import Pos
from ..ir.graph import Input, Node, Output, Param, Stack, TensorType
from .defeq import Normalizer
from .env import TENSOR_ARITY, TENSOR_FAMILIES, DefInfo, Env, StructInfo
from .failure import Fail
from .numerals import nat_str
from .terms import (
    App,
    Arr,
    Block,
    Call,
    FLit,
    InitV,
    Lam,
    Lit,
    MetaCtx,
    Opaque,
    Pair,
    Proj,
    SLit,
    StructV,
    TensorV,
    Term,
    Var,
    map_children,
    show,
    subst,
)

INT64_MAX = 2**63 - 1  # the IR's dims and integer attributes are int64
DEFAULT_MAX_UNROLL = 4096  # elements of one `Vector` a model may unroll (layers, list items)


@dataclass(eq=False)
class Closure(Term):
    """A `fun` with the values of the variables it captured."""

    lam: Lam
    env: dict[int, Term]


def brief(v: Any) -> str:
    """A value for a message; a number of thousands of digits is not printed whole."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 200:
        return f"a {len(nat_str(v))}-digit number"
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


class Evaluator:
    """Evaluates core terms of one model instantiation; owns the graph being built."""

    def __init__(self, env: Env, max_unroll: int = DEFAULT_MAX_UNROLL):
        self.env, self.max_unroll = env, max_unroll
        self.norm = Normalizer(MetaCtx(), env.unfold)
        self.inputs: list[Input] = []
        self.params: list[Param] = []
        self.nodes: list[Node] = []
        self.checkpoints: dict[str, Term] = {}
        self.layouts: dict[Term, list] = {}  # parameter structure type → its fields
        self.stacks: list[Stack] = []  # outermost folds over vectors of parameter structures
        self._folding = 0  # folds being unrolled (a fold inside a block is not a stack)
        # Told every scope's values as they are bound (a def's arguments, a block's `let`s, a
        # closure's arguments): the language server reads the run's numbers from them.
        self.seen: Callable[[dict[int, Term]], None] | None = None

    # ---- values ---------------------------------------------------------------------------
    def eval(self, t: Term, s: dict[int, Term]) -> Term:
        if isinstance(t, Var):
            return s.get(t.uid, t)
        if isinstance(t, (Lit, FLit, SLit, Opaque, TensorV)):
            return t
        if isinstance(t, Call):
            head = t.head if isinstance(t.head, str) else self.eval(t.head, s)
            return self.call(head, [self.eval(a, s) for a in t.args], t.pos)
        if isinstance(t, Block):
            s = dict(s)
            for _, uid, v in t.binds:
                s[uid] = self.eval(v, s)
            if self.seen is not None:
                self.seen(s)
            return self.eval(t.body, s)
        if isinstance(t, Lam):
            return Closure(t, s)
        if isinstance(t, Pair):
            return Pair(self.eval(t.a, s), self.eval(t.b, s))
        if isinstance(t, Proj):  # values are normal already: select without normalising them
            v = self.eval(t.e, s)
            if isinstance(v, StructV):
                got = v.get(t.field)
                if got is not None:
                    return got
            if isinstance(v, Arr) and t.field.startswith("[") \
                    and int(t.field[1:-1]) < len(v.items):
                return v.items[int(t.field[1:-1])]
            return self.norm(Proj(v, t.field))
        if isinstance(t, (Arr, InitV)):
            return map_children(t, lambda c: self.eval(c, s))
        return self.norm(map_children(t, lambda c: self.eval(c, s)))

    def call(self, head: str | Term, args: list[Term], pos: Pos) -> Term:
        if isinstance(head, Closure):
            return self.apply_closure(head, args)
        if not isinstance(head, str):
            raise Fail(pos, f"cannot apply {show(head)}: not a function value")
        info = self.env.get(head)
        assert isinstance(info, DefInfo), head
        if head == "Vector.extract":  # Lean's: the items from `start` to `stop`, clamped
            xs, lo, hi = args[2], args[3], args[4]
            if not (isinstance(xs, Arr) and isinstance(lo, Lit) and isinstance(hi, Lit)):
                raise Fail(pos, "`Vector.extract` needs a known vector and numbers here")
            return Arr(xs.items[lo.n:hi.n])
        if head == "Vector.foldl":
            f, acc, xs = args[3], args[4], args[5]
            if not (isinstance(f, Closure) and isinstance(xs, Arr)):
                raise Fail(pos, "`Vector.foldl` needs a `fun` and a known vector here")
            spans = []
            self._folding += 1
            try:
                for item in xs.items:
                    start = len(self.nodes)
                    acc = self.apply_closure(f, [acc, item])
                    if len(self.nodes) > start:
                        spans.append((self.nodes[start].name, self.nodes[-1].name))
            finally:
                self._folding -= 1
            path = _stack_path(xs)
            if not self._folding and path is not None and len(spans) == len(xs.items):
                elem = args[0]
                self.stacks.append(Stack(elem.head if isinstance(elem, App) else show(elem),
                                         path, tuple(spans)))
            return acc
        if info.op is not None:
            return self.emit(info, args, pos)
        if info.checkpoint is not None:
            return self.checkpoint_value(info, pos)
        if info.code is None:
            raise Fail(pos, f"'{head}' has no body to evaluate")
        return self.scope(info.code, {p.uid: v for p, v in zip(info.params, args)})

    def apply_closure(self, f: Closure, args: list[Term]) -> Term:
        s = dict(f.env)
        s.update((p.uid, a) for p, a in zip(f.lam.params, args))
        return self.scope(f.lam.body, s)

    def scope(self, body: Term, s: dict[int, Term]) -> Term:
        """`body` evaluated with its binders' values `s` (which `seen` is told)."""
        if self.seen is not None:
            self.seen(s)
        return self.eval(body, s)

    # ---- graph ----------------------------------------------------------------------------
    def emit(self, info: DefInfo, values: list[Term], pos: Pos) -> TensorV:
        assert info.op is not None
        byname = {p.name: v for p, v in zip(info.params, values)}
        refs = []
        for t in info.op.tensors:
            v = byname[t]
            if not isinstance(v, TensorV):
                what = v.tag if isinstance(v, Opaque) else show(v)
                raise Fail(pos, f"argument '{t}' of '{info.name}' is not a graph value: {what}")
            refs.append(v.ref)
        attrs = {a: to_python(byname[a], pos, f"attribute '{a}' of '{info.name}'")
                 for a, _ in info.op.attrs}
        res = self.norm(subst(info.result, {p.uid: v for p, v in zip(info.params, values)}))
        tt = closed_tensor_type(res, pos, f"the result of '{info.name}'")
        implicit = {p.name: to_python(byname[p.name], pos,
                                      f"implicit argument '{p.name}' of '{info.name}'")
                    for p in info.params if p.kind == "implicit"}
        name = f"%{len(self.nodes)}"
        self.nodes.append(Node(name, info.op.prim, refs, attrs, tt.shape, tt.dtype,
                               f"{pos.file}:{pos.line}:{pos.col}", implicit, tt.bound))
        return TensorV(name)

    def checkpoint_value(self, info: DefInfo, pos: Pos) -> Term:
        """A type provider's constant: its float tensors become parameters initialised from
        the checkpoint, at paths `Name.key`; the ones the model never uses are dropped."""
        if info.name not in self.checkpoints:
            self.checkpoints[info.name] = self._ckpt_tree(info, self.norm(info.result), [], pos)
        return self.checkpoints[info.name]

    def _ckpt_tree(self, info: DefInfo, ty: Term, key: list[str], pos: Pos) -> Term:
        assert isinstance(ty, App)
        if ty.head in TENSOR_FAMILIES:
            name = ".".join(key)
            if ty.head != "torch.T":
                return Opaque(f"integer tensor '{name}' of {info.name} (not a parameter)")
            tt = closed_tensor_type(ty, pos, f"'{info.name}.{name}'")
            path = f"{info.name}.{name}"
            self.params.append(Param(path, tt.shape, tt.dtype,
                                     {"kind": "checkpoint", "file": info.checkpoint, "key": name}))
            return TensorV(path)
        if ty.head == "Vector":
            n = self.norm(ty.args[1])
            assert isinstance(n, Lit)
            self.check_unroll(n.n, f"{info.name}.{'.'.join(key)}", pos)
            return Arr(tuple(self._ckpt_tree(info, self.norm(ty.args[0]), key + [str(i)], pos)
                             for i in range(n.n)))
        sinfo = self.env.get(ty.head)
        assert isinstance(sinfo, StructInfo)
        return StructV(sinfo.name, tuple((f.name, self._ckpt_tree(info, self.norm(f.type),
                                                                  key + [f.name], pos))
                                         for f in sinfo.fields))

    def check_unroll(self, n: int, what: str, pos: Pos) -> None:
        if n > self.max_unroll:
            raise Fail(pos, f"'{what}' is a vector of {brief(n)} elements, over the limit of "
                            f"{self.max_unroll} a model may unroll (set TYR_MAX_UNROLL or pass "
                            f"max_unroll to allow more)")

    def prune_checkpoint_params(self, outputs: list[Output]) -> None:
        """Drop the checkpoint's tensors the model does not use, but keep whole lists whose
        elements it uses (`C.a.1.w` keeps `C.a.0.*` too): list paths stay 0…n-1."""
        used = {r for n in self.nodes for r in n.inputs} | {o.ref for o in outputs}
        lists = set()
        for path in used:
            parts = path.split(".")
            lists |= {".".join(parts[:i]) for i, seg in enumerate(parts) if seg.isdigit()}

        def keep(p: Param) -> bool:
            if p.init.get("kind") != "checkpoint" or p.path in used:
                return True
            parts = p.path.split(".")
            return any(seg.isdigit() and ".".join(parts[:i]) in lists
                       for i, seg in enumerate(parts))

        self.params = [p for p in self.params if keep(p)]


def _stack_path(xs: Arr) -> str | None:
    """`blocks` for a vector whose items are parameter structures at `blocks.0`, `blocks.1`,
    ...; None for any other vector (of tensors, numbers, configs)."""
    def first_ref(v: Term) -> str | None:
        if isinstance(v, TensorV):
            return v.ref
        if isinstance(v, StructV):
            return next((r for _, f in v.fields if (r := first_ref(f)) is not None), None)
        return None

    if not xs.items or not all(isinstance(v, StructV) for v in xs.items):
        return None
    ref = first_ref(xs.items[0])
    if ref is None or ".0." not in ref:
        return None
    head = ref.split(".0.")[0]
    return head if all((r := first_ref(v)) is not None and r.startswith(f"{head}.{i}.")
                       for i, v in enumerate(xs.items)) else None


def to_python(v: Term, pos: Pos, what: str) -> Any:
    if isinstance(v, Lit):
        if v.n > INT64_MAX:
            raise Fail(pos, f"{what} is {brief(v.n)}, which does not fit the graph IR's 64-bit "
                            f"integers")
        return v.n
    if isinstance(v, SLit):
        return v.s
    if isinstance(v, FLit):
        if not math.isfinite(v.x):
            raise Fail(pos, f"{what} evaluates to {v.x}, which is not finite")
        return v.x
    if isinstance(v, Arr) and all(isinstance(x, Lit) for x in v.items):
        return [to_python(x, pos, what) for x in v.items]
    raise Fail(pos, f"{what} is not a closed value at instantiation: {show(v)}")


def closed_tensor_type(t: Term, pos: Pos, what: str) -> TensorType:
    """`T #[2, 3]` → f32 [2, 3]; `IT #[2, 3] 65` → i64 [2, 3] with bound 65."""
    if isinstance(t, App) and t.head in TENSOR_FAMILIES and len(t.args) == TENSOR_ARITY[t.head]:
        s, bound = t.args[0], t.args[1] if len(t.args) == 2 else None
        if isinstance(s, Arr) and all(isinstance(x, Lit) for x in s.items) \
                and (bound is None or isinstance(bound, Lit)):
            big = [x.n for x in s.items if x.n > INT64_MAX]  # type: ignore[attr-defined]
            if big:
                raise Fail(pos, f"{what} has a dimension of {brief(big[0])}, which does not "
                                f"fit the graph IR's 64-bit integers")
            n = bound.n if isinstance(bound, Lit) else None
            if n is not None and n > INT64_MAX + 1:
                raise Fail(pos, f"{what} has the bound {brief(n)}, over the graph IR's limit "
                                f"of 2**63 (every int64 id is below it)")
            dims = tuple(x.n for x in s.items)  # type: ignore[attr-defined]
            return TensorType(dims, TENSOR_FAMILIES[t.head], n)
    raise Fail(pos, f"{what} has type {show(t)}, which is not a closed tensor type")
