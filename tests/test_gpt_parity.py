"""GPT.lean through Tyr's executor computes nanoGPT's math: same logits, loss and gradients
as the hand-written nanoGPT-structured model of `bench/nanogpt.py` holding copies of its
weights; nanoGPT's init rules; dropout only in train mode."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.gpt import batches, build_pair, gpt_values  # noqa: E402
from bench.nanogpt import tyr_to_plain_key  # noqa: E402

# vocab 75: the batches are the char_lm task's Shakespeare characters (bench.gpt.batches)
TINY = dict(vocab=75, block=8, n_layer=2, n_head=2, head_dim=4, dropout=0.0, b=3)
ATOL = 1e-6


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    assert a.shape == b.shape, what
    err = float((a - b).detach().abs().max()) if a.numel() else 0.0
    assert err <= ATOL, f"{what}: max |diff| {err:.2e}"


@pytest.mark.parametrize("t", [8, 5], ids=["t=block", "t<block"])
def test_forward_and_backward_match_nanogpt(t):
    # t=5 < block=8: the Lean model takes the first 5 rows of wpe, nanoGPT looks up arange(5)
    values = gpt_values(**TINY, t=t)
    tyr, plain = build_pair(values, seed=3)
    (x, y), = batches(values, 1, seed=4)
    zt, lt = tyr(x, y)
    zp, lp = plain(x, y)
    assert zt.shape == (3, t, 75) and lt.shape == ()
    _close(zt, zp, "logits")
    _close(lt, lp, "loss")
    lt.backward()
    lp.backward()
    grads = dict(plain.named_parameters())
    assert len(grads) == len(list(tyr.parameters()))  # tied head: one parameter each side
    for path, p in tyr.named_parameters():
        q = grads[tyr_to_plain_key(path)]
        assert p.grad is not None and q.grad is not None, path
        _close(p.grad, q.grad, f"grad of {path}")
    # the wpe rows past t get no gradient on either side
    if t < 8:
        assert torch.count_nonzero(dict(tyr.named_parameters())["wpe"].grad[t:]) == 0


def test_init_follows_nanogpt_rules():
    # wide enough that the sample std of each matrix is within ~1% of its target
    c = dict(vocab=64, block=64, n_layer=3, n_head=4, head_dim=64, dropout=0.0)
    tyr, _ = build_pair(gpt_values(**c, b=1, t=1), seed=0)
    resid_std = 0.02 / math.sqrt(2 * c["n_layer"])
    seen = set()
    for path, p in tyr.state_dict().items():  # detached values
        leaf = path.rsplit(".", 1)[-1]
        if leaf.endswith("_bias"):
            assert torch.count_nonzero(p) == 0, path
        elif leaf.startswith("ln_"):
            assert torch.equal(p, torch.ones_like(p)), path
        else:
            target = resid_std if leaf == "c_proj" else 0.02
            std, mean = float(p.std()), float(p.mean())
            assert abs(std / target - 1) < 0.05, (path, std, target)
            assert abs(mean) < 3 * target / math.sqrt(p.numel()) + 1e-9, (path, mean)
        seen.add(leaf)
    assert {"wte", "wpe", "c_attn", "c_proj", "c_fc", "ln_1", "ln_f_bias"} <= seen


def test_dropout_only_in_train_mode():
    values = gpt_values(**{**TINY, "dropout": 0.5}, t=8)
    tyr, plain = build_pair(values, seed=0)
    (x, y), = batches(values, 1, seed=1)
    for m in (tyr, plain):
        m.train()
        torch.manual_seed(0)
        a = m(x, y)[0]
        b = m(x, y)[0]
        assert not torch.equal(a, b), type(m).__name__
        m.eval()
        with torch.no_grad():
            assert torch.equal(m(x, y)[0], m(x, y)[0]), type(m).__name__
    # in eval mode the two models agree, dropout or not
    with torch.no_grad():
        _close(tyr(x, y)[0], plain(x, y)[0], "eval logits with dropout 0.5")
