"""V2 (frequency oracle), V3 (heavy hitters), V4 (ULDPMean) and V9 (heterogeneous
budgets) of spec ``uldp-sparse-linear-regression.md`` §15."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from learners.uldp_sparse import (
    BitMessages,
    ULDPSparseLinearRegression,
    ValueMessages,
    assign_levels,
    debias_factor,
    exact_heavy_hitters,
    first_pruned_level,
    frequency_oracle,
    heavy_hitter_randomizer,
    heavy_hitters,
    independent_design,
    laplace_randomizer,
    laplace_weights,
    tree_depth,
    uldp_mean,
    weighted_means,
)


def test_v2_frequency_oracle_is_unbiased_with_the_predicted_spread(
    rng: np.random.Generator,
) -> None:
    """One level (ℓ = 4, 16 prefixes, γ = 1), 50,000 users with known counts, ε = 1,
    200 repetitions: each mean within 4 standard errors of the truth, the sd within 10 %
    of ``√(N c_ε² − count_u)``."""
    n, reps, eps = 50_000, 200, 1.0
    counts = rng.multinomial(n, rng.dirichlet(np.ones(16)))
    prefixes = np.repeat(np.arange(16), counts)
    level, cand = np.full(n, 4), np.arange(16)
    e = np.full(n, eps)
    est = np.empty((reps, 16))
    for r in range(reps):
        row = rng.integers(0, 16, n)
        bits = heavy_hitter_randomizer(prefixes, level=level, row=row, n_levels=4, epsilon=e, rng=rng)  # fmt: skip
        est[r] = frequency_oracle(BitMessages(level, row, bits, e), cand, n_total=n)
    c = float(debias_factor(eps))
    sd_pred = np.sqrt(n * c**2 - counts)
    se = est.std(axis=0, ddof=1) / math.sqrt(reps)
    assert np.all(np.abs(est.mean(axis=0) - counts) <= 4 * se)
    assert np.all(np.abs(est.std(axis=0, ddof=1) / sd_pred - 1) <= 0.10)


def _votes(n1: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    heavy = rng.choice(d, 8, replace=False)
    per = n1 // 10
    v = np.concatenate([np.repeat(heavy, per), rng.integers(0, d, n1 - 8 * per)])
    return rng.permutation(v), heavy


def _recall(alpha: float, rng: np.random.Generator, runs: int = 10) -> float:
    out = []
    for _ in range(runs):
        v, heavy = _votes(20_000, 256, rng)
        res = heavy_hitters(
            v, np.full(v.size, 4.0), d=256, k=8, rng_public=rng, rng_private=rng, alpha=alpha
        )  # fmt: skip
        out.append(len(set(res.support.tolist()) & set(heavy.tolist())) / 8)
    return float(np.mean(out))


def test_v3_heavy_hitters_recover_random_heavy_indices(
    rng: np.random.Generator,
) -> None:
    """d = 256, n1 = 20,000, 8 random heavy indices with 10 % of the votes each, ε = 4,
    k = 8, top-k pruning: mean recall over 10 runs ≥ 0.9 (calibrated ≈ 0.97)."""
    assert _recall(0.0, rng) >= 0.9


def test_v3_reference_alpha_rule_collapses(rng: np.random.Generator) -> None:
    """Same with the reference α = 0.1 rule: recall collapses (calibrated 0.3–0.4),
    because each heavy index holds exactly the α share (spec A3)."""
    assert _recall(0.1, rng) <= 0.6


def _tree_f1(
    share: float, rng: np.random.Generator, runs: int = 40, levels: str = "all"
) -> float:
    """Mean F1 of the heavy hitters on V7's scaled-up selection half (n1 = 10,000,
    d = 256, ε = 4, k = 8, top-k) when each of 8 random true indices holds ``share`` of
    the votes and the rest are uniform."""
    out = []
    for _ in range(runs):
        true = rng.choice(256, 8, replace=False)
        p = np.full(256, (1 - 8 * share) / 256)
        p[true] += share
        v = rng.choice(256, size=10_000, p=p).astype(np.int64)
        res = heavy_hitters(
            v, np.full(v.size, 4.0), d=256, k=8, rng_public=rng, rng_private=rng,
            levels=levels,
        )  # fmt: skip
        tp = len(set(res.support.tolist()) & set(true.tolist()))
        out.append(2 * tp / (res.support.size + 8))
    return float(np.mean(out))


def test_v7_heavy_hitters_meet_the_calibration_at_its_vote_share(
    rng: np.random.Generator,
) -> None:
    """V7's calibration (F1 ≈ 0.7 at n = 20,000) assumes each true index gets ≈ 6 % of
    the votes (spec §4.3), the share of the reference's signed Screening at m = 100.
    Fed that share (6.25 %) the tree reaches F1 ≥ 0.6 (an independent Gaussian model
    of the tree gives 0.67); at the 4.8 % share of the |c| Screening default it does
    not (model: 0.51): the V7 shortfall with the default selector is the vote share,
    not the tree (benchmarks/RESULTS.md)."""
    assert _tree_f1(0.0625, rng) >= 0.6
    assert _tree_f1(0.048, rng) < 0.6


def test_levels_rule_pruned_spends_no_bit_on_levels_that_keep_everything(
    rng: np.random.Generator,
) -> None:
    """Option ``levels="pruned"`` (not in the spec): with top-k pruning (α = 0) and
    k = 8 the levels 1–3 keep all their 2, 4, 8 candidates whatever the bits say, so
    users go to levels 4–8 only (≈ n1/5 each instead of n1/8); the tree model
    predicts F1 0.65 instead of 0.51 at the |c| Screening's 4.8 % vote share.
    With α > 0 every level prunes and the rule changes nothing."""
    eps = np.full(10_000, 4.0)
    lv = assign_levels(eps, n_levels=8, k=8, alpha=0.0, rule="pruned", rng=rng)
    np.testing.assert_array_equal(np.unique(lv), np.arange(4, 9))
    assert np.ptp(np.bincount(lv)[4:]) <= 1
    lv_all = assign_levels(eps, n_levels=8, k=8, alpha=0.0, rule="all", rng=rng)
    np.testing.assert_array_equal(np.unique(lv_all), np.arange(1, 9))
    lv_ref = assign_levels(eps, n_levels=8, k=8, alpha=0.1, rule="pruned", rng=rng)
    np.testing.assert_array_equal(np.unique(lv_ref), np.arange(1, 9))
    assert first_pruned_level(8, 0.0) == 4
    assert first_pruned_level(7, 0.0) == 3
    with pytest.raises(ValueError, match="hh_levels"):
        assign_levels(eps, n_levels=8, k=8, alpha=0.0, rule="some", rng=rng)

    v = rng.integers(0, 256, 10_000)
    res = heavy_hitters(
        v, eps, d=256, k=8, rng_public=rng, rng_private=rng, levels="pruned"
    )
    for level in (1, 2, 3):
        np.testing.assert_array_equal(res.survivors[level - 1], np.arange(2**level))
    assert _tree_f1(0.048, rng, levels="pruned") >= 0.6


def test_v3_exact_mode_recall_is_one(rng: np.random.Generator) -> None:
    for _ in range(10):
        v, heavy = _votes(20_000, 256, rng)
        res = exact_heavy_hitters(v, d=256, k=8)
        assert set(res.support.tolist()) == set(heavy.tolist())


def test_tree_depth_limit_is_named() -> None:
    assert tree_depth(256) == 8
    assert tree_depth(257) == 9
    assert tree_depth(1) == 1
    with pytest.raises(ValueError, match="n_features"):
        tree_depth(2**20 + 1)


def test_v4_uldp_mean_accuracy(rng: np.random.Generator) -> None:
    """v_i = μ + 0.1·N(0, I_8), μ ~ U[−0.3, 0.3]^8, 20,000 users, ε = 4, B = 1,
    N_b = 16: mean ℓ2 error over 20 runs ≤ 0.03 (calibrated ≈ 0.015)."""
    errs = []
    for _ in range(20):
        mu = rng.uniform(-0.3, 0.3, 8)
        V = mu + 0.1 * rng.standard_normal((20_000, 8))
        res = uldp_mean(V, np.full(20_000, 4.0), bound=1.0, n_bins=16, rng_public=rng, rng_private=rng)  # fmt: skip
        errs.append(np.linalg.norm(res.mean - mu))
    assert np.mean(errs) <= 0.03


def test_v4_infinite_epsilon_is_the_plain_mean_of_projected_values(
    rng: np.random.Generator,
) -> None:
    """With ε = ∞ the output is ``U·μ`` with ``μ_k`` the plain mean, over the users of
    coordinate ``k``'s mean group, of their rotated values projected onto ``I_k``."""
    n, s = 2000, 5
    V = rng.uniform(-0.4, 0.4, s) + 0.2 * rng.standard_normal((n, s))
    res = uldp_mean(V, np.full(n, np.inf), bound=1.0, n_bins=8, rng_public=rng, rng_private=rng)  # fmt: skip
    K = 8
    W = np.hstack([V, np.zeros((n, K - s))]) @ res.rotation
    mu = np.zeros(K)
    for k in range(K):
        users = res.mean_users[res.coordinate[res.mean_users] == k]
        lo, hi = res.intervals[k]
        mu[k] = np.mean(np.clip(W[users, k], lo, hi))
    np.testing.assert_allclose(
        res.mean, (res.rotation @ mu)[:s], rtol=1e-12, atol=1e-14
    )
    np.testing.assert_allclose(res.rotation @ res.rotation.T, np.eye(K), atol=1e-12)


