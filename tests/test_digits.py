"""scikit-learn's digits for rectified flow: the data, its scaling, a stratified
deterministic split and batches drawn by a generator."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.data.digits import (
    Digits,
    load_digits,
    load_digits_split,
    split_digits,
    to_gray,
    to_unit_range,
)
from pytyr.errors import DataError


@pytest.fixture(scope="module")
def digits() -> Digits:
    return load_digits()


def numbered(n: int = 200) -> Digits:
    """Stand-in digits whose pixels hold their own index, so splits can be traced."""
    return Digits(torch.arange(n, dtype=torch.float32).reshape(n, 1, 1, 1).expand(n, 1, 8, 8),
                  torch.arange(n) % 10)


def test_all_digits_in_unit_range(digits):
    assert digits.images.shape == (1797, 1, 8, 8) and digits.images.dtype == torch.float32
    assert digits.labels.shape == (1797,) and digits.labels.dtype == torch.int64
    assert digits.images.min() == -1 and digits.images.max() == 1
    counts = torch.bincount(digits.labels, minlength=10)
    assert counts.sum() == 1797 and counts.min() >= 170 and counts.max() <= 190
    # 17 gray levels: 0 … 16 become -1, -7/8, …, 1
    levels = torch.unique(digits.images)
    assert torch.equal(levels, torch.arange(17) / 8 - 1)


def test_scaling_round_trips():
    v = torch.arange(17)
    assert torch.equal(to_unit_range(v), v / 8 - 1)
    assert torch.equal(to_gray(to_unit_range(v)), v / 16)
    assert torch.equal(to_gray(torch.tensor([-3.0, 3.0])), torch.tensor([0.0, 1.0]))


def test_split_is_stratified_disjoint_and_complete(digits):
    train, val = split_digits(digits, 0.1, seed=0)
    assert len(train) + len(val) == 1797
    per_class = torch.bincount(digits.labels, minlength=10)
    val_counts = torch.bincount(val.labels, minlength=10)
    assert torch.equal(val_counts, torch.round(per_class * 0.1).long())
    tr, va = split_digits(numbered(), 0.25, seed=3)
    ids_tr, ids_va = tr.images[:, 0, 0, 0].long(), va.images[:, 0, 0, 0].long()
    assert sorted(ids_tr.tolist() + ids_va.tolist()) == list(range(200))
    assert torch.equal(ids_va % 10, va.labels) and torch.equal(ids_tr % 10, tr.labels)


def test_split_is_deterministic_in_the_seed():
    a_tr, a_va = load_digits_split(0.1, seed=7)
    b_tr, b_va = load_digits_split(0.1, seed=7)
    c_tr, c_va = load_digits_split(0.1, seed=8)
    assert torch.equal(a_tr.images, b_tr.images) and torch.equal(a_va.labels, b_va.labels)
    assert not torch.equal(a_va.images, c_va.images)


def test_no_validation_part():
    train, val = split_digits(numbered(), 0.0)
    assert len(train) == 200 and len(val) == 0


@given(st.one_of(st.floats(allow_nan=True), st.integers(), st.booleans(), st.none(),
                 st.text(max_size=3)))
@settings(max_examples=60, deadline=None)
def test_bad_fractions_are_data_errors(fraction):
    ok = isinstance(fraction, (int, float)) and not isinstance(fraction, bool) \
        and 0 <= fraction < 1
    if ok:
        split_digits(numbered(20), fraction)
    else:
        with pytest.raises(DataError, match="val_fraction must be a number in"):
            split_digits(numbered(20), fraction)


@pytest.mark.parametrize("seed", [1.5, "0", True, None])
def test_bad_seeds_are_data_errors(seed):
    with pytest.raises(DataError, match="seed must be an integer"):
        split_digits(numbered(20), 0.1, seed=seed)
