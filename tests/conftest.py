"""Shared fixtures: a seeded generator (``PRIVMARKET_TEST_SEED``, default 42).

Exit time (issue 14, item 8): ``python -m pytest`` used to linger 5–16 s after its
summary with no thread, pool or child process left: pytest's unraisable-exception
plugin runs ``gc.collect()`` five times at unconfigure and the interpreter's shutdown
collects again, each pass traversing every object of the imported stack (numpy, scipy,
scikit-learn, numba, SQLAlchemy, FastAPI, hypothesis, schemathesis, ...). After
collection that heap is moved to the permanent generation (``gc.freeze``), so those
passes only traverse what the tests allocated; objects created later are collected as
usual. Measured in ``benchmarks/RESULTS.md`` ("pytest exit time").

Hypothesis: with ``CI`` set, the ``ci`` profile derandomises the examples (a fixed seed,
no example database), so a CI run is reproducible; local runs keep drawing new
examples, which is where property tests find bugs.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from hypothesis import settings

SEED = int(os.environ.get("PRIVMARKET_TEST_SEED", "42"))

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze the imported and collected heap out of the cyclic GC (module docstring)."""
    gc.collect()
    gc.freeze()


@pytest.fixture
def rng() -> np.random.Generator:
    """A generator seeded from ``PRIVMARKET_TEST_SEED``; tests must pass for any seed."""
    return np.random.default_rng(SEED)
