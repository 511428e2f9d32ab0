"""Real text nobody here wrote, for the own-data tests: the docstrings of the Python standard
library that runs the tests, one document per module (its module, class and function
docstrings, breadth first). Read with `ast`, nothing imported, so no module's import side
effects run. The text differs between Python versions; the tests assert properties of it
(every token reachable, the split's arithmetic), never its exact numbers."""
from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

_DEFS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def module_documents(min_chars: int) -> list[str]:
    """Documents of the top-level stdlib modules in name order until they hold `min_chars`
    characters: a module's name, a blank line, its docstrings separated by blank lines."""
    root = Path(sysconfig.get_paths()["stdlib"])
    docs, chars = [], 0
    for path in sorted(root.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        texts = [d for node in ast.walk(tree) if isinstance(node, _DEFS)
                 and (d := ast.get_docstring(node))]
        if sum(map(len, texts)) < 500:  # a module with next to no prose
            continue
        doc = path.stem + "\n\n" + "\n\n".join(texts)
        docs.append(doc)
        chars += len(doc)
        if chars >= min_chars:
            return docs
    raise RuntimeError(f"{root}: the stdlib's docstrings hold only {chars} characters")
