"""Surface syntax of the Tyr subset: what the parser produces and the elaborator reads."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Pos


@dataclass
class Expr:
    pos: Pos


@dataclass
class Ident(Expr):
    name: str  # possibly dotted: `torch.linear`, `c.hidden`, `p.w1.node`
    # the parts written as numerals, by index (`p.2.1`: 1 and 2), numbered fields; an escaped
    # part (`p.«1»`) is a name
    numbered: tuple[int, ...] = ()


@dataclass
class DotIdent(Expr):
    name: str  # `.f32`: a constructor of the expected type


@dataclass
class NatLit(Expr):
    value: int


@dataclass
class SciLit(Expr):
    text: str


@dataclass
class StrLit(Expr):
    value: str


@dataclass
class Hole(Expr):
    pass


@dataclass
class Arg:
    expr: Expr
    name: str | None = None  # `(b := 32)`
    pos: Pos | None = None  # where a named argument's `(` is


@dataclass
class App(Expr):
    fn: Expr
    args: list[Arg]


@dataclass
class Proj(Expr):
    expr: Expr
    field: str | int  # `(e).f`; an int is a numbered field, `(e).2`


@dataclass
class BinOp(Expr):
    op: str  # + - * / % = × →
    lhs: Expr
    rhs: Expr


@dataclass
class ArrayLit(Expr):
    items: list[Expr]


@dataclass
class ListLit(Expr):
    items: list[Expr]


@dataclass
class Tuple(Expr):
    items: list[Expr]


@dataclass
class AnonCtor(Expr):
    items: list[Expr]


@dataclass
class Ascribe(Expr):
    expr: Expr
    type: Expr


@dataclass
class Index(Expr):
    expr: Expr
    index: Expr  # `xs[i]`: no space before `[`


@dataclass
class Binder:
    name: str
    kind: str  # explicit | implicit | inst
    type: Expr | None
    pos: Pos
    default: Expr | None = None
    tactic: str | None = None  # `(h : P := by decide)`


@dataclass
class Let(Expr):
    name: str
    type: Expr | None
    value: Expr
    body: Expr


@dataclass
class Fun(Expr):
    binders: list[Binder]
    body: Expr


@dataclass
class Pi(Expr):
    binders: list[Binder]  # dependent arrow `(x : A) → B`
    body: Expr


@dataclass
class By(Expr):
    tactic: str


@dataclass
class Sort(Expr):
    name: str  # Type | Prop


# ---- commands ---------------------------------------------------------------------------


@dataclass
class Command:
    pos: Pos


@dataclass
class Import(Command):
    module: str


@dataclass
class Open(Command):
    names: list[str]


@dataclass
class Namespace(Command):
    name: str


@dataclass
class Section(Command):
    name: str | None


@dataclass
class End(Command):
    name: str | None


@dataclass
class Def(Command):
    name: str
    kind: str  # def | abbrev
    binders: list[Binder]
    type: Expr | None
    body: Expr
    attrs: list[str] = field(default_factory=list)
    doc: str | None = None


@dataclass
class Field:
    name: str
    type: Expr
    pos: Pos
    default: Expr | None = None
    doc: str | None = None


@dataclass
class Structure(Command):
    name: str
    binders: list[Binder]
    fields: list[Field]
    deriving: list[str]
    doc: str | None = None
    deriving_pos: list[Pos] = field(default_factory=list)  # of each class name


@dataclass
class Ctor:
    name: str
    binders: list[Binder]
    pos: Pos


@dataclass
class Inductive(Command):
    name: str
    binders: list[Binder]
    ctors: list[Ctor]
    deriving: list[str]
    doc: str | None = None
    deriving_pos: list[Pos] = field(default_factory=list)


@dataclass
class TypeProvider(Command):
    """`safetensors_type_provider "path" as Name`: types from a checkpoint's header."""

    path: str
    name: str


@dataclass
class Module:
    file: str
    imports: list[Import]
    commands: list[Command]
    starts: list[Pos] = field(default_factory=list)  # each command's first token (doc, `@[`)
