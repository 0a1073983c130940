"""Shared fixtures: a seeded generator (``PRIVMARKET_TEST_SEED``, default 42)."""

from __future__ import annotations

import os

import numpy as np
import pytest

SEED = int(os.environ.get("PRIVMARKET_TEST_SEED", "42"))


@pytest.fixture
def rng() -> np.random.Generator:
    """A generator seeded from ``PRIVMARKET_TEST_SEED``; tests must pass for any seed."""
    return np.random.default_rng(SEED)
