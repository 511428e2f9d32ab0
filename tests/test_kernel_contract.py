"""The contract form itself (pytyr/kernels/contract.py): domains, edges, draws, refusals and
the tolerance rule. No kernel runs here."""
from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pytyr.errors import KernelError
from pytyr.kernels.contract import Case, Contract, Dim, Tolerance

dims = st.builds(
    lambda lo, span, mult, block: Dim(lo=lo, hi=lo + span, multiple=mult, block=block),
    st.integers(0, 64), st.integers(0, 4096), st.sampled_from([1, 1, 2, 8]),
    st.sampled_from([None, 4, 16, 64]))


@given(dims, st.integers(1, 300))
def test_edges_are_admitted_and_bounded(dim, base):
    edges = dim.edges(base)
    assert all(dim.admits(v) for v in edges)
    cap = max(base, dim.lo, 2 * dim.block + 1 if dim.block else 0)
    assert all(v <= cap for v in edges)
    if dim.admits(dim.lo):
        assert dim.lo in edges
    if dim.block and dim.admits(dim.block + dim.multiple) and dim.block + dim.multiple <= cap:
        assert dim.block + dim.multiple in edges  # just past the boundary: the mask case


@given(dims, st.integers(1, 300), st.integers(0, 10**6))
def test_draws_are_admitted(dim, base, seed):
    n = dim.draw(random.Random(seed), base)
    assert dim.admits(n) or not any(dim.admits(v) for v in range(dim.lo, dim.hi + 1))


def test_enumerated_dims_admit_only_their_values():
    d = Dim(values=(16, 32, 64, 128))
    assert [v for v in range(200) if d.admits(v)] == [16, 32, 64, 128]
    assert d.edges(32) == [16, 32, 64, 128]
    assert d.describe() == "one of 16, 32, 64, 128"
    assert Dim(lo=2, hi=10, multiple=2).describe() == "2..10 (a multiple of 2)"


def _toy(**kw):
    args = dict(name="toy", kernel=lambda x: x, reference=lambda x: x,
                dims={"n": Dim(hi=100, block=8)}, dtypes=(torch.float32,),
                inputs=lambda case, gen, dev: [torch.zeros(case.dims["n"])],
                sizes={"small": {"n": 5}}, tolerance={torch.float32: Tolerance()},
                options={"flag": (False, True)})
    return Contract(**{**args, **kw})


def test_refusals_name_the_dim_or_dtype():
    c = _toy()
    assert c.refusal({"n": 5}, torch.float32) is None
    assert c.refusal({"n": 101}, torch.float32) == "n=101 is outside 1..100"
    assert c.refusal({"n": 5}, torch.bfloat16) == "dtype bf16 is not one of f32"
    with pytest.raises(KernelError, match="kernel 'toy' called outside its contract: n=0"):
        c.require({"n": 0}, torch.float32)


def test_fixtures_cover_base_options_and_edges_with_distinct_seeds():
    cases = _toy().fixtures("small")
    assert [c.dims["n"] for c in cases[:2]] == [5, 5]
    assert {c.options["flag"] for c in cases} == {False, True}
    assert sorted({c.dims["n"] for c in cases}) == [1, 5, 7, 8, 9, 15, 16, 17]
    assert len({c.seed for c in cases[2:]}) == len(cases) - 2
    assert all(c.kind == "edge" for c in cases)


def test_trials_are_seeded_and_marked():
    c = _toy()
    a, b = c.trials("small", 5, seed=1), c.trials("small", 5, seed=1)
    assert [x.id for x in a] == [x.id for x in b]
    assert [x.id for x in a] != [x.id for x in c.trials("small", 5, seed=2)]
    assert all(x.kind == "random" and 1 <= x.dims["n"] <= 10 for x in a)


def test_tolerance_is_the_flashattention_rule():
    tol = Tolerance(mult=2.0, ulps=4.0)
    eps = torch.finfo(torch.bfloat16).eps
    assert tol.bound(0.01, 3.0, torch.bfloat16) == pytest.approx(0.02 + 4 * eps * 3.0)
    assert Tolerance(0.0, 0.0).bound(0.5, 9.0, torch.float32) == 0.0  # exact kernels


def test_case_ids_are_readable():
    case = Case({"t": 17, "d": 64}, torch.bfloat16, {"causal": True}, 3)
    assert case.id == "t=17,d=64,bf16,causal=True,seed=3"
