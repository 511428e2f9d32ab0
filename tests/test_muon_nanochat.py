"""Today's nanochat Muon as settings of `pytyr.train.muon.Muon`: Polar Express, NorMuon,
MuonEq, Muon+, EMA momentum and cautious weight decay, with nanochat's momentum and weight
decay schedules. Checked against an independent reimplementation of nanochat's fused Muon
step (`muon_step_fused` of `nanochat/optim.py`, July 2026), written here from a reading of it,
over steps of a schedule for tall, wide and square matrices; and each choice is shown to
matter (turning it off changes the step)."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from pytyr.config import load_dataclass
from pytyr.errors import ConfigError
from pytyr.train.muon import Muon
from pytyr.train.optim import make_optimizers, schedule_muon
from pytyr.train.orthogonalize import polar_express
from pytyr.train.settings import TrainConfig, lr_multiplier, muon_momentum, muon_weight_decay

COEFFS = [(8.156554524902461, -22.48329292557795, 15.878769915207462),
          (4.042929935166739, -2.808917465908714, 0.5000178451051316),
          (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
          (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
          (2.3465413258596377, -1.7097828382687081, 0.42323551169305323)]
TODAY = dict(orthogonalizer="polar_express", momentum_form="ema", normuon_beta2=0.9,
             equilibrate=True, renormalize=True, cautious_weight_decay=True)


def reference_step(p, grad, buf, second, momentum, lr, wd, beta2=0.9):
    """nanochat's Muon step for one matrix, in float32 (its CPU path), as read."""
    buf.lerp_(grad, 1 - momentum)
    g = grad.lerp(buf, momentum)
    target = g.norm() / g.shape[0] ** 0.5
    g = g * (target / g.norm(dim=-1, keepdim=True).clamp_min(1e-6))
    x = g / (g.norm() * 1.01 + 1e-6)
    for a, b, c in COEFFS:
        if x.shape[0] > x.shape[1]:
            gram = x.T @ x
            x = a * x + x @ (b * gram + c * gram @ gram)
        else:
            gram = x @ x.T
            x = a * x + (b * gram + c * gram @ gram) @ x
    x = x * (min(x.shape) ** 0.5 / x.norm().clamp_min(1e-6))
    dim = -1 if p.shape[0] >= p.shape[1] else -2
    v = (x * x).mean(dim=dim, keepdim=True)
    n = x.shape[dim]
    before = (v.sum() * n).sqrt()
    second.lerp_(v, 1 - beta2)
    step = second.clamp_min(1e-10).rsqrt()
    after = ((v * n) * step * step).sum().sqrt()
    x = x * step * (before / after.clamp_min(1e-10))
    lr = lr * max(1.0, p.shape[0] / p.shape[1]) ** 0.5
    p.sub_(lr * x + lr * wd * p * ((x * p) >= 0))


@pytest.mark.parametrize("shape", [(24, 8), (8, 24), (16, 16)], ids=["tall", "wide", "square"])
def test_today_s_muon_follows_nanochat_step_by_step(shape):
    gen = torch.Generator().manual_seed(0)
    w = nn.Parameter(torch.randn(shape, generator=gen))
    p = w.detach().clone()
    buf = torch.zeros(shape)
    second = torch.zeros((shape[0], 1) if shape[0] >= shape[1] else (1, shape[1]))
    opt = Muon([w], lr=0.02, **TODAY)
    for step, (momentum, wd) in enumerate([(0.85, 0.28), (0.88, 0.2), (0.97, 0.1), (0.9, 0.0)]):
        grad = torch.randn(shape, generator=gen)
        w.grad = grad.clone()
        for group in opt.param_groups:
            group["momentum"], group["weight_decay"] = momentum, wd
        opt.step()
        reference_step(p, grad, buf, second, momentum, 0.02, wd)
        torch.testing.assert_close(w.detach(), p, rtol=1e-5, atol=1e-6)
    assert set(opt.state[w]) == {"momentum_buffer", "second_momentum_buffer"}


@pytest.mark.parametrize("off", list(TODAY))
def test_each_choice_changes_the_step(off):
    def run(**variant):
        gen = torch.Generator().manual_seed(1)
        w = nn.Parameter(torch.randn(12, 6, generator=gen))
        opt = Muon([w], lr=0.05, weight_decay=0.3, **variant)
        for momentum in (0.85, 0.9, 0.97):  # a schedule: the two momentum forms differ
            opt.param_groups[0]["momentum"] = momentum
            w.grad = torch.randn(12, 6, generator=gen)
            opt.step()
        return w.detach()

    base = {**TODAY, off: {"orthogonalizer": "newton_schulz", "momentum_form": "heavy_ball",
                           "normuon_beta2": None}.get(off, False)}
    assert not torch.allclose(run(**TODAY), run(**base), atol=1e-4)


