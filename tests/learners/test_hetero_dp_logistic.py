"""HeteroDPLogisticRegression: the released point, its privacy report, its noise.

References are independent of the estimator: the KKT conditions written out here,
scipy / scikit-learn non-private fits, and the deterministic displacement bounds
``2‖b‖/(η(λ + 1/4)) ≤ ‖ŵ − w₀‖ ≤ 2‖b‖/(ηλ)`` (λ-strong convexity and
(λ + 1/4)-smoothness of the unperturbed objective when ‖x_i‖ ≤ 1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import LogisticRegression

import learners.hetero_dp_logistic as module
from learners import HeteroDPLogisticRegression
from learners._noise import sample_gamma_direction_noise


def _data(rng: np.random.Generator, n: int = 150, d: int = 4, shift: float = 0.0):
    X = rng.normal(scale=0.5, size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]  # public radius 1
    w_true = rng.normal(size=d)
    y = np.where(X @ w_true + shift + 0.1 * rng.normal(size=n) > 0, 1, -1)
    return X, y


def _design(X: np.ndarray, fit_intercept: bool) -> np.ndarray:
    return np.hstack([X, np.ones((len(X), 1))]) / math.sqrt(2) if fit_intercept else X


def _grad(w, Z, y, a, lam, c):
    """∇ of Σ a_i log(1+exp(−y_i z_i·w)) + λ/2‖w‖² + cᵀw, written out."""
    return Z.T @ (a * (-y * expit(-y * (Z @ w)))) + lam * w + c


def _nonprivate(Z, y, a, lam):
    res = minimize(
        lambda w: (
            a @ np.logaddexp(0, -y * (Z @ w)) + 0.5 * lam * w @ w,
            _grad(w, Z, y, a, lam, 0),
        ),
        np.zeros(Z.shape[1]),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-13, "ftol": 1e-16, "maxiter": 10_000},
    )
    return res.x


def _released_w(clf: HeteroDPLogisticRegression) -> np.ndarray:
    if clf.fit_intercept:
        return np.append(clf.coef_, clf.intercept_) * math.sqrt(2)
    return clf.coef_


# --- the released point ---------------------------------------------------------------


def _assert_kkt(clf: HeteroDPLogisticRegression, X, y, a, eta, seed) -> None:
    """ŵ must be the argmin of the objective perturbed by the b drawn from the seed."""
    Z = _design(X, clf.fit_intercept)
    b = sample_gamma_direction_noise(Z.shape[1], rng=np.random.default_rng(seed))
    g = _grad(_released_w(clf), Z, y.astype(float), a, clf.lam, 2 * b / eta)
    assert np.linalg.norm(g) <= 1e-9


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_released_point_is_the_perturbed_argmin(
    fit_intercept: bool, rng: np.random.Generator
) -> None:
    X, y = _data(rng)
    eps = rng.uniform(0.1, 2.0, size=len(y))
    clf = HeteroDPLogisticRegression(
        lam=0.05, fit_intercept=fit_intercept, random_state=7
    )
    clf.fit(X, y, sample_epsilon=eps)
    _assert_kkt(clf, X, y, eps / eps.sum(), eps.sum(), seed=7)
    assert clf.privacy_report_.grad_norm <= clf.gtol


def test_kkt_check_catches_a_mis_scaled_noise(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planted bug: noise at half scale (c = b/η instead of 2b/η) must be caught."""
    monkeypatch.setattr(
        module,
        "sample_gamma_direction_noise",
        lambda d, *, rng: 0.5 * sample_gamma_direction_noise(d, rng=rng),
    )
    X, y = _data(rng)
    a = np.full(len(y), 1 / len(y))
    clf = HeteroDPLogisticRegression(lam=0.05, eta=3.0, random_state=7).fit(
        X, y, weights=a
    )
    with pytest.raises(AssertionError):
        _assert_kkt(clf, X, y, a, 3.0, seed=7)


