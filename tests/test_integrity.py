"""Nothing corrupted is used: every checkpoint file carries a SHA-256 checked at every load,
run.json and the data's metadata carry their own, and a byte flipped anywhere in a file a
run wrote or reads is detected (the file named) or provably harmless (the same JSON value,
or a file nothing reads back), never silently used. A resume that changes the trajectory
(the sequence length included) is refused by name; a damaged state.json or a full disk ends
with one line."""
from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from integrity_runs import bpe_args, bpe_run, bpe_shards, char_args, char_run
from pytyr.cli import main
from pytyr.errors import CheckpointError
from pytyr.train.checkpoint import load_checkpoint, save_checkpoint


def slow(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=[
        HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _flip(path: Path, offset: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= mask
    path.write_bytes(bytes(data))


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- the checkpoint alone -------------------------------------------------------------------

class Net(nn.Module):
    def __init__(self, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = nn.Parameter(torch.randn(6, 5, generator=g))
        self.b = nn.Parameter(torch.randn(6, generator=g))


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    net = Net(0)
    opt = torch.optim.AdamW(net.parameters(), lr=0.1)
    net.w.sum().backward()
    opt.step()
    ck = save_checkpoint(tmp_path_factory.mktemp("ck") / "ckpt", module=net, optimizers=[opt],
                         step=3, config={"lr": 0.1}, extra={"history": {"steps": [1.5e-3]}})
    return ck, {p.name: p.read_bytes() for p in ck.iterdir()}


def _load(ck: Path) -> tuple[dict, dict[str, torch.Tensor], dict]:
    net = Net(1)
    opt = torch.optim.AdamW(net.parameters(), lr=0.1)
    state = load_checkpoint(ck, net, [opt], restore_rng_state=False)
    osd = opt.state_dict()["state"]
    return state, {k: v.clone() for k, v in net.state_dict().items()}, osd


@slow(150)
@given(name=st.sampled_from(["model.safetensors", "optimizer.safetensors", "state.json"]),
       offset=st.integers(0, 1 << 20), mask=st.integers(1, 255))
def test_a_byte_flip_anywhere_in_a_checkpoint_is_detected_or_harmless(saved, tmp_path, name,
                                                                      offset, mask):
    ck, files = saved
    copy = Path(tempfile.mkdtemp(dir=tmp_path)) / "ckpt"
    shutil.copytree(ck, copy)
    _flip(copy / name, offset, mask)
    try:
        state, weights, opt = _load(copy)
    except CheckpointError as err:
        assert name in str(err) and "\n" not in str(err).strip(), err
        return
    # Used: only where the flip did not change what the file means.
    assert name == "state.json", f"a flip in {name} was used"
    assert json.loads((copy / name).read_bytes()) == json.loads(files[name])
    ref_state, ref_weights, ref_opt = _load(ck)
    assert weights.keys() == ref_weights.keys()
    assert all(torch.equal(weights[k], ref_weights[k]) for k in weights)


def test_every_checkpoint_file_carries_its_sha256(saved):
    import hashlib

    ck, files = saved
    state = json.loads(files["state.json"])
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert state["files"][name]["sha256"] == hashlib.sha256(files[name]).hexdigest()


# -- the files of a run, through the commands that read them ----------------------------------

@pytest.fixture(scope="module")
def char(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("char")
    cache = root / "corpus"
    run = char_run(root / "run", cache, 2)
    shutil.copytree(run, root / "ref" / "run")  # the reference resumes a copy
    ref = _consume(root / "ref" / "run", cache, root / "ref")
    return {"root": root, "run": run, "cache": cache, "ref": ref}


def _consume(run: Path, cache: Path, scratch: Path, checkpoint: str = "best") -> dict:
    """What the commands that read a run make of it: sample text, exported weights, the
    forward's outputs (of the `checkpoint` they take) and a resumed run's losses. A command
    that fails gives its error."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from pytyr.safetensors import write_file

    scratch.mkdir(parents=True, exist_ok=True)
    write_file({"idx": torch.tensor([[1, 5, 9, 2]])}, scratch / "idx.safetensors")
    out: dict = {"notes": ""}
    commands = {
        "sample": ["sample", "--run", str(run), "--checkpoint", checkpoint],
        "export": ["export", "--format", "hf-gpt2", str(run), str(scratch / "hf"),
                   "--checkpoint", checkpoint],
        "run": ["run", "examples/gpt/GPT.lean", "--model", "gptLogits", "--run", str(run),
                "--checkpoint", checkpoint,
                "--inputs", str(scratch / "idx.safetensors"), "-o", str(scratch / "o.st")],
        "resume": char_args(run, cache, "--set", "train.max_iters=3", "--resume",
                            "--set", "train.checkpoint_interval=100"),
    }
    for key, argv in commands.items():
        so, se = io.StringIO(), io.StringIO()
        with redirect_stdout(so), redirect_stderr(se):
            code = main(argv)
        if code != 0:
            out[key] = ("error", se.getvalue())
            continue
        out["notes"] += se.getvalue()
        if key == "sample":
            out[key] = so.getvalue()
        elif key == "export":
            out[key] = (scratch / "hf" / "model.safetensors").read_bytes()
        elif key == "run":
            out[key] = (scratch / "o.st").read_bytes()
        else:
            out[key] = [s["loss"] for s in
                        json.loads((run / "metrics.json").read_text())["history"]["steps"]]
    return out


RUN_FILES = ["run.json", "metrics.json", "loss.png", "sample.txt", "ckpt/model.safetensors",
             "ckpt/optimizer.safetensors", "ckpt/state.json", "best/model.safetensors",
             "best/state.json"]
CACHE_FILES = ["meta.json", "input.txt", "train.bin", "val.bin"]


@slow(40)
@given(where=st.sampled_from([("run", f) for f in RUN_FILES] + [("cache", f) for f in CACHE_FILES]),
       offset=st.integers(0, 1 << 24), mask=st.integers(1, 255))
def test_a_byte_flip_in_any_file_of_a_run_is_detected_or_harmless(char, tmp_path, where, offset,
                                                                  mask):
    kind, name = where
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    run, cache = work / "run", work / "corpus"
    shutil.copytree(char["run"], run)
    shutil.copytree(char["cache"], cache)
    target = (run if kind == "run" else cache) / name
    original = target.read_bytes()
    _flip(target, offset, mask)
    got = _consume(run, cache, work / "scratch")
    base = Path(name).name
    for key in ("sample", "export", "run", "resume"):
        if isinstance(got[key], tuple):  # refused: one line naming the file
            line = _one_line(got[key][1])
            assert base in line or str(target) in line, (where, line)
        else:
            assert got[key] == char["ref"][key], (where, key)
    harmless = {"metrics.json", "loss.png", "sample.txt"}  # written for people, never read
    if kind == "run" and base in harmless:
        assert all(not isinstance(got[k], tuple) for k in ("sample", "export", "run"))
    if kind == "cache" and not all(isinstance(got[k], tuple) for k in ("sample", "resume")):
        # a damaged cache is named and rebuilt (the same corpus again), or the flip did not
        # change what the file means
        rebuilt = base in got["notes"] or original == target.read_bytes()
        assert rebuilt or (base.endswith(".json") and json.loads(target.read_bytes())
                           == json.loads(original)), where


@pytest.mark.parametrize("which", ["ckpt", "best"])
def test_run_weights_are_verified_by_every_command(char, tmp_path, which):
    run, cache = tmp_path / "run", tmp_path / "corpus"
    shutil.copytree(char["run"], run)
    shutil.copytree(char["cache"], cache)
    path = run / which / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # the last byte of the last tensor: still a valid file
    path.write_bytes(bytes(data))
    from pytyr.safetensors import write_file

    write_file({"idx": torch.tensor([[1, 5, 9, 2]])}, tmp_path / "idx.safetensors")
    # a checkpoint directory given as --weights is verified too (before the resume below
    # writes a new best/)
    import io
    from contextlib import redirect_stderr

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["run", "examples/gpt/GPT.lean", "--model", "gptLogits", "--weights",
                     str(run / which), "--set", "model.c.n_layer=1", "--set", "model.c.n_head=2",
                     "--set", "model.c.head_dim=8", "--set", "model.c.block=16",
                     "--inputs", str(tmp_path / "idx.safetensors"),
                     "-o", str(tmp_path / "o.st")])
    assert code == 1 and "model.safetensors" in _one_line(err.getvalue())
    got = _consume(run, cache, tmp_path / "scratch", "last" if which == "ckpt" else "best")
    for key in ("sample", "export", "run"):
        assert isinstance(got[key], tuple), key
        line = _one_line(got[key][1])
        assert f"{run / which}: damaged checkpoint: model.safetensors is damaged" in line
    if which == "ckpt":  # the resume reads the last step's
        line = _one_line(got["resume"][1])
        assert f"{run / which}: damaged checkpoint: model.safetensors is damaged" in line
    else:
        assert got["resume"] == char["ref"]["resume"]


def test_an_edited_cache_meta_is_not_used(char, tmp_path):
    run, cache = tmp_path / "run", tmp_path / "corpus"
    shutil.copytree(char["run"], run)
    shutil.copytree(char["cache"], cache)
    meta = json.loads((cache / "meta.json").read_text())
    a, b = meta["itos"].index("a"), meta["itos"].index("e")
    meta["itos"][a], meta["itos"][b] = "e", "a"  # still a valid vocabulary, sorted no more
    (cache / "meta.json").write_text(json.dumps(meta, indent=1))
    got = _consume(run, cache, tmp_path / "scratch")
    assert got["sample"] == char["ref"]["sample"] and "meta.json" in got["notes"]


# -- resume ---------------------------------------------------------------------------------

@pytest.mark.parametrize("change,named", [
    (["--set", "task.seq=8"], "task.seq"),
    (["--set", "model.c.dropout=0.1"], "model.c.dropout"),
    (["--set", "train.lr=0.01"], "lr"),
])
def test_a_resume_that_changes_the_trajectory_is_refused_by_name(char, tmp_path, capsys, change,
                                                                   named):
    run = tmp_path / "run"
    shutil.copytree(char["run"], run)
    before = (run / "ckpt" / "state.json").read_bytes()
    capsys.readouterr()
    assert main(char_args(run, char["cache"], "--set", "train.max_iters=4", "--resume",
                          *change)) == 1
    line = _one_line(capsys.readouterr().err)
    assert "cannot resume" in line and f"{named}: checkpoint" in line, line
    assert (run / "ckpt" / "state.json").read_bytes() == before


@pytest.mark.parametrize("key", ["config", "extra", "rng", "step", "optimizers", "files"])
def test_a_state_json_missing_a_key_is_named(char, tmp_path, capsys, key):
    run = tmp_path / "run"
    shutil.copytree(char["run"], run)
    path = run / "ckpt" / "state.json"
    state = json.loads(path.read_text())
    del state[key]
    path.write_text(json.dumps(state, indent=1))
    capsys.readouterr()
    assert main(char_args(run, char["cache"], "--set", "train.max_iters=4", "--resume")) == 1
    line = _one_line(capsys.readouterr().err)
    assert "state.json" in line


def test_a_full_disk_while_writing_state_json_keeps_the_last_checkpoint(char, tmp_path, capsys,
                                                                         monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(char["run"], run)
    real_fsync = os.fsync

    def full(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("state.json"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    capsys.readouterr()
    assert main(char_args(run, char["cache"], "--set", "train.max_iters=4", "--resume")) == 1
    line = _one_line(capsys.readouterr().err)
    assert "state.json" in line and "No space left on device" in line
    monkeypatch.setattr(os, "fsync", real_fsync)
    from pytyr.train.checkpoint import read_state

    assert read_state(run / "ckpt")["step"] == 2  # the last complete checkpoint, verified
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("ckpt")) == ["ckpt"]


# -- the data's own files -------------------------------------------------------------------

@pytest.fixture(scope="module")
def bpe(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("bpe")
    shards = bpe_shards(root / "data")
    run = bpe_run(root / "run", shards)
    return {"root": root, "shards": shards, "run": run}


def _shards_copy(bpe: dict, tmp_path: Path) -> Path:
    shards = tmp_path / "shards"
    shutil.copytree(bpe["shards"], shards)
    return shards


def test_a_replaced_tokenizer_in_a_shard_directory_is_refused(bpe, tmp_path, capsys):
    from pytyr.data.tokenizer import train_bpe

    shards = _shards_copy(bpe, tmp_path)
    other = train_bpe(["a completely different corpus of text, " * 20], 300)
    other.save(shards / "tokenizer.json")
    capsys.readouterr()
    assert main(bpe_args(tmp_path / "run", shards, "--set", "train.max_iters=2")) == 1
    line = _one_line(capsys.readouterr().err)
    assert "tokenizer.json" in line
    assert not (tmp_path / "run" / "run.json").exists()


@pytest.mark.parametrize("edit", [{"bos_id": 7}, {"vocab_size": 299}, {"tokens": 1}])
def test_an_edited_shard_meta_is_refused(bpe, tmp_path, capsys, edit):
    shards = _shards_copy(bpe, tmp_path)
    meta = json.loads((shards / "meta.json").read_text())
    meta.update(edit)
    (shards / "meta.json").write_text(json.dumps(meta, indent=1))
    capsys.readouterr()
    assert main(bpe_args(tmp_path / "run", shards, "--set", "train.max_iters=2")) == 1
    line = _one_line(capsys.readouterr().err)
    assert "meta.json" in line


@slow(25)
@given(name=st.sampled_from(["meta.json", "tokenizer.json", "data_train_000000.bin",
                             "data_val_000000.bin"]),
       offset=st.integers(0, 1 << 24), mask=st.integers(1, 255))
def test_a_byte_flip_in_a_shard_directory_is_detected_or_harmless(bpe, tmp_path, capsys, name,
                                                                  offset, mask):
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    shards = _shards_copy(bpe, work)
    original = (shards / name).read_bytes()
    _flip(shards / name, offset, mask)
    capsys.readouterr()
    code = main(bpe_args(work / "run", shards, "--set", "train.max_iters=1",
                         "--set", "sample.max_new_tokens=0"))
    err = capsys.readouterr().err
    if code == 1:
        assert name in _one_line(err)
    else:
        assert name.endswith(".json") and json.loads((shards / name).read_bytes()) == \
            json.loads(original), f"a flip in {name} was used"
