"""``OneBitQuantileRegression``: the issue's contract, bookkeeping and bad input."""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

import learners.onebit_quantile._protocol as estimator_module
from learners import LEARNERS, OneBitQuantileRegression, ReleaseContext
from learners.onebit_quantile import (
    PrivateXReports,
    PublicXLikelihood,
    PublicXReports,
    randomize_public_x,
)
from tests.learners.onebit_quantile.designs import (
    S1_BETA,
    S1_INTERVAL,
    draw_s1,
    draw_s2,
    s1_model,
)


def _s1_fit(
    rng: np.random.Generator, n: int = 4000, **kw: Any
) -> OneBitQuantileRegression:
    X, y = draw_s1(n, rng)
    est = OneBitQuantileRegression(
        alpha=0.3, interval=S1_INTERVAL, random_state=7, **kw
    )
    return est.fit(X, y, sample_epsilon=np.full(n, 2.5))


def test_registered_with_the_issues_contract() -> None:
    cls = LEARNERS["onebit_quantile"]
    assert cls is OneBitQuantileRegression
    spec = cls.learner_spec
    assert spec.tasks == ("quantile",)
    assert spec.privacy_model == "local"
    assert spec.mechanism_loss == "pinball"
    assert spec.overhead == "none"
    assert {p.name for p in spec.params} == {
        "alpha",
        "interval",
        "scale",
        "private_x",
        "fit_intercept",
    }


def test_fit_exposes_coef_bse_conf_int_and_predict(rng: np.random.Generator) -> None:
    est = _s1_fit(rng)
    assert est.coef_.shape == (2,)
    assert isinstance(est.intercept_, float)
    assert est.bse_.shape == (3,)  # intercept last
    ci = est.conf_int()
    assert ci.shape == (3, 2)
    params = np.append(est.coef_, est.intercept_)
    np.testing.assert_allclose(ci.mean(axis=1), params, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        (ci[:, 1] - ci[:, 0]) / 2, 1.959963984540054 * est.bse_, rtol=1e-12
    )
    wider = est.conf_int(level=0.99)
    assert np.all(wider[:, 1] - wider[:, 0] > ci[:, 1] - ci[:, 0])
    X = np.array([[0.2, -0.4], [0.0, 0.0]])
    np.testing.assert_allclose(est.predict(X), X @ est.coef_ + est.intercept_)
    assert est.cov_params_ is not None
    np.testing.assert_allclose(np.sqrt(np.diag(est.cov_params_)), est.bse_)
    with pytest.raises(ValueError, match="level"):
        est.conf_int(level=1.5)
    stat, p = est.result_.wald_test(np.eye(3), np.append(S1_BETA[:2], S1_BETA[2]))
    assert stat >= 0
    assert 0 <= p <= 1


def test_model_covariance_option(rng: np.random.Generator) -> None:
    est = _s1_fit(rng, covariance="model")
    assert est.result_.covariance_kind == "model"
    assert np.all(np.isfinite(est.bse_))


def test_privacy_report_public_x_one_stage(rng: np.random.Generator) -> None:
    n = 600
    X, y = draw_s1(n, rng)
    eps = rng.uniform(0.5, 3.0, n)
    eps[:10] = 0.0
    est = OneBitQuantileRegression(alpha=0.3, interval=S1_INTERVAL, random_state=1)
    est.fit(X, y, sample_epsilon=eps)
    rep = est.privacy_report_
    assert rep.guarantee == "local"
    assert rep.delta == 0.0
    np.testing.assert_array_equal(rep.sample_epsilon_total, eps)
    assert [st.label for st in rep.stages] == ["response bit"]
    np.testing.assert_array_equal(rep.stages[0].sample_epsilon, eps)
    assert est.result_.n_users == n - 10
    json.dumps(rep.to_dict(), allow_nan=False)


