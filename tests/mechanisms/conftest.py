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

from mechanisms import MechanismConfig

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


# --- independent references (written from the spec's formulas, not the package) ---


def loss_value(
    name: str, z: FloatArray, y: FloatArray, *, q: float, h: float
) -> FloatArray:
    """ℓ(z, y) per spec §7: logistic log(1+e^{−yz}), squared (y−z)²/2, smoothed pinball."""
    if name == "logistic":
        t = -y * z
        return np.where(t > 0, t + np.log1p(np.exp(-np.abs(t))), np.log1p(np.exp(t)))
    if name == "squared":
        return 0.5 * (y - z) ** 2
    r = y - z
    quad = r**2 / (4 * h) + (q - 0.5) * r + h / 4
    return np.where(r >= h, q * r, np.where(r <= -h, (q - 1) * r, quad))


def loss_derivative(
    name: str, z: FloatArray, y: FloatArray, *, q: float, h: float
) -> FloatArray:
    """dℓ/dz of :func:`loss_value`."""
    if name == "logistic":
        return -y / (1.0 + np.exp(np.clip(y * z, -700, 700)))
    if name == "squared":
        return z - y
    r = y - z
    return -np.where(r >= h, q, np.where(r <= -h, q - 1, r / (2 * h) + q - 0.5))


def g_value(
    X: FloatArray,
    y: FloatArray,
    psi: FloatArray,
    cfg: MechanismConfig,
    w: FloatArray,
    a: FloatArray,
    eta: float,
) -> float:
    """G(w, a, η) of spec §4.1, written out independently."""
    ell = loss_value(cfg.loss, X @ w, y, q=cfg.quantile, h=cfg.pinball_smoothing)
    u = eta * a if cfg.u == "linear" else (eta * a) ** cfg.u_power
    return float(
        a @ ell
        + 0.5 * cfg.lam * w @ w
        + cfg.mu * np.sqrt(a @ a)
        + cfg.sigma / eta
        + cfg.gamma * psi @ u
    )


def capped_simplex_kkt(
    a: FloatArray, grad: FloatArray, caps: FloatArray, *, zero_tol: float = 1e-10
) -> float:
    """Largest violation of the KKT conditions of ``min f(a)`` over
    ``{Σ a = 1, 0 ≤ a ≤ h}`` given ``grad = ∇f(a)``.

    There must be one multiplier ``τ`` with ``∇f_i = τ`` where ``0 < a_i < h_i``,
    ``∇f_i ≥ τ`` where ``a_i = 0`` and ``∇f_i ≤ τ`` where ``a_i = h_i``. The best ``τ``
    minimises the largest violation, a 1-D convex piecewise-linear problem solved
    exactly over its breakpoints (the gradient values). Returns that violation,
    relative to ``1 + max |∇f|``, and also counts feasibility violations.
    """
    forced = caps <= zero_tol  # h_i = 0: a_i = 0 whatever the gradient
    at0 = (a <= zero_tol) & ~forced
    finite = np.isfinite(caps)
    atc = np.zeros_like(forced)
    atc[finite] = a[finite] >= caps[finite] - zero_tol * np.maximum(caps[finite], 1.0)
    atc &= ~forced
    at0 &= ~atc
    free = ~at0 & ~atc & ~forced

    def viol(tau: float) -> float:
        v = [0.0]
        if free.any():
            v.append(float(np.abs(grad[free] - tau).max()))
        if at0.any():
            v.append(float(np.maximum(tau - grad[at0], 0).max()))
        if atc.any():
            v.append(float(np.maximum(grad[atc] - tau, 0).max()))
        return max(v)

    cands = (
        np.concatenate([grad, [0.5 * (grad[free].max() + grad[free].min())]])
        if free.any()
        else grad
    )
    best = min(viol(float(t)) for t in cands)
    feas = max(
        abs(float(a.sum()) - 1.0),
        float(np.maximum(-a, 0).max()),
        float(np.maximum(a - caps, 0).max()),
    )
    return max(best / (1.0 + float(np.abs(grad).max())), feas)
