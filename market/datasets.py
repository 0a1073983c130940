"""Data for the experiments: Wisconsin with public bounds, splits, synthetic data.

Spec ``mechanism.md`` §1: the market never scales with statistics of the sellers' data.
The Wisconsin breast-cancer features are therefore mapped to ``[-1, 1]`` with **fixed**
per-feature bounds written below (:data:`WBC_FEATURE_BOUNDS`), an intercept column of
ones is appended, and every row is divided by the one constant ``√(d + 1)`` so that
``‖x_i‖₂ ≤ 1`` (each coordinate lies in ``[-1, 1]``). The synthetic generator is the one
of the paper's Appendix B (Gaussian ``x``, labels from a linear separator through the
origin, costs ``U[p, q]``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

# Public per-feature bounds of the Wisconsin diagnostic data (scikit-learn's copy of
# UCI WDBC, 30 features in scikit-learn's order: 10 means, 10 standard errors, 10
# "worst" values). Derived ONCE from the published summary table (the data set's
# description lists Min/Max of every feature to 3–4 significant digits), then rounded
# OUTWARD to a round step below/above the published value minus/plus half its last digit,
# so a record is never outside them. They are constants, like the bounds an admin
# declares in a market's schema: nothing here is computed from the records.
WBC_FEATURE_BOUNDS: tuple[tuple[float, float], ...] = (
    # mean: radius, texture, perimeter, area, smoothness
    (6.0, 30.0),
    (9.0, 40.0),
    (40.0, 190.0),
    (140.0, 2600.0),
    (0.05, 0.17),
    # mean: compactness, concavity, concave points, symmetry, fractal dimension
    (0.01, 0.35),
    (0.0, 0.43),
    (0.0, 0.21),
    (0.1, 0.31),
    (0.045, 0.1),
    # standard error: radius, texture, perimeter, area, smoothness
    (0.1, 2.9),
    (0.3, 4.9),
    (0.7, 22.0),
    (6.0, 550.0),
    (0.001, 0.032),
    # standard error: compactness, concavity, concave points, symmetry, fractal dim.
    (0.001, 0.14),
    (0.0, 0.4),
    (0.0, 0.054),
    (0.007, 0.08),
    (0.0005, 0.031),
    # worst: radius, texture, perimeter, area, smoothness
    (7.0, 37.0),
    (12.0, 50.0),
    (50.0, 260.0),
    (180.0, 4300.0),
    (0.07, 0.23),
    # worst: compactness, concavity, concave points, symmetry, fractal dimension
    (0.02, 1.1),
    (0.0, 1.3),
    (0.0, 0.3),
    (0.15, 0.67),
    (0.05, 0.21),
)


def scale_with_bounds(
    X: ArrayLike,
    bounds: ArrayLike,
    *,
    intercept: bool = True,
) -> FloatArray:
    """Map features to ``[-1, 1]`` with public bounds; rows end with ``‖x‖₂ ≤ 1``.

    ``x'_j = 2 (x_j − low_j)/(high_j − low_j) − 1`` clipped to ``[-1, 1]`` (clipping
    uses only the public bounds), an optional intercept ``1`` appended, and the row
    divided by ``√D`` with ``D`` the final dimension, so ``‖x'‖₂ ≤ √D/√D = 1``.

    Raises
    ------
    ValueError
        ``X`` is not finite or 2-D, or ``bounds`` is not ``(d, 2)`` with ``low < high``.
    """
    Xa = np.asarray(X, dtype=float)
    b = np.asarray(bounds, dtype=float)
    if Xa.ndim != 2 or not np.isfinite(Xa).all():
        raise ValueError("X must be a finite 2-D array")
    if b.shape != (Xa.shape[1], 2) or not np.isfinite(b).all():
        raise ValueError(f"bounds must be a finite array of shape ({Xa.shape[1]}, 2)")
    bad = np.flatnonzero(b[:, 0] >= b[:, 1])
    if bad.size:
        raise ValueError(f"bounds[{bad[0]}]: low must be < high")
    Z = np.clip(2.0 * (Xa - b[:, 0]) / (b[:, 1] - b[:, 0]) - 1.0, -1.0, 1.0)
    if intercept:
        Z = np.hstack([Z, np.ones((Z.shape[0], 1))])
    return Z / np.sqrt(Z.shape[1])


def load_wisconsin(*, intercept: bool = True) -> tuple[FloatArray, FloatArray]:
    """Wisconsin breast cancer (569 records) scaled with :data:`WBC_FEATURE_BOUNDS`.

    Returns
    -------
    X : ndarray of shape (569, 31) (or (569, 30) without intercept), ``‖x_i‖₂ ≤ 1``.
    y : ndarray of shape (569,), ``+1`` benign, ``−1`` malignant.
    """
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    X = scale_with_bounds(data.data, WBC_FEATURE_BOUNDS, intercept=intercept)
    y = np.where(np.asarray(data.target) == 1, 1.0, -1.0)
    return X, y


@dataclass(frozen=True, eq=False)
class Split:
    """A train / validation / test split (validation is the public set, spec §4.3)."""

    X_train: FloatArray
    y_train: FloatArray
    X_val: FloatArray
    y_val: FloatArray
    X_test: FloatArray
    y_test: FloatArray
    train_index: IntArray


def train_val_test_split(
    X: ArrayLike,
    y: ArrayLike,
    *,
    val_fraction: float = 0.15,
    test_fraction: float = 0.15,
    random_state: int | np.random.Generator | None = None,
) -> Split:
    """Shuffle once and cut into train / validation / test (not stratified).

    Deterministic for a given integer ``random_state``. ``train_index`` maps train rows
    back to the rows of ``X`` (to pair per-record costs).
    """
    Xa, ya = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    n = Xa.shape[0]
    if ya.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {ya.shape}")
    for name, f in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0.0 < f < 1.0:
            raise ValueError(f"{name} must be in (0, 1), got {f!r}")
    n_val, n_test = round(n * val_fraction), round(n * test_fraction)
    if min(n_val, n_test, n - n_val - n_test) < 1:
        raise ValueError("val_fraction, test_fraction: every part needs a record")
    perm = np.random.default_rng(random_state).permutation(n)
    tr, va, te = np.split(perm, [n - n_val - n_test, n - n_test])
    return Split(Xa[tr], ya[tr], Xa[va], ya[va], Xa[te], ya[te], tr.astype(np.int64))


@dataclass(frozen=True, eq=False)
class SyntheticData:
    """Paper Appendix B data: ``X`` (``‖x‖ ≤ 1``), ``y = ±1``, costs, the separator."""

    X: FloatArray
    y: FloatArray
    costs: FloatArray
    w_true: FloatArray


def make_synthetic(
    m: int,
    d: int,
    *,
    cost_low: float = 1e-4,
    cost_high: float = 5e-4,
    scale: float = 0.5,
    label_noise: float = 0.0,
    random_state: int | np.random.Generator | None = None,
) -> SyntheticData:
    """Synthetic data of the paper's Appendix B.

    ``x_i ~ N(0, (scale²/d)·I)`` (so ``E‖x‖² = scale²``), projected radially onto the unit
    ball when ``‖x_i‖ > 1`` (a per-record rule with a public constant);
    ``y_i = sign(w*ᵀx_i)`` for a separator ``w*`` through the origin drawn uniformly on
    the sphere, each label flipped with probability ``label_noise``;
    ``c_i ~ U[cost_low, cost_high]``.
    """
    if m < 2 or d < 1:
        raise ValueError(f"m must be >= 2 and d >= 1, got m={m!r}, d={d!r}")
    if not 0.0 <= cost_low <= cost_high:
        raise ValueError("cost_low, cost_high: need 0 <= cost_low <= cost_high")
    if not 0.0 <= label_noise < 0.5:
        raise ValueError(f"label_noise must be in [0, 0.5), got {label_noise!r}")
    if not scale > 0.0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    rng = np.random.default_rng(random_state)
    X = rng.standard_normal((m, d)) * (scale / np.sqrt(d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    y = np.where(X @ w >= 0.0, 1.0, -1.0)
    y[rng.random(m) < label_noise] *= -1.0
    costs = rng.uniform(cost_low, cost_high, size=m)
    return SyntheticData(X, y, costs, w)


def correlate_costs(X: ArrayLike, costs: ArrayLike, *, feature: int) -> FloatArray:
    """Pair sorted costs with records sorted by one feature (paper §5, correlations).

    The record with the ``k``-th smallest value of ``X[:, feature]`` gets the ``k``-th
    smallest cost; returns the costs aligned with the rows of ``X``.
    """
    Xa, c = np.asarray(X, dtype=float), np.asarray(costs, dtype=float)
    if c.shape != (Xa.shape[0],):
        raise ValueError(f"costs must have shape ({Xa.shape[0]},), got {c.shape}")
    if not -Xa.shape[1] <= feature < Xa.shape[1]:
        raise ValueError(f"feature must index a column of X, got {feature!r}")
    out = np.empty_like(c)
    out[np.argsort(Xa[:, feature], kind="stable")] = np.sort(c)
    return out
