"""The order pipeline's extension point and its single loader and money rule.

- A learner registered only in this module is ordered through the HTTP API end to end
  (no change to ``market/`` or ``api/``): the proof that the registry is the extension
  point.
- The trade-off job and an order on the same market and settings see the identical
  instance (rows, costs, caps): the old job loaded offers itself, without the intercept
  column and without the lifetime caps.
- One money rule: the settled ledger's sum equals ``choose_gamma``'s total for the same
  payments, and never exceeds the budget.
"""

from collections.abc import Mapping
from typing import Any, ClassVar, Self

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import ArrayLike, NDArray

from learners import (
    LEARNERS,
    LearnerSpec,
    ParamSpec,
    PrivacyReport,
    ReleaseContext,
    StageSpend,
)
from market import numerics
from mechanisms import money
from tests.market.pipeline_helpers import add_sellers, market_body, stand_in_payments
from tests.market.test_orders_run import Env, env

__all__ = ["env", "stand_in_payments"]


class RandomizedResponseMean:
    """A toy local learner: each record's label is flipped with probability
    ``1/(1 + e^{ε_i})`` (ε_i-LDP randomized response), then the coefficients are the
    debiased mean of ``y·x``. Registered only in this test module."""

    learner_spec: ClassVar[LearnerSpec] = LearnerSpec(
        name="test_rr_mean",
        tasks=("classification",),
        privacy_model="local",
        mechanism_loss="logistic",
        overhead="none",
        params=(
            ParamSpec(
                name="shrink", kind="float", default=1.0, low=0.0, high=1.0, doc="scale"
            ),
        ),
    )

    def __init__(self, shrink: float = 1.0) -> None:
        self.shrink = shrink

    @classmethod
    def for_order(cls, params: Mapping[str, Any], *, context: ReleaseContext) -> Self:
        return cls(**cls.learner_spec.check_params(params))

    def design_matrix(self, X: ArrayLike) -> NDArray[np.float64]:
        return np.asarray(X, dtype=float)

    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        sample_epsilon: ArrayLike,
        groups: Any = None,
    ) -> Self:
        X_arr, y_arr = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        eps = np.asarray(sample_epsilon, dtype=float)
        rng = np.random.default_rng()
        keep = rng.random(eps.size) < 1.0 / (1.0 + np.exp(-eps))
        noisy = np.where(keep, y_arr, -y_arr)
        scale = np.where(eps > 0, np.tanh(eps / 2.0), 1.0)  # E[noisy] = tanh(ε/2)·y
        self.coef_ = self.shrink * (noisy[:, None] * X_arr / scale[:, None]).mean(
            axis=0
        )
        self.intercept_ = 0.0
        self.privacy_report_ = PrivacyReport(
            mechanism="randomized response on the label",
            guarantee="local",
            sample_epsilon=tuple(float(e) for e in eps),
            sample_epsilon_total=tuple(float(e) for e in eps),
            epsilon_max=float(eps.max()),
            grad_norm=0.0,
            gtol=0.0,
            stages=(StageSpend("label flip", tuple(float(e) for e in eps)),),
        )
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        return np.where(np.asarray(X, dtype=float) @ self.coef_ > 0, 1.0, -1.0)

    def export_model(self) -> dict[str, Any]:
        return {"coef": [float(v) for v in self.coef_], "intercept": None, "rounds": 1}


@pytest.fixture
def toy_learner() -> Any:
    with LEARNERS.registered(RandomizedResponseMean) as cls:
        yield cls


class AlwaysPositive(RandomizedResponseMean):
    """The toy learner with a ``predict`` that ignores the fit: every label is +1."""

    learner_spec: ClassVar[LearnerSpec] = LearnerSpec(
        name="test_always_positive",
        tasks=("classification",),
        privacy_model="local",
        mechanism_loss="logistic",
        overhead="none",
    )

    @classmethod
    def for_order(cls, params: Mapping[str, Any], *, context: ReleaseContext) -> Self:
        return cls()

    def set_params(self, **params: Any) -> Self:
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        return np.ones(np.asarray(X).shape[0])