def test_privacy_report_per_record_totals(rng: np.random.Generator) -> None:
    X, y = _data(rng, n=40)
    eps = rng.uniform(0.0, 3.0, size=40)
    eps[5] = 0.0
    lam = 0.02
    clf = HeteroDPLogisticRegression(lam=lam, random_state=1).fit(
        X, y, sample_epsilon=eps
    )
    rep = clf.privacy_report_
    a, eta = eps / eps.sum(), eps.sum()
    np.testing.assert_allclose(rep.sample_epsilon, eps, rtol=1e-12)
    np.testing.assert_allclose(
        rep.sample_epsilon_total, a * eta + 2 * np.log(1 + a / (4 * lam)), rtol=1e-12
    )
    assert rep.sample_epsilon_total[5] == 0.0
    assert rep.epsilon_max == pytest.approx(max(rep.sample_epsilon_total), rel=1e-15)
    assert rep.guarantee == "conditional_on_allocation"
    assert rep.neighbouring == "replace_one"
    assert rep.grad_norm <= rep.gtol == 1e-10
    end = HeteroDPLogisticRegression(guarantee="end_to_end", random_state=1).fit(
        X, y, sample_epsilon=eps
    )
    assert end.privacy_report_.guarantee == "end_to_end"


def test_zero_weight_records_do_not_influence_the_release(
    rng: np.random.Generator,
) -> None:
    X, y = _data(rng, n=30)
    eps = rng.uniform(0.5, 1.0, size=30)
    eps[:3] = 0.0
    X2, y2 = X.copy(), y.copy()
    X2[:3] = rng.normal(size=(3, X.shape[1])) * 0.2
    y2[:3] = -y2[:3]
    w1 = HeteroDPLogisticRegression(random_state=3).fit(X, y, sample_epsilon=eps).coef_
    w2 = (
        HeteroDPLogisticRegression(random_state=3).fit(X2, y2, sample_epsilon=eps).coef_
    )
    np.testing.assert_array_equal(w1, w2)


