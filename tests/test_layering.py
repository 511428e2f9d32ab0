"""The data flow is one way: a module imports only modules of its own or earlier layers."""
from __future__ import annotations

import ast
from pathlib import Path

import pytyr

ROOT = Path(pytyr.__file__).parent
# Earlier first. A module of layer k may import layers 0..k.
LAYERS = ["errors", "paths", "atomic", "digest", "process", "config", "ir", "safetensors", "hf",
          "lean", "kernels", "exec", "pipeline", "data", "train", "export", "abi", "lsp", "cli",
          "torchrun"]


def _layer(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "__init__"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = "pytyr." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: -node.level]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("pytyr"):
                out.append(mod)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names if a.name.startswith("pytyr"))
    return out


def test_no_module_reaches_back_up():
    bad = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        own = rel.parts[0].removesuffix(".py")
        if own in ("__init__", "__main__"):
            continue
        for mod in _imports(path):
            target = mod.split(".")[1] if mod.count(".") else "__init__"
            target = target.removesuffix(".py")
            if target == "__init__" or own not in LAYERS or target not in LAYERS:
                continue
            if LAYERS.index(target) > LAYERS.index(own):
                bad.append(f"{rel} imports {mod} (layer '{target}' comes after '{own}')")
    assert not bad, "\n".join(bad)


def test_checking_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, pytyr.lean; pytyr.lean.check_files('examples/mlp/MLP.lean'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cli_start_up_does_not_import_torch():
    # `tyr check` and `tyr --help` must start fast: heavy libraries load on first use only.
    import subprocess
    import sys
    code = ("import sys, pytyr.cli; pytyr.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'pyarrow', 'tokenizers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
