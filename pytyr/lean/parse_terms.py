"""Terms of the Tyr subset of Lean 4, read as Lean's parser reads them (docs/lean-subset.md).

A Pratt parser over `lexer.Token`s that follows Lean's own grammar where the subset overlaps
it: application arguments must be indented past the position saved by `let` (Lean's
`withPosition`/`checkColGt`), parentheses and brackets clear that position, operators keep
Lean's precedences (`→` 25, `×` 35, `=` 50, `+ -` 65, `* / %` 70). Anything outside the
subset is rejected with a located "not in the Tyr subset of Lean" error.
"""
from __future__ import annotations

from ..errors import Diagnostic, LeanError
from . import syntax as S
from .lexer import Token, tokenize

SUBSET = "not in the Tyr subset of Lean"
# Infix operators: symbol -> (precedence, right-associative)
INFIX = {"→": (25, True), "->": (25, True), "×": (35, True), "=": (50, False),
         "≤": (50, False), "<=": (50, False), "<": (50, False), "≠": (50, False),
         "≥": (50, False), ">=": (50, False), ">": (50, False),
         "+": (65, False), "-": (65, False), "*": (70, False), "/": (70, False),
         "%": (70, False)}
RELATIONS = ("=", "≤", "<", "≠", "≥", ">")  # `infix:50`, non-associative
MAX_PREC = 1024
# Lean's own limit is `maxRecDepth` (512 elaboration steps); the subset's is on the syntax:
# parentheses, arguments and operators around a term, each one level.
MAX_NESTING = 128
UNSUPPORTED_TERMS = {"if": "`if`", "match": "`match`", "do": "`do` notation",
                     "have": "`have`", "show": "`show`"}


