"""Shared designs of spec ``one-bit-ldp-qmle.md`` §7 and the paper's printed formulas.

- S1 (public X, correct model): ``x = (u₁, u₂, 1)`` (intercept last, the estimator's
  order), ``u ~ U[−1, 1]²``, ``β* = (1, −1, 0.5)``, ``y ~ ALD(0.3, β*ᵀx, 1)``,
  ``[c_l, c_u] = [−4, 6]``.
- S2 (private X, correct model): ``x`` uniform on ``{−1, +1}³``, ``β* = (1, −0.5, 0.5)``,
  no intercept, ``[c_l, c_u] = [−4, 4]``, covariate intervals ``[−1, 1]``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from learners.onebit_quantile import (
    CornerPrior,
    QuantileWorkingModel,
    posterior_transform,
    sample_ald_noise,
)

FloatArray = NDArray[np.float64]
ALPHA = 0.3
S1_BETA = np.array([1.0, -1.0, 0.5])
S1_INTERVAL = (-4.0, 6.0)
S2_BETA = np.array([1.0, -0.5, 0.5])
S2_INTERVAL = (-4.0, 4.0)


def s1_model() -> QuantileWorkingModel:
    return QuantileWorkingModel(alpha=ALPHA, sigma=1.0, low=-4.0, high=6.0)


def s2_model() -> QuantileWorkingModel:
    return QuantileWorkingModel(alpha=ALPHA, sigma=1.0, low=-4.0, high=4.0)


def draw_s1(n: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray]:
    """Features ``(u₁, u₂)`` (the intercept is the estimator's) and responses."""
    u = rng.uniform(-1.0, 1.0, (n, 2))
    theta = u @ S1_BETA[:2] + S1_BETA[2]
    return u, theta + sample_ald_noise(n, alpha=ALPHA, rng=rng)


def draw_s2(
    n: int, rng: np.random.Generator, *, uniform: bool = False
) -> tuple[FloatArray, FloatArray]:
    """S2 (``uniform=True``: ``x ~ U[−1, 1]³``, the prior-limitation design V-B6)."""
    if uniform:
        X = rng.uniform(-1.0, 1.0, (n, 3))
    else:
        X = rng.choice([-1.0, 1.0], size=(n, 3))
    return X, X @ S2_BETA + sample_ald_noise(n, alpha=ALPHA, rng=rng)


def s1_inverse_information(epsilon: float, *, nodes: int = 64) -> FloatArray:
    """``I(β*)⁻¹`` of S1 by Gauss–Legendre quadrature over ``u`` (spec V-B3)."""
    t, w = np.polynomial.legendre.leggauss(nodes)
    u1, u2 = np.meshgrid(t, t, indexing="ij")
    weight = (np.outer(w, w) / 4.0).reshape(-1)  # density 1/4 on the square
    X = np.column_stack([u1.reshape(-1), u2.reshape(-1), np.ones(u1.size)])
    m = s1_model()
    theta = X @ S1_BETA
    psi = m.psi(theta, epsilon=epsilon)
    d1 = m.psi_prime(theta, epsilon=epsilon)
    info = (X.T * (weight * d1**2 / (psi * (1.0 - psi)))) @ X
    return np.linalg.inv(info)


def s2_inverse_information(epsilon: float) -> FloatArray:
    """``I(β*)⁻¹`` of S2: ``I = 2^{−k} Σ_r Φ'_rΦ'_rᵀ/(Φ_r(1 − Φ_r))`` (spec V-B4)."""
    k = 3
    prior = CornerPrior(center=np.zeros(k), half_width=np.ones(k), rho=np.ones(k))
    corners = prior.corners()
    m = s2_model()
    per_bit = epsilon / (k + 1)
    tau = np.full((1, k), math.tanh(per_bit / 2.0))
    theta = corners @ S2_BETA
    stacked = np.vstack(
        [m.psi(theta, epsilon=per_bit), m.psi_prime(theta, epsilon=per_bit) * corners.T]
    )
    T = posterior_transform(stacked, tau)[0]
    phi, grad = T[0], T[1:]
    info = (grad * (1.0 / (phi * (1.0 - phi)))) @ grad.T / 2**k
    return np.linalg.inv(info)


# ---- the paper's printed closed forms (App. C.3), for the regression test of defect 5 ----


def paper_psi(
    theta: FloatArray,
    *,
    epsilon: float,
    alpha: float,
    sigma: float,
    low: float,
    high: float,
    printed_upper: bool = True,
) -> FloatArray:
    """Ψ as printed in the paper, case by case. ``printed_upper=False`` applies the
    spec's correction to the ``θ ≥ c_u`` case (``e^{+(1−α)(c_u−θ)/σ}``)."""
    C = (math.exp(epsilon) + 1.0) / (math.exp(epsilon) - 1.0)
    W, m = high - low, (high + low) / 2.0
    CW = C * W
    a, s = alpha, sigma
    th = np.asarray(theta, dtype=float)
    inner = (
        th / CW
        + (a / (1 - a)) * s / CW * np.exp((1 - a) * (low - th) / s)
        - ((1 - a) / a) * s / CW * np.exp(-a * (high - th) / s)
        + 0.5
        + (-a / (1 - a) + (1 - a) / a) * s / CW
        - m / CW
    )
    lower = (
        0.5
        - 1 / (2 * C)
        + (1 - a) * s / a / CW * np.exp(-a * (low - th) / s)
        - (1 - a) * s / a / CW * np.exp(-a * (high - th) / s)
    )
    sign = -1.0 if printed_upper else 1.0
    upper = (
        0.5
        + 1 / (2 * C)
        + a * s / (1 - a) / CW * np.exp((1 - a) * (low - th) / s)
        - a * s / (1 - a) / CW * np.exp(sign * (1 - a) * (high - th) / s)
    )
    return np.where(th <= low, lower, np.where(th >= high, upper, inner))
