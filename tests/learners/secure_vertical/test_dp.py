"""Spec §10 V10: DP on top of the secure fit (ε → ∞ limit, clipping, ε_θ + ε_β report,
record ε = min over the parties holding the record, noise norm distribution)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import gamma, kstest

from learners._newton import minimize_ridge_risk
from learners.losses import LogisticLoss
from learners.secure_vertical import SecureVerticalLogisticRegression
from learners.secure_vertical._dp import (
    FRAC_BITS,
    clip_radii,
    noisy_pattern_moments,
    objective_noise,
    record_epsilon,
)
from learners.secure_vertical._joint_noise import JointNoise, contributors, joint_noise
from tests.learners.secure_vertical._data import split, v1_data


def _masked(
    rng: np.random.Generator, n: int = 300
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    X, y = v1_data(rng, n=n)
    X = X / 6.0
    Xm = X.copy()
    Xm[: n // 5, 2:4] = np.nan
    Xm[n // 5 : 2 * n // 5, 4:] = np.nan
    return split(Xm, [2, 2, 2]), y, X


def test_eps_to_infinity_equals_nonprivate_regularised_fit(
    rng: np.random.Generator,
) -> None:
    X, y = v1_data(rng, n=400)
    X = X / 6.0
    blocks = split(X, [2, 2, 2])
    lam = 0.05
    est = SecureVerticalLogisticRegression(
        lam=lam, random_state=0, dp_iterations=20
    ).fit(blocks, y, party_epsilon=[1e12, 1e12, 1e12])
    # independent solver: learners._newton on the clipped design, ±1 labels, a = 1/n
    c0, radii = clip_radii([2, 2, 2])
    rows = [b * np.minimum(1, r / np.maximum(np.linalg.norm(b, axis=1), 1e-300))[:, None]
            for b, r in zip(blocks, radii, strict=True)]  # fmt: skip
    Z = np.hstack([np.full((400, 1), c0), *rows])
    assert np.max(np.linalg.norm(Z, axis=1)) <= 1 + 1e-12
    res = minimize_ridge_risk(
        LogisticLoss(), Z, 2 * y - 1, np.full(400, 1 / 400), lam, gtol=1e-13
    )
    np.testing.assert_allclose(np.r_[est.intercept_ / c0, est.coef_], res.w, atol=1e-7)
    assert est.privacy_report_ is not None
    # the plain backend computes in the clear: a central label
    assert est.privacy_report_.guarantee == "conditional_on_allocation"


def test_report_splits_theta_and_beta_and_respects_record_budgets(
    rng: np.random.Generator,
) -> None:
    blocks, y, _ = _masked(rng)
    party_eps = np.array([2.0, 1.0, 4.0])
    est = SecureVerticalLogisticRegression(lam=0.05, random_state=1).fit(
        blocks, y, party_epsilon=party_eps
    )
    rep = est.privacy_report_
    assert rep is not None
    held = np.column_stack([~np.isnan(b[:, 0]) for b in blocks])
    budget = record_epsilon(held, party_eps)
    total = np.array(rep.sample_epsilon_total)
    assert np.all(total <= budget + 1e-9)
    np.testing.assert_allclose(np.max(total / budget), 1.0, rtol=1e-9)  # binding record
    by_stage = np.sum([st.sample_epsilon for st in rep.stages], axis=0)
    np.testing.assert_allclose(by_stage, total, atol=1e-12)
    labels = [s.label for s in rep.spends]
    assert labels[0].startswith("epsilon_theta")
    assert labels[1].startswith("epsilon_beta")
    assert sum(s.epsilon for s in rep.spends) == pytest.approx(rep.epsilon_max)
    theta = np.array(rep.stages[0].sample_epsilon)
    np.testing.assert_allclose(theta, 0.2 * budget.min())
    # the imputation model was released once with DP (row 8, no per-iteration θ)
    assert [o.label for o in est.ledger_.openings].count("theta.means") == 1
    assert est.ledger_.labels() >= {"beta"}
    assert "converged" not in est.ledger_.labels()  # fixed iteration count (§6 row 14)


def test_clipping_holds_for_every_record_and_imputed_block(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks handed to the secure computation obey the radii (observed through a
    spy: the estimator keeps no norm of the records as an attribute)."""
    blocks, y, _ = _masked(rng)
    blocks = [b * 10 for b in blocks]  # rows far outside the radii: clipping must act
    est = SecureVerticalLogisticRegression(lam=0.05, random_state=2)
    seen = _spy_run(SecureVerticalLogisticRegression, monkeypatch)
    est.fit(blocks, y, party_epsilon=[1.0, 1.0, 1.0])
    party_blocks = seen["party_blocks"]
    assert np.linalg.norm(np.hstack(party_blocks), axis=1).max() <= 1 + 1e-12
    _, radii = clip_radii([2, 2, 2])
    for k, r in enumerate(radii):
        b = party_blocks[k][:, 1:] if k == 0 else party_blocks[k]
        assert np.linalg.norm(b, axis=1).max() <= r + 1e-12
    assert not any("norm" in a for a in vars(est) if a.endswith("_"))


