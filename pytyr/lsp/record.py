"""What the checker elaborated, and where: the record behind hover, definition, completion
and `tyr shapes`.

`RecordingChecker` is the checker whose elaborators note every term they elaborate (the
syntax node, the core term, its type, the local context it was elaborated in, and the
elaborator, whose metavariable solutions come later) and every global name an application
resolves. Only the language server and `tyr shapes` use it: `tyr check` runs the plain
`Checker`, so recording costs it nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..lean import syntax as S
from ..lean.check import Checker
from ..lean.context import Ctx
from ..lean.elaborate import TermElab
from ..lean.failure import Fail
from ..lean.terms import Opaque, Term


@dataclass(frozen=True, slots=True)
class Typed:
    """A term as elaborated: `expr` (syntax) is `term : type` in `ctx`, inside `decl`."""

    expr: S.Expr
    term: Term
    type: Term
    ctx: Ctx
    elab: "RecordingElab"


@dataclass(frozen=True, slots=True)
class Ref:
    """A name in function position (or a constant) resolved to the global `name`."""

    expr: S.Ident
    name: str
    info: Any
    ctx: Ctx
    elab: "RecordingElab"


class Record:
    """Every `Typed` and `Ref` of a check, in the order the checker made them."""

    def __init__(self) -> None:
        self.typed: list[Typed] = []
        self.refs: list[Ref] = []


class RecordingElab(TermElab):
    """The checker's elaborator, noting what it elaborates; it checks exactly as the plain one
    (each method calls the plain one and only looks at its result).

    One addition, for hovers after an error: when a `let`'s value fails, the rest of its run
    of `let`s is still elaborated, as Lean's error recovery does (the failed value is a
    `sorry` of its written type, or of an unknown one), so that the bindings after the error
    have types; then the first error is raised, exactly as the plain elaborator raised it.
    Nothing after it is reported.
    """

    record: Record | None  # None once the check is over (`RecordingChecker.detach`)
    quiet = False  # set while the server elaborates a piece on its own (a name's prefix)
    _failed: Fail | None = None  # the first error of the run of `let`s being elaborated

    def elab(self, e: S.Expr, expected: Term | None, ctx: Ctx,
             soft: bool = False) -> tuple[Term, Term]:
        term, ty = super().elab(e, expected, ctx, soft)
        if not self.quiet and self.record is not None:
            self.record.typed.append(Typed(e, term, ty, ctx, self))
        return term, ty

    def let_chain(self, e: S.Let, expected: Term | None, ctx: Ctx) -> tuple[Term, Term]:
        if self.quiet:
            return super().let_chain(e, expected, ctx)
        outer, self._failed = self._failed, None
        try:
            out = super().let_chain(e, expected, ctx)
            failed = self._failed
        finally:
            self._failed = outer
        if failed is not None:
            raise failed
        return out

    def let_value(self, e: S.Let, ctx: Ctx) -> tuple[Term, Term]:
        if self.quiet:
            return super().let_value(e, ctx)
        try:
            return super().let_value(e, ctx)
        except Exception as err:  # noqa: BLE001 — after the first error anything is ignored
            if self._failed is None:
                if not isinstance(err, Fail):
                    raise
                self._failed = err
        return Opaque("sorry"), self._written(e, ctx) or self.mctx.fresh(e.name)

    def let_body(self, e: S.Expr, expected: Term | None, ctx: Ctx) -> tuple[Term, Term]:
        if self._failed is None or self.quiet:
            return super().let_body(e, expected, ctx)
        try:
            return super().let_body(e, expected, ctx)
        except Exception:  # noqa: BLE001 — recovering: the first error is the one raised
            return Opaque("sorry"), expected or self.mctx.fresh("body")

    def _written(self, e: S.Let, ctx: Ctx) -> Term | None:
        """A `let`'s written type, if it elaborates (quietly: it was recorded already)."""
        if e.type is None:
            return None
        self.quiet = True
        try:
            return self.elab_type(e.type, ctx)
        except Exception:  # noqa: BLE001
            return None
        finally:
            self.quiet = False

    def head(self, fn: S.Expr, expected: Term | None, ctx: Ctx) -> tuple:
        out = super().head(fn, expected, ctx)
        if out[0] == "const" and isinstance(fn, S.Ident) and not self.quiet \
                and self.record is not None:
            self.record.refs.append(Ref(fn, out[1], out[2], ctx, self))
        return out


class RecordingChecker(Checker):
    def __init__(self, record: Record) -> None:
        super().__init__()
        self.record = record
        self.elabs: list[RecordingElab] = []

    def elaborator(self, decl: str) -> TermElab:
        el = RecordingElab(self.env, self.scope, decl, self.normal_forms)
        el.record = self.record
        self.elabs.append(el)
        return el

    def detach(self) -> None:
        """The check is over: its elaborators let go of the record (an elaborator outlives
        its check in the terms a later check reuses, and must not keep this one's alive)."""
        for el in self.elabs:
            el.record = None
        self.elabs = []
