"""Statistical validation against the spec's bands (spec §8; marked ``slow``).

V-B3 (public X, correct model S1), V-B4 (private X, correct model S2), V-B6 (the
prior's limitation), V-B11 (b) (heterogeneous budgets). Each replication draws fresh
data and fresh bits; the bands are the spec's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learners import OneBitQuantileRegression
from tests.learners.onebit_quantile.designs import (
    S1_BETA,
    S1_INTERVAL,
    S2_BETA,
    S2_INTERVAL,
    draw_s1,
    draw_s2,
    s1_inverse_information,
    s2_inverse_information,
)

pytestmark = pytest.mark.slow
Z95 = 1.959963984540054


def _replicate(
    reps: int,
    rng: np.random.Generator,
    *,
    draw: Any,
    n: int,
    epsilon: Any,
    **kw: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimates, SEs and on-boundary flags of ``reps`` independent fits."""
    est, se, edge = [], [], []
    for _ in range(reps):
        X, y = draw(n, rng)
        eps = epsilon(n, rng) if callable(epsilon) else np.full(n, float(epsilon))
        fit = OneBitQuantileRegression(alpha=0.3, random_state=rng, **kw)
        fit.fit(X, y, sample_epsilon=eps)
        est.append(
            np.append(fit.coef_, fit.intercept_)
            if kw.get("fit_intercept", True)
            else fit.coef_
        )
        se.append(fit.bse_)
        edge.append(fit.on_boundary_)
    return np.array(est), np.array(se), np.array(edge)


def _check_correct_model(
    est: np.ndarray,
    se: np.ndarray,
    truth: np.ndarray,
    inv_info: np.ndarray,
    n: int,
    *,
    rel: float,
) -> None:
    reps = est.shape[0]
    mean_se = est.std(axis=0, ddof=1) / np.sqrt(reps)
    assert np.all(np.abs(est.mean(axis=0) - truth) <= 4 * mean_se), (
        est.mean(axis=0),
        truth,
    )
    cov = np.cov(est.T)
    err = np.linalg.norm(n * cov - inv_info) / np.linalg.norm(inv_info)
    assert err <= rel, err
    covered = np.abs(est - truth) <= Z95 * se
    coverage = covered.mean(axis=0)
    assert np.all((coverage >= 0.90) & (coverage <= 0.99)), coverage


@pytest.mark.parametrize("eps", [1.0, 2.5, 5.0, 10.0])
@pytest.mark.parametrize("n", [5000, 20000])
def test_vb3_public_x_correct_model(
    eps: float, n: int, rng: np.random.Generator
) -> None:
    """V-B3: unbiased within 4 SE; ‖n·Cov − I⁻¹‖_F/‖I⁻¹‖_F ≤ 0.25; 95 % sandwich
    coverage in [0.90, 0.99] per coordinate (200 replications)."""
    est, se, edge = _replicate(
        200, rng, draw=draw_s1, n=n, epsilon=eps, interval=S1_INTERVAL
    )
    assert not edge.any()
    _check_correct_model(est, se, S1_BETA, s1_inverse_information(eps), n, rel=0.25)


@pytest.mark.parametrize("eps", [5.0, 10.0, 25.0])
@pytest.mark.parametrize("n", [1000, 10_000, 100_000])
def test_vb4_private_x_correct_model(
    eps: float, n: int, rng: np.random.Generator
) -> None:
    """V-B4: S2 (the endpoint prior is exact): mean within 0.03 of β* for n ≥ 10⁴;
    relative Frobenius error ≤ 0.25; coverage in [0.90, 0.99] (≥ 200 replications;
    500 in the noisiest cell so that 0.03 is ≥ 3.5 standard errors of the mean)."""
    reps = 500 if (eps, n) == (5.0, 10_000) else 200
    est, se, edge = _replicate(
        reps,
        rng,
        draw=draw_s2,
        n=n,
        epsilon=eps,
        interval=S2_INTERVAL,
        private_x=True,
        bounds_X=(-1.0, 1.0),
        fit_intercept=False,
    )
    assert edge.mean() <= 0.02
    est, se = est[~edge], se[~edge]
    inv_info = s2_inverse_information(eps)
    if n >= 10_000:
        assert np.all(np.abs(est.mean(axis=0) - S2_BETA) <= 0.03), est.mean(axis=0)
    cov = np.cov(est.T)
    assert np.linalg.norm(n * cov - inv_info) / np.linalg.norm(inv_info) <= 0.25
    coverage = (np.abs(est - S2_BETA) <= Z95 * se).mean(axis=0)
    assert np.all((coverage >= 0.90) & (coverage <= 0.99)), coverage


