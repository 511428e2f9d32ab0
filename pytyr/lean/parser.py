"""Parser for the Tyr subset of Lean 4: modules and commands (docs/lean-subset.md).

Terms are read by `parse_terms.TermParser`, which follows Lean's own grammar where the subset
overlaps it; anything outside the subset is rejected with a located "not in the Tyr subset of
Lean" error.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import Diagnostic, LeanError, Pos
from . import syntax as S
from .lexer import Token
from .parse_terms import MAX_NESTING, SUBSET, TermParser

__all__ = ["MAX_NESTING", "SUBSET", "Parser", "parse"]

# What Lean's `declaration` parser accepts after its modifiers (a doc comment, `@[…]`) that
# the subset reads; the commands of UNSUPPORTED_COMMANDS are declarations too (or modifiers).
DECLARATIONS = {"def", "abbrev", "structure", "inductive"}
UNSUPPORTED_COMMANDS = {
    "theorem": "theorems", "instance": "instance declarations", "class": "class declarations",
    "variable": "`variable`", "universe": "`universe`", "mutual": "mutual blocks",
    "example": "`example`", "set_option": "`set_option`", "attribute": "`attribute`",
    "macro": "macros", "syntax": "syntax extensions", "notation": "notations",
    "infixl": "notations", "infixr": "notations", "elab": "elaborators",
    "initialize": "`initialize`", "private": "`private`", "protected": "`protected`",
    "noncomputable": "`noncomputable`", "partial": "`partial`", "unsafe": "`unsafe`",
}



Reuse = Callable[[list[Token], int], "tuple[S.Command, int] | None"]
"""`reuse(tokens, i)`: a command parsed before from the same tokens from `i` on, and how many
tokens it took (an editor's previous parse of the text being edited), or None."""


class Parser(TermParser):
    def __init__(self, text: str, file: str, tokens: list[Token] | None = None,
                 reuse: Reuse | None = None):
        super().__init__(text, file, tokens)
        self.reuse = reuse

    def _same_line_ident(self) -> bool:
        return self.tok.kind == "ident" and not self.tok.nl_before

    def module(self) -> S.Module:
        imports: list[S.Import] = []
        # Lean's header is the `import`s alone: a `/-!` doc before them is a command, and
        # every `import` after a command is rejected below, as Lean does.
        while self.at("import", "keyword"):
            t = self.next()
            imports.append(S.Import(t.pos, self.ident("a module name").text))
            if self.tok.kind == "ident" and not self.tok.nl_before:
                # `import A B` is not Lean 4: one module per `import` (Lean 4.35 says this).
                raise self.error("unexpected identifier; expected command")
        cmds: list[S.Command] = []
        starts: list[Pos] = []
        while self.tok.kind != "eof":
            start = self.tok.pos
            hit = self.reuse(self.toks, self.i) if self.reuse is not None else None
            if hit is not None:
                cmd, n = hit
                self.i += n
            else:
                cmd = self.command()
            if cmd is not None:
                cmds.append(cmd)
                starts.append(start)
        return S.Module(self.file, imports, cmds, starts)

    def command(self) -> S.Command | None:
        t = self.tok
        if t.kind == "moddoc":
            self.next()
            return None
        doc = None
        if t.kind == "doc":
            doc_tok = self.next()
            doc = doc_tok.text[3:-2].strip()
            self._documented(doc_tok)
        attrs: list[str] = []
        if self.at("@["):
            self.next()
            while True:
                attrs.append(self.ident("an attribute name").text)
                if self.at(","):
                    self.next()
                    continue
                break
            self.expect("]", "to close the attribute list")
        t = self.tok
        if t.kind == "keyword" and t.text in ("def", "abbrev"):
            return self.definition(doc, attrs)
        if attrs:
            raise self.error("attributes are only supported on `def` in the Tyr subset", t)
        if t.kind == "ident" and t.text == "safetensors_type_provider":
            self.next()
            if self.tok.kind != "str":
                raise self.error("expected a path string after `safetensors_type_provider`")
            path = self.next().text
            if not (self.tok.kind == "ident" and self.tok.text == "as"):
                raise self.error("expected `as Name` after the checkpoint path")
            self.next()
            return S.TypeProvider(t.pos, path, self.ident("a name for the checkpoint").text)
        if t.kind == "keyword":
            if t.text == "import":
                raise self.error(
                    "invalid 'import' command, it must be used in the beginning of the file")
            if t.text == "open":
                self.next()
                names = [self.ident("a namespace").text]
                while self.tok.kind == "ident" and not self.tok.nl_before:
                    names.append(self.next().text)
                return S.Open(t.pos, names)
            if t.text == "namespace":
                self.next()
                return S.Namespace(t.pos, self.ident("a namespace name").text)
            if t.text == "section":
                self.next()
                name = self.next().text if self._same_line_ident() else None
                return S.Section(t.pos, name)
            if t.text == "end":
                self.next()
                name = self.next().text if self._same_line_ident() else None
                return S.End(t.pos, name)
            if t.text == "structure":
                return self.structure(doc)
            if t.text == "inductive":
                return self.inductive(doc)
            if t.text in UNSUPPORTED_COMMANDS:
                raise self.error(f"{UNSUPPORTED_COMMANDS[t.text]} are {SUBSET}"
                                 if UNSUPPORTED_COMMANDS[t.text].endswith("s")
                                 else f"{UNSUPPORTED_COMMANDS[t.text]} is {SUBSET}")
        if t.text.startswith("#") or t.text == "#":
            raise self.error(f"commands like '{t.text}{self.peek().text}' are {SUBSET}")
        raise self.error(f"expected a command (def, abbrev, structure, inductive, namespace, "
                         f"section, end, open), found '{t.text or 'end of file'}'")

    def _documented(self, doc: Token) -> None:
        """A doc comment is part of a declaration's modifiers (Lean's `declModifiers`), so a
        declaration must follow it: Lean rejects one before `namespace`, `open`, `end`, another
        doc comment or the end of the file, located where the doc comment ends."""
        t = self.tok
        if t.kind in ("keyword", "ident") and (t.text in DECLARATIONS
                                               or t.text in UNSUPPORTED_COMMANDS) \
                or self.at("@["):
            return
        raise self.error_at(_end(doc), f"unexpected {_describe(t)}; expected a declaration "
                                       f"after the doc comment (def, abbrev, structure, "
                                       f"inductive)")

    def error_at(self, pos: Pos, msg: str) -> LeanError:
        return LeanError([Diagnostic(pos, msg)])

    def definition(self, doc: str | None, attrs: list[str]) -> S.Def:
        kw = self.next()
        name = self.ident("a definition name")
        binders = self.binders()
        typ = None
        if self.at(":"):
            self.next()
            typ = self.term()
        if self.at("|"):
            raise self.error(f"definitions by pattern matching are {SUBSET}")
        if self.at("where", "keyword"):
            raise self.error(f"`where` clauses are {SUBSET}")
        self.expect(":=", f"in the definition of '{name.text}'")
        body = self.term()
        if self.at("where", "keyword") or self.at("deriving", "keyword"):
            raise self.error(f"`{self.tok.text}` after a definition is {SUBSET}")
        return S.Def(name.pos, name.text, kw.text, binders, typ, body, attrs, doc)

    def structure(self, doc: str | None) -> S.Structure:
        self.next()
        name = self.ident("a structure name")
        binders = self.binders()
        if self.at("extends", "keyword"):
            raise self.error(f"`extends` is {SUBSET}")
        self.expect("where", f"after 'structure {name.text}'")
        if self.tok.kind == "ident" and self.peek().text == "::":
            raise self.error(f"custom structure constructors are {SUBSET}")
        fields: list[S.Field] = []
        # Lean's fields are `manyIndent`: each starts at the first one's column or right of
        # it, and a doc comment belongs to a field only when a field name follows (`atomic`);
        # otherwise it is left to the next command, which must be a declaration.
        col = self.tok.pos.col
        while self.tok.pos.col >= col:
            fdoc = None
            if self.tok.kind == "doc":
                if self.peek().kind != "ident":
                    break
                fdoc = self.next().text[3:-2].strip()
            if self.tok.kind != "ident":
                break
            names = [self.next()]
            while self.tok.kind == "ident":
                names.append(self.next())
            if self.at("("):
                raise self.error(f"structure fields with binders are {SUBSET}")
            self.expect(":", f"after field '{names[0].text}'")
            saved, self.pos_col = self.pos_col, names[0].pos.col
            typ = self.term()
            default = None
            if self.at(":="):
                self.next()
                default = self.term()
            self.pos_col = saved
            for nt in names:
                fields.append(S.Field(nt.text, typ, nt.pos, default, fdoc))
        names, where = self.deriving()
        return S.Structure(name.pos, name.text, binders, fields, names, doc, where)

    def deriving(self) -> tuple[list[str], list[Pos]]:
        out: list[Token] = []
        if self.at("deriving", "keyword"):
            self.next()
            out.append(self.ident("a class name"))
            while self.at(","):
                self.next()
                out.append(self.ident("a class name"))
        return [t.text for t in out], [t.pos for t in out]

    def inductive(self, doc: str | None) -> S.Inductive:
        self.next()
        name = self.ident("an inductive type name")
        binders = self.binders()
        if self.at(":"):
            raise self.error(f"indexed inductive families are {SUBSET}")
        self.expect("where", f"after 'inductive {name.text}'")
        ctors: list[S.Ctor] = []
        while True:
            # As for fields, a doc comment not followed by `|` is the next command's.
            if self.tok.kind == "doc" and self.peek().text == "|":
                self.next()
            if not self.at("|"):
                break
            self.next()
            cname = self.ident("a constructor name")
            cb = self.binders()
            if self.at(":"):
                raise self.error(f"constructors with explicit result types are {SUBSET}")
            ctors.append(S.Ctor(cname.text, cb, cname.pos))
        names, where = self.deriving()
        return S.Inductive(name.pos, name.text, binders, ctors, names, doc, where)

    # -- terms ------------------------------------------------------------------------------

def _end(tok: Token) -> Pos:
    """Where a token ends: Lean reports a token that may not follow it there."""
    lines = tok.text.split("\n")
    col = tok.pos.col + len(lines[0]) if len(lines) == 1 else len(lines[-1])
    return Pos(tok.pos.file, tok.pos.line + len(lines) - 1, col)


def _describe(t: Token) -> str:
    if t.kind == "eof":
        return "end of input"
    if t.kind == "ident":
        return "identifier"
    return f"token '{t.text[:3] if t.kind in ('doc', 'moddoc') else t.text}'"


def parse(text: str, file: str) -> S.Module:
    return Parser(text, file).module()
