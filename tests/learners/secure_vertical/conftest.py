"""The secure vertical tests fit without ε on purpose (spec §4.3 allows non-DP fits:
the V1–V9 targets are about the non-private numerics and the leakage ledger), so the
:class:`~learners.privacy.NonPrivateFitWarning` of those fits is not an error here.
``test_labels.py`` asserts that the warning is raised."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
IGNORE_NON_PRIVATE = pytest.mark.filterwarnings(
    "ignore::learners.privacy.NonPrivateFitWarning"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(IGNORE_NON_PRIVATE)
