"""The config reference (`docs/configuration.md`), made from the dataclasses that check it.

    python -m pytyr.train.reference > docs/configuration.md

A test regenerates it and compares, so the document cannot drift from what the loader checks.
"""
from __future__ import annotations

import sys

from pytyr.config import describe
from pytyr.train.settings import TrainConfig
from pytyr.train.tasks import BUILTIN, task_class

HEAD = """# Configuration reference

Every command that takes a model (`tyr train`, `graph`, `run`, `sample`) reads one config: a
JSON object (the `config.json` beside the model, or `--config FILE`) with the tables below,
then `--set TABLE.KEY=VALUE` overrides (`--set train.lr=3e-4`, `--set model.c.n_layer=2`).
Every key, type and range is checked before any work; an unknown key is named together with
the known ones. This page is generated from the dataclasses that do the checking
(`python -m pytyr.train.reference`).

| table | what |
|---|---|
| `model` | argument values of the `@[model]` (configs, dims); the task fills the dims it feeds (`b`, `t`) and config fields the data decides (`c.vocab` from the corpus) |
| `task` | `name`, one of the tasks below, and its options |
| `train` | optimizer, schedule, batch, evaluation, checkpoints, device (below) |
| `sample` | the task's sampling options (after training, `tyr sample` and `tyr chat`) |
| `out` | the run directory (default `runs/<model>`); refused when empty, `/`, the home directory, the working directory or above it ([runs](own-data.md#where-the-runs-go)) |
"""


def _table(cls: type) -> list[str]:
    rows = ["| key | default | |", "|---|---|---|"]
    for key, default, doc in describe(cls):
        rows.append(f"| `{key}` | `{default}` | {doc} |")
    return rows


def reference() -> str:
    out = [HEAD, "## `train`", "", *_table(TrainConfig), ""]
    for name in sorted(BUILTIN):
        cls = task_class({"name": name}, "reference")
        doc = sys.modules[cls.__module__].__doc__ or ""
        out += [f"## task `{name}`", "", doc.strip().split("\n\n")[0], "", *_table(cls.Options), ""]
        if cls.SampleOptions is not None:
            out += [f"`sample` table of `{name}`:", "", *_table(cls.SampleOptions), ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(reference(), end="")
