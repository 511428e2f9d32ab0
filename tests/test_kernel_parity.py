"""Every kernel against its reference, forward and backward, at every case its contract
generates (edges and seeded randomized trials), with the contract's tolerance. Without a GPU
they run in Triton's interpreter on CPU tensors (conftest sets TRITON_INTERPRET=1).

Nothing here is written per kernel: a new kernel's contract adds its cases by itself. The
broken kernels of `broken_kernels.py` show that these generated cases catch real bugs."""
from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("triton")

import broken_kernels  # noqa: E402
from pytyr.kernels import contracts  # noqa: E402
from pytyr.kernels.parity import run_case  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TRIALS = 2  # randomized cases per contract on top of the fixtures, seeded
CONTRACTS = contracts()
CASES = [(c, case) for c in CONTRACTS.values()
         for case in c.fixtures("small") + c.trials("small", TRIALS)]


@pytest.mark.parametrize("contract,case", CASES, ids=[f"{c.name}[{k.id}]" for c, k in CASES])
def test_kernel_matches_its_reference(contract, case):
    report = run_case(contract, case, DEVICE)
    assert report.ok, "\n".join(report.lines())
    assert report.checks, "a case with nothing compared"


def test_every_kernel_is_checked_in_both_directions():
    # each contract has gradients to check and each dtype appears among its cases
    for c in CONTRACTS.values():
        assert c.differentiable, c.name
        dtypes = {case.dtype for _, case in CASES if _.name == c.name}
        assert dtypes == set(c.dtypes), c.name


def test_cases_cover_edges_and_every_option():
    attn = CONTRACTS["flash_attention"]
    cases = attn.fixtures("small")
    ts = {case.dims["t"] for case in cases}
    block = attn.dims["t"].block
    assert {1, block - 1, block, block + 1} <= ts
    assert {case.dims["d"] for case in cases} == {16, 32, 64, 128}
    for causal in (False, True):  # an edge meets every dtype under every option
        seen = {case.dtype for case in cases if case.options["causal"] is causal}
        assert seen == set(attn.dtypes)


def _failures(contract, cases):
    return [case for case in cases if not run_case(contract, case, DEVICE).ok]


def test_a_kernel_dropping_the_tail_is_caught_at_the_edges():
    copy = CONTRACTS["copy"]
    broken = dataclasses.replace(copy, kernel=broken_kernels.copy_without_tail)
    cases = broken.fixtures("small")
    failed = _failures(broken, cases)
    block = copy.dims["n"].block
    # exactly the sizes that are not a multiple of the block, and the fixtures have some
    assert failed
    assert {c.dims["n"] for c in failed} == {c.dims["n"] for c in cases if c.dims["n"] % block}


def test_a_wrong_backward_is_caught_by_the_gradient_check():
    rotary = CONTRACTS["rotary"]
    broken = dataclasses.replace(rotary, kernel=broken_kernels.rotary_unrotated_backward)
    cases = rotary.fixtures("small")[:4]
    reports = [run_case(broken, case, DEVICE) for case in cases]
    assert all(not r.ok for r in reports)
    for r in reports:  # the forward is right: only the gradient fails
        assert [c.what for c in r.checks if not c.ok] == ["grad x"]


def test_a_slightly_wrong_kernel_is_outside_the_f32_tolerance():
    attn = CONTRACTS["flash_attention"]
    broken = dataclasses.replace(attn, kernel=broken_kernels.attention_scale_off_by_a_thousandth)
    f32 = [c for c in attn.fixtures("small") if c.dtype == torch.float32][:2]
    assert f32 and len(_failures(broken, f32)) == len(f32)
