"""train_lm on a tiny hand-written torch LM: it learns, and a resumed run is bit-exact."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from pytyr.errors import ConfigError
from pytyr.train.lm import LMConfig, lr_at, train_lm

VOCAB = 8


class BigramLM(nn.Module):
    """forward(idx i64[b, t], targets i64[b, t]) -> (logits f32[b, t, vocab], loss f32[]).
    Dropout makes the run consume torch's RNG, so resuming must restore it."""

    def __init__(self, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(VOCAB, 16, generator=g) * 0.1)
        self.head = nn.Parameter(torch.randn(VOCAB, 16, generator=g) * 0.1)
        self.bias = nn.Parameter(torch.zeros(VOCAB))
        self.drop = nn.Dropout(0.1)
        self.crash_after: int | None = None  # raise on this many training forwards
        self.calls = 0

    def forward(self, idx, targets):
        if self.training:
            self.calls += 1
            if self.crash_after is not None and self.calls > self.crash_after:
                raise KeyboardInterrupt("simulated kill")
        logits = self.drop(self.emb[idx]) @ self.head.T + self.bias
        return logits, F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def _data():
    # A noisy cycle 0..7: the next token is predictable most of the time.
    rng = np.random.default_rng(0)
    seq = np.arange(6000) % VOCAB
    noise = rng.random(6000) < 0.1
    seq[noise] = rng.integers(0, VOCAB, noise.sum())
    return {"train": seq[:5000].astype(np.uint16), "val": seq[5000:].astype(np.uint16)}


CFG = dict(batch=4, block=8, max_iters=30, lr=3e-2, min_lr=3e-3, warmup_iters=3,
           lr_decay_iters=30, weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0,
           eval_interval=10, eval_iters=3, log_interval=5, seed=3, checkpoint_interval=7)


def test_loss_decreases_and_outputs_are_written(tmp_path):
    hist = train_lm(BigramLM(), _data(), CFG, tmp_path, progress=True)  # the bar must not warn
    assert [s["step"] for s in hist["steps"]] == list(range(1, 31))
    assert [e["step"] for e in hist["evals"]] == [0, 10, 20, 30]
    first, last = hist["evals"][0], hist["evals"][-1]
    assert first["val"] > 1.9 and last["val"] < first["val"] - 0.5
    assert np.mean([s["loss"] for s in hist["steps"][-5:]]) < hist["steps"][0]["loss"] - 0.5
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["steps"] == 30 and metrics["final_val_loss"] == last["val"]
    assert metrics["tokens_per_s"] > 0
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()


@pytest.mark.parametrize("crash_after", [9, 14])  # mid-interval; right after a checkpoint
def test_resume_after_a_kill_equals_an_uninterrupted_run(tmp_path, crash_after):
    ref_model = BigramLM()
    ref = train_lm(ref_model, _data(), CFG, tmp_path / "ref", progress=False)

    victim = BigramLM()
    victim.crash_after = crash_after
    with pytest.raises(KeyboardInterrupt):
        train_lm(victim, _data(), CFG, tmp_path / "run", progress=False)

    resumed_model = BigramLM(seed=99)  # a fresh process: other weights, other RNG state
    torch.manual_seed(12345)
    resumed = train_lm(resumed_model, _data(), CFG, tmp_path / "run", resume=True, progress=False)
    assert [s["loss"] for s in resumed["steps"]] == [s["loss"] for s in ref["steps"]]
    assert resumed["evals"] == ref["evals"]
    for a, b in zip(ref_model.parameters(), resumed_model.parameters()):
        assert torch.equal(a, b)


def test_extending_a_finished_run(tmp_path):
    ref = train_lm(BigramLM(), _data(), CFG, tmp_path / "ref", progress=False)
    train_lm(BigramLM(), _data(), {**CFG, "max_iters": 20}, tmp_path / "run", progress=False)
    more = train_lm(BigramLM(), _data(), CFG, tmp_path / "run", resume=True, progress=False)
    assert [s["loss"] for s in more["steps"]] == [s["loss"] for s in ref["steps"]]


def test_resume_errors(tmp_path):
    with pytest.raises(ConfigError, match="no checkpoint to resume from"):
        train_lm(BigramLM(), _data(), CFG, tmp_path, resume=True, progress=False)
    train_lm(BigramLM(), _data(), {**CFG, "max_iters": 7}, tmp_path, progress=False)
    fresh = BigramLM(seed=4)
    before = [p.detach().clone() for p in fresh.parameters()]
    with pytest.raises(ConfigError, match="lr: checkpoint 0.03, now 0.01"):
        train_lm(fresh, _data(), {**CFG, "lr": 1e-2}, tmp_path, resume=True, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(before, fresh.parameters()))  # untouched


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown key lrr"):
        LMConfig.from_dict({"lrr": 1})
    with pytest.raises(ConfigError, match="'batch' must be a number \\(integer\\)"):
        LMConfig.from_dict({"batch": 2.5})
    with pytest.raises(ConfigError, match="min_lr 0.1 exceeds lr"):
        LMConfig.from_dict({"lr": 0.01, "min_lr": 0.1})


def test_lr_schedule_is_nanogpts():
    cfg = LMConfig(lr=1.0, min_lr=0.1, warmup_iters=10, lr_decay_iters=110)
    assert lr_at(0, cfg) == pytest.approx(1 / 11)
    assert lr_at(9, cfg) == pytest.approx(10 / 11)
    assert lr_at(10, cfg) == pytest.approx(1.0)
    assert lr_at(60, cfg) == pytest.approx(0.55)
    assert lr_at(110, cfg) == pytest.approx(0.1) and lr_at(500, cfg) == 0.1
