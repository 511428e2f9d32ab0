"""Bad paths and values are one located line before any work, never a traceback: shard names
that leave --out, --out at a file, an unknown --bos, tokenizer numbers beyond range, binary
chat input and prompts, `--set` keys a command does not use, Muon name lists that match no
parameter, a corpus cache at a file, a dropout outside [0, 1)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrity_runs import bpe_run, bpe_shards, char_args, char_run
from pytyr.cli import main

ROOT = Path(__file__).resolve().parents[1]
def slow(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=[
        HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _one_line(err: str, command: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"tyr {command}: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return bpe_shards(tmp_path_factory.mktemp("bpe") / "data")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory, data) -> Path:
    return bpe_run(tmp_path_factory.mktemp("bperun") / "run", data)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corpus")


def _prepare(data: Path, out: Path, *extra: str) -> list[str]:
    return ["data", "prepare", str(data.parent / "docs.parquet"), "--tokenizer",
            str(data.parent / "tok.json"), "--out", str(out), "--no-progress", *extra]


# -- data prepare and tokenizer train -------------------------------------------------------

@pytest.mark.parametrize("name", ["../x", "a/b", "/abs", "..", ".", "", "x\0y", "a\\b"])
def test_a_shard_name_that_is_no_plain_name_is_refused(data, tmp_path, capsys, name):
    out = tmp_path / "in" / "out"
    assert main(_prepare(data, out, f"--name={name}")) == 1
    line = _one_line(capsys.readouterr().err, "data prepare")
    assert "--name" in line
    assert not any(tmp_path.rglob("*.bin"))  # nothing written, inside --out or beside it


@slow(25)
@given(name=st.text(st.sampled_from("ab./\\-_ ~"), min_size=0, max_size=6))
def test_every_shard_lands_inside_out(data, tmp_path, capsys, name):
    import tempfile

    work = Path(tempfile.mkdtemp(dir=tmp_path))
    out = work / "out"
    code = main(_prepare(data, out, f"--name={name}"))
    err = capsys.readouterr().err
    written = [p for p in work.rglob("*") if p.is_file()]
    assert all(out in p.parents for p in written), written
    if code != 0:
        _one_line(err, "data prepare")


@pytest.mark.parametrize("where", ["file", "file/under"])
def test_data_prepare_out_at_or_under_a_file_is_one_line(data, tmp_path, capsys, where):
    (tmp_path / "file").write_text("not a directory")
    assert main(_prepare(data, tmp_path / where)) == 1
    line = _one_line(capsys.readouterr().err, "data prepare")
    assert str(tmp_path / "file") in line


def test_an_unknown_bos_is_refused_not_dropped(data, tmp_path, capsys):
    assert main(_prepare(data, tmp_path / "out", "--bos", "<|nope|>")) == 1
    line = _one_line(capsys.readouterr().err, "data prepare")
    assert "<|nope|>" in line and "<|bos|>" in line  # the token, and those the file has
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_no_bos_is_said_explicitly(data, tmp_path, capsys):
    assert main(_prepare(data, tmp_path / "out", "--no-bos")) == 0
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["bos_id"] is None


@pytest.mark.parametrize("option,value", [
    ("--vocab-size", str(10**23)), ("--vocab-size", str(-(10**23))), ("--vocab-size", "0"),
    ("--vocab-size", str(2**64)), ("--min-frequency", "-1"), ("--min-frequency", str(2**64)),
    ("--min-frequency", str(10**30)),
])
def test_tokenizer_numbers_beyond_range_are_one_line(data, tmp_path, capsys, option, value):
    argv = ["tokenizer", "train", str(data.parent / "docs.parquet"), "--out",
            str(tmp_path / "t.json"), option, value]
    assert main(argv) == 1
    line = _one_line(capsys.readouterr().err, "tokenizer train")
    assert option in line
    assert not (tmp_path / "t.json").exists()


@slow(20)
@given(vocab=st.one_of(st.integers(-2**70, 2**70), st.integers(250, 400)),
       freq=st.one_of(st.integers(-2**70, 2**70), st.integers(0, 5)))
def test_tokenizer_train_any_numbers(data, tmp_path, capsys, vocab, freq):
    argv = ["tokenizer", "train", str(data.parent / "docs.parquet"), "--out",
            str(tmp_path / "t.json"), "--vocab-size", str(vocab), "--min-frequency", str(freq)]
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 1)
    if code == 1:
        _one_line(err, "tokenizer train")


# -- chat and sample ------------------------------------------------------------------------

def _cli(args: list, stdin: bytes = b"", env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "pytyr.cli", *args], cwd=ROOT, input=stdin,
                          capture_output=True, env=env, timeout=120)


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_chat_with_binary_input_names_the_line_and_goes_on(bpe, locale):
    res = _cli(["chat", "--run", str(bpe), "--max-new-tokens", "3"],
               stdin=b"\xff\xfe binary\nThe cat\n\x80\n", env={"LC_ALL": locale,
                                                               "PYTHONIOENCODING": ""})
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode == 0 and "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 2 and all(ln.startswith("tyr chat: line ") for ln in lines), err
    assert "line 1" in lines[0] and "line 3" in lines[1] and "UTF-8" in lines[0]


@pytest.mark.parametrize("command", ["sample", "chat"])
def test_a_prompt_that_is_not_utf8_is_one_line(bpe, command):
    args = ["sample", "--run", str(bpe), "--prompt", os.fsdecode(b"The \xff")] \
        if command == "sample" else \
        ["chat", "--run", str(bpe), "--stop", os.fsdecode(b"\xff")]
    res = _cli(args)
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode == 1
    _one_line(err, command)
    assert "UTF-8" in err


@pytest.mark.parametrize("command", ["sample", "chat"])
@pytest.mark.parametrize("key", ["train.lr=0.5", "model.c.n_layer=3", "task.seq=4", "out=x",
                                 "zz=1"])
def test_set_keys_a_command_does_not_use_are_named(bpe, capsys, monkeypatch, command, key):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("The\n"))
    assert main([command, "--run", str(bpe), "--set", key, "--set", "sample.seed=3"]) == 1
    line = _one_line(capsys.readouterr().err, command)
    assert key.split("=")[0] in line


def test_run_names_set_keys_it_does_not_use(bpe, tmp_path, capsys):
    import torch

    from pytyr.safetensors import write_file

    write_file({"idx": torch.tensor([[1, 2, 3]])}, tmp_path / "i.st")
    assert main(["run", "examples/gpt/GPT.lean", "--model", "gptLogits", "--run", str(bpe),
                 "--inputs", str(tmp_path / "i.st"), "-o", str(tmp_path / "o.st"),
                 "--set", "train.lr=0.5"]) == 1
    assert "train.lr" in _one_line(capsys.readouterr().err, "run")


# -- train ----------------------------------------------------------------------------------

@pytest.mark.parametrize("sets,named", [
    (["train.optimizer=muon"], "lm_head"),  # the GPT's head is tied: no lm_head
    (["train.optimizer=muon", 'train.muon.embedding_names=["wte","wtee"]',
      "train.muon.head_names=[]"], "wtee"),
    (["train.optimizer=muon", 'train.muon.head_names=["nohead"]',
      'train.muon.embedding_names=["wte"]'], "nohead"),
])
def test_muon_names_that_match_no_parameter_are_refused_before_work(tmp_path, cache, capsys,
                                                                    sets, named):
    flat = [a for s in sets for a in ("--set", s)]
    assert main(char_args(tmp_path / "run", cache, "--set", "train.max_iters=2", *flat)) == 1
    line = _one_line(capsys.readouterr().err, "train")
    assert named in line and "train.muon" in line
    assert not (tmp_path / "run" / "run.json").exists()


def test_muon_names_that_match_train(tmp_path, cache, capsys):
    assert main(char_args(tmp_path / "run", cache, "--set", "train.max_iters=2",
                          "--set", "train.optimizer=muon", "--set", "train.muon.head_names=[]",
                          "--set", 'train.muon.embedding_names=["wte","wpe"]')) == 0


@pytest.mark.parametrize("where", ["file", "file/under"])
def test_a_cache_dir_at_a_file_is_one_line(tmp_path, capsys, where):
    (tmp_path / "file").write_text("x")
    args = char_args(tmp_path / "run", tmp_path / where, "--set", "train.max_iters=2")
    assert main(args) == 1
    line = _one_line(capsys.readouterr().err, "train")
    assert str(tmp_path / "file") in line and "task.cache_dir" in line


@pytest.mark.parametrize("p", ["1.5", "-0.1", "1.0", "1e9"])
def test_a_dropout_outside_0_1_fails_before_work(tmp_path, cache, capsys, p):
    assert main(char_args(tmp_path / "run", cache, "--set", "train.max_iters=2",
                          "--set", f"model.c.dropout={p}")) == 1
    line = _one_line(capsys.readouterr().err, "train")
    assert "model.c.dropout" in line and "[0, 1)" in line
    assert not (tmp_path / "run").exists() or not (tmp_path / "run" / "run.json").exists()


def test_a_dropout_inside_0_1_trains(tmp_path, cache):
    char_run(tmp_path / "run", cache, 2, "--set", "model.c.dropout=0.5")
