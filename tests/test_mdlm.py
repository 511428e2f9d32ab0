"""MDLM's batches: masking rates and ELBO weights (pure functions of their inputs and an
explicit generator), and the training batches the `mdlm` task makes of them (`training_batch`,
the one path the engine and the benchmarks take)."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.errors import ConfigError
from pytyr.train.task import TaskContext
from pytyr.train.tasks import make_task
from pytyr.train.tasks.mdlm import masking as mdlm


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


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


def test_weights_are_one_over_t_at_masked_positions_only():
    masked = torch.tensor([[True, False, True], [False, False, False]])
    rates = torch.tensor([0.25, 0.5])
    w = mdlm.elbo_weights(masked, rates)
    assert torch.equal(w, torch.tensor([[4.0, 0.0, 4.0], [0.0, 0.0, 0.0]]))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return str(tmp_path_factory.mktemp("corpus"))


def _task(corpus: str, micro: int, seq: int, **options):
    """The `mdlm` task over the Shakespeare corpus: the only maker of training batches."""
    table = {"name": "mdlm", "seq": seq, "cache_dir": corpus, **options}
    task = make_task(table, TaskContext(micro, 7), "test")
    task.prepare()
    return task


@pytest.mark.parametrize("stratified", [True, False])
def test_mean_weight_is_one_so_the_loss_is_unbiased(corpus, stratified):
    # E[masked / t | t] = 1: with a constant per-character loss c, the weighted loss is c
    batch = _task(corpus, 512, 256, stratified=stratified).training_batch(2)
    assert abs(float(batch["weights"].mean()) - 1.0) < 0.03


def test_masking_follows_the_rate_of_each_row(corpus):
    task = _task(corpus, 4, 20000, stratified=False)
    batch = task.training_batch(0)
    rates = 1 / batch["weights"].max(1).values  # a row's weight is 1/t where masked
    frac = (batch["ids"] == task.mask_id).float().mean(1)
    assert torch.allclose(frac, rates, atol=0.015), (frac, rates)


def test_a_training_batch_is_keyed_by_the_model_inputs_and_consistent(corpus):
    task = _task(corpus, 8, 32)
    batch = task.training_batch(3)
    assert list(batch) == list(task.feeds()) == ["ids", "targets", "weights"]
    ids, tg, w = batch["ids"], batch["targets"], batch["weights"]
    assert ids.dtype == tg.dtype == torch.int64 and w.dtype == torch.float32
    assert ids.shape == tg.shape == w.shape == (8, 32)
    assert torch.equal(tg, task.batch(3)["targets"])  # the clean windows of batch k
    assert torch.equal(ids == task.mask_id, w > 0)
    assert torch.equal(ids[w == 0], tg[w == 0])
    assert bool((w[w > 0] >= 1).all())  # 1/t with t <= 1


def test_a_training_batch_is_a_pure_function_of_k(corpus):
    task = _task(corpus, 4, 64)
    state = torch.get_rng_state()
    one, two = task.training_batch(5), task.training_batch(5)
    assert all(torch.equal(one[k], two[k]) for k in one)
    other = _task(corpus, 4, 64).training_batch(5)  # another instance: the same batch
    assert all(torch.equal(one[k], other[k]) for k in one)
    assert not torch.equal(one["ids"], task.training_batch(6)["ids"])
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG is untouched


@pytest.mark.parametrize("rates,frag", [
    (torch.tensor([0.5]), "rates must be a tensor [2]"),
    (torch.tensor([0.5, 0.0]), "rates must lie in (0, 1]"),
    (torch.tensor([0.5, 1.5]), "rates must lie in (0, 1]"),
])
def test_bad_rates_are_rejected(rates, frag):
    with pytest.raises(ConfigError) as info:
        mdlm.elbo_weights(torch.zeros(2, 4, dtype=torch.bool), rates)
    assert frag in str(info.value)


def test_bad_batch_size_rejected():
    for batch in (0, -1, 2.0, True):
        with pytest.raises(ConfigError, match="batch must be a positive integer"):
            mdlm.mask_rates(batch, _gen(0))