def test_tradeoff_scores_the_ordered_learners_release(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trade-off curve's validation error is that of the model the buyer would
    get (the registry learner, released at each point's allocation), not of the
    objective-perturbation logistic release: with a learner that always predicts +1
    it is exactly the validation set's share of −1 labels at every γ. (The Myerson
    totals are replaced by a zero stand-in: only the scoring is under test.)"""
    from mechanisms.tuning import _tradeoff

    monkeypatch.setattr(
        _tradeoff, "myerson_total_fn", lambda eps_max: lambda *args: 0.0
    )
    body = market_body(rng=env.rng, n_val=80)
    r = env.client.post("/v1/markets", headers=env.admin, json=body)
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    add_sellers(env.client, mid, 15, rng=env.rng)
    y_val = np.array([v["y"] for v in body["validation"]], dtype=float)
    with LEARNERS.registered(AlwaysPositive):
        job = env.client.post(
            f"/v1/markets/{mid}/tradeoff",
            headers=env.admin,
            json={"gammas": [0.1, 1.0], "learner": "test_always_positive"},
        )
        assert job.status_code == 202, job.text
        env.drain()
    out = env.client.get(f"/v1/jobs/{job.json()['job_id']}", headers=env.admin).json()
    assert out["status"] == "succeeded", out
    errors = [p["validation_error"] for p in out["points"]]
    assert errors == pytest.approx([float(np.mean(y_val != 1.0))] * 2, abs=1e-12)


def test_a_learner_registered_in_a_test_is_orderable_end_to_end(
    env: Env, toy_learner: Any, stand_in_payments: Any
) -> None:
    listed = env.client.get("/v1/learners", headers=env.buyer).json()["items"]
    assert "test_rr_mean" in {item["name"] for item in listed}
    mid = env.market(n_sellers=20)
    bad = env.client.post(
        f"/v1/markets/{mid}/orders",
        headers=env.buyer,
        json={
            "learner": "test_rr_mean",
            "budget": 100.0,
            "gamma": 1.0,
            "params": {"shrink": 2.0},
        },
    )
    assert bad.status_code == 422
    assert "params.shrink" in bad.text
    oid = env.order(mid, learner="test_rr_mean", params={"shrink": 0.5})
    env.drain()
    st_ = env.status(oid)
    assert st_["status"] == "succeeded", st_["error"]
    model = env.client.get(f"/v1/orders/{oid}/model", headers=env.buyer).json()
    assert model["learner"] == "test_rr_mean"
    assert model["params"] == {"shrink": 0.5}
    assert model["rounds"] == 1  # the learner's own field
    assert model["privacy"]["guarantee"] == "local"
    assert [s["stage"] for s in model["privacy"]["stages"]] == ["label flip"]
    allocs = env.client.get(f"/v1/orders/{oid}/allocations", headers=env.admin).json()
    eps = np.array([a["epsilon"] for a in allocs["items"]])
    assert eps.size > 0
    # overhead "none": the ledger holds exactly the allocated ε, no Δ term
    assert model["privacy"]["epsilon"]["max"] == pytest.approx(eps.max(), rel=1e-12)


def test_unknown_learner_and_wrong_task_are_422_naming_the_field(env: Env) -> None:
    mid = env.market(n_sellers=3)
    for body, field in (
        ({"learner": "no_such_learner"}, "learner"),
        ({"params": {"fit_intercept": "yes"}}, "params.fit_intercept"),
        ({"params": {"seed": 1}}, "params.seed"),
    ):
        payload = {
            "learner": "hetero_dp_logistic",
            "budget": 10.0,
            "gamma": 1.0,
            **body,
        }
        r = env.client.post(
            f"/v1/markets/{mid}/orders", headers=env.buyer, json=payload
        )
        assert r.status_code == 422, r.text
        assert field in r.text


def test_learners_endpoint_lists_the_registry(env: Env) -> None:
    r = env.client.get("/v1/learners", headers=env.buyer)
    assert r.status_code == 200
    items = {item["name"]: item for item in r.json()["items"]}
    assert set(items) == set(LEARNERS)
    hetero = items["hetero_dp_logistic"]
    assert hetero["tasks"] == ["classification"]
    assert hetero["privacy_model"] == "central"
    assert hetero["params"]["fit_intercept"]["default"] is True
    anonymous = env.client.get("/v1/learners")  # the catalogue is public
    assert anonymous.status_code == 200
    assert anonymous.json() == r.json()


def test_tradeoff_and_order_use_the_identical_instance(
    env: Env, monkeypatch: pytest.MonkeyPatch, stand_in_payments: Any
) -> None:
    """Same market, same settings version, same γ: the rows, costs and caps the
    numerics receive are equal (the old trade-off job had no intercept column and no
    lifetime caps)."""
    seen: dict[str, dict[str, Any]] = {}
    real_allocate = numerics.allocate

    def spy_allocate(X: Any, y: Any, costs: Any, **kw: Any) -> Any:
        seen["order"] = {"X": X, "y": y, "costs": costs, "eps_max": kw["eps_max"]}
        return real_allocate(X, y, costs, **kw)

    def spy_tradeoff(X: Any, y: Any, costs: Any, **kw: Any) -> Any:
        seen["tradeoff"] = {"X": X, "y": y, "costs": costs, "eps_max": kw["eps_max"]}
        return [
            {"gamma": g, "validation_error": 0.0, "total_payment": 0.0}
            for g in kw["gammas"]
        ]

    monkeypatch.setattr(numerics, "allocate", spy_allocate)
    monkeypatch.setattr(numerics, "tradeoff", spy_tradeoff)
    mid = env.market(n_sellers=15)
    first = env.order(mid)  # spends budget: the caps of the next runs are below the cap
    env.drain()
    assert env.status(first)["status"] == "succeeded"
    job = env.client.post(
        f"/v1/markets/{mid}/tradeoff", headers=env.admin, json={"gammas": [1.0]}
    ).json()["job_id"]
    env.drain()
    assert (
        env.client.get(f"/v1/jobs/{job}", headers=env.admin).json()["status"]
        == "succeeded"
    )
    oid = env.order(mid)
    env.drain()
    assert env.status(oid)["status"] == "succeeded"
    a, b = seen["order"], seen["tradeoff"]
    for key in ("X", "y", "costs", "eps_max"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    market = env.client.get(f"/v1/markets/{mid}", headers=env.admin).json()
    cap = market["lifetime_epsilon_cap"]
    assert np.all(np.asarray(b["eps_max"]) < cap)  # the lifetime ledger was read


amounts = st.floats(
    min_value=0.0, max_value=50.0, allow_nan=False, allow_infinity=False
)


@settings(max_examples=200, deadline=None)
@given(st.lists(amounts, min_size=1, max_size=40), amounts)
def test_one_money_rule_settlement_equals_choose_gamma(
    payments: list[float], budget: float
) -> None:
    """The ledger's minor units (``numerics.payments_to_minor``) and the budget check of
    ``choose_gamma`` (``mechanisms.money.fits_budget`` with the market's unit) agree, and
    a vector that fits is never settled above the budget."""
    settled = numerics.payments_to_minor(payments)
    ours = sum(settled)
    theirs = int(money.to_minor_units(payments, numerics.MONEY_UNIT).sum())
    assert ours == theirs
    budget_minor = numerics.to_minor(budget)
    fits = money.fits_budget(payments, budget_minor / 100, numerics.MONEY_UNIT)
    assert fits == (ours <= budget_minor)
    if fits:
        assert ours <= budget_minor
    for t, n in zip(payments, settled, strict=True):
        assert n / 100 >= t  # never paid below the payment
        assert n <= round(t * 100) + 1  # rounded up by less than one cent


def test_decimal_amounts_are_not_lost_to_binary_rounding() -> None:
    # 0.29 is 0.28999… in binary: both the budget and a payment of 0.29 are 29 cents.
    # A payment owed rounds up (1.005 → 101); 0.1 + 0.2 is 0.30000000000000004, above
    # 0.30, so it is paid 31 (never below the payment); a budget rounds down.
    assert numerics.to_minor(0.29) == 29
    assert numerics.to_minor(1.005) == 100
    assert numerics.payments_to_minor([0.29, 1.005, 0.1 + 0.2]) == [29, 101, 31]


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_raw_coefficients_reproduce_the_scaled_model(
    task: str, rng: np.random.Generator
) -> None:
    from market.offers import records
    from market.pipeline.results import raw_coefficients

    d = 4
    low = rng.uniform(-5, 0, d)
    high = low + rng.uniform(0.5, 10, d)
    features = [
        {"name": f"f{j}", "low": float(lo), "high": float(hi)}
        for j, (lo, hi) in enumerate(zip(low, high, strict=True))
    ]
    target = {"low": -3.0, "high": 7.0} if task == "regression" else None
    X = rng.uniform(low, high, (20, d))
    y = rng.uniform(-3, 7, 20) if target else np.where(rng.random(20) < 0.5, -1, 1)
    rows = [{"x": x.tolist(), "y": float(v)} for x, v in zip(X, y, strict=True)]
    Xs, _ = records.scale_records(rows, features=features, task=task, target=target)
    w, b = rng.standard_normal(d), float(rng.standard_normal())
    scaled = Xs @ w + b
    w_raw, b_raw = raw_coefficients(w, b, features, target)
    raw = X @ np.asarray(w_raw) + b_raw
    want = scaled if target is None else -3.0 + 5.0 * (scaled + 1.0)
    np.testing.assert_allclose(raw, want, rtol=1e-10, atol=1e-10)


def test_tradeoff_totals_are_what_an_order_would_charge() -> None:
    """Each trade-off point's ``total_payment`` is the sum of the payments rounded up to
    the ledger unit (whole cents, at least one per seller given privacy, never below the
    Myerson total) — not the float total, which rounds to less than the charge."""
    from mechanisms import MechanismConfig, UniformPrior, tradeoff_curve

    rng = np.random.default_rng(3)
    m = 6
    X = rng.normal(size=(m, 2))
    X /= 1.2 * np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ np.ones(2) + 0.3 * rng.normal(size=m) >= 0, 1.0, -1.0)
    costs = rng.uniform(1e-4, 2e-3, m)  # payments of a few tenths of a cent
    prior, cfg = UniformPrior(1e-4, 2e-3), MechanismConfig(lam=1.0, k=3.0)
    gammas = [0.5, 2.0]
    kw = {"gammas": gammas, "X_val": X, "y_val": y}
    points = numerics.tradeoff(
        X, y, costs, prior=prior, config=cfg, grids={}, **kw
    )
    plain = tradeoff_curve(
        X, y, costs, prior, cfg, grid={"lam": [1.0], "mu": [cfg.mu], "sigma": [cfg.sigma]},
        select_on_total=True, n_draws=1, random_state=0, **kw,
    )  # fmt: skip
    for p, q in zip(points, plain, strict=True):
        cents = p["total_payment"] * 100
        assert cents == pytest.approx(round(cents), abs=1e-9)
        n_paid = int(np.count_nonzero(p["epsilon_total"] > 0))
        assert round(cents) >= n_paid >= 1
        assert p["total_payment"] >= q.total_payment
        assert p["total_payment"] > q.total_payment + 0.005  # rounding up shows here