@pytest.mark.parametrize("eps", [10.0, 25.0])
def test_vb6_the_prior_defines_the_estimand(
    eps: float, rng: np.random.Generator
) -> None:
    """V-B6 (documents spec §3.6): covariates uniform inside their intervals, endpoint
    prior: the fit converges to ≈ β*/3, not β*; the moment-matched prior (ρ = 1/√3)
    recovers β* (30 replications, n = 10⁵)."""

    def uniform(n: int, g: np.random.Generator) -> Any:
        return draw_s2(n, g, uniform=True)

    common: dict[str, Any] = {
        "interval": S2_INTERVAL,
        "private_x": True,
        "bounds_X": (-1.0, 1.0),
        "fit_intercept": False,
    }
    est, _, _ = _replicate(30, rng, draw=uniform, n=100_000, epsilon=eps, **common)
    assert np.all(np.abs(est.mean(axis=0) - S2_BETA / 3) <= 0.05), est.mean(axis=0)
    est, _, _ = _replicate(
        30, rng, draw=uniform, n=100_000, epsilon=eps, prior="moment_matched", **common
    )
    assert np.all(np.abs(est.mean(axis=0) - S2_BETA) <= 0.06), est.mean(axis=0)


def test_vb11b_heterogeneous_budgets(rng: np.random.Generator) -> None:
    """V-B11 (b): S1, n = 20,000, ε_i ∈ {1, 5} with probability 1/2: unbiased within 4 SE,
    n·‖Cov‖_F within 20 % of ‖(½I₁ + ½I₅)⁻¹‖_F = 243.8, coverage in [0.90, 0.99], and
    the variance strictly between the all-1 and the all-5 fits."""
    n = 20_000

    def mixed(size: int, g: np.random.Generator) -> np.ndarray:
        return np.where(g.random(size) < 0.5, 1.0, 5.0)

    inv = {e: np.linalg.inv(s1_inverse_information(e)) for e in (1.0, 5.0)}
    target = np.linalg.inv(0.5 * inv[1.0] + 0.5 * inv[5.0])
    assert np.linalg.norm(target) == pytest.approx(243.8, abs=0.1)
    est, se, edge = _replicate(
        200, rng, draw=draw_s1, n=n, epsilon=mixed, interval=S1_INTERVAL
    )
    assert not edge.any()
    mean_se = est.std(axis=0, ddof=1) / np.sqrt(est.shape[0])
    assert np.all(np.abs(est.mean(axis=0) - S1_BETA) <= 4 * mean_se)
    norm_mixed = n * np.linalg.norm(np.cov(est.T))
    assert abs(norm_mixed / 243.8 - 1) <= 0.20, norm_mixed
    coverage = (np.abs(est - S1_BETA) <= Z95 * se).mean(axis=0)
    assert np.all((coverage >= 0.90) & (coverage <= 0.99)), coverage
    all_1, _, _ = _replicate(
        100, rng, draw=draw_s1, n=n, epsilon=1.0, interval=S1_INTERVAL
    )
    all_5, _, _ = _replicate(
        100, rng, draw=draw_s1, n=n, epsilon=5.0, interval=S1_INTERVAL
    )
    norms = [n * np.linalg.norm(np.cov(e.T)) for e in (all_5, est, all_1)]
    assert norms[0] < norms[1] < norms[2], norms
