"""Small data fixtures for the allocation tests.

Wisconsin (scikit-learn's copy): every feature of that data set is non-negative, so
each column is divided by a *fixed* bound (the column maxima of the published data,
frozen once here as a test fixture — the market itself never scales with data
statistics), an intercept column of ones is appended, and all rows are divided by one
global constant ``sqrt(d + 1)`` so that ``‖x_i‖₂ ≤ 1``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.datasets import load_breast_cancer

FloatArray = NDArray[np.float64]


@functools.cache
def _wisconsin() -> tuple[FloatArray, FloatArray]:
    data = load_breast_cancer()
    X = np.asarray(data.data, dtype=float)
    bounds = X.max(axis=0)  # frozen public bounds (fixture only)
    Z = np.hstack([X / bounds, np.ones((X.shape[0], 1))]) / np.sqrt(X.shape[1] + 1)
    y = np.where(data.target == 1, 1.0, -1.0)
    return Z, y


@pytest.fixture(scope="session")
def wisconsin() -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``(X_train, y_train, X_val, y_val)``: a fixed 400/169 split, ``‖x‖ ≤ 1``."""
    X, y = _wisconsin()
    perm = np.random.default_rng(2024).permutation(X.shape[0])
    tr, va = perm[:400], perm[400:]
    return X[tr], y[tr], X[va], y[va]


def synthetic_logistic(
    rng: np.random.Generator, m: int, d: int, *, flip: float = 0.1
) -> tuple[FloatArray, FloatArray]:
    """Gaussian ``x`` scaled into the unit ball, labels from a separator through the
    origin (paper Appendix B), with a fraction ``flip`` of labels flipped."""
    X = rng.standard_normal((m, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0) * 1.0001
    X *= 0.9
    w_true = rng.standard_normal(d)
    y = np.where(X @ w_true >= 0, 1.0, -1.0)
    y[rng.random(m) < flip] *= -1.0
    return X, y
