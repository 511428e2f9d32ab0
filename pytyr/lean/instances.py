"""Which type class instances exist, for `deriving` (as Lean's deriving handlers need them).

`deriving C` for a structure makes an instance whose code uses `C` on every field, so each
field type needs an instance (for `Vector α n`, `α × β`, `Array α`: one for `α` and `β`).
Known instances: Tyr's `TensorStruct` ones (`Tyr/Meta/TensorStruct.lean`), the derived ones of
`Tyr/*.lean` and of the file, and those of Lean's core library the subset is sure of; where
unsure, none (and the checker rejects, as the subset does when it does not know).
"""
from __future__ import annotations

from typing import Callable

from .env import Env, IndInfo, StructInfo
from .terms import App, Prod, Term, Var, show

ALL = frozenset({"Repr", "BEq", "Inhabited", "Hashable", "DecidableEq", "TensorStruct"})
# Instances of core types: class → sure to exist (for a type former, given its arguments').
_CORE: dict[str, frozenset[str]] = {
    "Nat": ALL, "String": ALL, "Bool": ALL,
    "Float": frozenset({"Repr", "BEq", "Inhabited", "TensorStruct"}),  # no `DecidableEq Float`
    "Array": ALL - {"TensorStruct"}, "List": ALL - {"TensorStruct"},
    "Vector": frozenset({"Repr", "BEq", "Inhabited", "DecidableEq", "TensorStruct"}),
    "torch.T": frozenset({"Inhabited", "TensorStruct"}),  # `deriving Inhabited` in Tyr/Core.lean
    "torch.IT": frozenset({"Inhabited", "TensorStruct"}),
}


def missing_instance(env: Env, whnf: Callable[[Term], Term], cls: str, ty: Term,
                     deriving: tuple[str, str]) -> str | None:
    """None when `cls ty` has an instance; else the instance that is missing (`TensorStruct
    (Block c)`, the innermost one for `Vector (Block c) n`). `deriving` is (type, class) being
    derived: a recursive occurrence has the instance being made."""
    t = whnf(ty)
    if isinstance(t, Var):
        return None  # a type parameter: the derived instance takes `[cls α]`
    if isinstance(t, Prod):
        return (missing_instance(env, whnf, cls, t.a, deriving)
                or missing_instance(env, whnf, cls, t.b, deriving))
    if isinstance(t, App):
        if (t.head, cls) == deriving:
            return None
        if cls in _CORE.get(t.head, frozenset()):
            if t.head in ("Array", "List", "Vector"):
                return missing_instance(env, whnf, cls, t.args[0], deriving)
            return None
        info = env.get(t.head)
        if isinstance(info, (StructInfo, IndInfo)) and cls in info.deriving:
            return None
    return f"{cls} {_arg(t)}"


def _arg(t: Term) -> str:
    s = show(t)
    return f"({s})" if " " in s else s
