"""Issue 10 end to end: a classification market with a ``missable`` feature, sellers
offering records with ``null`` in it, and buyers ordering ``ldp_missing_logistic``
(``two_phase`` and ``dummy``) through the HTTP API; the mechanism prices ε_i and pays as
for every learner (the fast stand-in payments of ``pipeline_helpers``), the model comes
back labelled ``local`` with one ε stage per phase. The un-randomized reports (each
record's gradient before the randomizer) are neither stored nor returned."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select as sa_select
from sqlmodel import Session, SQLModel, select

import learners.ldp_missing._algorithms as ldp_algorithms
from market.datasets import WBC_FEATURE_BOUNDS
from market.store import Allocation, Offer
from tests.market.pipeline_helpers import (
    NAMES,
    offer_as_new_seller,
    stand_in_payments,
    wisconsin_raw,
)
from tests.market.test_orders_run import Env, env

__all__ = ["env", "stand_in_payments"]

K = 4  # features used (the first four Wisconsin ones); feature 1 is missable


def _market(env: Env, *, n_sellers: int) -> tuple[int, list[dict[str, str]]]:
    X, y = wisconsin_raw()
    rng = env.rng
    features = [
        {"name": n, "low": lo, "high": hi, "missable": j == 1}
        for j, (n, (lo, hi)) in enumerate(
            zip(NAMES[:K], WBC_FEATURE_BOUNDS[:K], strict=True)
        )
    ]
    val = rng.choice(len(y), size=60, replace=False)
    body = {
        "name": "wisconsin-missing",
        "task": "classification",
        "features": features,
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "mechanism": {"gamma": 1.0, "lam": 0.1, "mu": 1.0, "sigma": 1.0},
        "validation": [{"x": X[i, :K].tolist(), "y": int(y[i])} for i in val],
    }
    body["validation"][0]["x"][1] = None  # public validation rows may miss it too
    r = env.client.post("/v1/markets", headers=env.admin, json=body)
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    sellers = []
    for j, i in enumerate(rng.choice(len(y), size=n_sellers, replace=False)):
        x: list[float | None] = X[i, :K].tolist()
        if j == 0 or rng.random() < (0.5 if y[i] == 1 else 0.1):  # depends on y
            x[1] = None
        seller = offer_as_new_seller(
            env.client,
            mid,
            name=f"m{j}",
            records=[{"x": x, "y": int(y[i])}],
            cost=0.5,
        )
        sellers.append(seller.headers)
    return mid, sellers


def test_null_is_accepted_only_in_missable_features(env: Env) -> None:
    mid, _ = _market(env, n_sellers=3)
    r = env.client.post("/v1/sellers", json={"name": "bad"})
    headers = {"Authorization": f"Bearer {r.json()['api_key']}"}
    with Session(env.engine) as s:
        before = len(s.exec(select(Offer)).all())
    for x, field in (([None, 10.0, 80.0, 500.0], "records[0].x[0]"),
                     ([15.0, 20.0, None, 500.0], "records[0].x[2]")):  # fmt: skip
        r = env.client.post(
            f"/v1/markets/{mid}/offers",
            headers=headers,
            json={"records": [{"x": x, "y": 1}], "reported_cost": 0.5},
        )
        assert r.status_code == 422, r.text
        assert r.json()["field"] == field
        assert "missable" in r.json()["detail"]
    with Session(env.engine) as s:
        offers = s.exec(select(Offer)).all()
        assert len(offers) == before  # nothing stored
        stored = [o for o in offers if o.records[0]["x"][1] is None]
    assert stored
    for o in stored:  # missing stays missing through scaling: null, not a number
        assert o.records_scaled[0]["x"][1] is None
        assert all(
            v is not None for j, v in enumerate(o.records_scaled[0]["x"]) if j != 1
        )


@pytest.mark.parametrize("algorithm", ["two_phase", "dummy"])
def test_order_ldp_missing_logistic_end_to_end(
    env: Env, stand_in_payments: Any, algorithm: str
) -> None:
    mid, _ = _market(env, n_sellers=40)
    listed = {
        i["name"]: i
        for i in env.client.get("/v1/learners", headers=env.buyer).json()["items"]
    }
    assert listed["ldp_missing_logistic"]["privacy_model"] == "local"
    oid = env.order(
        mid, learner="ldp_missing_logistic", params={"algorithm": algorithm}
    )
    env.drain()
    st = env.status(oid)
    assert st["status"] == "succeeded", st
    model = env.client.get(f"/v1/orders/{oid}/model", headers=env.buyer).json()
    assert model["learner"] == "ldp_missing_logistic"
    assert model["params"]["algorithm"] == algorithm
    assert model["algorithm"] == algorithm
    assert len(model["coefficients"]) == K
    assert np.isfinite(model["intercept"])
    assert model["privacy"]["guarantee"] == "local"
    stages = [s["stage"] for s in model["privacy"]["stages"]]
    assert len(stages) == (2 if algorithm == "two_phase" else 1)
    allocs = env.client.get(f"/v1/orders/{oid}/allocations", headers=env.admin).json()
    eps = np.array([a["epsilon"] for a in allocs["items"]])
    assert eps.size > 0
    # overhead "none": each phase spends ε_i/2 (TP) and the ledger holds exactly ε_i
    assert model["privacy"]["epsilon"]["max"] == pytest.approx(eps.max(), rel=1e-12)
    if algorithm == "two_phase":
        assert model["privacy"]["stages"][0]["max"] == pytest.approx(eps.max() / 2)


def test_bad_algorithm_is_422_naming_the_field(env: Env) -> None:
    mid, _ = _market(env, n_sellers=3)
    r = env.client.post(
        f"/v1/markets/{mid}/orders",
        headers=env.buyer,
        json={"learner": "ldp_missing_logistic", "budget": 10.0, "gamma": 1.0,
              "params": {"algorithm": "ipw"}},
    )  # fmt: skip
    assert r.status_code == 422, r.text
    assert "params.algorithm" in r.text


def _every_stored_value(env: Env) -> str:
    """Every row of every table, as text."""
    parts = []
    with Session(env.engine) as s:
        for table in SQLModel.metadata.sorted_tables:
            for row in s.execute(sa_select(table)).all():
                parts.append(repr(tuple(row)))
    return "\n".join(parts)


def test_unrandomized_reports_are_never_stored_or_returned(
    env: Env, stand_in_payments: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Capture each record's randomizer input (and its report) inside the fit, then
    look for those numbers in the database and in every response about the order."""
    captured: list[np.ndarray] = []
    real = ldp_algorithms.private_sgd

    def spy(*args: Any, **kwargs: Any) -> Any:
        res = real(*args, **{**kwargs, "record": True})
        captured.extend([res.inputs, res.reports])
        return res

    monkeypatch.setattr(ldp_algorithms, "private_sgd", spy)
    mid, _ = _market(env, n_sellers=30)
    oid = env.order(mid, learner="ldp_missing_logistic", params={})
    env.drain()
    assert env.status(oid)["status"] == "succeeded"
    assert len(captured) == 4  # two phases: inputs and reports of each
    responses = [
        env.client.get(path, headers=env.buyer).text
        for path in (f"/v1/orders/{oid}", f"/v1/orders/{oid}/model")
    ] + [env.client.get(f"/v1/orders/{oid}/allocations", headers=env.admin).text]
    haystack = _every_stored_value(env) + "\n".join(responses)
    with Session(env.engine) as s:  # positive control: stored ε values are found
        eps = [a.epsilon for a in s.exec(select(Allocation)).all()]
    assert all(repr(float(e)) in haystack for e in eps)
    # short decimals such as 0.5 (σ(0) − m at the first step) are everywhere (costs,
    # bounds); a leak would show as the long reprs of the gradients
    values = {
        float(v) for arr in captured for v in np.ravel(arr) if len(repr(float(v))) >= 10
    }
    assert len(values) > 30
    leaked = [v for v in values if repr(v) in haystack or json.dumps(v) in haystack]
    assert leaked == []


