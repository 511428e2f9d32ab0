"""The tasks `tyr train` knows, by name; `register` adds one (an example's own task).

    {"task": {"name": "char_lm", "seq": 64}}        a character corpus (Shakespeare or a file)
    {"task": {"name": "shard_lm", "data": "DIR"}}    token shards written by `tyr data prepare`
    {"task": {"name": "bpb_lm", "data": "DIR"}}      the same, evaluated in bits per byte too
    {"task": {"name": "classification", "data": "spirals" | "table.csv" | "table.parquet"}}

A task of your own: `{"task": {"name": "mine", "module": "my_tasks.py"}}` (or `--set
task.module=my_tasks.py`) imports that file, or a dotted module name, before the name is
looked up; every `Task` subclass it defines is registered under its `name`. An installed
package can offer tasks through the entry-point group `pytyr.tasks` (`name = "pkg.mod:Cls"`).

A run directory is data: a run's record names its task module and the SHA-256 of the file as
training imported it (`task_record`), and nothing that reads a run imports it
(`recorded_task_class`): the user names the module again, and its file must have that digest
before any of it runs.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any

from pytyr.config import load_dataclass, parse_set, refuse_unread, show
from pytyr.digest import file_sha256
from pytyr.errors import ConfigError
from pytyr.paths import input_file
from pytyr.train.task import Task, TaskContext

MODULE = "module"  # the task table's key naming the module that defines the task
SHA256 = "module_sha256"  # in a run's record: the SHA-256 of that module's file at training
ENTRY_POINTS = "pytyr.tasks"

_REGISTRY: dict[str, type[Task]] = {}
_DIGESTS: dict[str, str] = {}  # the SHA-256 of each task module's file as imported, by spec
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


def _module_file(name: str) -> Path | None:
    """The file a dotted module name resolves to, found by the import system's finders level
    by level, so that none of it (nor its packages' `__init__`) runs; None where it has none."""
    found, path, parts = None, None, name.split(".")
    for i in range(1, len(parts) + 1):
        level = ".".join(parts[:i])
        loaded = sys.modules.get(level)
        if loaded is not None:
            found = getattr(loaded, "__spec__", None)
        else:
            finders = (f.find_spec for f in sys.meta_path if hasattr(f, "find_spec"))
            found = next((s for s in (find(level, path) for find in finders) if s), None)
        if found is None:
            return None
        path = found.submodule_search_locations
        if path is None and level != name:
            return None
    origin = found.origin if found is not None and found.has_location else None
    return Path(origin) if origin and Path(origin).is_file() else None


def _check_digest(spec: str, digest: str | None, expect: tuple[str, str | None] | None) -> None:
    """Refuse the module `spec` (its file's SHA-256 `digest`) unless it is the one a run
    recorded (`expect`: the module the run names, the SHA-256 it recorded)."""
    if expect is None:
        return
    recorded, want = expect
    if want is None:  # a run of an older tyr: named by the user, so theirs to vouch for
        print(f"note: the run records no SHA-256 of its task module {recorded}; {spec} is "
              f"used unchecked", file=sys.stderr)
    elif digest is None:
        raise ConfigError(f"--set task.module={spec}: no file to check against the SHA-256 "
                          f"{want} the run recorded for its task module {recorded}")
    elif digest != want:
        raise ConfigError(f"--set task.module={spec}: its file has SHA-256 {digest}, not the "
                          f"{want} of the task module the run was trained with ({recorded}); "
                          f"name that module")


def _import(spec: str, expect: tuple[str, str | None] | None = None) -> Any:
    """The module `spec` names (a `.py` path or a dotted name), imported once its file's
    SHA-256 is checked (`_check_digest`); the digest is kept for the run's record."""
    if not _is_file(spec):
        file = _module_file(spec)
        digest = file_sha256(file) if file is not None else None
        _check_digest(spec, digest, expect)
        module = importlib.import_module(spec)
        if digest is not None:
            _DIGESTS[spec] = digest
        return module
    path = input_file(spec, "task module").resolve()
    data = path.read_bytes()  # the bytes checked are the bytes run
    digest = hashlib.sha256(data).hexdigest()
    _check_digest(spec, digest, expect)
    name = f"pytyr_user_tasks_{path.stem}_{abs(hash(str(path)))}"
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise ConfigError(f"{spec}: the task module cannot be imported (not a .py file)")
    module = importlib.util.module_from_spec(found)
    code = compile(data, str(path), "exec")
    sys.modules[name] = module
    try:
        exec(code, vars(module))  # noqa: S102 — the user's module, as they named it
    except BaseException:
        del sys.modules[name]
        raise
    _DIGESTS[spec] = digest
    return module


def load_task_module(spec: Any, where: str,
                     expect: tuple[str, str | None] | None = None) -> None:
    """Import the module of `task.module` and register every Task subclass it defines;
    `expect`: the module a run recorded and its SHA-256, which the file must have."""
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"{where}: 'task.module' must be a path to a .py file or a module "
                          f"name, got {show(spec)}")
    try:
        module = _import(spec, expect)
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


