"""The data flow is one way: a module imports only modules of its own or earlier layers."""
from __future__ import annotations

import ast
from pathlib import Path

import pytyr

ROOT = Path(pytyr.__file__).parent
# Earlier first. A module of layer k may import layers 0..k.
LAYERS = ["errors", "paths", "atomic", "digest", "process", "config", "ir", "safetensors", "hf",
          "lean", "kernels", "exec", "pipeline", "data", "train", "export", "generate", "abi", "lsp",
          "sampling", "cli", "torchrun"]


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


def _module(path: Path) -> str:
    parts = ["pytyr", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> set[str]:
    """Every pytyr module `path` imports when it runs, function-level imports included (they
    hide a cycle, not remove it); `if TYPE_CHECKING:` blocks left out (never run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _module(path)
    pkg = own if path.name == "__init__.py" else own.rsplit(".", 1)[0]
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                if node.module:
                    out.add(".".join([*base, node.module]))
                else:  # `from . import syntax`: the modules named
                    out |= {".".join([*base, a.name]) for a in node.names}
            elif (node.module or "").startswith("pytyr"):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("pytyr")}
    return out


def test_no_import_cycle_anywhere():
    """Inside every package too: the modules of a package form an order (what `lean/` needs
    in both `elaborate` and `application` lives in `context` and `obligations`)."""
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for mod, path in modules.items():
        deps = set()
        for target in _runtime_imports(path):
            while target and target not in modules:  # `pytyr.x.f` (a name) → `pytyr.x`
                target = target.rpartition(".")[0]
            if target and target != mod:
                deps.add(target)
        graph[mod] = deps
    state: dict[str, int] = {}  # 1 on the path, 2 done
    cycles = []

    def visit(mod: str, path: list[str]) -> None:
        state[mod] = 1
        for dep in sorted(graph[mod]):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(path[path.index(dep):] + [mod, dep]))
            elif dep not in state:
                visit(dep, path + [mod])
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


TASKS = ROOT / "train" / "tasks"


def _family(module: str) -> str | None:
    """The task family of `pytyr.train.tasks.<family>...`; None for the rest of pytyr (the
    registry `pytyr.train.tasks` itself included)."""
    parts = module.split(".")
    return parts[3] if parts[:3] == ["pytyr", "train", "tasks"] and len(parts) > 3 else None


def family_problems(imports: dict[str, set[str]]) -> list[str]:
    """Inside `pytyr.train`: a family folder may import the shared top of train/ (the engine,
    `task`, the registry), never another family; the shared top reaches a family only through
    the registry, by name (`importlib`, not an import statement)."""
    bad = []
    for mod, targets in sorted(imports.items()):
        if not mod.startswith("pytyr.train"):
            continue
        own = _family(mod)
        for target in sorted(targets):
            theirs = _family(target)
            if theirs is None or theirs == own:
                continue
            if own is None:
                bad.append(f"{mod} imports {target}: the shared train/ reaches the family "
                           f"'{theirs}' only through the registry, by its task name")
            else:
                bad.append(f"{mod} imports {target}: the family '{own}' may not import the "
                           f"family '{theirs}'; move what both need to the top of train/")
    return bad


def test_task_families_import_only_the_shared_top():
    imports = {_module(p): _runtime_imports(p) for p in (ROOT / "train").rglob("*.py")}
    families = {p.name for p in TASKS.iterdir() if (p / "__init__.py").is_file()}
    assert families == {"lm", "mdlm", "flow", "classification"}
    assert not family_problems(imports), "\n".join(family_problems(imports))


def test_the_family_rule_catches_both_directions():
    assert family_problems({"pytyr.train.tasks.mdlm.task": {"pytyr.train.tasks.lm.char_lm"},
                            "pytyr.train.run": {"pytyr.train.tasks.flow.task"}}) == [
        "pytyr.train.run imports pytyr.train.tasks.flow.task: the shared train/ reaches the "
        "family 'flow' only through the registry, by its task name",
        "pytyr.train.tasks.mdlm.task imports pytyr.train.tasks.lm.char_lm: the family 'mdlm' "
        "may not import the family 'lm'; move what both need to the top of train/"]
    assert family_problems({"pytyr.train.tasks.lm.chat": {"pytyr.train.run",
                                                          "pytyr.train.tasks",
                                                          "pytyr.train.tasks.lm.kvcache"},
                            "pytyr.export.hf": {"pytyr.train.tasks.lm.task"}}) == []


def test_every_family_registers_its_tasks_by_name():
    from pytyr.train.tasks import BUILTIN, task_class

    for name, module in BUILTIN.items():
        cls = task_class({"name": name}, "test")
        assert cls.__module__ == f"pytyr.train.tasks.{module}" and _family(cls.__module__)


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
