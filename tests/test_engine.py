"""The one engine on a tiny hand-written torch LM and an in-memory task: it learns, a killed
run resumes bit for bit (optimizer, RNG, history), accumulation and the optimizers behave."""
from __future__ import annotations

import json
import random
from collections.abc import Iterator

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from pytyr.config import load_dataclass
from pytyr.data.batches import RandomBatches
from pytyr.digest import stamped
from pytyr.errors import ConfigError
from pytyr.train.engine import Engine
from pytyr.train.settings import TrainConfig, lr_multiplier
from pytyr.train.task import Batch, Feed, StepRNG, Task, TaskContext

VOCAB = 8


class BigramLM(nn.Module):
    """forward(idx, targets) -> (logits, loss). Dropout makes the run consume torch's RNG, so
    resuming must restore it."""

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


def _tokens() -> dict[str, np.ndarray]:
    # A noisy cycle 0..7: the next token is predictable most of the time.
    rng = np.random.default_rng(0)
    seq = np.arange(6000) % VOCAB
    noise = rng.random(6000) < 0.1
    seq[noise] = rng.integers(0, VOCAB, noise.sum())
    return {"train": seq[:5000].astype(np.uint16), "val": seq[5000:].astype(np.uint16)}


class CycleTask(Task):
    """An in-memory LM task whose `step_inputs` hook also flips targets at random (to show
    that the hook's draws are part of the exact resume)."""

    name = "cycle"
    Options = dict

    def __init__(self, ctx: TaskContext, noisy: bool = False):
        super().__init__({}, ctx)
        data, c = _tokens(), ctx
        self.noisy = noisy
        self.stream = RandomBatches(data["train"], c.micro_batch, 8, seed=c.seed,
                                    rank=c.rank, world=c.world)
        self.evals = {s: RandomBatches(data[s], c.micro_batch, 8, seed=c.seed + 1 + i)
                      for i, s in enumerate(("train", "val"))}

    def feeds(self) -> dict[str, Feed]:
        return {"idx": Feed("i64", ("batch", "seq")), "targets": Feed("i64", ("batch", "seq"))}

    def batch(self, k: int) -> Batch:
        x, y = self.stream.batch_at(k)
        return {"idx": x, "targets": y}

    def step_inputs(self, batch: Batch, rng: StepRNG) -> Batch:
        if not self.noisy:
            return batch
        flip = rng.rand(batch["targets"].shape[0], 8) < 0.05
        return {**batch, "targets": torch.where(flip, 0, batch["targets"])}

    def eval_batches(self, split: str, iters: int) -> Iterator[Batch]:
        for j in range(iters):
            x, y = self.evals[split].batch_at(j)
            yield {"idx": x, "targets": y}


CFG = dict(batch=4, max_iters=30, lr=3e-2, min_lr=3e-3, warmup_iters=3, lr_decay_iters=30,
           weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0, eval_interval=10,
           eval_iters=3, log_interval=5, seed=3, checkpoint_interval=7, device="cpu",
           threads=1)  # the calibration's forwards would count as BigramLM's training calls


def _cfg(**over) -> TrainConfig:
    return load_dataclass(TrainConfig, {**CFG, **over}, "test")


def _train(module, out, *, resume=False, noisy=False, progress=False, **over):
    cfg = _cfg(**over)
    micro = cfg.micro_batch or cfg.batch
    task = CycleTask(TaskContext(micro, cfg.seed), noisy=noisy)
    engine = Engine(module, task, cfg, ["idx", "targets"], out, accum=cfg.batch // micro,
                    row_tokens=8)
    return engine.run(resume=resume, progress=progress)


def _losses(h) -> list[float]:
    return [s["loss"] for s in h["steps"]]


def test_loss_decreases_and_outputs_are_written(tmp_path):
    hist = _train(BigramLM(), tmp_path, progress=True)  # the bar must not warn
    assert [s["step"] for s in hist["steps"]] == list(range(1, 31))
    assert [e["step"] for e in hist["evals"]] == [0, 10, 20, 30]
    first, last = hist["evals"][0], hist["evals"][-1]
    assert first["val"] > 1.9 and last["val"] < first["val"] - 0.5
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["steps"] == 30 and metrics["final_val_loss"] == last["val"]
    assert metrics["tokens_per_s"] > 0
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        "model.safetensors", "optimizer.safetensors", "state.json"]