def test_privacy_report_private_x_k_plus_one_stages(rng: np.random.Generator) -> None:
    """V-B12: k + 1 bits whose budgets add up to ε_i; none for the public intercept."""
    n = 800
    X, y = draw_s2(n, rng)
    eps = rng.uniform(2.0, 8.0, n)
    est = OneBitQuantileRegression(
        alpha=0.3,
        interval=[-4, 4],
        private_x=True,
        bounds_X=(-1.0, 1.0),
        random_state=2,
    )
    est.fit(X, y, sample_epsilon=eps)
    stages = est.privacy_report_.stages
    assert [st.label for st in stages] == [
        "response bit",
        "covariate bit x[0]",
        "covariate bit x[1]",
        "covariate bit x[2]",
    ]
    per_record = np.sum([st.sample_epsilon for st in stages], axis=0)
    np.testing.assert_allclose(per_record, eps, rtol=1e-14)
    np.testing.assert_allclose(est.privacy_report_.sample_epsilon_total, eps)
    for st in stages:
        np.testing.assert_allclose(st.sample_epsilon, eps / 4)


def test_curator_receives_only_bits_rows_and_public_configuration(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """V-B12: the estimate is computed from the report objects alone (bits, budgets,
    public rows), never from ``y`` or a private covariate."""
    seen: list[Any] = []
    real_public, real_private = (
        estimator_module.estimate_public_x,
        estimator_module.estimate_private_x,
    )

    def spy_public(reports: Any, **kw: Any) -> Any:
        seen.append((reports, kw))
        return real_public(reports, **kw)

    def spy_private(reports: Any, **kw: Any) -> Any:
        seen.append((reports, kw))
        return real_private(reports, **kw)

    monkeypatch.setattr(estimator_module, "estimate_public_x", spy_public)
    monkeypatch.setattr(estimator_module, "estimate_private_x", spy_private)
    n = 500
    X, y = draw_s1(n, rng)
    OneBitQuantileRegression(alpha=0.3, interval=S1_INTERVAL, random_state=3).fit(
        X, y, sample_epsilon=np.full(n, 1.0)
    )
    X2, y2 = draw_s2(n, rng)
    OneBitQuantileRegression(
        alpha=0.3, interval=[-4, 4], private_x=True, bounds_X=(-1, 1), random_state=3
    ).fit(X2, y2, sample_epsilon=np.full(n, 4.0))
    (pub, _kw_pub), (priv, _kw_priv) = seen
    assert isinstance(pub, PublicXReports)
    assert isinstance(priv, PrivateXReports)
    assert set(np.unique(pub.z)) <= {0, 1}
    np.testing.assert_array_equal(pub.X[:, :2], X)  # public X: the rows themselves
    assert set(np.unique(priv.z_x)) <= {-1, 1}
    assert set(np.unique(priv.z_y)) <= {0, 1}
    np.testing.assert_array_equal(priv.X_public, np.ones((n, 1)))  # only the intercept
    for reports, kw in seen:
        arrays = (
            [np.asarray(v) for v in vars(reports).values() if isinstance(v, np.ndarray)]
            if hasattr(reports, "__dict__")
            else [np.asarray(getattr(reports, f)) for f in reports.__slots__]
        )
        for arr in arrays:
            assert not any(np.array_equal(arr.reshape(-1)[:n], v) for v in (y, y2))
        assert set(kw) <= {
            "model",
            "prior",
            "private_index",
            "public_index",
            "intercept_index",
            "box",
            "n_restarts",
            "covariance",
        }


def test_equal_budgets_reproduce_the_homogeneous_fit_bit_for_bit(
    rng: np.random.Generator,
) -> None:
    """V-B11 (a): a vector of equal ε_i and the scalar ε give the identical fit."""
    n = 3000
    X, y = draw_s1(n, rng)
    kw = {"alpha": 0.3, "interval": S1_INTERVAL, "random_state": 11}
    a = OneBitQuantileRegression(**kw).fit(X, y, sample_epsilon=np.full(n, 2.5))
    b = OneBitQuantileRegression(**kw).fit(X, y, sample_epsilon=2.5)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.bse_, b.bse_)
    X2, y2 = draw_s2(n, rng)
    kw2 = {
        "alpha": 0.3,
        "interval": [-4, 4],
        "private_x": True,
        "bounds_X": (-1, 1),
        "fit_intercept": False,
        "random_state": 5,
    }
    c = OneBitQuantileRegression(**kw2).fit(X2, y2, sample_epsilon=np.full(n, 6.0))
    d = OneBitQuantileRegression(**kw2).fit(X2, y2, sample_epsilon=6.0)
    np.testing.assert_array_equal(c.coef_, d.coef_)