class TermParser:
    """Tokens, binders and terms; `parser.Parser` adds the commands."""

    def __init__(self, text: str, file: str, tokens: list[Token] | None = None):
        self.file = file
        self.toks = tokens if tokens is not None else tokenize(text, file)  # lexed already
        self.i = 0
        self.pos_col: int | None = None  # column saved by Lean's withPosition
        self.depth = 0  # terms being read, one inside the other

    # -- token helpers ----------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, text: str, kind: str | None = None) -> bool:
        t = self.tok
        return t.text == text and (kind is None or t.kind == kind) \
            and t.kind not in ("str", "char", "doc", "moddoc")

    def error(self, msg: str, tok: Token | None = None) -> LeanError:
        t = tok or self.tok
        return LeanError([Diagnostic(t.pos, msg)])

    def expect(self, text: str, what: str | None = None) -> Token:
        if not self.at(text):
            got = self.tok.text or "end of file"
            raise self.error(f"expected '{text}'{' ' + what if what else ''}, found '{got}'")
        return self.next()

    def ident(self, what: str = "an identifier") -> Token:
        if self.tok.kind != "ident":
            raise self.error(f"expected {what}, found '{self.tok.text or 'end of file'}'")
        return self.next()

    # -- module -----------------------------------------------------------------------------
    def binders(self, allow_inst: bool = False) -> list[S.Binder]:
        out: list[S.Binder] = []
        while self.at("(") or self.at("{") or self.at("["):
            open_tok = self.next()
            if open_tok.text == "[":
                raise self.error(f"instance-implicit binders `[...]` are {SUBSET}", open_tok)
            close = ")" if open_tok.text == "(" else "}"
            kind = "explicit" if close == ")" else "implicit"
            saved, self.pos_col = self.pos_col, None
            names = [self.ident("a binder name")]
            while self.tok.kind == "ident":
                names.append(self.next())
            self.expect(":", f"and a type for binder '{names[0].text}' (the Tyr subset requires "
                             f"binder types)")
            typ = self.term()
            default = tactic = None
            if self.at(":=") and kind == "explicit":
                self.next()
                if self.at("by", "keyword"):
                    tactic = self.by_tactic()
                else:
                    default = self.term()
            self.expect(close, "to close the binder")
            self.pos_col = saved
            for nt in names:
                out.append(S.Binder(nt.text, kind, typ, nt.pos, default,
                                    tactic.tactic if tactic else None))
        return out

    def term(self, prec: int = 0) -> S.Expr:
        self.depth += 1
        try:
            return self._term(prec)
        finally:
            self.depth -= 1

    def nested(self, extra: int = 0) -> None:
        """A term nested deeper than the checker goes is a located error, not a crash."""
        if self.depth + extra > MAX_NESTING:
            raise self.error(f"this term is nested more than {MAX_NESTING} levels deep "
                             f"(parentheses, arguments, operators), which the Tyr subset does not "
                             f"allow; split it with `let`")

    def _term(self, prec: int) -> S.Expr:
        self.nested()
        wraps = 0  # `left` grows one level with each operator or argument list around it
        left = self.leading()
        while True:
            t = self.tok
            if t.kind == "sym" and t.text == "[" and not t.ws_before:
                self.next()
                saved, self.pos_col = self.pos_col, None
                idx = self.term()
                self.pos_col = saved
                self.expect("]", "to close the index")
                left = S.Index(t.pos, left, idx)
                wraps += 1
                self.nested(wraps)
                continue
            if t.kind == "sym" and t.text == "." and not t.ws_before \
                    and self.peek().kind == "ident" \
                    and not self.peek().ws_before:
                self.next()
                for part in self.next().text.split("."):  # `(e).a.b` lexes `a.b` as one name
                    left = S.Proj(t.pos, left, part)
                    wraps += 1
                self.nested(wraps)
                continue
            if t.kind == "sym" and t.text == "." and not t.ws_before \
                    and self.peek().kind in ("nat", "sci") and not self.peek().ws_before \
                    and self.peek().text.replace(".", "").isdigit():
                self.next()  # `(e).2.1` lexes `2.1` as one number: numbered fields, each
                num = self.next()
                parts = num.text.split(".")
                for k, part in enumerate(parts):
                    if part[0] == "0":  # Lean's `fieldIdx` is a numeral from 1; at its dot
                        dot = t.pos if k == 0 else num.pos._replace(
                            col=num.pos.col + len(".".join(parts[:k])))
                        raise LeanError([Diagnostic(dot, f"invalid field notation: '.{part}' "
                                                         f"is no field; numbered fields count "
                                                         f"from 1 (`.1` is the first)")])
                    left = S.Proj(t.pos, left, int(part))
                    wraps += 1
                self.nested(wraps)
                continue
            if prec < MAX_PREC and self.starts_argument() and _is_fn_position(left):
                args = []
                while self.starts_argument():
                    args.append(self.argument())
                left = S.App(left.pos, left, args)
                wraps += 1
                self.nested(wraps)
                continue
            if t.kind == "sym" and t.text in INFIX:
                p, right = INFIX[t.text]
                if p < prec:
                    break
                self.next()
                rhs = self.term(p if right else p + 1)
                op = {"->": "→", "<=": "≤", ">=": "≥"}.get(t.text, t.text)
                left = S.BinOp(t.pos, op, left, rhs)
                wraps += 1
                self.nested(wraps)
                if op in RELATIONS and self.tok.text in RELATIONS + ("<=", ">="):
                    raise self.error(f"`{op}` does not chain (`infix:50`); add parentheses")
                continue
            if t.kind == "sym" and t.text in ("==", "!=", "&&", "||", "++", "|>", "<|", "^",
                                               "$"):
                raise self.error(f"the operator '{t.text}' is {SUBSET}")
            break
        return left

    def starts_argument(self) -> bool:
        t = self.tok
        if not t.ws_before:
            return False
        if self.pos_col is not None and t.pos.col <= self.pos_col:
            return False
        if t.kind in ("ident", "nat", "sci", "str", "char"):
            return True
        if t.kind == "sym" and t.text in ("(", "#[", "[", "⟨", "_", "λ"):
            return True
        if t.kind == "keyword" and t.text == "fun":  # `fun` is `leading_parser:maxPrec`
            return True
        if t.kind == "sym" and t.text == "." and self.peek().kind == "ident" \
                and not self.peek().ws_before:
            return True
        return False

    def argument(self) -> S.Arg:
        if self.at("(") and self.peek().kind == "ident" and self.peek(2).text == ":=":
            open_tok = self.next()
            name = self.next().text
            self.next()
            saved, self.pos_col = self.pos_col, None
            e = self.term()
            self.pos_col = saved
            self.expect(")", "to close the named argument")
            return S.Arg(e, name, open_tok.pos)
        return S.Arg(self.term(MAX_PREC))

    def leading(self) -> S.Expr:
        t = self.tok
        if t.kind == "ident":
            self.next()
            if t.text in ("Type", "Prop"):
                return S.Sort(t.pos, t.text)
            return S.Ident(t.pos, t.text, t.value or ())
        if t.kind == "nat":
            self.next()
            assert isinstance(t.value, int)
            return S.NatLit(t.pos, t.value)
        if t.kind == "sci":
            self.next()
            return S.SciLit(t.pos, t.text)
        if t.kind == "str":
            self.next()
            return S.StrLit(t.pos, t.text)
        if t.kind == "char":
            raise self.error(f"character literals are {SUBSET}")
        if t.kind == "keyword":
            if t.text == "let":
                return self.let()
            if t.text == "fun":
                return self.fun()
            if t.text == "by":
                return self.by_tactic()
            if t.text in UNSUPPORTED_TERMS:
                raise self.error(f"{UNSUPPORTED_TERMS[t.text]} is {SUBSET}")
            raise self.error(f"unexpected keyword '{t.text}'")
        if t.kind == "sym":
            if t.text == "λ":
                return self.fun()
            if t.text == "(":
                return self.paren()
            if t.text in ("#[", "[", "⟨"):
                self.next()
                close = {"#[": "]", "[": "]", "⟨": "⟩"}[t.text]
                items = self.comma_list(close)
                cls = {"#[": S.ArrayLit, "[": S.ListLit, "⟨": S.AnonCtor}[t.text]
                return cls(t.pos, items)
            if t.text == "." and self.peek().kind == "ident" and not self.peek().ws_before:
                self.next()
                return S.DotIdent(t.pos, self.next().text)
            if t.text == "." and self.peek().kind in ("nat", "sci") and not self.peek().ws_before:
                num = self.peek().text  # Lean reads `.1` as `·` notation, then a stray `1`
                raise self.error(f"'.{num}' is not a number in Lean 4, so not in the Tyr "
                                 f"subset either; write '0.{num}'")
            if t.text == "_":
                self.next()
                return S.Hole(t.pos)
            if t.text in ("{", "@", "∀", "·", "↑", "!", "-", "?"):
                what = {"{": "structure instances `{ x := ... }` and implicit arrows",
                        "@": "explicit application `@f`", "∀": "`∀`", "·": "`·` lambdas",
                        "↑": "coercion arrows", "!": "`!`", "-": "negation", "?": "`?` holes"}
                raise self.error(f"{what[t.text]} {'are' if t.text == '{' else 'is'} {SUBSET}")
        raise self.error(f"expected a term, found '{t.text or 'end of file'}'")

    def comma_list(self, close: str) -> list[S.Expr]:
        saved, self.pos_col = self.pos_col, None
        items: list[S.Expr] = []
        if not self.at(close):
            items.append(self.term())
            while self.at(","):
                self.next()
                items.append(self.term())
        self.expect(close, "to close the list")
        self.pos_col = saved
        return items

    def paren(self) -> S.Expr:
        open_tok = self.next()
        saved, self.pos_col = self.pos_col, None
        if self.at(")"):
            raise self.error(f"the unit value `()` is {SUBSET}")
        # `(x y : A) → B`: a dependent arrow binder.
        j = self.i
        while self.toks[j].kind == "ident":
            j += 1
        if j > self.i and self.toks[j].text == ":":
            k, depth = j, 0
            while self.toks[k].kind != "eof":
                if self.toks[k].text in ("(", "#[", "[", "⟨", "{"):
                    depth += 1
                elif self.toks[k].text in (")", "]", "⟩", "}"):
                    if depth == 0:
                        break
                    depth -= 1
                k += 1
            if self.toks[k].text == ")" and self.toks[k + 1].text in ("→", "->"):
                self.i -= 1  # rewind to '(' and read it as a binder
                self.pos_col = saved
                binders = self.binders()
                self.pos_col = saved
                self.next()  # the arrow
                return S.Pi(open_tok.pos, binders, self.term(25))
        e = self.term()
        if self.at(":"):
            self.next()
            typ = self.term()
            self.expect(")", "to close the type ascription")
            self.pos_col = saved
            return S.Ascribe(open_tok.pos, e, typ)
        if self.at(","):
            items = [e]
            while self.at(","):
                self.next()
                items.append(self.term())
            self.expect(")", "to close the tuple")
            self.pos_col = saved
            return S.Tuple(open_tok.pos, items)
        self.expect(")", "to close the parenthesis")
        self.pos_col = saved
        return e

    def let(self) -> S.Expr:
        """A run of `let`s is read in a loop (a long chain is not nesting), then the body."""
        saved = self.pos_col
        heads = []
        while True:
            kw = self.next()
            self.pos_col = kw.pos.col
            if self.tok.kind == "ident" and self.tok.text == "rec":
                raise self.error(f"`let rec` is {SUBSET}")
            if self.tok.kind != "ident":
                raise self.error(f"`let` patterns are {SUBSET}; bind a single name")
            name = self.next()
            if self.at("(") or self.at("{"):
                raise self.error(f"`let` with binders is {SUBSET}; use `fun`")
            typ = None
            if self.at(":"):
                self.next()
                typ = self.term()
            self.expect(":=", f"in 'let {name.text}'")
            value = self.term()
            self.pos_col = saved
            if self.at(";"):
                self.next()
            elif not self.tok.nl_before:
                raise self.error("expected ';' or a line break after the `let` value")
            heads.append((kw, name, typ, value))
            if not self.at("let", "keyword"):
                break
        body = self.term()
        for kw, name, typ, value in reversed(heads):
            body = S.Let(kw.pos, name.text, typ, value, body)
        return body

    def fun(self) -> S.Fun:
        kw = self.next()
        binders: list[S.Binder] = []
        while not (self.at("=>") or self.at("↦")):
            if self.tok.kind == "ident":
                t = self.next()
                binders.append(S.Binder(t.text, "explicit", None, t.pos))
            elif self.at("("):
                binders.extend(self.binders())
            elif self.at("{"):
                raise self.error(f"implicit `fun` binders are {SUBSET}")
            else:
                raise self.error(f"expected a binder or '=>' in `fun`, found '{self.tok.text}'")
        if not binders:
            raise self.error("`fun` needs at least one binder")
        self.next()
        return S.Fun(kw.pos, binders, self.term())

    def by_tactic(self) -> S.By:
        kw = self.next()
        t = self.tok
        if t.kind == "ident" and t.text in ("decide",):
            self.next()
            return S.By(kw.pos, t.text)
        raise self.error(f"only `by decide` is in the Tyr subset, found 'by {t.text}'")



def _is_fn_position(e: S.Expr) -> bool:
    # Lean's `app` needs a maximal-precedence head; in the subset that is a name.
    return isinstance(e, (S.Ident, S.Proj, S.DotIdent, S.Index))
