"""The tasks `tyr train` knows, by name; `register` adds one (an example's own task).

    {"task": {"name": "char_lm", "seq": 64}}        a character corpus (Shakespeare or a file)
    {"task": {"name": "shard_lm", "data": "DIR"}}    token shards written by `tyr data prepare`
    {"task": {"name": "bpb_lm", "data": "DIR"}}      the same, evaluated in bits per byte too
    {"task": {"name": "classification", "data": "spirals" | "table.csv" | "table.parquet"}}
"""
from __future__ import annotations

from typing import Any

from pytyr.config import load_dataclass
from pytyr.errors import ConfigError
from pytyr.train.task import Task, TaskContext

_REGISTRY: dict[str, type[Task]] = {}
_BUILTIN = {"char_lm": "char_lm", "shard_lm": "shard_lm", "classification": "classification",
            "mdlm": "diffusion", "image_flow": "image_flow", "bpb_lm": "bpb_lm"}


def register(cls: type[Task]) -> type[Task]:
    """Make `cls` available as `{"task": {"name": cls.name}}` (usable as a decorator)."""
    _REGISTRY[cls.name] = cls
    return cls


def task_class(table: dict[str, Any], where: str) -> type[Task]:
    name = table.get("name")
    known = sorted({*_BUILTIN, *_REGISTRY})
    if name is None:
        raise ConfigError(f"{where}: missing key 'task.name' (known tasks: {', '.join(known)})")
    if name not in _REGISTRY and name in _BUILTIN:
        from importlib import import_module

        import_module(f"pytyr.train.tasks.{_BUILTIN[name]}")
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ConfigError(f"{where}: unknown task {name!r} (known: {', '.join(known)})")
    return _REGISTRY[name]


def task_options(cls: type[Task], table: dict[str, Any], where: str) -> Any:
    """The task's options from its table; `name` and, in a run's record, `fitted` (what the
    task computed from its data, `Task.describe_for_run`) are not options."""
    return load_dataclass(cls.Options, {k: v for k, v in table.items()
                                        if k not in ("name", "fitted")}, where, prefix="task.")


def sample_options(cls: type[Task], table: dict[str, Any], where: str) -> Any:
    if cls.SampleOptions is None:
        if table:
            raise ConfigError(f"{where}: task '{cls.name}' does not sample; remove the "
                              f"'sample' table")
        return None
    return load_dataclass(cls.SampleOptions, table, where, prefix="sample.")


def make_task(table: dict[str, Any], ctx: TaskContext, where: str) -> Task:
    cls = task_class(table, where)
    if "fitted" in table:
        raise ConfigError(f"{where}: 'task.fitted' is not an option: `tyr train` records there, "
                          f"in run.json, what the task computed from its data; remove it")
    return cls(task_options(cls, table, where), ctx)