def test_public_x_gradient_and_hessian_match_finite_differences(
    rng: np.random.Generator,
) -> None:
    n = 2000
    u, y = draw_s1(n, rng)
    X = np.column_stack([u, np.ones(n)])
    eps = np.where(rng.random(n) < 0.5, 1.0, 5.0)
    lik = PublicXLikelihood(
        randomize_public_x(X, y, epsilon=eps, low=-4, high=6, rng=rng), s1_model()
    )
    beta = np.array([0.8, -1.2, 0.4])
    _, grad = lik.value_grad(beta)
    h = 1e-6
    fd = np.array(
        [
            (lik.value_grad(beta + h * e)[0] - lik.value_grad(beta - h * e)[0])
            / (2 * h)
            for e in np.eye(3)
        ]
    )
    np.testing.assert_allclose(grad, fd, rtol=0, atol=1e-8)
    A, _ = lik.sandwich_parts(beta)
    fd_h = np.array(
        [
            (lik.value_grad(beta + h * e)[1] - lik.value_grad(beta - h * e)[1])
            / (2 * h)
            for e in np.eye(3)
        ]
    )
    np.testing.assert_allclose(-A, fd_h, rtol=0, atol=1e-7)


@pytest.mark.parametrize(
    ("kwargs", "fit_kwargs", "name"),
    [
        ({"alpha": 0.0}, {}, "alpha"),
        ({"alpha": 1.0}, {}, "alpha"),
        ({"interval": [3.0, -2.0]}, {}, "interval"),
        ({"interval": [1.0, 1.0]}, {}, "interval"),
        ({"interval": [0.0, np.inf]}, {}, "interval"),
        ({"interval": [1.0]}, {}, "interval"),
        ({"scale": 0.0}, {}, "scale"),
        ({"private_x": True}, {}, "bounds_X"),
        ({"private_x": True, "bounds_X": (1.0, -1.0)}, {}, "bounds_X"),
        ({}, {"sample_epsilon": -1.0}, "sample_epsilon"),
        ({}, {"sample_epsilon": np.nan}, "sample_epsilon"),
        ({}, {"sample_epsilon": 0.0}, "sample_epsilon"),
        ({}, {"X": np.nan}, "X"),
        ({}, {"y": np.inf}, "y"),
    ],
)
def test_bad_input_is_a_value_error_naming_the_parameter(
    kwargs: dict[str, Any],
    fit_kwargs: dict[str, Any],
    name: str,
    rng: np.random.Generator,
) -> None:
    n = 50
    X, y = draw_s1(n, rng)
    if "X" in fit_kwargs:
        X[3, 1] = fit_kwargs.pop("X")
    if "y" in fit_kwargs:
        y[4] = fit_kwargs.pop("y")
    eps = fit_kwargs.pop("sample_epsilon", 1.0)
    params = {"alpha": 0.3, "interval": S1_INTERVAL, **kwargs}
    with pytest.raises(ValueError, match=name):
        OneBitQuantileRegression(**params).fit(X, y, sample_epsilon=eps)


def test_responses_outside_the_interval_are_valid(rng: np.random.Generator) -> None:
    X, y = draw_s1(500, rng)
    y[:20] = 1e6
    y[20:40] = -1e6
    OneBitQuantileRegression(alpha=0.3, interval=S1_INTERVAL, random_state=0).fit(
        X, y, sample_epsilon=2.0
    )


