"""The docs' claims about structure hold: docs/architecture.md's module table is the tree
(every module of pytyr/ named in it, every path it names there), and every Python name the
docs give (`pytyr.train.model.RunModel`) exists."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def named_modules(text: str) -> set[str]:
    """The `.py` paths a markdown table names: `pytyr/a/b.py`, then siblings by their bare
    names in the same cell (`c.py`), and `pytyr/a/{b,c}.py` expanded."""
    named = set()
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        for cell in line.split("|"):
            folder = None
            for code in re.findall(r"`([^`]+)`", cell):
                m = re.fullmatch(r"(pytyr/(?:\w+/)*)(\{[\w,]+\}|\w+)\.py", code)
                if m:
                    folder, stem = m.groups()
                    stems = stem[1:-1].split(",") if stem.startswith("{") else [stem]
                    named |= {f"{folder}{s}.py" for s in stems}
                elif folder and re.fullmatch(r"\w+\.py", code):
                    named.add(folder + code)
    return named


def test_the_table_names_every_module_and_nothing_that_is_gone():
    named = named_modules(DOC.read_text(encoding="utf-8"))
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "pytyr").rglob("*.py")
               if p.name != "__init__.py" or p.parent.name == "tasks"}
    assert not sorted(modules - named), f"not in docs/architecture.md: {sorted(modules - named)}"
    assert not sorted(named - modules - {p for p in named if p.endswith("__init__.py")
                                          and (ROOT / p).is_file()}), \
        f"named in docs/architecture.md but gone: {sorted(named - modules)}"


def test_the_reader_expands_siblings_and_braces():
    text = ("| x | `pytyr/lean/lexer.py`, `numerals.py` | tokens |\n"
            "| | `pytyr/kernels/{copy,norms}.py` | kernels; not `other.py` of `tyr` |\n"
            "prose naming `pytyr/gone.py` outside a table\n")
    assert named_modules(text) == {"pytyr/lean/lexer.py", "pytyr/lean/numerals.py",
                                   "pytyr/kernels/copy.py", "pytyr/kernels/norms.py"}


ENTRY_POINT_GROUPS = {"pytyr.tasks"}  # names of entry-point groups, not modules


def _resolves(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_python_name_the_docs_give_exists():
    bad = []
    for doc in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        for m in re.finditer(r"`[^`]*?\b(pytyr(?:\.\w+)+)", doc.read_text(encoding="utf-8")):
            if m.group(1) not in ENTRY_POINT_GROUPS and not _resolves(m.group(1)):
                bad.append(f"{doc.relative_to(ROOT)}: {m.group(1)}")
    assert not bad, "names that do not exist:\n" + "\n".join(bad)
    assert not _resolves("pytyr.train.run.make_factory")  # the check can fail