def _spy_run(cls: type, monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """Record the ``party_blocks`` the estimator hands to its (secure) fit."""
    seen: dict[str, list] = {}
    real = cls._run  # type: ignore[attr-defined]

    def spy(self, party_blocks, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen["party_blocks"] = [np.array(b) for b in party_blocks]
        return real(self, party_blocks, *args, **kwargs)

    monkeypatch.setattr(cls, "_run", spy)
    return seen


def test_noise_norm_is_gamma_d(rng: np.random.Generator) -> None:
    d = 7
    T = np.full(50, 1.0)
    norms = []
    for _ in range(2000):
        _, eta, _, c = objective_noise(T, 0.1, d, rng)
        norms.append(np.linalg.norm(c) * eta / 2)
    assert kstest(norms, gamma(d).cdf).pvalue > 1e-3


def test_joint_noise_draws_on_the_grid_with_gamma_norm(
    rng: np.random.Generator,
) -> None:
    assert [contributors(m) for m in (1, 3, 4, 5, 7)] == [1, 2, 2, 3, 4]
    d, scale = 7, 0.5
    noise = joint_noise(scale, d, 2, rng, seeded=True)
    c0, c1 = noise.draw(0), noise.draw(1)
    np.testing.assert_array_equal(noise.draw(0), c0)  # a seed fixes the draw
    assert not np.array_equal(c0, c1)  # drawers are independent
    np.testing.assert_array_equal(noise.total(), c0 + c1)
    for c in (c0, c1):  # on the fixed-point grid 2^-32
        np.testing.assert_array_equal(np.round(c * 2.0**32), c * 2.0**32)
    unseeded = joint_noise(scale, d, 2, rng, seeded=False)
    assert unseeded.seeds == (None, None)
    assert not np.array_equal(unseeded.draw(0), unseeded.draw(0))  # OS entropy
    norms = [
        np.linalg.norm(joint_noise(scale, d, 1, rng, seeded=True).draw(0)) / scale
        for _ in range(1000)
    ]
    assert kstest(norms, gamma(d).cdf).pvalue > 1e-3
    with pytest.raises(ValueError, match="scale"):
        JointNoise(0.0, d, (None,))
    with pytest.raises(ValueError, match="seeds"):
        JointNoise(1.0, d, ())


def test_record_epsilon_is_min_over_holders() -> None:
    held = np.array([[True, True, False], [True, False, True], [False, True, True]])
    np.testing.assert_array_equal(
        record_epsilon(held, np.array([1.0, 2.0, 3.0])), [1.0, 1.0, 2.0]
    )


def test_noisy_moments_lie_on_the_fixed_point_grid(rng: np.random.Generator) -> None:
    """The imputation-moment release is on the grid ``2^{−32}``: the data's sums are
    rounded before the (grid) noise is added, so no floating-point low bit of a sum
    reaches the output (Mironov's attack on textbook Laplace needs those bits)."""
    n, p = 300, 3
    X = rng.uniform(-1, 1, (n, p)) / np.sqrt(p)  # ‖x‖ ≤ 1; sums with arbitrary low bits
    X[:100, 2] = np.nan
    moments = noisy_pattern_moments(X, 1.0, rng)
    for per_pattern in moments.sums:
        for _count, s, Q in per_pattern:
            assert np.all(np.ldexp(s, FRAC_BITS) % 1.0 == 0.0)
            assert np.all(np.ldexp(Q, FRAC_BITS) % 1.0 == 0.0)
