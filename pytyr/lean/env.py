"""What the checker knows about global names: structures, inductives, definitions.

`Env` is filled by the checker and only read after it: the instantiator and the op signatures
share a checked program's `Env` (and the unification of `defeq.py`) and nothing else, so several
instantiations may run at once.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import Pos
from .numerals import float_exp, float_log, float_of_nat, float_sqrt
from .reshapes import RULE, merges_or_splits
from .terms import (
    BOOL,
    FLOAT,
    NAT,
    TYPE,
    App,
    Arr,
    FLit,
    Lit,
    NatOp,
    Param,
    Pi,
    Prod,
    Term,
    Var,
    subst,
)


@dataclass
class FieldInfo:
    name: str
    uid: int  # the field as a variable in later field types
    type: Term
    pos: Pos
    default: Term | None = None  # `f : A := v`: `v`, elaborated (a parameter's initialiser)
    doc: str | None = None


@dataclass
class StructInfo:
    name: str
    params: tuple[Param, ...]
    fields: list[FieldInfo]
    deriving: list[str]
    pos: Pos


@dataclass
class CtorInfo:
    name: str
    inductive: str
    params: tuple[Param, ...]


@dataclass
class IndInfo:
    name: str
    params: tuple[Param, ...]
    ctors: dict[str, CtorInfo]
    pos: Pos
    deriving: list[str] = field(default_factory=list)


@dataclass
class OpInfo:
    """A typed op: a def whose body is `prim "name" [t.node, ...] [attrs]`."""

    prim: str
    tensors: list[str]  # explicit tensor binders, in order
    attrs: list[tuple[str, str]]  # (binder name, Attr constructor: nat | float | shape)


@dataclass
class InitInfo:
    """A parameter initialiser: a def whose body is `param (.kind arg...)`."""

    kind: str
    args: list[tuple[str, str]]  # (Init constructor argument, the def's binder passed to it)


@dataclass
class DefInfo:
    name: str
    pos: Pos
    kind: str  # def | abbrev | builtin
    params: tuple[Param, ...]
    result: Term
    attrs: list[str] = field(default_factory=list)
    native: bool = False
    op: OpInfo | None = None
    init: InitInfo | None = None
    value: Term | None = None  # body as a term when it is a value (Nat, Shape, config, ...)
    code: Term | None = None  # body as a core term when it computes tensors
    tensor_level: bool = False  # result mentions tensors: evaluated when instantiated
    doc: str | None = None
    checkpoint: str | None = None  # a type provider's constant: the file its tensors come from

    @property
    def type(self) -> Pi | Term:
        return Pi(self.params, self.result) if self.params else self.result


# Type formers of Lean's core library, with the sort of each parameter ("type" or "nat").
# `Vector α n` is core's length-indexed array: a stack of `n` blocks in a parameter tree.
BUILTIN_TYPES: dict[str, tuple[str, ...]] = {
    "Nat": (), "Float": (), "String": (), "Bool": (), "Array": ("type",), "List": ("type",),
    "Vector": ("type", "nat"),
}


def builtin_defs() -> dict[str, DefInfo]:
    """Functions the checker evaluates itself (Lean's core library, not Tyr's)."""
    pos = Pos("<builtin>", 0, 0)
    x = Param("x", -1, "explicit", NAT)
    y = Param("x", -2, "explicit", FLOAT)
    # Vector.foldl {α β : Type} {n : Nat} (f : β → α → β) (init : β) (xs : Vector α n) : β
    a, b, n = Var("α", -10), Var("β", -11), Var("n", -12)
    step = Pi((Param("acc", -14, "explicit", b), Param("x", -15, "explicit", a)), b)
    foldl = (Param("α", -10, "implicit", TYPE), Param("β", -11, "implicit", TYPE),
             Param("n", -12, "implicit", NAT), Param("f", -13, "explicit", step),
             Param("b", -16, "explicit", b),
             Param("xs", -17, "explicit", App("Vector", (a, n))))
    # Prod.fst {α β : Type} (p : α × β) : α, and Prod.snd: a fold's accumulator of pairs
    pa, pb = Var("α", -20), Var("β", -21)
    pair = (Param("α", -20, "implicit", TYPE), Param("β", -21, "implicit", TYPE),
            Param("p", -22, "explicit", Prod(pa, pb)))
    # Vector.extract {α : Type} {n : Nat} (xs : Vector α n) (start : Nat := 0)
    #   (stop : Nat := n) : Vector α (min stop n - start): a run of layers of a stack
    xa, xn, lo, hi = Var("α", -30), Var("n", -31), Var("start", -33), Var("stop", -34)
    extract = (Param("α", -30, "implicit", TYPE), Param("n", -31, "implicit", NAT),
               Param("xs", -32, "explicit", App("Vector", (xa, xn))),
               Param("start", -33, "explicit", NAT, default=Lit(0)),
               Param("stop", -34, "explicit", NAT, default=xn))
    sliced = App("Vector", (xa, NatOp("-", NatOp("min", hi, xn), lo)))
    # `Bool.true`, `Bool.false`, and `true`, `false` as `export Bool (false true)` names them
    bools = {f"Bool.{v}": DefInfo(f"Bool.{v}", pos, "builtin", (), BOOL) for v in ("true", "false")}
    bools.update({v: DefInfo(v, pos, "builtin", (), BOOL, value=App(f"Bool.{v}"))
                  for v in ("true", "false")})
    return bools | {
        "Vector.foldl": DefInfo("Vector.foldl", pos, "builtin", foldl, b),
        "Vector.extract": DefInfo("Vector.extract", pos, "builtin", extract, sliced),
        "Prod.fst": DefInfo("Prod.fst", pos, "builtin", pair, pa),
        "Prod.snd": DefInfo("Prod.snd", pos, "builtin", pair, pb),
        "Nat.toFloat": DefInfo("Nat.toFloat", pos, "builtin", (x,), FLOAT),
        "Float.sqrt": DefInfo("Float.sqrt", pos, "builtin", (y,), FLOAT),
        "Float.exp": DefInfo("Float.exp", pos, "builtin", (y,), FLOAT),
        "Float.log": DefInfo("Float.log", pos, "builtin", (y,), FLOAT),
    }


_FLOAT_FNS = {"Nat.toFloat": lambda x: x, "Float.sqrt": float_sqrt, "Float.exp": float_exp,
              "Float.log": float_log}
# `numel`, `mergesOrSplits`, `prim`, `primI` and `param` live in Tyr/Core.lean; the checker
# implements them natively.
NATIVE_DEFS = {"torch.numel", RULE, "torch.prim", "torch.primI", "torch.param"}
# Lean-only modules (metaprograms); the checker provides what they provide.
NATIVE_MODULE_PREFIX = "Tyr.Meta"
NATIVE_DERIVING = {"Repr", "BEq", "Inhabited", "Hashable", "DecidableEq", "TensorStruct"}
KNOWN_ATTRS = {"model"}
TENSOR_FAMILIES = {"torch.T": "f32", "torch.IT": "i64"}
# `T s`; `IT s n`, an index tensor whose values lie in `[0, n)` (Tyr/Core.lean).
TENSOR_ARITY = {"torch.T": 1, "torch.IT": 2}


def closed_dims(t: Term) -> list[int] | None:
    """The numbers of a shape whose every dimension is a literal (normalised), else None."""
    if isinstance(t, Arr) and all(isinstance(x, Lit) for x in t.items):
        return [x.n for x in t.items]  # type: ignore[attr-defined]
    return None


class Env:
    """The global declarations of a program, by full name."""

    def __init__(self) -> None:
        self.decls: dict[str, Any] = dict(builtin_defs())
        self.namespaces: set[str] = set()  # every proper prefix of a declared name
        self.prims: dict[str, str] = {}  # op name → the def that declares it
        self._uids = itertools.count(1)

    def fresh_uid(self) -> int:
        return next(self._uids)

    def reserve_uids(self, n: int) -> int:
        """Make every later uid at least `n` (the uids of declarations reused from another
        check stay unique); return the next one."""
        nxt = max(n, next(self._uids))
        self._uids = itertools.count(nxt)
        return nxt

    def __contains__(self, name: str) -> bool:
        return name in self.decls

    def get(self, name: str) -> Any:
        return self.decls.get(name)

    def declare(self, name: str, info: Any) -> None:
        self.decls[name] = info
        parts = name.split(".")
        self.namespaces.update(".".join(parts[:k]) for k in range(1, len(parts)))
        if isinstance(info, DefInfo) and info.op is not None:
            self.prims[info.op.prim] = name

    def unfold(self, t: App) -> Term | None:
        """Delta: a constant applied to all its arguments, when its body is a value."""
        info = self.decls.get(t.head)
        if not isinstance(info, DefInfo):
            return None
        if t.head == "torch.numel" and t.args and isinstance(t.args[0], Arr) \
                and all(isinstance(x, Lit) for x in t.args[0].items):
            return Lit(math.prod(x.n for x in t.args[0].items))
        if t.head == RULE:
            dims = [closed_dims(a) for a in t.args]
            if len(dims) == 2 and None not in dims:
                return App(f"Bool.{'true' if merges_or_splits(*dims) else 'false'}")
        if t.head in _FLOAT_FNS and t.args and isinstance(t.args[0], (Lit, FLit)):
            v = t.args[0]
            return FLit(_FLOAT_FNS[t.head](float_of_nat(v.n) if isinstance(v, Lit) else v.x))
        if info.value is not None and len(t.args) == len(info.params):
            return subst(info.value, {p.uid: a for p, a in zip(info.params, t.args)})
        return None

    def signature(self, info: Any) -> tuple[tuple[Param, ...], Term]:
        """Binders and result type of anything that can be applied."""
        if isinstance(info, DefInfo):
            return info.params, info.result
        if isinstance(info, (StructInfo, IndInfo)):
            return info.params, TYPE
        if isinstance(info, CtorInfo):
            ind = self.decls[info.inductive]
            return info.params, App(ind.name, tuple(Var(p.name, p.uid) for p in ind.params))
        if isinstance(info, str):  # builtin type former
            return tuple(Param(f"α{i}", -100 - i, "explicit", TYPE if k == "type" else NAT)
                         for i, k in enumerate(BUILTIN_TYPES[info])), TYPE
        raise AssertionError(info)

    def snapshot(self) -> tuple:
        """The declarations so far, to start another program from (they are never changed)."""
        n = next(self._uids)
        self._uids = itertools.count(n)
        return dict(self.decls), set(self.namespaces), dict(self.prims), n

    @classmethod
    def restore(cls, snap: tuple) -> "Env":
        env = cls()
        decls, namespaces, prims, n = snap
        env.decls, env.namespaces, env.prims = dict(decls), set(namespaces), dict(prims)
        env._uids = itertools.count(n)
        return env

    def ops(self) -> dict[str, DefInfo]:
        return {prim: self.decls[name] for prim, name in self.prims.items()}
