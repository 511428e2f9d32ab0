"""Checkpoints: round trip, atomicity under a crash at any point, errors listed together."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from torch import nn

from pytyr.safetensors import load_file
from pytyr.train import checkpoint
from pytyr.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


class Tiny(nn.Module):
    def __init__(self, d: int = 4, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(5, d)
        self.head = nn.Linear(d, 5)


def _model_and_opt(seed=0):
    m = Tiny(seed=seed)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    loss = m.head(m.emb(torch.tensor([1, 2]))).sum()
    loss.backward()
    opt.step()
    return m, opt


def _same(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_round_trip(tmp_path):
    m, opt = _model_and_opt(0)
    torch.manual_seed(11)
    np.random.seed(12)
    random.seed(13)
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(11)
    np.random.seed(12)
    random.seed(13)
    path = save_checkpoint(tmp_path / "ckpt", module=m, optimizers=opt, step=7,
                           config={"lr": 0.01}, extra={"data": {"step": 3}, "history": [1.5]})
    assert sorted(p.name for p in path.iterdir()) == [
        "model.safetensors", "optimizer.safetensors", "state.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert set(load_file(path / "model.safetensors")) == {
        "emb.weight", "head.weight", "head.bias"}
    torch.rand(5), np.random.rand(5), random.random()  # move every RNG on
    m2, opt2 = _model_and_opt(1)
    state = load_checkpoint(path, m2, opt2)
    assert _same(m, m2)
    assert state["step"] == 7 and state["config"] == {"lr": 0.01}
    assert state["extra"] == {"data": {"step": 3}, "history": [1.5]}
    saved_avg, loaded_avg = (o.state_dict()["state"][0]["exp_avg"] for o in (opt, opt2))
    assert torch.equal(saved_avg, loaded_avg)
    got = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    assert got[2] == expected[2]


def test_tied_weights_are_saved(tmp_path):
    m, opt = _model_and_opt()
    m.head.weight = m.emb.weight
    save_checkpoint(tmp_path / "c", module=m, optimizers=None, step=1)
    m2 = Tiny(seed=3)
    m2.head.weight = m2.emb.weight
    load_checkpoint(tmp_path / "c", m2)
    assert _same(m, m2)


@pytest.mark.parametrize("fail_at",
                         ["optimizer", "state", "fsync", "first rename", "second rename"])
def test_crash_mid_save_leaves_previous_checkpoint_loadable(tmp_path, monkeypatch, fail_at):
    m_old, opt_old = _model_and_opt(0)
    path = save_checkpoint(tmp_path / "ckpt", module=m_old, optimizers=opt_old, step=1)
    m_new, opt_new = _model_and_opt(5)

    class Crash(Exception):
        pass

    def crash(*a, **k):
        raise Crash(fail_at)

    if fail_at == "optimizer":  # after model.safetensors is written
        real_write = checkpoint.write_file
        monkeypatch.setattr(checkpoint, "write_file", lambda t, p, m=None: crash() if
                            p.name == "optimizer.safetensors" else real_write(t, p, m))
    elif fail_at == "state":
        monkeypatch.setattr(checkpoint, "_write_state", crash)
    elif fail_at == "fsync":
        monkeypatch.setattr(checkpoint, "fsync_dir", crash)
    else:
        real, calls = checkpoint._rename, []

        def replace(src, dst):
            calls.append(src)
            if len(calls) == (1 if fail_at == "first rename" else 2):
                raise Crash(fail_at)
            real(src, dst)

        monkeypatch.setattr(checkpoint, "_rename", replace)
    with pytest.raises(Crash):
        save_checkpoint(path, module=m_new, optimizers=opt_new, step=2)
    monkeypatch.undo()
    m, opt = _model_and_opt(9)
    assert load_checkpoint(path, m, opt)["step"] == 1
    assert _same(m, m_old)
    # The next save recovers and completes normally.
    save_checkpoint(path, module=m_new, optimizers=opt_new, step=2)
    assert load_checkpoint(path, m, opt)["step"] == 2 and _same(m, m_new)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_mismatches_are_listed_together(tmp_path):
    m, opt = _model_and_opt()
    save_checkpoint(tmp_path / "c", module=m, optimizers=opt, step=1)

    class Other(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, 4)        # shape differs
            self.head = nn.Linear(4, 5, bias=False)  # head.bias unexpected
            self.extra = nn.Linear(2, 2)         # extra.* missing

    other = Other()
    before = [t.clone() for t in other.state_dict().values()]
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tmp_path / "c", other)
    msg = str(e.value)
    assert "(4 problems)" in msg
    for part in ("missing: 'extra.weight' (the model expects F32 [2, 2])",
                 "missing: 'extra.bias' (the model expects F32 [2])",
                 "unexpected: 'head.bias' (F32 [5] in the file)",
                 "shape: 'emb.weight' is [5, 4] in the file, [6, 4] in the model"):
        assert part in msg
    assert all(torch.equal(a, b) for a, b in zip(before, other.state_dict().values()))


def test_missing_and_damaged_files(tmp_path):
    m, opt = _model_and_opt()
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "none", m)
    path = save_checkpoint(tmp_path / "c", module=m, optimizers=opt, step=1)
    (path / "optimizer.safetensors").unlink()
    with open(path / "model.safetensors", "ab") as f:
        f.write(b"junk")
    with pytest.raises(CheckpointError, match=r"model.safetensors has \d+ bytes, "
                                              r"state.json says \d+; optimizer.safetensors is missing"):
        load_checkpoint(path, m, opt)
    (path / "state.json").unlink()
    with pytest.raises(CheckpointError, match="state.json is missing"):
        load_checkpoint(path, m, opt)


def test_no_optimizer_saved(tmp_path):
    m, opt = _model_and_opt()
    path = save_checkpoint(tmp_path / "c", module=m, optimizers=None, step=1)
    assert "optimizer.safetensors" not in json.loads((path / "state.json").read_text())["files"]
    with pytest.raises(CheckpointError, match="no optimizer state"):
        load_checkpoint(path, m, opt)


def test_extra_must_be_json(tmp_path):
    m, opt = _model_and_opt()
    with pytest.raises(CheckpointError, match="not JSON-serialisable"):
        save_checkpoint(tmp_path / "c", module=m, optimizers=opt, step=1, extra={"x": object()})
    assert not (tmp_path / "c").exists() and not (tmp_path / "c.tmp").exists()
