"""Every Lean example of the docs checks, as written.

Two kinds of example:

* the `` `EXPR` on `TYPE` `` of a doc comment in `Tyr/*.lean` (how to call an op on literal
  shapes) is checked as `def ex (x : TYPE) := EXPR`;
* each ```` ```lean ```` block of `README.md` and `docs/*.md` is checked as a file (after
  `import Tyr` and `open torch` when it has no `import`), unless the HTML comment on the line
  before it says otherwise:
  - `<!-- lean: continues -->`: checked after the document's earlier checked blocks;
  - `<!-- lean: excerpt of A.lean B.lean -->`: each declaration is a part of one of those
    files (checked there by `make check`), comments aside, `…` standing for what is left out;
  - `<!-- lean: as NAME, gives the output below -->`: checked as the file NAME, whose
    diagnostics are exactly the lines of the next (plain) block;
  - `<!-- lean: with checkpoint PATH KEY D0xD1… -->`: checked beside a safetensors file at
    PATH holding one float tensor KEY of that shape (a type provider's example).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytyr.lean import check_files

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INLINE = re.compile(r"`([^`\n]+)`\s+on\s+`((?:I?T) #\[[^`\]]*\][^`]*)`")
FENCE = re.compile(r"(?:<!-- lean: (?P<marker>[^>]*?) -->\n)?(?P<indent>[ ]*)```lean\n"
                   r"(?P<body>.*?)\n(?P=indent)```\n(?:\n*(?P=indent)```\n(?P<out>.*?)\n"
                   r"(?P=indent)```)?", re.S)
PRELUDE = "import Tyr\nopen torch\n"


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    marker: str
    body: str
    output: str | None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _blocks() -> list[Block]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            indent = len(m["indent"])
            body = "\n".join(ln[indent:] for ln in m["body"].split("\n")) + "\n"
            out.append(Block(str(doc.relative_to(ROOT)), text.count("\n", 0, m.start("body")),
                             (m["marker"] or "").strip(), body, m["out"]))
    return out


def _inline() -> list[tuple[str, str, str]]:
    out = []
    for f in sorted((ROOT / "Tyr").glob("*.lean")):
        for m in INLINE.finditer(f.read_text(encoding="utf-8")):
            out.append((f.name, m[1], m[2]))
    return out


BLOCKS = _blocks()
INLINE_EXAMPLES = _inline()


def _check(tmp_path: Path, src: str, name: str = "Example.lean") -> list[str]:
    f = tmp_path / name
    f.write_text(src if src.lstrip().startswith("import") else PRELUDE + src, encoding="utf-8")
    return [f"{name}:{d.pos.line}:{d.pos.col}: error: {d.message}" for d in check_files(f)]


def _normalise(text: str) -> str:
    text = re.sub(r"/-[-!].*?-/", " ", text, flags=re.S)
    text = re.sub(r"--[^\n]*", " ", text)
    return " ".join(text.split())


def _in_file(paragraph: str, files: list[str]) -> bool:
    parts = [re.escape(p) for p in re.split(r"…|\.\.\.", _normalise(paragraph))]
    pattern = re.compile(r".*?".join(p.strip("\\ ") for p in parts), re.S)
    return any(pattern.search(_normalise((ROOT / f).read_text(encoding="utf-8")))
               for f in files)


_DECL = re.compile(r"(?:def|abbrev|structure|inductive|import|open|namespace|section|end|@\[)\b")


def _declarations(body: str) -> list[str]:
    """The block cut before each command that starts a line (an attribute keeps its def)."""
    chunks: list[list[str]] = [[]]
    for ln in body.splitlines():
        prev = next((x for x in reversed(chunks[-1]) if x.strip()), "")
        if _DECL.match(ln) and not prev.startswith("@[") and any(x.strip() for x in chunks[-1]):
            chunks.append([])
        chunks[-1].append(ln)
    return ["\n".join(c) for c in chunks if any(x.strip() for x in c)]


def _with_checkpoint(tmp_path: Path, spec: str) -> None:
    import torch
    from safetensors.torch import save_file

    path, key, shape = spec.split()
    target = tmp_path / path
    target.parent.mkdir(parents=True, exist_ok=True)
    save_file({key: torch.zeros(*(int(d) for d in shape.split("x")))}, str(target))


@pytest.mark.parametrize("file,expr,type_", INLINE_EXAMPLES,
                         ids=[f"{f}:{e}" for f, e, _ in INLINE_EXAMPLES])
def test_an_inline_example_of_the_library_checks(tmp_path, file, expr, type_):
    assert _check(tmp_path, f"def ex (x : {type_}) := {expr}\n") == []


def test_the_library_has_inline_examples():
    found = {(f, e.split()[0]) for f, e, _ in INLINE_EXAMPLES}
    assert {("Shape.lean", "frontSeq3"), ("Shape.lean", "splitLast"), ("NN.lean", "rotary")} \
        <= found, found


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_a_lean_block_of_the_docs_checks(tmp_path, block):
    marker = block.marker
    if marker.startswith("excerpt of "):
        files = marker.removeprefix("excerpt of ").split()
        for decl in _declarations(block.body):
            assert _in_file(decl, files), f"not in {files}:\n{decl}"
        return
    if marker.startswith("as "):
        name = marker.removeprefix("as ").split(",")[0]
        assert block.output is not None, "the output block is missing"
        assert _check(tmp_path, block.body, name) == block.output.strip().splitlines()
        return
    src = block.body
    if marker == "continues":
        earlier = [b for b in BLOCKS if b.doc == block.doc and b.line < block.line
                   and not b.marker.startswith(("excerpt", "as "))]
        src = "".join(b.body for b in earlier) + src
    elif marker.startswith("with checkpoint "):
        _with_checkpoint(tmp_path, marker.removeprefix("with checkpoint "))
    else:
        assert marker == "", f"unknown marker {marker!r}"
    assert _check(tmp_path, src) == []


def test_the_docs_have_lean_blocks_of_each_kind():
    kinds = {b.marker.split(" ")[0] for b in BLOCKS}
    assert {"", "excerpt", "as", "continues", "with"} <= kinds, kinds
