"""The training loop and the spirals task, end to end through the graph IR."""
from __future__ import annotations

import math

import pytest
import torch

from graphs import GraphBuilder, mlp
from pytyr.errors import ConfigError, TyrError
from pytyr.exec.lower import build_module
from pytyr.ir.validate import load_graph
from pytyr.train import loop, tasks

BATCH = 128


def run(signatures, steps: int, seed: int = 0, **kw):
    module = build_module(load_graph(mlp(BATCH), signatures), seed=seed)
    x, y = tasks.make_dataset(3000, seed=0)
    history = loop.train(module, tasks.batches(x, y, BATCH, seed=seed), steps=steps,
                         lr=1e-2, weight_decay=1e-4, warmup=20, grad_clip=1.0,
                         progress=False, seed=seed, **kw)
    return module, history


@pytest.mark.slow
def test_mlp_learns_spirals(signatures):
    xt, yt = tasks.make_dataset(1000, seed=1)  # held out
    module, history = run(signatures, steps=500,
                          eval_fn=lambda m: {"acc": tasks.accuracy(m, xt, yt, BATCH)},
                          eval_every=250)
    assert [r["step"] for r in history if "acc" in r] == [250, 500]
    assert history[-1]["acc"] >= 0.95
    assert history[-1]["loss"] < history[0]["loss"] / 3


def test_same_seed_same_losses(signatures):
    _, h1 = run(signatures, steps=30, seed=5)
    _, h2 = run(signatures, steps=30, seed=5)
    _, h3 = run(signatures, steps=30, seed=6)
    assert [r["loss"] for r in h1] == [r["loss"] for r in h2]
    assert [r["loss"] for r in h1] != [r["loss"] for r in h3]


def test_history_and_schedule(signatures):
    _, h = run(signatures, steps=40)
    assert [r["step"] for r in h] == list(range(1, 41))
    assert set(h[0]) == {"step", "loss", "lr", "grad_norm"}
    lrs = [r["lr"] for r in h]
    assert lrs[0] == pytest.approx(1e-2 / 20) and lrs[19] == pytest.approx(1e-2)
    assert all(a >= b for a, b in zip(lrs[19:], lrs[20:]))  # cosine decays monotonically


def test_lr_factor():
    assert loop.lr_factor(0, steps=100, warmup=10) == pytest.approx(0.1)
    assert loop.lr_factor(9, steps=100, warmup=10) == 1.0
    assert loop.lr_factor(55, steps=100, warmup=10) == pytest.approx(0.5)
    assert loop.lr_factor(100, steps=100, warmup=10) == pytest.approx(0.0)
    assert loop.lr_factor(0, steps=10, warmup=0) == 1.0


def test_weight_decay_only_on_matrices(signatures):
    module = build_module(load_graph(mlp(4), signatures))
    decay, no_decay = loop.param_groups(module, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decay["params"]) and len(decay["params"]) == 2
    assert all(p.ndim == 1 for p in no_decay["params"]) and len(no_decay["params"]) == 2


def test_grad_clip_bounds_the_update(signatures):
    g = GraphBuilder()
    g.param("w", [3], {"kind": "ones"})
    g.output("loss", g.node("sum", [g.node("scale", ["w"], [3], alpha=1000.0)], []))
    module = build_module(load_graph(g.build(), signatures))
    h = loop.train(module, iter(lambda: (), None), steps=1, lr=1.0, grad_clip=0.5,
                   progress=False)
    assert h[0]["grad_norm"] == pytest.approx(1000 * math.sqrt(3))


def test_caller_rng_untouched(signatures):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    run(signatures, steps=25)
    assert torch.equal(torch.rand(3), expected)


def test_progress_bar_runs(signatures, capsys):
    module = build_module(load_graph(mlp(BATCH), signatures))
    x, y = tasks.make_dataset(512, seed=0)
    loop.train(module, tasks.batches(x, y, BATCH, seed=0), steps=12, lr=1e-2, progress=True)
    assert "loss=" in capsys.readouterr().err


def test_bad_config_and_exhausted_batches(signatures):
    module = build_module(load_graph(mlp(BATCH), signatures))
    x, y = tasks.make_dataset(256, seed=0)
    with pytest.raises(ConfigError, match="warmup must be an integer in 0..steps"):
        loop.train(module, [], steps=5, warmup=6, progress=False)
    with pytest.raises(ConfigError, match="lr must be a positive number"):
        loop.train(module, [], steps=5, lr=-1.0, progress=False)
    with pytest.raises(ConfigError, match="the batches ran out after 2 steps; steps=5"):
        loop.train(module, [(x[:BATCH], y[:BATCH])] * 2, steps=5, progress=False)


def test_divergence_is_reported(signatures):
    g = GraphBuilder()
    g.param("w", [2], {"kind": "ones"})
    loss = g.node("sum", [g.node("scale", ["w"], [2], alpha=1e38)], [])
    g.output("loss", g.node("scale", [loss], [], alpha=1e38))
    module = build_module(load_graph(g.build(), signatures))
    with pytest.raises(TyrError, match="the loss is inf at step 1"):
        loop.train(module, iter(lambda: (), None), steps=3, progress=False)


def test_dataset_is_seeded_and_balanced():
    x1, y1 = tasks.make_dataset(300, seed=7)
    x2, y2 = tasks.make_dataset(300, seed=7)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.shape == (300, 2) and x1.dtype == torch.float32 and y1.dtype == torch.int64
    assert torch.bincount(y1).tolist() == [100, 100, 100]
    assert not torch.equal(tasks.make_dataset(300, seed=8)[0], x1)
    b = next(tasks.batches(x1, y1, 64, seed=0))
    assert b[0].shape == (64, 2) and b[1].shape == (64,)
