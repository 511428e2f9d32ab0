"""generate: autoregressive sampling from a logits function."""
from __future__ import annotations

import pytest
import torch

from pytyr.errors import ConfigError
from pytyr.train.tasks.lm.sample import generate

VOCAB = 5


def cycle_fn(idx):
    """Logits that strongly predict (last token + 1) % VOCAB at every position."""
    logits = torch.full((*idx.shape, VOCAB), -10.0)
    logits.scatter_(2, ((idx + 1) % VOCAB).unsqueeze(-1), 10.0)
    return logits


def uniform_fn(idx):
    return (torch.zeros(*idx.shape, VOCAB),)  # a tuple, as a TyrModule returns


def test_greedy_follows_the_argmax():
    out = generate(cycle_fn, [3], 6, temperature=0)
    assert out.tolist() == [[3, 4, 0, 1, 2, 3, 4]] and out.dtype == torch.int64


def test_seeded_sampling_is_deterministic_and_leaves_global_rng():
    torch.manual_seed(0)
    before = torch.get_rng_state()
    a = generate(uniform_fn, torch.tensor([[1, 2]]), 40, seed=7)
    b = generate(uniform_fn, torch.tensor([[1, 2]]), 40, seed=7)
    c = generate(uniform_fn, torch.tensor([[1, 2]]), 40, seed=8)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == (1, 42) and a[0, :2].tolist() == [1, 2]
    assert torch.equal(torch.get_rng_state(), before)


def test_top_k_restricts_the_choice():
    def fn(idx):
        return torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0]).expand(*idx.shape, VOCAB)

    out = generate(fn, [0], 200, temperature=5.0, top_k=2, seed=1)
    assert set(out[0, 1:].tolist()) == {3, 4}
    assert generate(fn, [0], 50, top_k=1, seed=1)[0, 1:].tolist() == [4] * 50


def test_context_is_cropped_to_block_size():
    lengths = []

    def fn(idx):
        lengths.append(idx.shape[1])
        return cycle_fn(idx)

    generate(fn, [0, 1, 2], 5, block_size=4, temperature=0)
    assert lengths == [3, 4, 4, 4, 4]


def test_bad_arguments():
    with pytest.raises(ConfigError, match="prompt of shape"):
        generate(cycle_fn, [[1], [2]], 3)
    with pytest.raises(ConfigError, match="temperature must be >= 0"):
        generate(cycle_fn, [1], 3, temperature=-1)
    with pytest.raises(ConfigError, match=r"expected \[1, 1, vocab\]"):
        generate(lambda idx: torch.zeros(1, VOCAB), [1], 3)
