"""Spec §10 V5 (Gaussian-mixture EM, the paper's first simulation) and V8 (categorical)."""

from __future__ import annotations

import numpy as np
import pytest

from learners.secure_vertical import (
    Ledger,
    Theta,
    fit_gaussian_mixture,
    impute_conditional_mean,
)
from learners.secure_vertical._categorical import (
    impute_dummies,
    pattern_tables,
    saturated_em,
)
from learners.secure_vertical._em import e_step, m_step, pattern_sums, patterns
from tests.learners.secure_vertical._data import v5_data


def _start(pi1: float, m: float) -> Theta:
    return Theta(np.array([pi1, 1 - pi1]), np.stack([-m * np.ones(6), m * np.ones(6)]),
                 np.stack([np.eye(6), np.eye(6)]))  # fmt: skip


def _pooled_em_step(X: np.ndarray, th: Theta) -> Theta:
    """§5.1 record by record (completed vectors x̂_ij and padded C_ij), independent of
    the pattern sums of §5.2."""
    n, p = X.shape
    J = th.weights.size
    alpha, _ = e_step(X, th, patterns(X))
    nj = alpha.sum(axis=0)
    xhat = np.zeros((n, J, p))
    C = np.zeros((n, J, p, p))
    for i in range(n):
        o = np.flatnonzero(~np.isnan(X[i]))
        m = np.flatnonzero(np.isnan(X[i]))
        for j in range(J):
            S, mu = th.covariances[j], th.means[j]
            xhat[i, j, o] = X[i, o]
            if m.size:
                B = S[np.ix_(m, o)] @ np.linalg.inv(S[np.ix_(o, o)])
                xhat[i, j, m] = mu[m] + B @ (X[i, o] - mu[o])
                C[i, j][np.ix_(m, m)] = S[np.ix_(m, m)] - B @ S[np.ix_(o, m)]
    means = np.einsum("ij,ijp->jp", alpha, xhat) / nj[:, None]
    covs = np.stack([
        np.einsum("i,ia,ib->ab", alpha[:, j], xhat[:, j] - means[j], xhat[:, j] - means[j]) / nj[j]
        + np.einsum("i,iab->ab", alpha[:, j], C[:, j]) / nj[j] + 1e-9 * np.eye(p)
        for j in range(J)
    ])  # fmt: skip
    return Theta(nj / n, means, covs)


def test_v5_pattern_sums_equal_pooled_em(rng: np.random.Generator) -> None:
    _, Xm = v5_data(rng)
    th = _start(0.5, 2.0)
    for _ in range(5):
        pats = patterns(Xm)
        alpha, _ = e_step(Xm, th, pats)
        ours = m_step(pattern_sums(Xm, alpha, pats), th, pats, n=100, covariance="full")
        ref = _pooled_em_step(Xm, th)
        np.testing.assert_allclose(ours.weights, ref.weights, atol=1e-10)
        np.testing.assert_allclose(ours.means, ref.means, atol=1e-10)
        np.testing.assert_allclose(ours.covariances, ref.covariances, atol=1e-10)
        th = ours


def _ordered(th: Theta) -> Theta:
    order = np.argsort(th.means[:, 0])
    return Theta(th.weights[order], th.means[order], th.covariances[order])


def test_v5_fixed_identity_both_starts_same_optimum_and_bands(
    rng: np.random.Generator,
) -> None:
    inside_pi, inside_mu = 0, 0
    reps = 20
    for _ in range(reps):
        _, Xm = v5_data(rng)
        fits = [
            fit_gaussian_mixture(Xm, s, covariance="fixed_identity")
            for s in (_start(0.5, 2.0), _start(0.1, 1.0))
        ]
        assert all(f.converged and f.n_iter <= 25 for f in fits)
        assert abs(fits[0].loglik[-1] - fits[1].loglik[-1]) < 1e-6
        th = _ordered(fits[0].theta)
        inside_pi += 0.165 <= th.weights[0] <= 0.36
        inside_mu += int(
            np.sum(np.abs(th.means[0] + 2) <= 0.48)
            + np.sum(np.abs(th.means[1] - 2) <= 0.30)
        )
    # 95% bands of the spec, per replicate; P(Binomial(20, 0.95) < 15) ≈ 3e-4
    assert inside_pi >= 15
    assert inside_mu >= 0.85 * reps * 12  # per coordinate (expected 95%)


def test_v5_full_covariance_monotone_and_ledger(rng: np.random.Generator) -> None:
    _, Xm = v5_data(rng)
    ledger = Ledger()
    fit = fit_gaussian_mixture(
        Xm, _start(0.5, 2.0), covariance="full", max_iter=300, ledger=ledger
    )
    L = np.array(fit.loglik)
    assert np.all(np.diff(L) >= -1e-8 * np.abs(L[1:]))
    th = _ordered(fit.theta)
    assert 0.1 <= th.weights[0] <= 0.45
    # E2 opens θ per iteration (row 8) and nothing per record
    assert ledger.rows() == {8}
    assert not ledger.opens_dimension(100)


