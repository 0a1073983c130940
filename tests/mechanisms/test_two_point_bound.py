"""The two-point bound of an ``η`` cell is a lower bound (spec §4.2).

:func:`mechanisms.allocation._range._two_point.two_point_bound` bounds
``P(η) = min_x H(x) + σ/η + γηS(x)`` (``S ≥ 0``) on ``[η₁, η₂]`` from lower bounds of
``P`` at the two ends. Here ``x`` ranges over a finite random set, so the true minimum
over the cell is exact: each ``x``'s convex ``H + σ/η + γηS`` is smallest at
``√(σ/(γS))`` clipped to the cell.
"""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.allocation._range._two_point import two_point_bound


def cell_minimum(
    H: np.ndarray, S: np.ndarray, sigma: float, gamma: float, e1: float, e2: float
) -> float:
    """``min_{η ∈ [e1, e2]} min_x H(x) + σ/η + γηS(x)``, each ``x`` in closed form."""
    with np.errstate(divide="ignore", invalid="ignore"):
        eta = np.sqrt(sigma / (gamma * S))
    eta = np.where(np.isnan(eta), e2, eta)  # σ = 0 and γS = 0: flat, any end
    eta = np.clip(eta, e1, e2)
    return float(np.min(H + sigma / eta + gamma * eta * S))


def ends(
    H: np.ndarray, S: np.ndarray, sigma: float, gamma: float, e1: float, e2: float
) -> tuple[float, float]:
    return (
        float(np.min(H + sigma / e1 + gamma * e1 * S)),
        float(np.min(H + sigma / e2 + gamma * e2 * S)),
    )


@pytest.mark.parametrize("case", ["generic", "zero_sigma", "zero_gamma"])
def test_the_bound_is_below_the_minimum_over_the_cell(case: str) -> None:
    rng = np.random.default_rng({"generic": 1, "zero_sigma": 2, "zero_gamma": 3}[case])
    for _ in range(2000):
        n = int(rng.integers(1, 6))
        H = rng.normal(size=n) * 10.0 ** rng.uniform(-2, 2)
        S = rng.exponential(size=n) * 10.0 ** rng.uniform(-3, 2)
        S[rng.random(n) < 0.1] = 0.0
        sigma = 0.0 if case == "zero_sigma" else float(10.0 ** rng.uniform(-3, 3))
        gamma = 0.0 if case == "zero_gamma" else float(10.0 ** rng.uniform(-3, 3))
        e1 = float(10.0 ** rng.uniform(-2, 3))
        e2 = e1 * float(10.0 ** rng.uniform(1e-6, 1.5))
        l1, l2 = ends(H, S, sigma, gamma, e1, e2)
        # certified bounds may lie below the exact end values
        if rng.random() < 0.3:
            l1 -= float(rng.exponential()) * (1.0 + abs(l1)) * 1e-3
            l2 -= float(rng.exponential()) * (1.0 + abs(l2)) * 1e-3
        lb = two_point_bound(sigma, gamma, e1, l1, e2, l2)
        true = cell_minimum(H, S, sigma, gamma, e1, e2)
        assert lb <= min(l1, l2)
        assert lb <= true + 1e-12 * (1.0 + abs(true))


def test_the_bound_is_the_minimum_for_one_point() -> None:
    """One ``x``: the two end lines cross at its own ``S``, so the bound is exact."""
    rng = np.random.default_rng(4)
    for _ in range(2000):
        H = np.array([rng.normal()])
        S = np.array([float(10.0 ** rng.uniform(-2, 2))])
        sigma = float(10.0 ** rng.uniform(-2, 2))
        gamma = float(10.0 ** rng.uniform(-2, 2))
        e1 = float(10.0 ** rng.uniform(-1, 2))
        e2 = e1 * float(10.0 ** rng.uniform(1e-3, 1.0))
        l1, l2 = ends(H, S, sigma, gamma, e1, e2)
        true = cell_minimum(H, S, sigma, gamma, e1, e2)
        lb = two_point_bound(sigma, gamma, e1, l1, e2, l2)
        assert lb <= true + 1e-12 * (1.0 + abs(true))
        scale = abs(l1) + sigma / e1 + gamma * e2 * S[0]
        assert lb == pytest.approx(true, rel=0, abs=1e-9 * scale)
