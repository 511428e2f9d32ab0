"""What the checker knows about global names: structures, inductives, definitions."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Pos
from . import syntax as S
from .terms import FLOAT, NAT, STRING, TYPE, App, Param, Pi, Prod, Term, Var


@dataclass
class FieldInfo:
    name: str
    uid: int  # the field as a variable in later field types
    type: Term
    pos: Pos
    default: S.Expr | None = None
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
    body: S.Expr | None = None
    attrs: list[str] = field(default_factory=list)
    native: bool = False
    op: OpInfo | None = None
    init: InitInfo | None = None
    value: Term | None = None  # body as a term when it is a value (Nat, Shape, config, ...)
    tensor_level: bool = False  # result mentions tensors: inlined when instantiated
    doc: str | None = None
    checkpoint: str | None = None  # a type provider's constant: the file its tensors come from

    @property
    def type(self) -> Pi | Term:
        return Pi(self.params, self.result) if self.params else self.result


@dataclass
class BuiltinType:
    name: str
    arity: int


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
    return {
        "Vector.foldl": DefInfo("Vector.foldl", pos, "builtin", foldl, b),
        "Prod.fst": DefInfo("Prod.fst", pos, "builtin", pair, pa),
        "Prod.snd": DefInfo("Prod.snd", pos, "builtin", pair, pb),
        "Nat.toFloat": DefInfo("Nat.toFloat", pos, "builtin", (x,), FLOAT),
        "Float.sqrt": DefInfo("Float.sqrt", pos, "builtin", (y,), FLOAT),
        "Float.exp": DefInfo("Float.exp", pos, "builtin", (y,), FLOAT),
        "Float.log": DefInfo("Float.log", pos, "builtin", (y,), FLOAT),
    }


# `numel`, `prim` and `param` live in Tyr/Core.lean; the checker implements them natively.
NATIVE_DEFS = {"torch.numel", "torch.prim", "torch.param"}
# Lean-only modules (metaprograms); the checker provides what they provide.
NATIVE_MODULE_PREFIX = "Tyr.Meta"
NATIVE_DERIVING = {"Repr", "BEq", "Inhabited", "Hashable", "DecidableEq", "TensorStruct"}
KNOWN_ATTRS = {"model"}
_ = (STRING, TYPE, App)
