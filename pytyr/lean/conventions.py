"""The two body shapes the checker reads as declarations of the graph IR (`docs/adding-an-op.md`):

- a *typed op*: `def f … : T s := prim "name" [x.node, …] [.nat "k" k, …]`, whose signature
  is the op's typing rule (`primI` in place of `prim` for an op whose result is an index
  tensor `IT s n`);
- an *initialiser*: `def f … : T s := param (.kind arg…)`, a parameter's init.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import syntax as S
from .env import TENSOR_FAMILIES, DefInfo, IndInfo, InitInfo, OpInfo
from .failure import Fail
from .terms import FLOAT, NAT, SHAPE, App, Param

if TYPE_CHECKING:
    from .elaborate import TermElab


def _calls(el: "TermElab", body: S.Expr, name: str) -> bool:
    if not (isinstance(body, S.App) and isinstance(body.fn, S.Ident)):
        return False
    try:
        return el.scope.resolve_global(body.fn.name, body.pos) == name
    except Fail:
        return False


def _tensor_param(el: "TermElab", p: Param) -> bool:
    t = el.whnf(p.type)
    return isinstance(t, App) and t.head in TENSOR_FAMILIES


# The emitters of a typed op's node, and the tensor family each one's result is.
EMITTERS = {"torch.prim": ("prim", "torch.T", "a float tensor `T s`"),
            "torch.primI": ("primI", "torch.IT", "an index tensor `IT s n`")}


def op_convention(el: "TermElab", info: DefInfo, body: S.Expr) -> OpInfo | None:
    emitter = next((e for e in EMITTERS if _calls(el, body, e)), None)
    if emitter is None:
        return None
    word, family, what = EMITTERS[emitter]
    assert isinstance(body, S.App)
    pos, args = body.pos, body.args
    if not (2 <= len(args) <= 3) or any(a.name for a in args) \
            or not isinstance(args[0].expr, S.StrLit) or not isinstance(args[1].expr, S.ListLit):
        raise Fail(pos, f"a typed op's body must be `{word} \"name\" [x.node, ...] [attrs]`")
    res = el.whnf(info.result)
    if not (isinstance(res, App) and res.head == family):
        raise Fail(pos, f"a `{word}` op must return {what}")
    tensors = [p.name for p in info.params if p.kind == "explicit" and _tensor_param(el, p)]
    given = []
    for item in args[1].expr.items:
        if not (isinstance(item, S.Ident) and item.name.endswith(".node")):
            raise Fail(item.pos, "`prim` arguments must be the op's tensor arguments `x.node`")
        given.append(item.name[: -len(".node")])
    if given != tensors:
        raise Fail(args[1].expr.pos, f"`prim` arguments must be the op's tensor arguments in "
                                     f"order: [{', '.join(t + '.node' for t in tensors)}]")
    others = [p for p in info.params if p.kind == "explicit" and not _tensor_param(el, p)
              and not el.is_prop(p.type)]
    if len(args) == 3 and not isinstance(args[2].expr, S.ListLit):
        raise Fail(args[2].expr.pos, "`prim` attributes must be a list literal")
    items = args[2].expr.items if len(args) == 3 else []  # type: ignore[attr-defined]
    attrs: list[tuple[str, str]] = []
    for item in items:
        ok = (isinstance(item, S.App) and isinstance(item.fn, S.DotIdent)
              and item.fn.name in ("nat", "float", "shape") and len(item.args) == 2
              and isinstance(item.args[0].expr, S.StrLit)
              and isinstance(item.args[1].expr, S.Ident)
              and item.args[0].expr.value == item.args[1].expr.name)
        if not ok:
            raise Fail(item.pos, "a `prim` attribute must be `.nat \"k\" k`, `.float \"k\" k` "
                                 "or `.shape \"k\" k` naming an explicit argument `k`")
        attrs.append((item.args[1].expr.name, item.fn.name))  # type: ignore[union-attr]
    if [a for a, _ in attrs] != [p.name for p in others]:
        raise Fail(pos, f"`prim` attributes must list the op's other explicit arguments in "
                        f"order: {[p.name for p in others]}")
    want = {"nat": NAT, "float": FLOAT, "shape": SHAPE}
    for (aname, kind), p in zip(attrs, others):
        if not el.unify(p.type, want[kind]):
            raise Fail(pos, f"attribute '{aname}' is `.{kind}` but the argument has type "
                            f"{el.show(p.type)}")
    prim = args[0].expr.value
    other = el.env.prims.get(prim)
    if other is not None:
        raise Fail(body.pos, f"the op name \"{prim}\" is already declared by '{other}'; an IR "
                             f"op has one signature")
    return OpInfo(prim, tensors, attrs)


def init_convention(el: "TermElab", body: S.Expr) -> InitInfo | None:
    if not _calls(el, body, "torch.param"):
        return None
    assert isinstance(body, S.App)
    if len(body.args) != 1:
        raise Fail(body.pos, "an initialiser's body must be `param (.kind arg...)`")
    e = body.args[0].expr
    if isinstance(e, S.DotIdent):
        kind, args = e.name, []
    elif isinstance(e, S.App) and isinstance(e.fn, S.DotIdent) and all(
            isinstance(a.expr, S.Ident) for a in e.args):
        kind, args = e.fn.name, [a.expr.name for a in e.args]  # type: ignore[attr-defined]
    else:
        raise Fail(body.pos, "an initialiser's body must be `param (.kind arg...)`")
    ind = el.env.get("torch.Init")
    ctor = ind.ctors.get(kind) if isinstance(ind, IndInfo) else None
    if ctor is None:
        raise Fail(e.pos, f"'Init' has no constructor '{kind}'")
    if len(ctor.params) != len(args):
        raise Fail(e.pos, f"'Init.{kind}' takes {len(ctor.params)} argument(s), given "
                          f"{len(args)}")
    return InitInfo(kind, [(cp.name, a) for cp, a in zip(ctor.params, args)])
