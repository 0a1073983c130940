"""Algorithms DS (dummy submission, spec §5) and TP (two-phase IPW, spec §6), with
per-user budgets ``ε_i`` (spec §9).

Inputs are the users' records in the spec's coding: ``x_i ∈ R^k`` (a row with any
``NaN`` is missing: ``m_i = 1``, spec §7), ``y_i ∈ {0, 1}``. Every participating user
(``ε_i > 0``) reports once per phase whether or not its ``x`` is missing; a missing
user reports the dummy ``v = 0`` (a uniform point on the sphere, spec §3).

DS:  G = √(1 + R_x²), one phase with ε_i, input (1 − m_i)·∇ℓ(β; x_i, y_i).
TP:  phase 1 with ε_i·s on the missingness model ``P(m = 1 | y) = σ(αᵀy')``
     (features y' = (1, y), target m, G₁ = √2, ball R_α) → α̂,
     r̂_y = σ(−(α̂₀ + α̂₁y)) (optionally floored), p_min = min_y r̂_y;
     phase 2 with ε_i·(1 − s) on (1 − m_i)·∇ℓ / r̂_{y_i}, G₂ = G/p_min, ball R_β.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

from learners.ldp_missing._sgd import SGDResult, private_sgd

__all__ = [
    "DSResult",
    "TPResult",
    "dummy_submission",
    "observation_probabilities",
    "two_phase",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DSResult:
    """Algorithm DS: ``beta = (β₀, β₁, …, β_k)`` and its one phase."""

    beta: NDArray[np.float64]
    phase: SGDResult


@dataclass(frozen=True, slots=True, kw_only=True)
class TPResult:
    """Algorithm TP: ``beta``, the missingness fit ``alpha`` (``α̂``), the weights
    ``r_hat = (r̂₀, r̂₁)`` and ``p_min``; ``phase1`` is None when ``α`` was given."""

    beta: NDArray[np.float64]
    alpha: NDArray[np.float64]
    r_hat: NDArray[np.float64]
    p_min: float
    phase1: SGDResult | None
    phase2: SGDResult


def observation_probabilities(
    alpha: NDArray[np.float64], *, p_floor: float = 0.0
) -> NDArray[np.float64]:
    """``(r̂₀, r̂₁)`` with ``r̂_y = max(σ(−(α₀ + α₁y)), p_floor)`` (spec §6 line 12)."""
    r = expit(-(alpha[0] + alpha[1] * np.array([0.0, 1.0])))
    return np.asarray(np.maximum(r, float(p_floor)), dtype=float)


def _design(X: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """``x' = (1, x)`` with missing rows zero-filled (never read), and ``m``."""
    missing = np.asarray(np.isnan(X).any(axis=1), dtype=bool)
    feats = np.hstack([np.ones((X.shape[0], 1)), np.where(np.isnan(X), 0.0, X)])
    return feats, missing


def dummy_submission(
    X: NDArray[np.float64],
    y01: NDArray[np.float64],
    epsilon: NDArray[np.float64],
    *,
    x_bound: float,
    beta_radius: float,
    gamma: float,
    rng: np.random.Generator,
    step_scale: float | None = None,
    identity: bool = False,
    record: bool = False,
) -> DSResult:
    """Algorithm DS (spec §5): private SGD on ``(1 − m_i)·∇ℓ``; limit ``β_DS`` (§1).

    Parameters
    ----------
    X : ndarray of shape (n, k)
        Covariates; ``NaN`` marks a missing record.
    y01 : ndarray of shape (n,)
        Labels in ``{0, 1}``.
    epsilon : ndarray of shape (n,)
        Per-user budgets ``ε_i ≥ 0`` (0: skipped).
    x_bound : float
        ``R_x ≥ ‖x_i‖₂`` (public), so ``G = √(1 + R_x²)``.
    beta_radius, gamma, step_scale, identity, record
        As in :func:`learners.ldp_missing._sgd.private_sgd`.
    """
    feats, missing = _design(X)
    phase = private_sgd(
        feats,
        y01,
        np.where(missing, 0.0, 1.0),
        bound=math.sqrt(1.0 + x_bound**2),
        epsilon=epsilon,
        ball=beta_radius,
        gamma=gamma,
        rng=rng,
        step_scale=step_scale,
        identity=identity,
        record=record,
    )
    return DSResult(beta=phase.coef, phase=phase)


def two_phase(
    X: NDArray[np.float64],
    y01: NDArray[np.float64],
    epsilon: NDArray[np.float64],
    *,
    x_bound: float,
    beta_radius: float,
    alpha_radius: float,
    gamma: float,
    rng: np.random.Generator,
    split: float = 0.5,
    p_floor: float = 0.0,
    alpha: NDArray[np.float64] | None = None,
    step_scale: float | None = None,
    identity: bool = False,
    record: bool = False,
) -> TPResult:
    """Algorithm TP (spec §6, with spec §9's per-user budgets ``ε_i·split``,
    ``ε_i·(1 − split)``).

    Parameters
    ----------
    X, y01, epsilon, x_bound, beta_radius, gamma, step_scale, identity, record
        As in :func:`dummy_submission`.
    alpha_radius : float
        ``R_α`` of the preparation phase (must exceed ``‖α*‖``; spec §6).
    split : float, default=0.5
        Share of ``ε_i`` spent on phase 1 (public).
    p_floor : float, default=0.0
        Floor of ``r̂_y`` (spec §6 PROPOSAL; 0 = off).
    alpha : ndarray of shape (2,), optional
        Test-only: the true ``α*``; phase 1 is skipped (spec V-A3, V-A8).
    """
    feats, missing = _design(X)
    m = missing.astype(float)
    eps1 = epsilon * split
    eps2 = epsilon - eps1
    sgd = partial(
        private_sgd,
        gamma=gamma,
        rng=rng,
        step_scale=step_scale,
        identity=identity,
        record=record,
    )
    phase1 = None
    if alpha is None:
        prep = np.column_stack([np.ones_like(y01), y01])
        phase1 = sgd(
            prep,
            m,
            np.ones_like(m),
            bound=math.sqrt(2.0),
            epsilon=eps1,
            ball=alpha_radius,
        )
        alpha = phase1.coef
    r_hat = observation_probabilities(alpha, p_floor=p_floor)
    p_min = float(r_hat.min())
    weights = np.where(missing, 0.0, 1.0 / r_hat[y01.astype(int)])
    phase2 = sgd(
        feats,
        y01,
        weights,
        bound=math.sqrt(1.0 + x_bound**2) / p_min,
        epsilon=eps2,
        ball=beta_radius,
    )
    return TPResult(
        beta=phase2.coef,
        alpha=np.asarray(alpha, dtype=float),
        r_hat=r_hat,
        p_min=p_min,
        phase1=phase1,
        phase2=phase2,
    )