@pytest.mark.parametrize("crash_after", [9, 14])  # mid-interval; right after a checkpoint
@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_resume_after_a_kill_equals_an_uninterrupted_run(tmp_path, crash_after, optimizer):
    over = {"optimizer": optimizer, "muon": {"embedding_names": ["emb"], "head_names": []}}
    ref_model = BigramLM()
    ref = _train(ref_model, tmp_path / "ref", noisy=True, **over)
    victim = BigramLM()
    victim.crash_after = crash_after
    with pytest.raises(KeyboardInterrupt):
        _train(victim, tmp_path / "run", noisy=True, **over)
    resumed_model = BigramLM(seed=99)  # a fresh process: other weights, other RNG state
    torch.manual_seed(12345)
    resumed = _train(resumed_model, tmp_path / "run", resume=True, noisy=True, **over)
    assert _losses(resumed) == _losses(ref)
    assert resumed["evals"] == ref["evals"]
    for a, b in zip(ref_model.parameters(), resumed_model.parameters()):
        assert torch.equal(a, b)


class HostRngLM(BigramLM):
    """Draws from numpy's and Python's global generators too (as a user's module or task
    may) and records, before every training forward, the states of all three."""

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self.states: list[tuple[bytes, bytes, object]] = []

    def forward(self, idx, targets):
        if self.training:
            n = np.random.get_state()
            self.states.append((torch.get_rng_state().numpy().tobytes(),
                                n[1].tobytes() + repr(n[2:]).encode(), random.getstate()))
        scale = 1 + 1e-3 * (np.random.random() + random.random()) if self.training else 1
        logits, loss = super().forward(idx, targets)
        return logits, loss * scale


def _host_states():
    n = np.random.get_state()
    return n[1].tobytes(), n[2:], random.getstate(), torch.get_rng_state()


