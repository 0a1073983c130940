"""The default settings of ``uldp_sparse_linear`` (``learners/uldp_sparse/_defaults.py``):
the rule's choices, and that the defaults beat the zero estimator (ℓ2 = ‖θ*‖ = 0.566)
where the spec's V5 says a fit must, and meet the V5/V7 bands (spec §15).

The previous fixed defaults (α = 0, N_b = 8, B = 1) had ℓ2 0.69 on a random support and
0.57–0.63 on the support {0..7} at the paper's size (benchmarks/RESULTS.md, "default
settings by rule"): worse than returning zeros."""

from __future__ import annotations

import numpy as np
import pytest

from learners.uldp_sparse import (
    ZERO_ESTIMATOR_L2,
    ULDPSparseLinearRegression,
    f1_score,
    independent_design,
)
from learners.uldp_sparse._defaults import default_settings


def _mean_errors(
    *, n: int, m: int, d: int, runs: int, random_support: bool, seed: int = 0
) -> tuple[float, float]:
    """Mean ℓ2 error and F1 of the default estimator over ``runs`` data sets (ε = 4)."""
    l2, f1 = [], []
    for r in range(runs):
        rng = np.random.default_rng(seed + r)
        des = independent_design(n, m, d, rng=rng, random_support=random_support)
        est = ULDPSparseLinearRegression(random_state=seed + r)
        est.fit(des.X, des.y, sample_epsilon=4.0, groups=des.groups)
        l2.append(float(np.linalg.norm(est.coef_ - des.theta)))
        f1.append(f1_score(est.support_, des.support))
    return float(np.mean(l2)), float(np.mean(f1))


def test_rule_at_the_papers_size_and_at_twenty_thousand_users() -> None:
    small = default_settings(np.full(400, 4.0), d=256, k=8)
    assert (small.hh_alpha, small.hh_levels, small.n_bins) == (0.1, "all", 4)
    assert small.bound == pytest.approx(4.0 * np.sqrt(12.5) / 56.0)
    assert small.selection_strength < 1.0
    big = default_settings(np.full(20_000, 4.0), d=256, k=8)
    assert (big.hh_alpha, big.hh_levels, big.n_bins, big.bound) == (
        0.0,
        "pruned",
        8,
        1.0,
    )
    assert big.selection_strength >= 1.0
    # users with ε = 0 take no part; the median budget of the others is read
    mixed = default_settings(np.r_[np.zeros(400), np.full(400, 4.0)], d=256, k=8)
    assert mixed == small


def test_a_given_setting_wins_over_the_rule() -> None:
    des = independent_design(40, 20, 16, rng=np.random.default_rng(0))
    est = ULDPSparseLinearRegression(n_bins=16, hh_alpha=0.0, random_state=0)
    est.fit(des.X, des.y, sample_epsilon=4.0, groups=des.groups)
    assert (est.settings_.n_bins, est.settings_.hh_alpha) == (16, 0.0)
    rule = default_settings(np.full(40, 4.0), d=16, k=8)
    assert est.settings_.bound == rule.bound
    assert est.settings_.hh_levels == rule.hh_levels


def test_default_beats_the_zero_estimator_at_a_smaller_size() -> None:
    """n = 400, m = 100, d = 64 (8 runs, support {0..7}): the default is ≥ 0.12 below the
    zero estimator (the previous defaults: 0.54 ± 0.10 over 4 runs)."""
    l2, f1 = _mean_errors(n=400, m=100, d=64, runs=8, random_support=False)
    assert l2 <= ZERO_ESTIMATOR_L2 - 0.12, l2
    assert f1 >= 0.55, f1


@pytest.mark.slow
def test_default_meets_v5_and_beats_the_zero_estimator_at_the_papers_size() -> None:
    """V5 with the defaults (n = 400, m = 100, d = 256, ε = 4, support {0..7}, 30 runs):
    F1 ∈ [0.55, 0.90], ℓ2 ∈ [0.22, 0.42] and ≥ 0.12 below the zero estimator."""
    l2, f1 = _mean_errors(n=400, m=100, d=256, runs=30, random_support=False)
    assert 0.55 <= f1 <= 0.90, f1
    assert 0.22 <= l2 <= 0.42, l2
    assert l2 <= ZERO_ESTIMATOR_L2 - 0.12, l2


@pytest.mark.slow
def test_default_meets_v7_at_the_papers_size() -> None:
    """V7 at the paper's size with the defaults (random support, 30 runs): F1 ≤ 0.2 and
    ℓ2 within ±0.06 of the zero estimator (selection at chance, spec D3); the previous
    defaults were 0.69, outside the band."""
    l2, f1 = _mean_errors(n=400, m=100, d=256, runs=30, random_support=True, seed=500)
    assert f1 <= 0.2, f1
    assert abs(l2 - ZERO_ESTIMATOR_L2) <= 0.06, l2


@pytest.mark.slow
def test_default_meets_v7_at_twenty_thousand_users() -> None:
    """V7 at n = 20,000 with the defaults (the rule picks top-k pruning on the pruning
    levels, N_b = 8, B = 1; 4 runs, seeds 100–103): F1 ≥ 0.5 and ℓ2 ≤ 0.40."""
    l2, f1 = _mean_errors(n=20_000, m=100, d=256, runs=4, random_support=True, seed=100)
    assert f1 >= 0.5, f1
    assert l2 <= 0.40, l2


def test_bound_is_capped_at_one_half_with_few_users_per_coordinate() -> None:
    """At ε = 16 and the paper's size the noise alone would allow ``B = 1``; with a dozen
    users per coordinate and 4 bins ``B = 0.5`` is the better range (ℓ2 0.29 vs 0.34,
    30 runs), and the rule caps there."""
    s = default_settings(np.full(400, 16.0), d=256, k=8)
    assert (s.n_bins, s.bound) == (4, 0.5)
    s = default_settings(np.full(3200, 4.0), d=256, k=8)
    assert s.n_bins == 8
    assert s.bound == pytest.approx(4.0 * 10.0 / 56.0)