def test_v9a_equal_budgets_make_weighted_equal_unweighted_bit_for_bit(
    rng: np.random.Generator,
) -> None:
    des = independent_design(400, 30, 64, rng=rng)
    for algorithm in ("two_round", "multi_round"):
        fits = [
            ULDPSparseLinearRegression(
                algorithm=algorithm,
                weighted=w,
                fit_intercept=True,
                small_batch_fallback=False,
                random_state=5,
            ).fit(des.X, des.y, sample_epsilon=2.5, groups=des.groups)
            for w in (True, False)
        ]
        np.testing.assert_array_equal(fits[0].support_, fits[1].support_)
        np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
        assert fits[0].intercept_ == fits[1].intercept_


def _clipped_normal_mean(mu: float, sd: float, a: float, b: float) -> float:
    al, be = (a - mu) / sd, (b - mu) / sd
    inside = mu * (norm.cdf(be) - norm.cdf(al)) + sd * (norm.pdf(al) - norm.pdf(be))
    return float(a * norm.cdf(al) + b * norm.sf(be) + inside)


def test_v9b_weighted_laplace_round_beats_the_plain_mean(
    rng: np.random.Generator,
) -> None:
    """Round 2 with half the users at ε = 1 and half at ε = 8 (1,000 users, interval
    [−0.2, 0.2], values 0.05 + 0.1·N(0, 1) clipped, v_0 = 0.01, 400 repetitions):
    weighted RMSE ≤ 0.6 × unweighted and within 15 % of ``1/√Σλ_i``."""
    n, reps = 1000, 400
    eps = np.where(np.arange(n) < n // 2, 1.0, 8.0)
    low, high = np.full(n, -0.2), np.full(n, 0.2)
    truth = _clipped_normal_mean(0.05, 0.1, -0.2, 0.2)
    group = np.zeros(n, dtype=np.int64)
    delta, v0 = np.array([0.4]), np.array([0.01])
    errs = {True: [], False: []}
    for _ in range(reps):
        values = 0.05 + 0.1 * rng.standard_normal(n)
        z = laplace_randomizer(values, low=low, high=high, epsilon=eps, rng=rng)
        msgs = ValueMessages(group=group, value=z, epsilon=eps)
        for w in (True, False):
            mu, _ = weighted_means(msgs, n_groups=1, delta=delta, v0=v0, weighted=w)
            errs[w].append(mu[0] - truth)
    rmse = {w: math.sqrt(np.mean(np.square(e))) for w, e in errs.items()}
    predicted = 1.0 / math.sqrt(
        laplace_weights(eps, np.full(n, 0.4), np.full(n, 0.01)).sum()
    )
    assert rmse[True] <= 0.6 * rmse[False]
    assert abs(rmse[True] / predicted - 1) <= 0.15
