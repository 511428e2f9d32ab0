"""The tasks `tyr train` knows, by name; `register` adds one (an example's own task).

    {"task": {"name": "char_lm", "seq": 64}}        a character corpus (Shakespeare or a file)
    {"task": {"name": "shard_lm", "data": "DIR"}}    token shards written by `tyr data prepare`
    {"task": {"name": "bpb_lm", "data": "DIR"}}      the same, evaluated in bits per byte too
    {"task": {"name": "classification", "data": "spirals" | "table.csv" | "table.parquet"}}

A task of your own: `{"task": {"name": "mine", "module": "my_tasks.py"}}` (or `--set
task.module=my_tasks.py`) imports that file, or a dotted module name, before the name is
looked up; every `Task` subclass it defines is registered under its `name`. An installed
package can offer tasks through the entry-point group `pytyr.tasks` (`name = "pkg.mod:Cls"`).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any

from pytyr.config import load_dataclass
from pytyr.errors import ConfigError
from pytyr.paths import input_file
from pytyr.train.task import Task, TaskContext

MODULE = "module"  # the task table's key naming the module that defines the task
ENTRY_POINTS = "pytyr.tasks"

_REGISTRY: dict[str, type[Task]] = {}
# The built-in tasks by name: the module of their family folder that defines each, imported
# when the name is first asked for (a family is never imported by another, nor by the engine).
BUILTIN = {"char_lm": "lm.char_lm", "shard_lm": "lm.shard_lm", "bpb_lm": "lm.bpb_lm",
            "mdlm": "mdlm.task", "image_flow": "flow.task",
            "classification": "classification.task"}


def register(cls: type[Task]) -> type[Task]:
    """Make `cls` available as `{"task": {"name": cls.name}}` (usable as a decorator)."""
    _REGISTRY[cls.name] = cls
    return cls


def _import_failure(err: BaseException, origin: str) -> str:
    """The user's line that raised, for a one-line message (`my_tasks.py:12: NameError: x`)."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == origin]
    if isinstance(err, SyntaxError):
        return f"{err.filename}:{err.lineno}: SyntaxError: {err.msg}"
    at = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    return f"{at}{type(err).__name__}: {err}"


def _is_file(spec: str) -> bool:
    """A path (`my_tasks.py`, `./tasks`, `.`), not a dotted module name (`pkg.tasks`)."""
    return spec.endswith(".py") or not all(part.isidentifier() for part in spec.split("."))


def _import(spec: str) -> Any:
    """The module `spec` names (a `.py` path or a dotted name), imported."""
    if not _is_file(spec):
        return importlib.import_module(spec)
    path = input_file(spec, "task module").resolve()
    name = f"pytyr_user_tasks_{path.stem}_{abs(hash(str(path)))}"
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise ConfigError(f"{spec}: the task module cannot be imported (not a .py file)")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_task_module(spec: Any, where: str) -> None:
    """Import the module of `task.module` and register every Task subclass it defines."""
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"{where}: 'task.module' must be a path to a .py file or a module "
                          f"name, got {spec!r}")
    try:
        module = _import(spec)
    except ModuleNotFoundError as err:
        raise ConfigError(f"{where}: 'task.module' {spec!r} cannot be imported: {err}") from None
    except ConfigError:
        raise
    except Exception as err:  # the user's code: one line, at its line
        origin = str(Path(spec).resolve()) if _is_file(spec) else ""
        raise ConfigError(f"{where}: task module {spec} failed to import: "
                          f"{_import_failure(err, origin)}") from None
    tasks = [v for v in vars(module).values()
             if isinstance(v, type) and issubclass(v, Task) and v.__module__ == module.__name__
             and isinstance(getattr(v, "name", None), str)]
    if not tasks:
        raise ConfigError(f"{where}: task module {spec} defines no Task subclass with a name")
    for cls in tasks:
        if cls.name in BUILTIN:
            raise ConfigError(f"{where}: task module {spec} defines a task named "
                              f"'{cls.name}', the name of a built-in task; rename it")
        _REGISTRY[cls.name] = cls


def _entry_point(name: str) -> None:
    """Register the task an installed package offers under `name`, if any."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS, name=name):
        cls = ep.load()
        if isinstance(cls, type) and issubclass(cls, Task):
            _REGISTRY.setdefault(name, cls)


def task_class(table: dict[str, Any], where: str) -> type[Task]:
    name = table.get("name")
    if MODULE in table:
        load_task_module(table[MODULE], where)
    elif isinstance(name, str) and name not in _REGISTRY and name not in BUILTIN:
        _entry_point(name)
    known = sorted({*BUILTIN, *_REGISTRY})
    if name is None:
        raise ConfigError(f"{where}: missing key 'task.name' (known tasks: {', '.join(known)})")
    if name not in _REGISTRY and name in BUILTIN:
        from importlib import import_module

        import_module(f"pytyr.train.tasks.{BUILTIN[name]}")
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ConfigError(f"{where}: unknown task {name!r} (known: {', '.join(known)})")
    return _REGISTRY[name]


def task_options(cls: type[Task], table: dict[str, Any], where: str, *,
                 record: bool = False) -> Any:
    """The task's options from its table; `name` and `module` are not options, nor, in a
    run's record (`record`), `fitted`: what the task computed from its data
    (`Task.describe_for_run`), which a config may not set."""
    if "fitted" in table and not record:
        raise ConfigError(f"{where}: 'task.fitted' is not an option: `tyr train` records there, "
                          f"in run.json, what the task computed from its data; remove it")
    return load_dataclass(cls.Options, {k: v for k, v in table.items()
                                        if k not in ("name", MODULE, "fitted")}, where,
                          prefix="task.")


def task_record(task: Task, table: dict[str, Any]) -> dict[str, Any]:
    """The task's table for run.json: what `tyr sample` needs to rebuild it, the module of
    a user's task included (as an absolute path)."""
    record = task.describe_for_run()
    if MODULE in table:
        spec = table[MODULE]
        record[MODULE] = str(Path(spec).resolve()) if _is_file(spec) else spec
    return record


def sample_options(cls: type[Task], table: dict[str, Any], where: str) -> Any:
    if cls.SampleOptions is None:
        if table:
            raise ConfigError(f"{where}: task '{cls.name}' does not sample; remove the "
                              f"'sample' table")
        return None
    return load_dataclass(cls.SampleOptions, table, where, prefix="sample.")


def make_task(table: dict[str, Any], ctx: TaskContext, where: str, *,
              record: bool = False) -> Task:
    """The task a `task` table names, with its options, for `ctx` (not yet prepared)."""
    cls = task_class(table, where)
    return cls(task_options(cls, table, where, record=record), ctx)
