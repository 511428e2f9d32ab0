"""MDLM's batch pieces: masking rates, independent masking, ELBO weights, bits per character;
all pure functions of their inputs and an explicit generator."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.errors import ConfigError, DataError
from pytyr.train.tasks.mdlm import masking as mdlm

MASK = 10


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _clean(b: int, l: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, MASK, (b, l), generator=_gen(seed))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 300), st.integers(0, 2**31), st.sampled_from([1e-3, 0.05, 0.5]))
def test_stratified_rates_put_one_rate_in_each_stratum(batch, seed, eps):
    t = mdlm.mask_rates(batch, _gen(seed), eps=eps)
    assert t.dtype == torch.float32 and t.shape == (batch,)
    assert bool((t >= eps - 1e-7).all() and (t <= 1).all())
    # (t - eps) / (1 - eps) lies in [i/b, (i+1)/b) for sequence i: one per stratum
    s = (t.double() - eps) / (1 - eps) * batch
    i = torch.arange(batch, dtype=torch.float64)
    assert bool((s >= i - 1e-4).all() and (s < i + 1 + 1e-4).all())


def test_iid_rates_are_uniform_over_the_interval():
    t = mdlm.mask_rates(20000, _gen(0), eps=0.2, stratified=False)
    assert float(t.min()) >= 0.2 and float(t.max()) < 1
    assert abs(float(t.mean()) - 0.6) < 0.01 and abs(float(t.var()) - 0.8**2 / 12) < 0.003
    # not stratified: the rates are not sorted by position
    assert not torch.equal(t, t.sort().values)


def test_masking_follows_the_rate_of_each_row():
    targets = _clean(3, 40000)
    rates = torch.tensor([0.1, 0.5, 1.0])
    ids, masked = mdlm.mask_tokens(targets, rates, MASK, _gen(1))
    assert masked.dtype == torch.bool and ids.dtype == torch.int64
    assert torch.equal(ids == MASK, masked)
    assert torch.equal(ids[~masked], targets[~masked])  # the rest is untouched
    frac = masked.float().mean(1)
    assert abs(float(frac[0]) - 0.1) < 0.01 and abs(float(frac[1]) - 0.5) < 0.01
    assert float(frac[2]) == 1.0


def test_weights_are_one_over_t_at_masked_positions_only():
    masked = torch.tensor([[True, False, True], [False, False, False]])
    rates = torch.tensor([0.25, 0.5])
    w = mdlm.elbo_weights(masked, rates)
    assert torch.equal(w, torch.tensor([[4.0, 0.0, 4.0], [0.0, 0.0, 0.0]]))


@pytest.mark.parametrize("stratified", [True, False])
def test_mean_weight_is_one_so_the_loss_is_unbiased(stratified):
    # E[masked / t | t] = 1: with a constant per-character loss c, the weighted loss is c
    batch = mdlm.diffusion_batch(_clean(512, 256), MASK, _gen(2), stratified=stratified)
    assert abs(float(batch["weights"].mean()) - 1.0) < 0.03


def test_batch_is_keyed_by_the_model_inputs_and_consistent():
    targets = _clean(8, 32, seed=3)
    batch = mdlm.diffusion_batch(targets, MASK, _gen(4))
    assert tuple(batch) == mdlm.INPUTS == ("ids", "targets", "weights")
    ids, tg, w = batch["ids"], batch["targets"], batch["weights"]
    assert ids.dtype == tg.dtype == torch.int64 and w.dtype == torch.float32
    assert ids.shape == tg.shape == w.shape == (8, 32)
    assert torch.equal(tg, targets)
    assert torch.equal(ids == MASK, w > 0)
    assert torch.equal(ids[w == 0], targets[w == 0])
    assert bool((w[w > 0] >= 1).all())  # 1/t with t <= 1


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 16), st.integers(1, 64))
def test_batch_is_a_pure_function_of_the_generator_state(seed, b, l):
    targets = _clean(b, l, seed % 1000)
    g = _gen(seed)
    state = g.get_state()
    one = mdlm.diffusion_batch(targets, MASK, g)
    g.set_state(state)
    two = mdlm.diffusion_batch(targets, MASK, g)
    assert all(torch.equal(one[k], two[k]) for k in mdlm.INPUTS)
    # and it leaves the generator in one state: the next batch is determined too
    after = g.get_state()
    g.set_state(state)
    mdlm.diffusion_batch(targets, MASK, g)
    assert torch.equal(g.get_state(), after) and not torch.equal(after, state)


def test_different_generators_give_different_masks():
    targets = _clean(4, 64)
    a = mdlm.diffusion_batch(targets, MASK, _gen(5))
    b = mdlm.diffusion_batch(targets, MASK, _gen(6))
    assert not torch.equal(a["ids"], b["ids"])


def test_global_rng_is_untouched():
    state = torch.get_rng_state()
    mdlm.diffusion_batch(_clean(4, 16), MASK, _gen(7))
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("targets,frag", [
    (torch.tensor([[1, 2, MASK]]), "found 10"),            # already a mask token
    (torch.tensor([[1, 2, 11]]), "found 11"),
    (torch.tensor([[1, -1, 3]]), "found -1"),
    (torch.tensor([1, 2, 3]), "int64 tensor [batch, length]"),
    (torch.tensor([[1.0, 2.0]]), "int64 tensor [batch, length]"),
    ([[1, 2]], "got list"),
])
def test_bad_clean_ids_are_data_errors(targets, frag):
    with pytest.raises(DataError, match=r"^mdlm: clean ids") as info:
        mdlm.diffusion_batch(targets, MASK, _gen(0))
    assert frag in str(info.value)


@pytest.mark.parametrize("kwargs,frag", [
    ({"eps": 0.0}, "eps must be a number in (0, 1)"),
    ({"eps": 1.0}, "eps must be a number in (0, 1)"),
    ({"eps": "0.1"}, "eps must be a number in (0, 1)"),
    ({"mask_id": 0}, "mask_id must be a positive integer"),
    ({"mask_id": True}, "mask_id must be a positive integer"),
])
def test_bad_settings_are_config_errors(kwargs, frag):
    mask_id = kwargs.pop("mask_id", MASK)
    with pytest.raises(ConfigError) as info:
        mdlm.diffusion_batch(_clean(2, 4), mask_id, _gen(0), **kwargs)
    assert frag in str(info.value)


@pytest.mark.parametrize("rates,frag", [
    (torch.tensor([0.5]), "rates must be a tensor [2]"),
    (torch.tensor([0.5, 0.0]), "rates must lie in (0, 1]"),
    (torch.tensor([0.5, 1.5]), "rates must lie in (0, 1]"),
])
def test_bad_rates_are_rejected(rates, frag):
    with pytest.raises(ConfigError) as info:
        mdlm.mask_tokens(_clean(2, 4), rates, MASK, _gen(0))
    assert frag in str(info.value)
    with pytest.raises(ConfigError):
        mdlm.elbo_weights(torch.zeros(2, 4, dtype=torch.bool), rates)


def test_bad_batch_size_rejected():
    for batch in (0, -1, 2.0, True):
        with pytest.raises(ConfigError, match="batch must be a positive integer"):
            mdlm.mask_rates(batch, _gen(0))


def test_bits_per_char():
    assert mdlm.bits_per_char(3 * math.log(2)) == pytest.approx(3.0)
    assert mdlm.bits_per_char(0.0) == 0.0
    # the GPT example's measured val loss 1.904 nats/char is 2.747 bits/char
    assert mdlm.bits_per_char(1.904) == pytest.approx(2.7469, abs=1e-4)
    for bad in (math.nan, math.inf, True):
        with pytest.raises(ConfigError, match="bits_per_char"):
            mdlm.bits_per_char(bad)
