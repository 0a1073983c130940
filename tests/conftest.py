"""Shared fixtures: a seeded generator (``PRIVMARKET_TEST_SEED``, default 42).

Hypothesis: with ``CI`` set, the ``ci`` profile derandomises the examples (a fixed seed,
no example database), so a CI run is reproducible; local runs keep drawing new
examples, which is where property tests find bugs.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings

SEED = int(os.environ.get("PRIVMARKET_TEST_SEED", "42"))

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def rng() -> np.random.Generator:
    """A generator seeded from ``PRIVMARKET_TEST_SEED``; tests must pass for any seed."""
    return np.random.default_rng(SEED)
