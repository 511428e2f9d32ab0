"""`by decide` obligations, decided on closed propositions as Lean's `Decidable` instances
evaluate them: in applications (`application.py`), in op signatures (`signatures.py`) and on
a model's values (`instantiate.py`)."""
from __future__ import annotations

from ..errors import Pos
from .defeq import Normalizer
from .env import closed_dims
from .failure import Fail
from .failure import short as _short
from .reshapes import RULE, why_not
from .terms import App, Arr, Eq, Lit, Meta, Opaque, Param, Rel, Term, Var, occurs, show


def decide(norm: Normalizer, fname: str, p: Param, pty: Term, pos: Pos,
           fixed: str = "") -> None:
    """`by decide` on a closed proposition `a = b`, `a ≤ b`, `a < b`, `a ≠ b` (Nat), as Lean's
    `Decidable` instances evaluate it; anything else is an error naming the argument. `fixed`
    says which arguments made the proposition's variables (`; ?n := c.k comes from …`)."""
    prop = norm(pty)
    shown = show(prop)
    if not isinstance(prop, (Eq, Rel)):
        raise Fail(pos, f"`by decide` cannot prove {shown}")
    if occurs(prop, lambda x: isinstance(x, (Var, Meta, Opaque))):
        raise Fail(pos, f"`by decide` failed for argument '{p.name}' of '{_short(fname)}': "
                        f"the proposition {shown} mentions variables, and `decide` needs a "
                        f"closed proposition{fixed}; {_open_advice(prop, p)}")
    if isinstance(prop, Rel):
        a, b = prop.a, prop.b
        holds = isinstance(a, Lit) and isinstance(b, Lit) and (
            a.n <= b.n if prop.op == "≤" else a.n < b.n if prop.op == "<" else a.n != b.n)
    else:
        holds = prop.a == prop.b
    if not holds:  # what makes it false: `a ≤ b` itself, or the (in)equality of the sides
        if isinstance(prop, Rel) and prop.op != "≠":
            detail = shown
        elif (why := _why_false(norm, pty)) is not None:
            detail = why
        else:
            detail = f"{show(prop.a)} {'=' if isinstance(prop, Rel) else '≠'} {show(prop.b)}"
        raise Fail(pos, f"`by decide` failed for argument '{p.name}' of '{_short(fname)}': "
                        f"the proposition {show(pty)} is false ({detail})")


def _why_false(norm: Normalizer, pty: Term) -> str | None:
    """What makes `mergesOrSplits s t = true` false, in the words of the reshape rule."""
    if isinstance(pty, Eq) and isinstance(pty.a, App) and pty.a.head == RULE:
        dims = [closed_dims(norm(a)) for a in pty.a.args]
        if len(dims) == 2 and dims[0] is not None and dims[1] is not None:
            return why_not(dims[0], dims[1])
    return None


def _open_advice(prop: Term, p: Param) -> str:
    """What to do about an open proposition: shapes want numbers (or the structural ops, which
    need no proof); anything else can be assumed and given by name."""
    if occurs(prop, lambda x: isinstance(x, Arr)):
        return ("use closed shapes, or the structural ops of `Tyr.Shape`, which type each axis "
                "and need no proof")
    return (f"give the proof by name, `({p.name} := {p.name}')`, from a hypothesis "
            f"`({p.name}' : {show(prop)})` of the declaration (a model's hypotheses are decided "
            f"on its values)")
