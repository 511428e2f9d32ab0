"""A task of the user's own, named by `task.module` (a file or a module) or an entry point:
trained by `tyr train`, recorded in run.json; a broken module is one located line."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytyr.cli import main
from pytyr.digest import file_sha256

MLP = Path(__file__).resolve().parents[1] / "examples" / "mlp" / "MLP.lean"
XOR = textwrap.dedent('''
    """XOR of two noisy bits: the smallest task a 2-layer MLP needs its hidden layer for."""
    import dataclasses

    import torch

    from pytyr.train.task import Feed, Task, epoch_rows


    @dataclasses.dataclass(frozen=True)
    class XorOptions:
        rows: int = 512


    class Xor(Task):
        name = "xor"
        Options = XorOptions

        def prepare(self):
            g = torch.Generator().manual_seed(0)
            bits = torch.randint(0, 2, (self.options.rows, 2), generator=g)
            self.x = bits.float() + 0.05 * torch.randn(self.options.rows, 2, generator=g)
            self.y = bits[:, 0] ^ bits[:, 1]
            return f"xor: {self.options.rows} rows"

        def feeds(self):
            return {"x": Feed("f32", ("batch", "features")), "y": Feed("i64", ("batch",), "classes")}

        def sizes(self):
            return {**super().sizes(), "features": 2, "classes": 2}

        def batch(self, k):
            rows = epoch_rows(self.options.rows, k, self.ctx, self.ctx.seed)
            return {"x": self.x[rows], "y": self.y[rows]}

        def eval_batches(self, split, iters):
            n = self.ctx.micro_batch
            yield {"x": self.x[:n], "y": self.y[:n]}
''')
@pytest.fixture(autouse=True)
def _registry(monkeypatch):
    """Each test starts from the built-in tasks (the registry lives as long as the process)."""
    from pytyr.train import tasks

    monkeypatch.setattr(tasks, "_REGISTRY", dict(tasks._REGISTRY))


CONFIG = {"model": {"c": {"inputs": 2, "hidden": 16, "classes": 2}},
          "task": {"name": "xor"},
          "train": {"max_iters": 60, "batch": 32, "eval_interval": 30, "threads": 1}}


def _train(tmp_path, module, *extra):
    (tmp_path / "xor.json").write_text(json.dumps(CONFIG))
    return main(["train", str(MLP), "--model", "mlp", "--config", str(tmp_path / "xor.json"),
                 "--set", f"task.module={module}", "--set", f"out={tmp_path / 'run'}", "-q",
                 *extra])


def test_a_task_file_trains_and_is_recorded(tmp_path, capsys, monkeypatch):
    (tmp_path / "xor_task.py").write_text(XOR)
    monkeypatch.chdir(tmp_path)  # a relative path, as a user gives it
    assert _train(tmp_path, "xor_task.py") == 0
    assert "task xor: xor: 512 rows" in capsys.readouterr().out
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["task"] == {"name": "xor", "rows": 512, "module": str(tmp_path / "xor_task.py"),
                           "module_sha256": file_sha256(tmp_path / "xor_task.py")}
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["final_val_loss"] < metrics["history"]["evals"][0]["val"]


def test_a_dotted_module_name_works_too(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_tasks_pkg").mkdir()
    (tmp_path / "my_tasks_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_tasks_pkg" / "xor.py").write_text(XOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _train(tmp_path, "my_tasks_pkg.xor") == 0


@pytest.mark.parametrize("source,frag", [
    ("def broken(:\n", "bad.py:1: SyntaxError: "),
    ("import torch\nx = 1\nraise RuntimeError('no data here')\n",
     "bad.py:3: RuntimeError: no data here"),
    ("from pytyr.train.task import Task\n", "defines no Task subclass with a name"),
    (XOR.replace('name = "xor"', 'name = "char_lm"'), "the name of a built-in task; rename it"),
    (XOR.replace('name = "xor"', 'name = "xnor"'), "unknown task 'xor' (known: "),
])
def test_a_broken_task_module_is_one_located_line(tmp_path, capsys, source, frag):
    (tmp_path / "bad.py").write_text(source)
    assert _train(tmp_path, tmp_path / "bad.py") == 1
    err = capsys.readouterr().err
    assert frag in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("module,frag", [
    ("no_such_module_xyz", "'task.module' 'no_such_module_xyz' cannot be imported"),
    ("missing.py", "missing.py: task module not found"),
    (".", "is a directory"),
])
def test_a_task_module_that_is_not_there(tmp_path, capsys, module, frag):
    assert _train(tmp_path, module) == 1
    err = capsys.readouterr().err
    assert frag in err and err.count("\n") == 1, err


def test_an_installed_package_offers_its_task_by_entry_point(tmp_path, monkeypatch):
    import importlib.metadata as md

    (tmp_path / "xor_plugin.py").write_text(XOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    point = md.EntryPoint(name="xor", value="xor_plugin:Xor", group="pytyr.tasks")
    monkeypatch.setattr(md, "entry_points", lambda group, name: [
        p for p in [point] if p.group == group and p.name == name])
    (tmp_path / "xor.json").write_text(json.dumps(CONFIG))
    assert main(["train", str(MLP), "--model", "mlp", "--config", str(tmp_path / "xor.json"),
                 "--set", f"out={tmp_path / 'run'}", "-q"]) == 0