def test_sample_epsilon_and_weights_paths_agree(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    eps = rng.uniform(0.1, 1.0, size=len(y))
    one = HeteroDPLogisticRegression(random_state=11).fit(X, y, sample_epsilon=eps)
    two = HeteroDPLogisticRegression(eta=eps.sum(), random_state=11).fit(
        X, y, weights=eps / eps.sum()
    )
    np.testing.assert_allclose(one.coef_, two.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        one.privacy_report_.sample_epsilon_total,
        two.privacy_report_.sample_epsilon_total,
        rtol=1e-12,
    )


def test_huge_eta_matches_nonprivate_fits(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    n, lam = len(y), 0.01
    a = rng.dirichlet(np.ones(n))
    clf = HeteroDPLogisticRegression(lam=lam, eta=1e9, random_state=0).fit(
        X, y, weights=a
    )
    np.testing.assert_allclose(
        clf.coef_, _nonprivate(X, y.astype(float), a, lam), atol=1e-5
    )
    # Uniform weights: Σ(1/n)ℓ + λ/2‖w‖² is sklearn's objective with C = 1/(nλ).
    uni = HeteroDPLogisticRegression(lam=lam, eta=1e9, random_state=0).fit(
        X, y, weights=np.full(n, 1 / n)
    )
    sk = LogisticRegression(
        C=1 / (n * lam), fit_intercept=False, tol=1e-12, max_iter=10_000
    ).fit(X, y)
    np.testing.assert_allclose(uni.coef_, sk.coef_.ravel(), atol=1e-5)


def test_intercept_recovers_a_shifted_separator(rng: np.random.Generator) -> None:
    X, y = _data(rng, n=300, d=2, shift=0.4)
    n, lam = len(y), 1e-3
    a = np.full(n, 1 / n)
    clf = HeteroDPLogisticRegression(
        lam=lam, eta=1e9, fit_intercept=True, random_state=0
    ).fit(X, y, weights=a)

    # Independent reference in original coordinates: ridge λ(‖β‖² + β₀²) (documented).
    def f(v):
        z = X @ v[:-1] + v[-1]
        val = a @ np.logaddexp(0, -y * z) + lam * v @ v
        gz = a * (-y * expit(-y * z))
        return val, np.append(X.T @ gz, gz.sum()) + 2 * lam * v

    ref = minimize(
        f,
        np.zeros(3),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-13, "ftol": 1e-16},
    )
    np.testing.assert_allclose(np.append(clf.coef_, clf.intercept_), ref.x, atol=1e-4)
    assert clf.intercept_ > 0
    assert (clf.predict(X) == y).mean() >= 0.9
    no_icpt = HeteroDPLogisticRegression(lam=lam, eta=1e9, random_state=0).fit(
        X, y, weights=a
    )
    assert no_icpt.intercept_ == 0.0


# --- the noise --------------------------------------------------------------------------


def _assert_noise_displacement(X, y, *, eta: float, lam: float, seeds) -> None:
    a = np.full(len(y), 1 / len(y))
    w0 = _nonprivate(X, y.astype(float), a, lam)
    for seed in seeds:
        clf = HeteroDPLogisticRegression(lam=lam, eta=eta, random_state=seed).fit(
            X, y, weights=a
        )
        b = sample_gamma_direction_noise(X.shape[1], rng=np.random.default_rng(seed))
        shift = np.linalg.norm(clf.coef_ - w0)
        scale = 2 * np.linalg.norm(b) / eta
        assert scale / (lam + 0.25) * (1 - 1e-6) <= shift <= scale / lam * (1 + 1e-6)


def test_noise_moves_the_release_by_the_theoretical_amount(
    rng: np.random.Generator,
) -> None:
    X, y = _data(rng)
    _assert_noise_displacement(X, y, eta=2.0, lam=0.05, seeds=range(5))


def test_planted_bug_noise_switched_off_is_caught(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        module, "sample_gamma_direction_noise", lambda d, *, rng: np.zeros(d)
    )
    X, y = _data(rng)
    with pytest.raises(AssertionError):
        _assert_noise_displacement(X, y, eta=2.0, lam=0.05, seeds=range(5))


def test_draws_differ_and_seeds_reproduce(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    eps = np.full(len(y), 0.01)

    def fit(rs: object) -> np.ndarray:
        est = HeteroDPLogisticRegression(random_state=rs)
        return est.fit(X, y, sample_epsilon=eps).coef_

    np.testing.assert_array_equal(fit(4), fit(4))
    assert not np.allclose(fit(4), fit(5))
    assert not np.allclose(fit(None), fit(None))  # OS entropy
    gen = np.random.default_rng(9)
    assert not np.allclose(fit(gen), fit(gen))  # a Generator is used, and advances

    # Small η: draws spread widely (std ≫ the η = 1e4 spread).
    def spread(eta: float) -> float:
        a = eps / eps.sum()
        draws = [
            HeteroDPLogisticRegression(eta=eta, random_state=s)
            .fit(X, y, weights=a)
            .coef_
            for s in range(10)
        ]
        return float(np.std(draws, axis=0).max())

    assert spread(0.5) > 100 * spread(1e4)


# --- interface ---------------------------------------------------------------------------


def test_predictions_are_consistent(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    clf = HeteroDPLogisticRegression(eta=50.0, fit_intercept=True, random_state=0).fit(
        X, y, weights=np.full(len(y), 1 / len(y))
    )
    np.testing.assert_array_equal(clf.classes_, [-1, 1])
    z = clf.decision_function(X)
    np.testing.assert_allclose(z, X @ clf.coef_ + clf.intercept_, rtol=1e-12)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-z)), rtol=1e-10)
    np.testing.assert_array_equal(clf.predict(X), np.where(proba[:, 1] > 0.5, 1, -1))
    assert clf.n_features_in_ == X.shape[1]
    # Prediction accepts rows outside the unit ball (only fitting needs the bound).
    assert clf.predict(10 * X).shape == (len(y),)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :2])


