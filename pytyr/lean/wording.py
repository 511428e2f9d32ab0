"""Terms in the author's words, for messages.

Lean prints a type as it stands, its metavariables instantiated: the names the author wrote
stay (`c.n_embd`, not its unfolding `c.n_head * c.head_dim`), and a function of a structure is
printed with field notation (`c.n_embd` for `GPTConfig.n_embd c`, Lean's
`pp.fieldNotation.generalized`). The checker does the same, and also folds arithmetic on
numbers alone (`T #[2, 8, 64]` for `T #[2, 8, 4 * 16]`): no name is lost by it, and a
convolution's `(8 + 2 * 1 - 1 * (3 - 1) - 1) / 2 + 1` reads as the `4` it is.
"""
from __future__ import annotations

from collections.abc import Callable

from .env import DefInfo, Env
from .terms import App, Meta, NatOp, Proj, Term, Var, map_children, occurs


def authored(t: Term, env: Env, norm: Callable[[Term], Term]) -> Term:
    """`t` (instantiated) as the author wrote it, for display only."""
    def go(u: Term) -> Term:
        if isinstance(u, NatOp) and not occurs(u, _open):
            return norm(u)
        if isinstance(u, App) and len(u.args) == 1 and _field_like(u.head, env):
            return Proj(go(u.args[0]), u.head.rpartition(".")[2])
        return map_children(u, go)

    return go(t)


def _open(t: Term) -> bool:
    return isinstance(t, (Var, Meta, App, Proj))


def _field_like(head: str, env: Env) -> bool:
    """`S.f x` is printed `x.f` when `f` is a function in the namespace of the type of its
    first (here: only) explicit argument."""
    info = env.get(head)
    if not isinstance(info, DefInfo) or len(info.params) != 1 or info.params[0].kind != "explicit":
        return False
    ty = info.params[0].type
    return isinstance(ty, App) and head.rpartition(".")[0] == ty.head
