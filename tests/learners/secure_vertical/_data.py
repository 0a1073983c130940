"""Data of spec §10 (V1, V5) for the secure vertical tests."""

from __future__ import annotations

import itertools

import numpy as np

BETA_STAR = np.array([-0.5, 1.0, -1.0, 0.5, 0.5, -0.5, 0.25])
SPLITS = {2: [3, 3], 3: [2, 2, 2], 5: [2, 1, 1, 1, 1]}


def v1_data(rng: np.random.Generator, n: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """``x ~ N(0, I_6)``, ``y ~ Bernoulli(σ(β*₀ + xᵀβ*))`` (V1)."""
    X = rng.standard_normal((n, 6))
    eta = BETA_STAR[0] + X @ BETA_STAR[1:]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(float)
    return X, y


def split(X: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    """Column blocks of ``X`` of the given sizes."""
    edges = np.cumsum([0, *sizes])
    return [X[:, a:b] for a, b in itertools.pairwise(edges)]


def pooled_mle(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Independent pooled fit: SciPy trust-region Newton on the negative
    log-likelihood to gradient 1e-12 (intercept first)."""
    from scipy.optimize import minimize

    Z = np.hstack([np.ones((X.shape[0], 1)), X])

    def f(b: np.ndarray) -> float:
        z = Z @ b
        return float(np.sum(np.logaddexp(0.0, z) - y * z))

    def grad(b: np.ndarray) -> np.ndarray:
        return Z.T @ (1.0 / (1.0 + np.exp(-(Z @ b))) - y)

    def hess(b: np.ndarray) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-(Z @ b)))
        return (Z.T * (p * (1 - p))) @ Z

    res = minimize(f, np.zeros(Z.shape[1]), jac=grad, hess=hess, method="trust-exact",
                   options={"gtol": 1e-12})  # fmt: skip
    return np.asarray(res.x)


def v5_data(rng: np.random.Generator, n: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """The paper's first simulation (V5): complete ``X`` and the masked copy."""
    z = rng.random(n) < 0.25
    mu = np.where(z[:, None], -2.0, 2.0) * np.ones((n, 6))
    X = mu + rng.standard_normal((n, 6))
    Xm = X.copy()
    A, B, C = slice(0, 2), slice(2, 4), slice(4, 6)
    Xm[40:60, A] = np.nan
    Xm[20:40, B] = np.nan
    Xm[60:80, B] = np.nan
    Xm[0:20, C] = np.nan
    Xm[60:80, C] = np.nan
    return X, Xm