def test_on_boundary_fit_reports_no_standard_errors(rng: np.random.Generator) -> None:
    """Tiny n·ε²: the optimum hits the box; no sandwich SEs, and the export says so."""
    X, y = draw_s1(30, rng)
    est = OneBitQuantileRegression(
        alpha=0.3, interval=S1_INTERVAL, box=0.5, random_state=0
    )
    est.fit(X, y, sample_epsilon=0.2)
    assert est.on_boundary_
    assert np.all(np.isnan(est.bse_))
    model = json.loads(json.dumps(est.export_model(), allow_nan=False))
    assert model["standard_errors"] is None
    assert model["conf_int_95"] is None
    assert model["inference"]["on_boundary"] is True


def test_sklearn_conventions(rng: np.random.Generator) -> None:
    est = OneBitQuantileRegression(alpha=0.3, interval=S1_INTERVAL, random_state=0)
    with pytest.raises(NotFittedError):
        est.predict(np.zeros((1, 2)))
    twin = clone(est)
    assert twin.get_params() == est.get_params()
    fitted = _s1_fit(rng)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(
        again.predict(np.ones((2, 2))), fitted.predict(np.ones((2, 2)))
    )
    with pytest.raises(ValueError, match="features"):
        fitted.predict(np.ones((2, 3)))


def test_for_order_maps_raw_units_with_the_market_schema() -> None:
    """The buyer's ``interval`` and ``scale`` are raw target units; the market fits on
    ``ỹ = 2(y − lo)/(hi − lo) − 1`` and ``x̃ ∈ [−1/√d, 1/√d]``."""
    market = {
        "task": "quantile",
        "features": [
            {"name": "a", "low": 0.0, "high": 10.0},
            {"name": "b", "low": -1.0, "high": 1.0, "public": True},
        ],
        "target": {"low": 40.0, "high": 110.0},
    }
    ctx = ReleaseContext(lam=0.01, task="quantile", market=market)
    est = OneBitQuantileRegression.for_order(
        {"alpha": 0.3, "interval": [50.0, 100.0], "scale": 7.0, "private_x": True},
        context=ctx,
    )
    np.testing.assert_allclose(est.interval, [2 * 10 / 70 - 1, 2 * 60 / 70 - 1])
    assert est.scale == pytest.approx(0.2)
    edge = 1 / math.sqrt(2)
    np.testing.assert_allclose(est.bounds_X, [[-edge, -edge], [edge, edge]])
    assert est.public_features == [1]
    assert est.report_units is not None
    default = OneBitQuantileRegression.for_order({}, context=ctx)
    assert default.interval == [-1.0, 1.0]
    assert default.alpha == 0.5
    assert default.scale == pytest.approx(2 / 70)
    bare = OneBitQuantileRegression.for_order(
        {"interval": [0, 2]}, context=ReleaseContext(lam=0.01)
    )
    assert bare.interval == [0.0, 2.0]
    assert bare.report_units is None


def test_design_matrix_has_unit_rows() -> None:
    est = OneBitQuantileRegression(alpha=0.5, interval=[-1, 1])
    X = np.array([[0.6, -0.8], [0.0, 0.0]])
    Z = est.design_matrix(X)
    assert Z.shape == (2, 3)
    assert np.linalg.norm(Z, axis=1).max() <= 1.0 + 1e-12
    np.testing.assert_array_equal(
        OneBitQuantileRegression(
            alpha=0.5, interval=[-1, 1], fit_intercept=False
        ).design_matrix(X),
        X,
    )


def test_private_x_refuses_more_than_twenty_private_features(
    rng: np.random.Generator,
) -> None:
    X = rng.uniform(-1, 1, (30, 21))
    est = OneBitQuantileRegression(
        alpha=0.5, interval=[-1, 1], private_x=True, bounds_X=(-1, 1)
    )
    with pytest.raises(ValueError, match="private_x"):
        est.fit(X, rng.standard_normal(30), sample_epsilon=1.0)
    est.set_params(public_features=list(range(4, 21)))
    est.fit(X, rng.standard_normal(30), sample_epsilon=1.0)  # 4 private: fine
    assert len(est.privacy_report_.stages) == 5
