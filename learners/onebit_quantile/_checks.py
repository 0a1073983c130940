"""Input checks of :class:`OneBitQuantileRegression` (``ValueError`` naming the input)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners._validation import check_sample_epsilon as _check_budgets
from learners.onebit_quantile._randomizers import check_interval

FloatArray = NDArray[np.float64]


def check_response_interval(interval: Any) -> tuple[float, float]:
    """``(c_l, c_u)`` from ``[low, high]``: two finite numbers, ``low < high``."""
    try:
        values = np.asarray(interval, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"interval must be two numbers [low, high]: {exc}") from exc
    if values.shape != (2,):
        raise ValueError(f"interval must be [low, high], got {interval!r}")
    return check_interval(values[0], values[1], name="interval")


def check_sample_epsilon(sample_epsilon: ArrayLike, n: int) -> FloatArray:
    """Per-record budgets (a scalar is broadcast): finite, ``≥ 0`` (0: the record sends
    nothing), not all zero (:func:`learners._validation.check_sample_epsilon`)."""
    return _check_budgets(sample_epsilon, n_samples=n, require_positive=True)


def check_bounds_X(bounds_X: Any, p: int) -> tuple[FloatArray, FloatArray]:
    """Public per-feature bounds ``(low, high)`` (scalars broadcast), required for
    private features: never taken from the data."""
    if bounds_X is None:
        raise ValueError(
            "bounds_X: private_x needs public bounds for every private feature "
            "(never taken from the data)"
        )
    try:
        lo = np.broadcast_to(np.asarray(bounds_X[0], dtype=float), (p,))
        hi = np.broadcast_to(np.asarray(bounds_X[1], dtype=float), (p,))
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"bounds_X must be (low, high) per feature: {exc}") from exc
    if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < hi).all()):
        raise ValueError("bounds_X must be finite with low < high for every feature")
    return lo.astype(float), hi.astype(float)


def check_public_features(public_features: Any, p: int) -> list[int]:
    """Sorted indices of the features declared public."""
    if public_features is None:
        return []
    idx = sorted({int(j) for j in np.asarray(public_features).reshape(-1)})
    if any(j < 0 or j >= p for j in idx):
        raise ValueError(f"public_features must be feature indices in [0, {p})")
    return idx


def prior_rho(prior: str, rho: Any, k: int) -> FloatArray:
    """``ρ_j`` of the two-point prior: 1 (endpoint) or the public moment-matched value
    (default ``1/√3``, uniform covariates)."""
    if prior == "endpoint":
        return np.ones(k)
    value = 1.0 / math.sqrt(3.0) if rho is None else rho
    out = np.broadcast_to(np.asarray(value, dtype=float), (k,)).astype(float)
    if not ((out > 0) & (out <= 1)).all():
        raise ValueError("prior_rho must be in (0, 1]")
    return out
