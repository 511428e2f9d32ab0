"""A run directory is data: `tyr sample`, `chat` and `export` never import a task module its
run.json names (nor does `tyr train --resume`), whatever its checksum says; the user names
the module again (`--set task.module=PATH`), and its file must have the SHA-256 recorded when
the run was trained before any of it runs."""
from __future__ import annotations

import io
import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from integrity_runs import char_args
from pytyr.cli import main
from pytyr.digest import file_sha256, stamped

# Imported, it leaves a mark beside itself: the mark says whether it ever ran.
MODULE = textwrap.dedent('''
    from pathlib import Path

    with Path(__file__).with_suffix(".imported").open("a") as mark:
        mark.write("imported\\n")

    from pytyr.train.tasks.lm.char_lm import CharLM


    class MyChar(CharLM):
        name = "my_char"
''')
NAMED = ("--set", "task.name=my_char")


def _mark(module: Path) -> Path:
    return module.with_suffix(".imported")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny GPT run of 2 steps trained with a task module of the user's (`my_char.py`, a
    character LM under its own name): (the run, the module)."""
    from pytyr.train import tasks

    root = tmp_path_factory.mktemp("rundata")
    module = root / "my_char.py"
    module.write_text(MODULE)
    with pytest.MonkeyPatch.context() as mp:  # the registry outlives the test otherwise
        mp.setattr(tasks, "_REGISTRY", dict(tasks._REGISTRY))
        assert main(char_args(root / "run", root / "cache", "--set", "train.max_iters=2",
                              "--set", f"task.module={module}", *NAMED)) == 0
    return root / "run", module


@pytest.fixture(autouse=True)
def _registry(monkeypatch):
    from pytyr.train import tasks

    monkeypatch.setattr(tasks, "_REGISTRY", dict(tasks._REGISTRY))


@pytest.fixture
def run(trained, tmp_path) -> Path:
    """A copy of the trained run, its module not imported since."""
    copy = tmp_path / "run"
    shutil.copytree(trained[0], copy)
    _mark(trained[1]).unlink(missing_ok=True)
    return copy


def _commands(run: Path, out: Path, *extra: str) -> dict[str, list[str]]:
    return {"sample": ["sample", "--run", str(run), *extra],
            "chat": ["chat", "--run", str(run), "--max-new-tokens", "3", *extra],
            "export": ["export", "--format", "hf", str(run), str(out), *extra]}


def _call(argv: list[str], monkeypatch) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO("ROMEO:\n"))
    return main(argv)


def _error(capsys) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


def _rewrite(run: Path, **task) -> None:
    """run.json with `task`'s keys changed (None: removed) and its checksum recomputed, as
    anyone can."""
    record = json.loads((run / "run.json").read_text())
    record.pop("checksum")
    record["task"].update(task)
    record["task"] = {k: v for k, v in record["task"].items() if v is not None}
    (run / "run.json").write_text(json.dumps(stamped(record), indent=1))


def test_the_run_records_its_module_and_the_digest_of_its_file(trained):
    run, module = trained
    task = json.loads((run / "run.json").read_text())["task"]
    assert task["module"] == str(module) and task["module_sha256"] == file_sha256(module)


@pytest.mark.parametrize("command", ["sample", "chat", "export"])
def test_a_module_the_run_names_is_never_imported(run, trained, tmp_path, command, capsys,
                                                   monkeypatch):
    argv = _commands(run, tmp_path / "hf")[command]
    assert _call(argv, monkeypatch) == 1
    err = _error(capsys)
    assert err.startswith(f"tyr {command}: {run}/run.json: the run was trained with the task "
                          f"module {trained[1]} (SHA-256 {file_sha256(trained[1])})"), err
    assert err.endswith("name the module again with --set task.module=PATH"), err
    assert not _mark(trained[1]).exists()
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("command", ["sample", "chat", "export"])
def test_a_tampered_record_with_its_checksum_recomputed_imports_nothing(run, tmp_path, command,
                                                                         capsys, monkeypatch):
    evil = tmp_path / "evil.py"  # another module, its digest written in as well
    evil.write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in (str(evil), "evil"):  # a file, or a module on the path
        _rewrite(run, module=module, module_sha256=file_sha256(evil))
        assert _call(_commands(run, tmp_path / "hf")[command], monkeypatch) == 1
        assert "name the module again with --set task.module=PATH" in _error(capsys)
        assert not _mark(evil).exists()
    _rewrite(run, module=None, module_sha256="0" * 64)  # a digest alone: refused the same
    assert _call(_commands(run, tmp_path / "hf")[command], monkeypatch) == 1
    assert "--set task.module=PATH" in _error(capsys) and not _mark(evil).exists()


@pytest.mark.parametrize("command", ["sample", "chat", "export"])
def test_naming_the_module_again_runs_the_command(run, trained, tmp_path, command, capsys,
                                                  monkeypatch):
    argv = _commands(run, tmp_path / "hf", "--set", f"task.module={trained[1]}")[command]
    assert _call(argv, monkeypatch) == 0, capsys.readouterr().err
    assert _mark(trained[1]).read_text() == "imported\n"  # once
    if command == "export":
        assert (tmp_path / "hf" / "config.json").is_file()
    else:
        assert capsys.readouterr().out


@pytest.mark.parametrize("command", ["sample", "chat", "export"])
def test_a_module_of_other_contents_is_refused_naming_both(run, trained, tmp_path, command,
                                                           capsys, monkeypatch):
    other = tmp_path / "my_char.py"
    other.write_text(MODULE + "# changed since the run was trained\n")
    argv = _commands(run, tmp_path / "hf", "--set", f"task.module={other}")[command]
    assert _call(argv, monkeypatch) == 1
    err = _error(capsys)
    assert (f"--set task.module={other}: its file has SHA-256 {file_sha256(other)}, not the "
            f"{file_sha256(trained[1])} of the task module the run was trained with "
            f"({trained[1]})") in err, err
    assert not _mark(other).exists() and not (tmp_path / "hf").exists()


def test_chat_without_a_run_passes_over_runs_of_a_task_module(run, trained, tmp_path, capsys,
                                                              monkeypatch):
    (tmp_path / "runs").mkdir()
    shutil.move(run, tmp_path / "runs" / "mine")
    monkeypatch.chdir(tmp_path)
    assert _call(["chat"], monkeypatch) == 1
    assert "no trained language model under runs/ to chat with" in _error(capsys)
    assert not _mark(trained[1]).exists()


def test_a_dotted_name_is_checked_before_its_package_runs(run, trained, tmp_path, capsys,
                                                         monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        "from pathlib import Path\nPath(__file__).with_suffix('.imported').write_text('x')\n")
    (tmp_path / "pkg" / "mine.py").write_text(MODULE + "# another version\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _call(["sample", "--run", str(run), "--set", "task.module=pkg.mine"],
                 monkeypatch) == 1
    assert "its file has SHA-256" in _error(capsys)
    assert not (tmp_path / "pkg" / "__init__.imported").exists()
    assert not (tmp_path / "pkg" / "mine.imported").exists()
    (tmp_path / "pkg" / "mine.py").write_text(MODULE)  # the same file by another name: taken
    assert _call(["sample", "--run", str(run), "--set", "task.module=pkg.mine"],
                 monkeypatch) == 0


def test_a_run_of_an_older_tyr_without_a_digest_takes_the_named_module(run, trained, capsys,
                                                                       monkeypatch):
    record = json.loads((run / "run.json").read_text())
    record.pop("checksum")
    del record["task"]["module_sha256"]
    (run / "run.json").write_text(json.dumps(stamped(record)))
    assert _call(["sample", "--run", str(run)], monkeypatch) == 1
    assert "--set task.module=PATH" in _error(capsys) and not _mark(trained[1]).exists()
    assert _call(["sample", "--run", str(run), "--set", f"task.module={trained[1]}"],
                 monkeypatch) == 0
    assert "records no SHA-256 of its task module" in capsys.readouterr().err


@pytest.mark.parametrize("argv,frag", [
    (["sample", "--set", "task.seq=3"], "--set task.seq: `tyr sample` takes the run's task "
                                        "options from its run.json; only task.module"),
    (["export", "--format", "hf", "--set", "sample.top_k=2"], "`tyr export` uses only task.*"),
    (["chat", "--set", "task.module=x.py"], "give that run with --run DIR"),
])
def test_other_task_settings_are_refused(tmp_path, argv, frag, capsys, monkeypatch):
    if argv[0] == "export":
        argv = [*argv, str(tmp_path / "run"), str(tmp_path / "hf")]
    elif argv[0] == "sample":
        argv = [*argv, "--run", str(tmp_path / "run")]
    assert _call(argv, monkeypatch) == 1
    assert frag in _error(capsys)


def test_a_module_named_for_a_run_without_one_is_refused(run, trained, capsys, monkeypatch):
    record = json.loads((run / "run.json").read_text())
    record.pop("checksum")
    record["task"] = {k: v for k, v in record["task"].items()
                      if k not in ("module", "module_sha256")} | {"name": "char_lm"}
    (run / "run.json").write_text(json.dumps(stamped(record)))
    assert _call(["sample", "--run", str(run), "--set", f"task.module={trained[1]}"],
                 monkeypatch) == 1
    assert "is not from a task module; remove --set task.module" in _error(capsys)
    assert not _mark(trained[1]).exists()


def test_resume_imports_only_the_module_the_command_names(run, trained, tmp_path, capsys):
    # the config is the user's: without task.module the run's is not taken from run.json
    more = ("--set", "train.max_iters=4")
    assert main(char_args(run, tmp_path / "cache", *more, *NAMED, "--resume")) == 1
    assert "unknown task 'my_char'" in _error(capsys) and not _mark(trained[1]).exists()
    assert main(char_args(run, tmp_path / "cache", *more, *NAMED, "--resume",
                          "--set", f"task.module={trained[1]}")) == 0
    assert _mark(trained[1]).read_text() == "imported\n"