def test_not_fitted_and_convergence_warning(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    X, y = _data(rng, n=20)
    with pytest.raises(NotFittedError):
        HeteroDPLogisticRegression().predict(X)
    real = module.minimize_ridge_risk

    def one_step(*args, **kwargs):  # a solver that stops early
        return real(*args, **kwargs, max_iter=1)

    monkeypatch.setattr(module, "minimize_ridge_risk", one_step)
    with pytest.warns(ConvergenceWarning, match="did not reach gtol") as caught:
        clf = HeteroDPLogisticRegression(lam=1e-3, random_state=0).fit(
            X, y, sample_epsilon=np.ones(20)
        )
    # the report and the warning state the public certificate only: no achieved norm
    assert clf.privacy_report_.grad_norm == np.inf
    assert str(caught[0].message) == (
        "argmin did not reach gtol=1e-10; the privacy proof assumes the exact minimiser"
    )


def test_report_states_the_tolerance_not_the_achieved_gradient_norm(
    rng: np.random.Generator,
) -> None:
    """The achieved ``‖∇F(ŵ)‖`` is a statistic of the records outside the release: the
    report carries the public bound ``gtol`` instead (equal for any two data sets)."""
    X, y = _data(rng, n=40)
    reports = [
        HeteroDPLogisticRegression(lam=0.05, random_state=s)
        .fit(X * scale, y, sample_epsilon=np.ones(40))
        .privacy_report_
        for s, scale in ((0, 1.0), (1, 0.5))
    ]
    assert [r.grad_norm for r in reports] == [1e-10, 1e-10]


def _bad(X, y, **kw):
    params = {k: kw.pop(k) for k in ("eta", "lam", "guarantee", "gtol") if k in kw}
    return HeteroDPLogisticRegression(random_state=0, **params).fit(X, y, **kw)


def test_bad_data_is_refused_with_its_name_never_a_row_or_value(
    rng: np.random.Generator,
) -> None:
    """A refusal names the input; it never says which record or what it holds (the
    records are private), so two data sets with different offending rows and values
    get the same message."""
    X, y = _data(rng, n=10)
    eps = np.ones(10)
    for bad_value in (np.nan, np.inf):
        Xb = X.copy()
        Xb[3, 1] = bad_value
        with pytest.raises(ValueError, match="X"):
            _bad(Xb, y, sample_epsilon=eps)
    yb = y.astype(float)
    yb[2] = np.nan
    with pytest.raises(ValueError, match="y"):
        _bad(X, yb, sample_epsilon=eps)
    with pytest.raises(ValueError, match="y labels must be -1 or \\+1") as zero_one:
        _bad(X, (y > 0).astype(int), sample_epsilon=eps)  # {0, 1} refused
    y3 = y.copy()
    y3[6] = 2
    with pytest.raises(ValueError, match="y labels") as two:
        _bad(X, y3, sample_epsilon=eps)
    assert str(zero_one.value) == str(two.value)
    assert "6" not in str(two.value)
    assert "2" not in str(two.value)
    Xn = X.copy()
    Xn[4] = [0.8, 0.8, 0.0, 0.0]
    with pytest.raises(ValueError, match="X rows must have Euclidean norm") as small:
        _bad(Xn, y, sample_epsilon=eps)
    Xh = X.copy()
    Xh[7] = [1e300, -1e300, 1e-300, 0.0]  # overflowing norm: refused the same way
    with pytest.raises(ValueError, match="X rows must have Euclidean norm") as huge:
        _bad(Xh, y, sample_epsilon=eps)
    assert str(small.value) == str(huge.value)
    assert "row 4" not in str(small.value)
    assert "1.13" not in str(small.value)
    Xu = X.copy()
    Xu[4] = [1.0, 0.0, 0.0, 0.0]  # exactly on the sphere: allowed
    _bad(Xu, y, sample_epsilon=eps)
    with pytest.raises(ValueError, match="samples"):
        _bad(X, y[:-1], sample_epsilon=eps)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "neither"),
        (
            {"sample_epsilon": np.ones(10), "weights": np.full(10, 0.1), "eta": 1.0},
            "both",
        ),
        ({"weights": np.full(10, 0.1)}, "eta must be set"),
        ({"weights": np.full(10, 0.11), "eta": 1.0}, "sum to 1"),
        (
            {"weights": np.r_[-0.1, 0.2, np.full(8, 0.1125)], "eta": 1.0},
            r"weights\[0\]",
        ),
        ({"weights": np.full(9, 1 / 9), "eta": 1.0}, "shape"),
        ({"sample_epsilon": np.zeros(10)}, "all zero"),
        ({"sample_epsilon": np.r_[1.0, np.nan, np.ones(8)]}, r"sample_epsilon\[1\]"),
        ({"sample_epsilon": np.r_[1.0, -1.0, np.ones(8)]}, r"sample_epsilon\[1\]"),
        ({"sample_epsilon": np.ones(10), "eta": 1.0}, "eta must be None"),
        ({"weights": np.full(10, 0.1), "eta": -1.0}, "eta"),
        ({"weights": np.full(10, 0.1), "eta": np.inf}, "eta"),
        ({"sample_epsilon": np.ones(10), "lam": 0.0}, "lam"),
        ({"sample_epsilon": np.ones(10), "guarantee": "always"}, "guarantee"),
        ({"sample_epsilon": np.ones(10), "gtol": -1.0}, "gtol"),
    ],
)
def test_bad_privacy_request_is_refused(
    kwargs: dict, match: str, rng: np.random.Generator
) -> None:
    X, y = _data(rng, n=10)
    with pytest.raises(ValueError, match=match):
        _bad(X, y, **kwargs)