@pytest.mark.parametrize("crash_after", [9, 14])
def test_a_resumed_run_has_every_rng_state_of_an_uninterrupted_one(tmp_path, crash_after):
    # each run in a process of its own seeding: the generators' states follow from
    # train.seed alone, step by step, whether the run was resumed or not; the caller's own
    # states are as they were after every run
    def in_process(seed, module, out, **kw):
        np.random.seed(seed)
        random.seed(seed)
        torch.manual_seed(seed)
        before = _host_states()
        try:
            return _train(module, out, **kw)
        finally:
            after = _host_states()
            assert after[:3] == before[:3] and torch.equal(after[3], before[3])

    ref = HostRngLM()
    losses = _losses(in_process(1, ref, tmp_path / "ref"))
    victim = HostRngLM()
    victim.crash_after = crash_after
    with pytest.raises(KeyboardInterrupt):
        in_process(2, victim, tmp_path / "run")
    resumed = HostRngLM(seed=99)
    assert _losses(in_process(3, resumed, tmp_path / "run", resume=True)) == losses
    start = 7 * (crash_after // 7)  # the last checkpoint before the kill
    assert len(resumed.states) == 30 - start
    for step, (a, b) in enumerate(zip(ref.states[start:], resumed.states), start):
        assert a[0] == b[0], f"torch's state differs at step {step}"
        assert a[1] == b[1], f"numpy's state differs at step {step}"
        assert a[2] == b[2], f"Python's state differs at step {step}"


def test_extending_a_finished_run(tmp_path):
    ref = _train(BigramLM(), tmp_path / "ref")
    _train(BigramLM(), tmp_path / "run", max_iters=20)
    more = _train(BigramLM(), tmp_path / "run", resume=True)
    assert _losses(more) == _losses(ref)


def test_resume_errors(tmp_path):
    with pytest.raises(ConfigError, match="no checkpoint to resume from"):
        _train(BigramLM(), tmp_path, resume=True)
    _train(BigramLM(), tmp_path, max_iters=7)
    fresh = BigramLM(seed=4)
    before = [p.detach().clone() for p in fresh.parameters()]
    with pytest.raises(ConfigError, match="lr: checkpoint 0.03, now 0.01"):
        _train(fresh, tmp_path, resume=True, lr=1e-2)
    # the decay's end follows max_iters unless given: a longer run is another schedule
    _train(BigramLM(), tmp_path / "short", max_iters=7, lr_decay_iters=None)
    with pytest.raises(ConfigError, match="lr_decay_iters: checkpoint 7, now 30"):
        _train(fresh, tmp_path / "short", resume=True, lr_decay_iters=None)
    assert all(torch.equal(a, b) for a, b in zip(before, fresh.parameters()))  # untouched
    with pytest.raises(ConfigError, match="warmup_form: checkpoint 'nanogpt', now 'nanochat'"):
        _train(fresh, tmp_path, resume=True, warmup_form="nanochat")


def test_a_checkpoint_older_than_a_setting_resumes_with_its_default(tmp_path):
    # state.json as written before train.warmup_form: the default was in force then
    _train(BigramLM(), tmp_path, max_iters=7)
    path = tmp_path / "ckpt" / "state.json"
    state = json.loads(path.read_text())
    del state["config"]["warmup_form"]
    path.write_text(json.dumps(stamped(state), indent=1))
    with pytest.raises(ConfigError, match="warmup_form: checkpoint 'nanogpt', now 'nanochat'"):
        _train(BigramLM(), tmp_path, resume=True, warmup_form="nanochat")
    hist = _train(BigramLM(), tmp_path, resume=True)
    assert [s["step"] for s in hist["steps"]] == list(range(1, 31))


def test_accumulation_follows_the_full_batch(tmp_path):
    # Two micro-batches of 2 rows step like one batch of those 4 rows (dropout off): the
    # engine feeds micro-batches 2k and 2k+1 to step k.
    def no_drop() -> BigramLM:
        m = BigramLM()
        m.drop.p = 0.0
        return m

    task = CycleTask(TaskContext(2, 3))
    pairs = CycleTask(TaskContext(4, 3))
    pairs.batch = lambda k: {n: torch.cat([task.batch(2 * k)[n], task.batch(2 * k + 1)[n]])
                             for n in ("idx", "targets")}
    big = Engine(no_drop(), pairs, _cfg(max_iters=10, fused=False), ["idx", "targets"],
                 tmp_path / "big").run(progress=False)
    acc = Engine(no_drop(), task, _cfg(max_iters=10, micro_batch=2, fused=False),
                 ["idx", "targets"], tmp_path / "acc", accum=2).run(progress=False)
    assert _losses(acc) == pytest.approx(_losses(big), abs=1e-5)
    assert _losses(acc) != _losses(Engine(no_drop(), task, _cfg(max_iters=10, fused=False),
                                          ["idx", "targets"], tmp_path / "one").run(
                                              progress=False))


def test_fused_and_plain_adamw_agree(tmp_path):
    fused = _train(BigramLM(), tmp_path / "f", max_iters=10, fused=True)
    plain = _train(BigramLM(), tmp_path / "p", max_iters=10, fused=False)
    assert _losses(fused) == pytest.approx(_losses(plain), abs=1e-5)


def test_train_config_is_checked_before_anything():
    with pytest.raises(ConfigError, match="unknown key 'lrr'"):
        load_dataclass(TrainConfig, {"lrr": 1}, "cfg")
    with pytest.raises(ConfigError, match="'batch' must be an integer, got 2.5"):
        load_dataclass(TrainConfig, {"batch": 2.5}, "cfg")
    with pytest.raises(ConfigError, match="'train.min_lr' 0.1 exceeds 'train.lr' 0.01"):
        load_dataclass(TrainConfig, {"lr": 0.01, "min_lr": 0.1}, "cfg")
    with pytest.raises(ConfigError, match="'lr' must be > 0"):
        load_dataclass(TrainConfig, {"lr": 0}, "cfg")
    with pytest.raises(ConfigError, match="'lr' must be a finite number"):
        load_dataclass(TrainConfig, {"lr": float("nan")}, "cfg")
    with pytest.raises(ConfigError, match="unknown key 'muon.lrr'"):
        load_dataclass(TrainConfig, {"muon": {"lrr": 1}}, "cfg")
    with pytest.raises(ConfigError, match="'train.batch' 12 is not a multiple of 'train.micro_batch' 5"):
        load_dataclass(TrainConfig, {"batch": 12, "micro_batch": 5}, "cfg")
    cfg = load_dataclass(TrainConfig, {"batch": 12}, "cfg")
    with pytest.raises(ConfigError, match="does not divide among 5 processes"):
        cfg.accumulation(5, "cfg")
    assert cfg.accumulation(2, "cfg") == (6, 1)
    assert load_dataclass(TrainConfig, {"batch": 12, "micro_batch": 3}, "c").accumulation(
        2, "c") == (3, 2)


def test_lr_schedule_is_nanogpts():
    cfg = load_dataclass(TrainConfig, {"lr": 1.0, "min_lr": 0.1, "warmup_iters": 10,
                                       "lr_decay_iters": 110}, "c")
    assert lr_multiplier(0, cfg) == pytest.approx(1 / 11)
    assert lr_multiplier(9, cfg) == pytest.approx(10 / 11)
    assert lr_multiplier(10, cfg) == pytest.approx(1.0)
    assert lr_multiplier(60, cfg) == pytest.approx(0.55)
    assert lr_multiplier(110, cfg) == pytest.approx(0.1) and lr_multiplier(500, cfg) == 0.1
    linear = load_dataclass(TrainConfig, {"lr": 1.0, "min_lr": 0.0, "warmup_iters": 0,
                                          "lr_decay_iters": 100, "schedule": "linear"}, "c")
    assert lr_multiplier(50, linear) == pytest.approx(0.5)


def test_warmdown_holds_the_peak_then_decays_linearly():
    # nanochat: warmup, constant, then a linear warmdown over the last steps to 0.05 × lr
    cfg = load_dataclass(TrainConfig, {"lr": 1.0, "min_lr": 0.05, "warmup_iters": 4,
                                       "max_iters": 100, "schedule": "linear",
                                       "warmdown_iters": 40}, "c")
    assert lr_multiplier(3, cfg) == pytest.approx(4 / 5)
    assert [lr_multiplier(s, cfg) for s in (4, 30, 60)] == [1.0, 1.0, 1.0]
    assert lr_multiplier(80, cfg) == pytest.approx(0.05 + 0.5 * 0.95)
    assert lr_multiplier(100, cfg) == pytest.approx(0.05)
    mults = [lr_multiplier(s, cfg) for s in range(60, 101)]
    assert all(a > b for a, b in zip(mults, mults[1:]))
    with pytest.raises(ConfigError, match="'train.warmup_iters' 4 \\+ 'train.warmdown_iters' "
                                          "97 exceed the decay's end 100"):
        load_dataclass(TrainConfig, {"warmup_iters": 4, "max_iters": 100,
                                     "warmdown_iters": 97}, "c")
    with pytest.raises(ConfigError, match="'warmdown_iters' must be > 0"):
        load_dataclass(TrainConfig, {"warmdown_iters": 0}, "c")


def test_step_rng_slices_one_global_draw():
    whole = StepRNG(7, 3).rand(4, 2)
    halves = [StepRNG(7, 3, rank=r, world=2).rand(2, 2) for r in (0, 1)]
    assert torch.equal(torch.cat(halves), whole)
    assert not torch.equal(StepRNG(7, 4).rand(4, 2), whole)


@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_autocast_precisions_train_and_resume(tmp_path, precision):
    def no_drop() -> BigramLM:
        m = BigramLM()
        m.drop.p = 0.0
        return m

    full = _train(no_drop(), tmp_path / "full", precision=precision, max_iters=12,
                  lr_decay_iters=12, checkpoint_interval=6)
    losses = _losses(full)
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert _losses(_train(no_drop(), tmp_path / "f32", max_iters=12, lr_decay_iters=12)) != losses
    _train(no_drop(), tmp_path / "part", precision=precision, max_iters=6, lr_decay_iters=12)
    resumed = _train(no_drop(), tmp_path / "part", resume=True, precision=precision,
                     max_iters=12, lr_decay_iters=12)
    assert _losses(resumed) == losses
    if precision == "float16":  # the loss scaler's state is part of the checkpoint
        state = json.loads((tmp_path / "part" / "ckpt" / "state.json").read_text())
        assert "scale" in state["extra"]["scaler"]
