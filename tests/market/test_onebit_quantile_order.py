"""``onebit_quantile`` ordered through the HTTP API on a quantile market (issue 12).

The market is the one every quantile market is (targets with public bounds, records
scaled to ``[-1, 1]`` by the market), with nothing changed in ``market/`` or ``api/``:
the buyer's ``interval`` and ``scale`` are raw target units, the learner maps them with
the market's public schema (``ReleaseContext.market``), and the model endpoint returns
raw-unit coefficients with standard errors and 95 % intervals in the same units.

Payments are the fast stand-in of ``pipeline_helpers`` (the pipeline is what is tested
here; the allocation is the real one, with the pinball loss).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sqlmodel import Session, func, select

from learners.onebit_quantile import sample_ald_noise
from market.store import Order
from tests.market.pipeline_helpers import (
    create_priced_market,
    offer_as_new_seller,
    stand_in_payments,
)
from tests.market.test_orders_run import Env, env

__all__ = ["env", "stand_in_payments"]

FEATURES = [
    {"name": "load", "low": 0.0, "high": 10.0},
    {"name": "temp", "low": -5.0, "high": 5.0},
]
TARGET = {"low": -20.0, "high": 40.0}
ALPHA, SIGMA = 0.3, 2.0
COEF = np.array([1.5, -2.0])
INTERCEPT = 4.0


def _draw(
    n: int, rng: np.random.Generator, features: list[dict[str, Any]] = FEATURES
) -> tuple[np.ndarray, np.ndarray]:
    low = np.array([f["low"] for f in features])
    high = np.array([f["high"] for f in features])
    X = rng.uniform(low, high, (n, len(features)))
    coef = np.resize(COEF, len(features))
    y = X @ coef + INTERCEPT + SIGMA * sample_ald_noise(n, alpha=ALPHA, rng=rng)
    return X, y


def _quantile_market(
    env: Env,
    *,
    n_sellers: int,
    eps_avg_max: float,
    features: list[dict[str, Any]] = FEATURES,
) -> int:
    mid = create_priced_market(
        env.client,
        env.admin,
        name="turbine",
        task="quantile",
        features=features,
        target=TARGET,
        eps_avg_max=eps_avg_max,
    )
    X, y = _draw(n_sellers, env.rng, features)
    for j in range(n_sellers):
        offer_as_new_seller(
            env.client,
            mid,
            name=f"q{j}",
            records=[{"x": X[j].tolist(), "y": float(y[j])}],
            cost=float(env.rng.uniform(0.05, 0.95)),
        )
    return mid


Z95 = 1.959963984540054


def _order(env: Env, mid: int, params: dict[str, Any]) -> dict[str, Any]:
    oid = env.order(
        mid, learner="onebit_quantile", budget=10_000.0, gamma=0.001, params=params
    )
    env.drain()
    st = env.status(oid)
    assert st["status"] == "succeeded", st["error"]
    r = env.client.get(f"/v1/orders/{oid}/model", headers=env.buyer)
    assert r.status_code == 200, r.text
    allocs = env.client.get(f"/v1/orders/{oid}/allocations", headers=env.admin)
    model = dict(r.json())
    model["_allocated"] = [a["epsilon"] for a in allocs.json()["items"]]
    return model


def test_quantile_order_publishes_raw_unit_intervals_that_cover_the_truth(
    env: Env, stand_in_payments: Any
) -> None:
    """A correctly specified quantile market (ALD noise, the buyer's ``scale`` is the
    true σ in raw units): the published raw coefficients are within 4 published
    standard errors of the truth (a single order's 95 % intervals miss 5 % of the time
    each; their coverage rate is the ``slow`` test V-B3), and the 95 % intervals are
    ``estimate ± 1.96·SE`` in the same raw units."""
    mid = _quantile_market(env, n_sellers=200, eps_avg_max=8.0)
    model = _order(
        env, mid, {"alpha": ALPHA, "interval": [-20.0, 40.0], "scale": SIGMA}
    )
    assert model["learner"] == "onebit_quantile"
    assert model["privacy"]["guarantee"] == "local"
    assert [s["stage"] for s in model["privacy"]["stages"]] == ["response bit"]
    eps = np.asarray(model["_allocated"])
    assert eps.size >= 50
    # overhead "none": each seller's debit is exactly the ε its bit was drawn with
    assert model["privacy"]["epsilon"]["max"] == pytest.approx(eps.max(), rel=1e-12)
    assert model["privacy"]["stages"][0]["max"] == pytest.approx(eps.max(), rel=1e-12)
    inf = model["inference"]
    assert inf["units"].startswith("raw market units")
    assert not inf["on_boundary"]
    assert inf["n_reports"] == model["privacy"]["sellers_used"]
    est = np.array([*model["coefficients"], model["intercept"]])
    se = np.array(
        [
            *model["standard_errors"]["coefficients"],
            model["standard_errors"]["intercept"],
        ]
    )
    ci = np.array(
        [*model["conf_int_95"]["coefficients"], model["conf_int_95"]["intercept"]]
    )
    np.testing.assert_allclose(ci[:, 0], est - Z95 * se, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ci[:, 1], est + Z95 * se, rtol=1e-9, atol=1e-9)
    truth = np.array([*COEF, INTERCEPT])
    assert np.all(se > 0)
    assert np.all(np.abs(est - truth) <= 4.0 * se), (est, se, truth)
    # informative: the slope of "temp" is resolved away from zero
    assert se[1] < abs(COEF[1])


def test_private_x_order_reports_k_plus_one_bits_and_the_prior_caveat(
    env: Env, stand_in_payments: Any
) -> None:
    mid = _quantile_market(env, n_sellers=60, eps_avg_max=8.0)
    model = _order(env, mid, {"alpha": ALPHA, "private_x": True, "scale": SIGMA})
    stages = model["privacy"]["stages"]
    assert [s["stage"] for s in stages] == [
        "response bit",
        "covariate bit x[0]",
        "covariate bit x[1]",
    ]
    eps = np.asarray(model["_allocated"])
    # equal split: each of the k + 1 = 3 bits at ε_i/3, summing to ε_i
    assert sum(s["max"] for s in stages) == pytest.approx(eps.max(), rel=1e-12)
    assert model["private_x"] is True
    assert "prior" in model["inference"]["estimand"]


def _place(env: Env, mid: int, params: dict[str, Any]) -> Any:
    return env.client.post(
        f"/v1/markets/{mid}/orders",
        headers=env.buyer,
        json={
            "learner": "onebit_quantile",
            "budget": 10.0,
            "gamma": 1.0,
            "params": params,
        },
    )


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"alpha": 1.0}, "params.alpha"),
        ({"alpha": 0.0}, "params.alpha"),
        ({"interval": [40.0, -20.0]}, "params.interval"),
        ({"interval": [5.0, 5.0]}, "params.interval"),
        ({"interval": [1.0]}, "params.interval"),
        ({"interval": "wide"}, "params.interval"),
        ({"scale": 0.0}, "params.scale"),
        ({"private_x": "yes"}, "params.private_x"),
    ],
)
def test_bad_params_are_422_naming_the_field_and_store_nothing(
    env: Env, params: dict[str, Any], field: str
) -> None:
    mid = _quantile_market(env, n_sellers=2, eps_avg_max=8.0)
    with Session(env.engine) as s:
        before = s.exec(select(func.count()).select_from(Order)).one()
    r = _place(env, mid, params)
    assert r.status_code == 422, r.text
    assert field in r.text
    with Session(env.engine) as s:
        assert s.exec(select(func.count()).select_from(Order)).one() == before


def test_onebit_quantile_is_listed_for_quantile_markets(env: Env) -> None:
    items = {
        i["name"]: i
        for i in env.client.get("/v1/learners", headers=env.buyer).json()["items"]
    }
    spec = items["onebit_quantile"]
    assert spec["tasks"] == ["quantile"]
    assert spec["privacy_model"] == "local"
    assert spec["mechanism_loss"] == "pinball"
    assert spec["params"]["interval"]["type"] == "interval"
    assert spec["params"]["alpha"]["exclusiveMinimum"] == 0.0


@pytest.mark.parametrize("intercept", [True, False])
def test_raw_unit_standard_errors_use_the_markets_own_linear_map(
    intercept: bool, rng: np.random.Generator
) -> None:
    """The learner's ``MarketUnits`` map is the market's ``raw_coefficients`` (value and
    Jacobian), so the exported raw SEs are ``√diag(M Cov Mᵀ)`` of exactly the map the
    market applies to the coefficients."""
    from learners import OneBitQuantileRegression, ReleaseContext
    from learners.onebit_quantile import MarketUnits
    from market.pipeline.results import raw_coefficients

    d = 3
    low = rng.uniform(-5, 0, d)
    high = low + rng.uniform(0.5, 10, d)
    features = [
        {"name": f"f{j}", "low": float(lo), "high": float(hi)}
        for j, (lo, hi) in enumerate(zip(low, high, strict=True))
    ]
    target = {"low": -3.0, "high": 7.0}
    units = MarketUnits.from_schema({"features": features, "target": target})
    assert units is not None

    def market_map(theta: np.ndarray) -> np.ndarray:
        b = float(theta[-1]) if intercept else 0.0
        w, b_raw = raw_coefficients(theta[:d], b, features, target)
        return np.array([*w, b_raw]) if intercept else np.array(w)

    theta = rng.standard_normal(d + intercept)
    np.testing.assert_allclose(
        units.to_raw(theta, intercept=intercept), market_map(theta), rtol=1e-12
    )
    h = 1e-6
    jac = np.column_stack(
        [
            (market_map(theta + h * e) - market_map(theta - h * e)) / (2 * h)
            for e in np.eye(theta.size)
        ]
    )
    np.testing.assert_allclose(
        units.jacobian(intercept=intercept), jac, rtol=1e-7, atol=1e-9
    )
    # a fitted learner built for this market exports SEs through that map
    schema = {"task": "quantile", "features": features, "target": target}
    est = OneBitQuantileRegression.for_order(
        {"alpha": 0.3, "fit_intercept": intercept},
        context=ReleaseContext(lam=0.01, task="quantile", market=schema),
    )
    n = 4000
    X = rng.uniform(-1, 1, (n, d)) / np.sqrt(d)
    y = np.clip(
        X @ np.array([0.5, -0.3, 0.2]) + 0.1 * sample_ald_noise(n, alpha=0.3, rng=rng),
        -1,
        1,
    )
    est.set_params(random_state=1).fit(X, y, sample_epsilon=3.0)
    out = est.export_model()
    assert out["inference"]["units"].startswith("raw market units")
    M = units.jacobian(intercept=intercept)
    se = np.sqrt(np.diag(M @ est.cov_params_ @ M.T))
    got = out["standard_errors"]
    np.testing.assert_allclose(got["coefficients"], se[:d], rtol=1e-12)
    if intercept:
        assert got["intercept"] == pytest.approx(se[d], rel=1e-12)
    else:
        assert got["intercept"] is None


def test_features_declared_public_are_not_privatized(
    env: Env, stand_in_payments: Any
) -> None:
    """A market may declare a feature ``"public": true``; a ``private_x`` order then
    sends one bit per private feature only (k + 1 = 2 bits here)."""
    features = [dict(FEATURES[0], public=True), FEATURES[1]]
    mid = _quantile_market(env, n_sellers=40, eps_avg_max=8.0, features=features)
    market = env.client.get(f"/v1/markets/{mid}", headers=env.admin).json()
    assert [f.get("public") for f in market["features"]] == [True, False]
    model = _order(env, mid, {"alpha": ALPHA, "private_x": True, "scale": SIGMA})
    stages = model["privacy"]["stages"]
    assert [s["stage"] for s in stages] == ["response bit", "covariate bit x[1]"]
    eps = np.asarray(model["_allocated"])
    assert sum(s["max"] for s in stages) == pytest.approx(eps.max(), rel=1e-12)


def test_private_x_with_more_private_features_than_the_protocol_handles_is_422(
    env: Env,
) -> None:
    """The private-X transform handles at most 20 private features (spec §3.4): an
    order that could never run is refused when it is placed, naming
    ``params.private_x``, and nothing is stored; declaring a feature public (or
    ordering public X) makes the same market orderable."""
    wide = [{"name": f"f{j}", "low": 0.0, "high": 1.0} for j in range(21)]
    mid = _quantile_market(env, n_sellers=2, eps_avg_max=8.0, features=wide)
    with Session(env.engine) as s:
        before = s.exec(select(func.count()).select_from(Order)).one()
    r = _place(env, mid, {"private_x": True})
    assert r.status_code == 422, r.text
    assert "params.private_x" in r.text
    assert "21 private features" in r.text
    with Session(env.engine) as s:
        assert s.exec(select(func.count()).select_from(Order)).one() == before
    assert _place(env, mid, {"private_x": False}).status_code == 202
    one_public = [dict(wide[0], public=True), *wide[1:]]
    mid2 = _quantile_market(env, n_sellers=2, eps_avg_max=8.0, features=one_public)
    assert _place(env, mid2, {"private_x": True}).status_code == 202


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.9])
def test_the_mechanism_prices_the_quantile_the_buyer_ordered(
    env: Env, alpha: float
) -> None:
    """The allocation values the model the buyer ordered: the pinball loss it prices
    is at the order's ``alpha``, not at the median."""
    from market.pipeline.instance import load_current

    mid = _quantile_market(env, n_sellers=3, eps_avg_max=8.0)
    with Session(env.engine) as s:
        inst = load_current(
            s, market_id=mid, learner="onebit_quantile", params={"alpha": alpha}
        )
    cfg = inst.config()
    assert cfg.loss == "pinball"
    assert cfg.quantile == pytest.approx(alpha)
    assert inst.config(gamma=0.5).quantile == pytest.approx(alpha)