def test_polar_express_is_closer_to_orthogonal_than_its_input():
    g = torch.randn(32, 64, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    s = torch.linalg.svdvals(polar_express(g, dtype=torch.float64))
    assert 0.6 < s.min() and s.max() < 1.25  # every direction about equally long
    with pytest.raises(ValueError, match="at most 5 steps"):
        polar_express(g, 6)


def _cfg(**muon):
    table = {"optimizer": "muon", "max_iters": 1000, "warmdown_iters": 650,
             "muon": {"momentum": 0.97, "momentum_start": 0.85, "momentum_warmup_iters": 400,
                      "momentum_end": 0.90, "weight_decay": 0.28,
                      "weight_decay_schedule": "cosine", **muon}}
    return load_dataclass(TrainConfig, table, "test", "train.")


def test_the_schedules_are_nanochat_s():
    cfg = _cfg()
    # base_train.py's get_muon_momentum and get_weight_decay for 1000 steps, warmdown 0.65

    def momentum(it):
        if it < 400:
            return (1 - it / 400) * 0.85 + it / 400 * 0.97
        if it >= 350:
            return 0.97 * (1 - (it - 350) / 650) + 0.90 * (it - 350) / 650
        return 0.97

    for it in (0, 1, 200, 349, 350, 399, 400, 700, 999):
        assert muon_momentum(it, cfg) == pytest.approx(momentum(it), abs=1e-12), it
        assert muon_weight_decay(it, cfg) == pytest.approx(
            0.28 * 0.5 * (1 + math.cos(math.pi * it / 1000)), abs=1e-12)
    flat = _cfg(momentum_start=None, momentum_end=None, weight_decay_schedule="constant")
    assert {muon_momentum(it, flat) for it in range(0, 1000, 50)} == {0.97}
    assert {muon_weight_decay(it, flat) for it in range(0, 1000, 50)} == {0.28}


@pytest.mark.parametrize("iters,warmup,warmdown", [(1000, 40, 0.65), (40, 4, 0.65),
                                                    (7, 3, 0.5)])
def test_the_lr_schedule_is_nanochat_s(iters, warmup, warmdown):
    # get_lr_multiplier of karpathy/nanochat's scripts/base_train.py (warmup_steps 40,
    # warmdown_ratio 0.65, final_lr_frac 0.05 by default), as it is there
    warmdown_iters = round(warmdown * iters)

    def nanochat(it):
        if it < warmup:
            return (it + 1) / warmup
        if it <= iters - warmdown_iters:
            return 1.0
        progress = (iters - it) / warmdown_iters
        return progress * 1.0 + (1 - progress) * 0.05

    table = {"lr": 1.0, "min_lr": 0.05, "max_iters": iters, "warmup_iters": warmup,
             "schedule": "linear", "warmdown_iters": warmdown_iters}
    cfg = load_dataclass(TrainConfig, {**table, "warmup_form": "nanochat"}, "c", "train.")
    for it in range(iters + 1):
        assert lr_multiplier(it, cfg) == pytest.approx(nanochat(it), abs=1e-12), it
    # nanoGPT's warmup, the default, is below nanochat's on every warmup step, equal after
    gpt = load_dataclass(TrainConfig, table, "c", "train.")
    assert gpt.warmup_form == "nanogpt"
    assert all(lr_multiplier(it, gpt) < nanochat(it) for it in range(warmup))
    assert all(lr_multiplier(it, gpt) == lr_multiplier(it, cfg) for it in range(warmup, iters))
    with pytest.raises(ConfigError, match="train.warmup_form"):
        load_dataclass(TrainConfig, {**table, "warmup_form": "nanoChat"}, "c", "train.")


def test_nanochat_s_adamw_groups_and_the_schedule_reach_the_optimizers():
    net = nn.ModuleDict({"lm_head": nn.Linear(4, 8, bias=False), "h": nn.Linear(4, 4),
                         "smear_gate": nn.Linear(24, 1, bias=False)})
    net.resid_lambdas = nn.Parameter(torch.ones(3))
    cfg = _cfg(groups=[
        {"name": "head", "names": ["lm_head"], "lr": 0.004, "beta1": 0.8, "beta2": 0.96,
         "weight_decay": 0.01},
        {"name": "resid", "names": ["resid_lambdas"], "lr": 0.005, "beta2": 0.95,
         "weight_decay": 0.05},
        {"name": "smear", "names": ["smear_gate"], "lr": 0.2}],
        embedding_names=[], **TODAY)  # this net has no embedding (a name must match one)
    muon, adamw = make_optimizers(net, cfg, torch.device("cpu"))
    assert [p.shape for p in muon.param_groups[0]["params"]] == [(4, 4)]  # not the smear gate
    groups = {g["name"]: g for g in adamw.param_groups}
    assert groups["head"]["betas"] == (0.8, 0.96) and groups["head"]["weight_decay"] == 0.01
    assert groups["resid"]["betas"] == (cfg.beta1, 0.95) and groups["resid"]["lr"] == 0.005
    assert groups["smear"]["paths"] == ["smear_gate.weight"]
    assert groups["scalars"]["paths"] == ["h.bias"]
    schedule_muon([muon, adamw], 0, cfg)
    assert muon.param_groups[0]["momentum"] == 0.85
    assert muon.param_groups[0]["weight_decay"] == pytest.approx(0.28)
    assert "momentum" not in groups["head"]
    with pytest.raises(ConfigError, match="Polar Express has coefficients for at most 5"):
        _cfg(ns_steps=6, orthogonalizer="polar_express")