def test_v7_imputed_values_are_conditional_means(rng: np.random.Generator) -> None:
    X, Xm = v5_data(rng)
    fit = fit_gaussian_mixture(Xm, _start(0.5, 2.0), covariance="fixed_identity")
    imp = impute_conditional_mean(Xm, fit.theta)
    obs = ~np.isnan(Xm)
    np.testing.assert_array_equal(imp[obs], Xm[obs])
    # imputations are far closer to the truth than the grand mean
    err = np.abs(imp[~obs] - X[~obs]).mean()
    assert err < 0.6 * np.abs(X[~obs] - X[obs].mean()).mean()


LEVELS = (3, 4, 5, 2, 2, 2, 3)
PARTIES = {"A": (0, 1), "B": (2, 3, 4), "C": (5, 6)}


def _table2_data(
    rng: np.random.Generator, n: int = 5000
) -> tuple[np.ndarray, np.ndarray]:
    q = rng.dirichlet(np.ones(int(np.prod(LEVELS))))
    cells = rng.choice(q.size, size=n, p=q)
    W = np.column_stack(np.unravel_index(cells, LEVELS)).astype(np.int64)
    cut = (np.array([9000, 10200, 22481]) * n / 48842).astype(int)
    pattern = np.select([np.arange(n) < cut[0], np.arange(n) < cut[1], np.arange(n) < cut[2]],
                        ["AB", "AC", "BC"], "A")  # fmt: skip
    Wm = W.copy()
    for i, pat in enumerate(pattern):
        for party, vars_ in PARTIES.items():
            if party not in pat:
                Wm[i, list(vars_)] = -1
    return W, Wm


def _pooled_saturated(Wm: np.ndarray, n_iter: int) -> np.ndarray:
    """The paper's per-record S_i route (what §5.5 replaces), for comparison only."""
    grid = np.indices(LEVELS).reshape(len(LEVELS), -1).T
    S = np.ones((Wm.shape[0], grid.shape[0]), dtype=bool)
    for v in range(len(LEVELS)):
        obs = Wm[:, v] >= 0
        S[obs] &= grid[None, :, v] == Wm[obs, v][:, None]
    q = np.full(grid.shape[0], 1.0 / grid.shape[0])
    for _ in range(n_iter):
        post = S * q
        q = (post / post.sum(axis=1, keepdims=True)).sum(axis=0) / Wm.shape[0]
    return q.reshape(LEVELS)


@pytest.mark.slow
def test_v8_tables_em_equals_pooled_and_paper_updates(rng: np.random.Generator) -> None:
    _, Wm = _table2_data(rng)
    tables = pattern_tables(Wm, LEVELS)
    assert len(tables) == 4
    q = saturated_em(LEVELS, tables, n_iter=60)
    np.testing.assert_allclose(q, _pooled_saturated(Wm, 60), atol=1e-10)
    assert q.sum() == pytest.approx(1.0)
    # the paper's J = 2 updates give the same q (components unidentifiable)
    grid = np.indices(LEVELS).reshape(len(LEVELS), -1).T
    S = np.ones((Wm.shape[0], grid.shape[0]), dtype=bool)
    for v in range(len(LEVELS)):
        obs = Wm[:, v] >= 0
        S[obs] &= grid[None, :, v] == Wm[obs, v][:, None]
    pj = rng.dirichlet(np.ones(grid.shape[0]), size=2)
    pi = np.array([0.3, 0.7])
    q0 = (pi[:, None] * pj).sum(axis=0)
    for _ in range(60):
        Pji = S.astype(float) @ pj.T  # n × J: Σ_{c∈S_i} p_jc
        alpha = pi * Pji
        alpha /= alpha.sum(axis=1, keepdims=True)
        new_p = pj * ((alpha / Pji).T @ S)
        pi = alpha.mean(axis=0)
        pj = new_p / new_p.sum(axis=1, keepdims=True)
    q_paper = (pi[:, None] * pj).sum(axis=0).reshape(LEVELS)
    np.testing.assert_allclose(
        q_paper,
        saturated_em(LEVELS, tables, n_iter=60, q0=q0.reshape(LEVELS)),
        atol=1e-10,
    )


def test_v8_imputed_dummies_are_conditional_expectations(
    rng: np.random.Generator,
) -> None:
    q = rng.dirichlet(np.ones(int(np.prod(LEVELS)))).reshape(LEVELS)
    post = impute_dummies(q, (0, 1), (2, 3))
    for v in (2, 3, 4, 5, 6):
        joint = q[2, 3]
        axes = tuple(a for a in range(5) if a != v - 2)
        expect = joint.sum(axis=axes) / joint.sum()
        np.testing.assert_allclose(post[v], expect, atol=1e-14)
        assert post[v].sum() == pytest.approx(1.0)
