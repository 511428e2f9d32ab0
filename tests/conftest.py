"""Shared fixtures. `signatures` is the real op table, read from `Tyr/*.lean` by the checker:
tests validate graphs against the same single source of typing rules as production."""
from __future__ import annotations

import os

import pytest
import torch

# Without a GPU the Triton kernels run in Triton's interpreter, on CPU tensors. Triton reads
# the switch when a kernel is defined, so it is set before any test imports pytyr.kernels.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session")
def signatures():
    """Op signatures read from Tyr/*.lean."""
    from pytyr.lean import LeanSignatures
    return LeanSignatures()


@pytest.fixture
def one_thread():
    """torch on one thread for the test (the CPU kernels' contract), restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
