"""Shared fixtures. `signatures` is the real op table, read from `Tyr/*.lean` by the checker:
tests validate graphs against the same single source of typing rules as production."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def signatures():
    """Op signatures read from Tyr/*.lean."""
    from pytyr.lean import LeanSignatures
    return LeanSignatures()