def _builtin(name: str) -> None:
    """Register the built-in task `name` from its family's module, read from the module
    itself: an import registers it only the first time (a registry replaced since, as tests
    do, would otherwise never see it again)."""
    module = importlib.import_module(f"pytyr.train.tasks.{BUILTIN[name]}")
    for v in vars(module).values():
        if isinstance(v, type) and issubclass(v, Task) and getattr(v, "name", None) == name:
            _REGISTRY[name] = v


def task_class(table: dict[str, Any], where: str) -> type[Task]:
    name = table.get("name")
    if MODULE in table:
        load_task_module(table[MODULE], where)
    elif isinstance(name, str) and name not in _REGISTRY and name not in BUILTIN:
        _entry_point(name)
    known = sorted({*BUILTIN, *_REGISTRY})
    if name is None:
        raise ConfigError(f"{where}: missing key 'task.name' (known tasks: {', '.join(known)})")
    if not isinstance(name, str):
        raise ConfigError(f"{where}: 'task.name' must be a task's name, not {show(name)} "
                          f"(known: {', '.join(known)})")
    if name not in _REGISTRY and name in BUILTIN:
        _builtin(name)
    if name not in _REGISTRY:
        raise ConfigError(f"{where}: unknown task {name!r} (known: {', '.join(known)})")
    return _REGISTRY[name]


def task_options(cls: type[Task], table: dict[str, Any], where: str, *,
                 record: bool = False) -> Any:
    """The task's options from its table; `name` and `module` are not options, nor, in a
    run's record (`record`), `fitted` (what the task computed from its data,
    `Task.describe_for_run`, which a config may not set) and the module's SHA-256."""
    if "fitted" in table and not record:
        raise ConfigError(f"{where}: 'task.fitted' is not an option: `tyr train` records there, "
                          f"in run.json, what the task computed from its data; remove it")
    kept = ("name", MODULE, "fitted", *((SHA256,) if record else ()))
    return load_dataclass(cls.Options, {k: v for k, v in table.items() if k not in kept},
                          where, prefix="task.")


def task_record(task: Task, table: dict[str, Any]) -> dict[str, Any]:
    """The task's table for run.json: what `tyr sample` needs to rebuild it; for a user's
    task, the module (a file as an absolute path) and the SHA-256 of its file as imported."""
    record = task.describe_for_run()
    if MODULE in table:
        spec = table[MODULE]
        record[MODULE] = str(Path(spec).resolve()) if _is_file(spec) else spec
        if spec in _DIGESTS:
            record[SHA256] = _DIGESTS[spec]
    return record


def recorded_task_class(record: dict[str, Any], where: str,
                        named: str | None = None) -> type[Task]:
    """The task class of a run's record (`where`: its run.json). A run directory is data: no
    module it names is imported. A run trained with a task module of the user's needs it
    named again (`named`: `--set task.module=PATH`), and its file must have the SHA-256
    recorded at training time before it is imported."""
    table = {k: v for k, v in record.items() if k not in (MODULE, SHA256)}
    if MODULE not in record and SHA256 not in record:
        if named is not None:
            raise ConfigError(f"{where}: the run's task {show(record.get('name'))} is not from "
                              f"a task module; remove --set task.module")
        return task_class(table, where)
    recorded, digest = record.get(MODULE), record.get(SHA256)
    if not (isinstance(recorded, str) and recorded.isprintable()):
        recorded = show(recorded)
    if digest is not None and not (isinstance(digest, str) and len(digest) == 64
                                   and all(c in "0123456789abcdef" for c in digest)):
        raise ConfigError(f"{where}: 'task.{SHA256}' is not a SHA-256 (64 hex digits)")
    if named is None:
        raise ConfigError(f"{where}: the run was trained with the task module {recorded}"
                          + (f" (SHA-256 {digest})" if digest else "")
                          + "; a run directory is data, so no module it names is imported: "
                            "name the module again with --set task.module=PATH")
    load_task_module(named, "--set task.module", expect=(recorded, digest))
    return task_class(table, where)


def named_task_module(sets: list[str] | None, command: str, alone: bool = False) -> str | None:
    """The task module `--set task.module=PATH` names for a command that reads a run (the
    run's record has its task's options: no other `task.` key is read; `alone`: nor any other
    table)."""
    if alone:
        refuse_unread(sets, command, ("task",))
    table = parse_set(sets or []).get("task", {})
    other = sorted(k for k in table if k != MODULE) if isinstance(table, dict) else ["*"]
    if other:
        raise ConfigError(f"--set task.{other[0]}: `tyr {command}` takes the run's task options "
                          f"from its run.json; only task.module may be set (the module a run "
                          f"was trained with)")
    return table.get(MODULE)


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