def test_learners_without_missing_values_are_refused_on_a_missable_market(
    env: Env,
) -> None:
    from market import numerics

    mid, _ = _market(env, n_sellers=3)
    r = env.client.post(
        f"/v1/markets/{mid}/orders",
        headers=env.buyer,
        json={"learner": "hetero_dp_logistic", "budget": 10.0, "gamma": 1.0},
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "learner"
    assert "missing values" in r.json()["detail"]
    assert numerics.default_learner("classification", [{"missable": True}]) == (
        "ldp_missing_logistic"
    )


def test_tradeoff_job_on_a_missable_market_prices_finite_rows(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trade-off job's default learner takes missing values, and the rows it
    prices are finite: missing entries at the public centre 0 (``design_matrix``).
    The validation rows are the ones the ordered learner's ``predict`` takes (it
    scores the learner's own release), missing entries included."""
    from market import numerics

    seen: dict[str, Any] = {}

    def spy_tradeoff(X: Any, y: Any, costs: Any, **kw: Any) -> Any:
        seen.update(X=X, X_val=kw["X_val"], release=kw["release"])
        return [
            {"gamma": g, "validation_error": 0.0, "total_payment": 0.0}
            for g in kw["gammas"]
        ]

    monkeypatch.setattr(numerics, "tradeoff", spy_tradeoff)
    mid, _ = _market(env, n_sellers=10)
    r = env.client.post(
        f"/v1/markets/{mid}/tradeoff", headers=env.admin, json={"gammas": [1.0]}
    )
    assert r.status_code in (200, 201, 202), r.text
    env.drain()
    job = env.client.get(f"/v1/jobs/{r.json()['job_id']}", headers=env.admin).json()
    assert job["status"] == "succeeded", job
    rows = np.asarray(seen["X"])
    assert np.isfinite(rows).all()
    assert np.linalg.norm(rows, axis=1).max() <= 1.0 + 1e-12
    assert seen["release"].name == "ldp_missing_logistic"
    val = np.nan_to_num(np.asarray(seen["X_val"]), nan=0.0)
    assert np.linalg.norm(val, axis=1).max() <= 1.0 + 1e-12
    assert (np.asarray(seen["X"])[:, 1] == 0.0).any()  # seller 0's missing entry
