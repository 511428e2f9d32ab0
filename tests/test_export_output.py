"""`tyr export` writes its directory whole: an export failed or killed at any of its writes
leaves OUT the previous export byte for byte (a kill after the swap: the new one), never a
mix of two; a directory of the user's, an empty name, the working directory, the run directory
and anything inside or above it are refused with nothing changed; a previous export is
replaced, unless a file in it was added or edited since. `tyr import nanochat` and the
directory swap itself (with and without an exchange) the same."""
from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytyr.atomic as atomic
import pytyr.export.output as output
from integrity_runs import rerecord
from pytyr.cli import main
from pytyr.digest import stamped
from pytyr.errors import ConfigError
from pytyr.export.output import RECORD, Output
from pytyr.safetensors import load_file, write_file

transformers = pytest.importorskip("transformers")

GPT = "examples/gpt/GPT.lean"
REAL_PUT, REAL_SWAP = output._put, output.swap_directory
TINY = ["--set", "model.c.n_layer=1", "--set", "model.c.n_head=2", "--set", "model.c.head_dim=8",
        "--set", "model.c.block=16", "--set", "task.seq=16", "--set", "train.batch=4",
        "--set", "train.max_iters=2", "--set", "train.eval_iters=1",
        "--set", "sample.max_new_tokens=0", "-q"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs whose exports differ in weights and in generation_config.json."""
    d = tmp_path_factory.mktemp("export-output")
    a = d / "a"
    assert main(["train", GPT, "--model", "gpt", *TINY, "--set", f"out={a}",
                 "--set", f"task.cache_dir={d / 'cache'}"]) == 0
    b = d / "b"
    shutil.copytree(a, b)
    for which in ("ckpt", "best"):
        if (b / which).is_dir():
            w = load_file(b / which / "model.safetensors")
            write_file({k: v + 0.5 for k, v in w.items()}, b / which / "model.safetensors")
            rerecord(b / which)
    record = json.loads((b / "run.json").read_text())
    record.pop("checksum")
    record["sample"]["temperature"] = 0.5
    (b / "run.json").write_text(json.dumps(stamped(record), indent=1))
    return a, b


def tree(path: Path) -> dict[str, bytes | None]:
    """Every entry under `path` with its bytes (None for a directory)."""
    return {p.relative_to(path).as_posix(): None if p.is_dir() else p.read_bytes()
            for p in sorted(path.rglob("*"))}


def export(run: Path, out: Path | str, *extra: str) -> int:
    return main(["export", "--format", "hf-gpt2", str(run), str(out), *extra])


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory):
    """The trees of run a's and run b's exports, each made alone."""
    d = tmp_path_factory.mktemp("exports")
    assert export(runs[0], d / "a") == 0 and export(runs[1], d / "b") == 0
    old, new = tree(d / "a"), tree(d / "b")
    assert old.keys() == new.keys() and old["model.safetensors"] != new["model.safetensors"]
    assert old["generation_config.json"] != new["generation_config.json"]
    assert old["tokenizer.json"] == new["tokenizer.json"]
    return old, new


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def count_writes(monkeypatch, fail_at: int | None, fault: type[BaseException]) -> list[int]:
    """Every file an export writes goes through `output._put`, then one swap: fail the
    `fail_at`-th of them (0-based) before it happens."""
    calls = [0]

    def step(real):
        def wrapped(*args):
            calls[0] += 1
            if calls[0] - 1 == fail_at:
                raise fault(errno.ENOSPC, "No space left on device", str(args[0]))
            return real(*args)
        return wrapped

    monkeypatch.setattr(output, "_put", step(REAL_PUT))
    monkeypatch.setattr(output, "swap_directory", step(REAL_SWAP))
    return calls


class Killed(BaseException):
    """A kill: nothing after it runs (the clean-up is switched off in the test)."""

    def __init__(self, *_):
        super().__init__("killed")


def test_a_failed_write_at_any_point_leaves_the_previous_export(runs, exports, tmp_path,
                                                                 monkeypatch, capsys):
    old, new = exports
    out = tmp_path / "parent" / "out"
    assert export(runs[0], out) == 0 and tree(out) == old
    with monkeypatch.context() as m:
        calls = count_writes(m, None, OSError)
        assert export(runs[1], tmp_path / "count") == 0
    writes = calls[0]
    assert writes == 8  # four tokenizer files, the model, its config, the record; the swap
    capsys.readouterr()
    for k in range(writes):
        with monkeypatch.context() as m:
            count_writes(m, k, OSError)
            assert export(runs[1], out) == 1
        err = one_line(capsys)
        assert f"{out}: cannot write the output" in err and "No space left" in err
        assert tree(out) == old, f"write {k}"
        assert os.listdir(out.parent) == ["out"], f"write {k} left {os.listdir(out.parent)}"
    assert export(runs[1], out) == 0 and tree(out) == new


def test_a_kill_at_any_point_leaves_one_export_whole(runs, exports, tmp_path, monkeypatch,
                                                     capsys):
    old, new = exports
    out = tmp_path / "out"
    assert export(runs[0], out) == 0
    writes = 8
    with monkeypatch.context() as m:
        m.setattr(shutil, "rmtree", lambda *a, **k: None)  # a kill cleans nothing up
        for k in range(writes):
            count_writes(m, k, Killed)
            with pytest.raises(Killed):
                export(runs[1], out)
            assert tree(out) == old, f"killed at write {k}"
        def swap_then_die(*args):
            REAL_SWAP(*args)
            raise Killed()

        m.setattr(output, "swap_directory", swap_then_die)
        with pytest.raises(Killed):
            export(runs[1], out)
        assert tree(out) == new
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != "out")
    assert len(leftovers) == writes + 1 and all(n.startswith("out.tmp") for n in leftovers)
    # the leftovers are nobody's export: the next one replaces OUT as before
    capsys.readouterr()
    assert export(runs[0], out) == 0 and tree(out) == old
    hf = transformers.GPT2LMHeadModel.from_pretrained(out)
    assert hf.config.n_layer == 1


def test_a_directory_of_the_user_s_is_refused_unchanged_unless_overwrite(runs, exports,
                                                                          tmp_path, capsys):
    old, _ = exports
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"mine": true}\n')
    (out / "notes").mkdir()
    (out / "notes" / "a.txt").write_text("keep me")
    before = tree(out)
    assert export(runs[0], out) == 1
    err = one_line(capsys)
    assert f"{out}: the output directory is not empty and not an output of Tyr's" in err
    assert "--overwrite" in err and tree(out) == before
    assert export(tmp_path / "no-run", out) == 1  # refused before the run is read
    assert "not an output of Tyr's" in one_line(capsys) and tree(out) == before
    assert export(runs[0], out, "--overwrite") == 0 and tree(out) == old


@pytest.mark.parametrize("change,why", [
    (lambda out: (out / "README.md").write_text("my notes"), "README.md in it is not a file"),
    (lambda out: (out / "config.json").write_text("{}"), "config.json in it changed since"),
    (lambda out: (out / RECORD).write_text("[]"), f"its {RECORD} is not one Tyr wrote"),
    (lambda out: (out / RECORD).unlink(), f"no {RECORD}"),
])
def test_a_previous_export_changed_since_is_the_user_s(runs, tmp_path, capsys, change, why):
    out = tmp_path / "out"
    assert export(runs[0], out) == 0
    change(out)
    before = tree(out)
    capsys.readouterr()
    assert export(runs[1], out) == 1
    assert why in one_line(capsys) and tree(out) == before


def test_an_empty_directory_is_filled_and_a_previous_export_replaced(runs, exports, tmp_path):
    old, new = exports
    out = tmp_path / "empty"
    out.mkdir()
    assert export(runs[0], out) == 0 and tree(out) == old
    assert export(runs[1], out) == 0 and tree(out) == new
    record = json.loads((out / RECORD).read_text())
    assert record["written_by"] == "tyr export --format hf-gpt2"
    assert set(record["files"]) == set(new) - {RECORD}


@pytest.mark.parametrize("where,frag", [
    ("", "the output directory is empty"),
    (".", "the output directory is the working directory"),
    ("..", "a directory above the working directory"),
    ("RUN", "the output directory is the run directory"),
    ("RUN/hf", "the output directory lies inside the run directory"),
    ("RUN/..", "the output directory holds the run directory"),
])
@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_places_that_are_not_the_export_s_own_are_refused(runs, tmp_path, monkeypatch, capsys,
                                                          where, frag, overwrite):
    run = tmp_path / "copy" / "run"
    shutil.copytree(runs[0], run)
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.json").write_text("{}")
    monkeypatch.chdir(work)
    before = tree(tmp_path)
    assert export(run, where.replace("RUN", str(run)), *overwrite) == 1
    assert frag in one_line(capsys)
    assert tree(tmp_path) == before


def test_import_nanochat_writes_its_directory_the_same_way(tmp_path, capsys):
    import torch

    from nanochat_reference import RefConfig, RefGPT

    ref = RefGPT(RefConfig(16, 64, 2, 2, 1, 32, "L")).randomize(3)
    ck = tmp_path / "ck"
    ck.mkdir()
    torch.save(ref.state_dict(), ck / "model_000001.pt")
    cfg = ref.cfg
    (ck / "meta_000001.json").write_text(json.dumps({"step": 1, "model_config": {
        "sequence_len": cfg.sequence_len, "vocab_size": cfg.vocab_size, "n_layer": cfg.n_layer,
        "n_head": cfg.n_head, "n_kv_head": cfg.n_kv_head, "n_embd": cfg.n_embd,
        "window_pattern": cfg.window_pattern}}))
    out = tmp_path / "out"
    assert main(["import", "nanochat", str(ck), str(out)]) == 0
    first = tree(out)
    assert set(first) == {"model.safetensors", "config.json", RECORD}
    assert main(["import", "nanochat", str(ck), str(out)]) == 0 and tree(out) == first
    capsys.readouterr()
    for bad, frag in ((ck, "the output directory is the checkpoint"),
                      (ck / "x", "lies inside the checkpoint"),
                      (tmp_path, "holds the checkpoint")):
        before = tree(tmp_path)
        assert main(["import", "nanochat", str(ck), str(bad), "--overwrite"]) == 1
        assert frag in one_line(capsys) and tree(tmp_path) == before
    (out / "config.json").write_text("{}")
    assert main(["import", "nanochat", str(ck), str(out)]) == 1
    assert "config.json in it changed since" in one_line(capsys)


def _fill(path: Path, files: dict[str, bytes]) -> None:
    path.mkdir()
    for name, data in files.items():
        (path / name).write_bytes(data)


names = st.sampled_from(["a", "b", "config.json", "model.safetensors"])
contents = st.dictionaries(names, st.binary(max_size=8), min_size=1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=contents, second=contents, edit=st.sampled_from(["none", "add", "edit"]),
       exchange=st.booleans())
def test_an_output_replaces_only_tyr_s_own_and_whole(tmp_path_factory, monkeypatch, first,
                                                    second, edit, exchange):
    """Any earlier output, edited by hand or not, then another: OUT is the new output exactly,
    or the refusal left it byte for byte; with an exchange or the two renames."""
    d = tmp_path_factory.mktemp("prop")
    out = d / "out"

    def write(files: dict[str, bytes]) -> None:
        with Output(str(out), "test").writing("src") as stage:
            for name, data in files.items():
                stage.write(name, lambda f, data=data: f.write(data))

    with monkeypatch.context() as m:
        if not exchange:
            m.setattr(atomic, "_exchange", lambda a, b: False)
        write(first)
        if edit == "add":
            (out / "added").write_bytes(b"mine")
        elif edit == "edit":
            name = sorted(first)[0]
            (out / name).write_bytes((out / name).read_bytes() + b"!")
        before = tree(out)
        if edit == "none":
            write(second)
            got = tree(out)
            assert {k: v for k, v in got.items() if k != RECORD} == second
        else:
            with pytest.raises(ConfigError, match="not an output of Tyr's"):
                write(second)
            assert tree(out) == before
    assert os.listdir(d) == ["out"]


def test_a_failed_second_rename_puts_the_old_directory_back(tmp_path, monkeypatch):
    stage, final = tmp_path / "s", tmp_path / "f"
    _fill(stage, {"x": b"new"})
    _fill(final, {"x": b"old"})
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    calls = []

    def rename(a, b):
        calls.append((a, b))
        if len(calls) == 2:
            raise OSError(errno.EIO, "I/O error", str(a))
        os.rename(a, b)

    monkeypatch.setattr(atomic, "_rename", rename)
    with pytest.raises(OSError):
        atomic.swap_directory(stage, final)
    assert tree(final) == {"x": b"old"} and tree(stage) == {"x": b"new"}
    assert sorted(os.listdir(tmp_path)) == ["f", "s"]
