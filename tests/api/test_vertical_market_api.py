"""Vertical markets over HTTP (issue 13): three parties as sellers of column blocks keyed
by a public record key, a buyer orders ``secure_vertical_logistic``, the in-process
worker runs the real mechanism (allocation + Myerson payments) and the DP release; and
bad input is a 422 naming the field with nothing stored."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from market.store import Market, Offer, Order
from tests.api.conftest import Api, World, count_rows

FEATURES = [{"name": f"x{j}", "low": -4.0, "high": 4.0} for j in range(1, 7)]
PARTIES = [
    {"name": "clinic", "features": ["x1", "x2"]},
    {"name": "insurer", "features": ["x3", "x4"]},
    {"name": "registry", "features": ["x5", "x6"]},
]


def vertical_market(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "name": "vertical",
        "task": "classification",
        "features": FEATURES,
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "lifetime_epsilon_cap": 10.0,
        "partition": "vertical",
        "record_key": "person_id",
        "parties": PARTIES,
    }
    body.update(overrides)
    return body


def _data(rng: np.random.Generator, n: int = 240) -> tuple[np.ndarray, np.ndarray]:
    X = np.clip(rng.standard_normal((n, 6)), -4, 4)
    eta = -0.5 + X @ np.array([1.0, -1.0, 0.5, 0.5, -0.5, 0.25])
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), 1.0, -1.0)
    return X, y


def _offer(
    X: np.ndarray, y: np.ndarray, k: int, rows: np.ndarray, cost: float
) -> dict[str, Any]:
    cols = slice(2 * k, 2 * k + 2)
    recs = []
    for i in rows:
        rec: dict[str, Any] = {"key": f"p{i:04d}", "x": X[i, cols].tolist()}
        if k == 0:
            rec["y"] = float(y[i])
        recs.append(rec)
    return {"party": PARTIES[k]["name"], "records": recs, "reported_cost": cost}


def _poll(api: Api, oid: int, headers: dict[str, str], timeout: float) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = api.client.get(f"/v1/orders/{oid}", headers=headers).json()
        if st["status"] in ("succeeded", "failed"):
            return st
        time.sleep(0.1)
    raise AssertionError(f"order {oid} did not finish")


def _order_end_to_end(
    make_api: Callable[..., Api], rng: np.random.Generator, backend: str,
    *, lease: int, timeout: float,
) -> dict[str, Any]:  # fmt: skip
    """Three parties offer their blocks, a buyer orders with ``backend``; checks the
    release and the payments and returns the model document."""
    api = make_api(workers=1, job_lease_seconds=lease)
    admin = api.admin()
    r = api.client.post("/v1/markets", headers=admin, json=vertical_market())
    assert r.status_code == 201, r.text
    mid = r.json()["id"]
    assert r.json()["partition"] == "vertical"
    X, y = _data(rng)
    n = X.shape[0]
    holds = [np.arange(n), np.r_[0:60, 100:n], np.r_[30:n]]  # partial overlap
    sellers = []
    for k, cost in enumerate([0.1, 0.2, 0.3]):
        h = api.register("seller", PARTIES[k]["name"])
        r = api.client.post(
            f"/v1/markets/{mid}/offers", headers=h, json=_offer(X, y, k, holds[k], cost)
        )
        assert r.status_code == 201, r.text
        assert r.json()["party"] == PARTIES[k]["name"]
        sellers.append((h, r.json()["id"]))
    buyer = api.register("buyer", "b")
    body = {"learner": "secure_vertical_logistic", "budget": 50.0, "gamma": 0.05,
            "params": {"backend": backend, "imputation": "em"}}  # fmt: skip
    r = api.client.post(f"/v1/markets/{mid}/orders", headers=buyer, json=body)
    assert r.status_code == 202, r.text
    oid = r.json()["id"]
    st = _poll(api, oid, buyer, timeout=timeout)
    assert st["status"] == "succeeded", st
    model: dict[str, Any] = api.client.get(f"/v1/orders/{oid}/model", headers=buyer).json()
    # plain computes in the clear: a central label (strict mode, the default: the
    # allocation saw costs and the public key lists only); mpc: computed in MPC
    expected = "mpc_plus_dp" if backend == "mpc" else "end_to_end"
    assert model["privacy"]["guarantee"] == expected
    assert model["feature_names"] == [f"x{j}" for j in range(1, 7)]
    assert len(model["coefficients"]) == 6
    labels = {o["label"] for o in model["opened"]}
    assert {"beta", "theta.means"} <= labels
    assert not any(n in o["shape"] for o in model["opened"])  # nothing per record
    stages = [s["stage"] for s in model["privacy"]["stages"]]
    assert any(s.startswith("epsilon_theta") for s in stages)
    assert any(s.startswith("epsilon_beta") for s in stages)
    allocs = api.client.get(f"/v1/orders/{oid}/allocations", headers=admin).json()
    assert len(allocs["items"]) == 3  # each party is one seller, paid once
    assert allocs["total_payment"] <= 50.0
    for (h, offer_id), a in zip(
        sellers, sorted(allocs["items"], key=lambda a: a["offer_id"]), strict=True
    ):
        assert a["offer_id"] == offer_id
        assert a["epsilon"] > 0
        priv = api.client.get("/v1/sellers/me/privacy", headers=h).json()
        assert priv["items"][0]["epsilon_spent"] == pytest.approx(a["epsilon"])
    return model


def test_vertical_order_end_to_end_three_parties(
    make_api: Callable[..., Api], rng: np.random.Generator
) -> None:
    model = _order_end_to_end(make_api, rng, "plain", lease=30, timeout=600)
    assert model["backend"] == "plain"


@pytest.mark.slow
def test_vertical_order_end_to_end_mpc_three_processes(
    make_api: Callable[..., Api], rng: np.random.Generator
) -> None:
    """The same order with ``backend: "mpc"``: three MPyC processes on 127.0.0.1 run
    the DP Newton fit (R2, fixed iterations, noise drawn jointly); bounded by the
    order poll (900 s) and the runner's own timeout."""
    pytest.importorskip("mpyc")
    model = _order_end_to_end(make_api, rng, "mpc", lease=900, timeout=900)
    assert (model["backend"], model["reveal_level"]) == ("mpc", "R2")
    labels = {o["label"] for o in model["opened"]}
    # R2 with fixed iterations: β̂ and the scalar ‖∇F(β̂)‖, never I, g or a per-iteration β
    assert {"beta", "grad_norm"} <= labels
    assert not labels & {"I", "g", "beta_t", "converged"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (
            {"parties": [PARTIES[0], PARTIES[1], {"name": "registry", "features": []}]},
            "parties[2].features",
        ),
        ({"parties": [PARTIES[0], PARTIES[1]]}, "features[4]"),
        (
            {
                "parties": [
                    PARTIES[0],
                    {"name": "b", "features": ["x2", "x3", "x4", "x5", "x6"]},
                ]
            },
            "parties[1].features[0]",
        ),
        ({"record_key": None}, "record_key"),
        ({"task": "regression", "target": {"low": 0, "high": 1}}, "task"),
        ({"partition": "horizontal"}, "record_key"),
        ({"mechanism": {"k": 4.0}}, "mechanism.k"),
    ],
)
def test_bad_vertical_markets_are_422(
    world: World, overrides: dict[str, Any], field: str
) -> None:
    before = count_rows(world.api, Market)
    r = world.api.client.post(
        "/v1/markets", headers=world.admin, json=vertical_market(**overrides)
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert count_rows(world.api, Market) == before


def test_bad_vertical_offers_and_orders_are_422(
    world: World, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = world.api.client
    mid = c.post("/v1/markets", headers=world.admin, json=vertical_market()).json()[
        "id"
    ]
    X, y = _data(rng, n=10)
    good = _offer(X, y, 0, np.arange(10), 0.3)
    dup = {**good, "records": [good["records"][0], good["records"][0]]}
    no_label = {
        **good,
        "records": [{k: v for k, v in good["records"][0].items() if k != "y"}],
    }
    other = _offer(X, y, 1, np.arange(3), 0.3)
    labelled_other = {**other, "records": [{**other["records"][0], "y": 1.0}]}
    cases = [
        (dup, "records[1].key"),
        (no_label, "records[0].y"),
        (labelled_other, "records[0].y"),
        ({**good, "party": "bank"}, "party"),
        ({k: v for k, v in good.items() if k != "party"}, "party"),
        ({**good, "records": [{"x": [0.0, 0.0], "y": 1.0}]}, "records[0].key"),
        ({**good, "records": [{"key": "p", "x": [0.0], "y": 1.0}]}, "records[0].x"),
    ]
    for body, field in cases:
        r = c.post(f"/v1/markets/{mid}/offers", headers=world.seller_a, json=body)
        assert r.status_code == 422, (field, r.text)
        assert r.json()["field"] == field
    assert count_rows(world.api, Offer) == 0
    # keys on a horizontal market
    r = c.post(f"/v1/markets/{world.market_id}/offers", headers=world.seller_a,
               json={"records": [{"key": "a", "x": [5.0, 0.5], "y": 1}], "reported_cost": 0.3})  # fmt: skip
    assert r.status_code == 422
    assert r.json()["field"] == "records[0].key"
    # one active offer per party
    assert (
        c.post(
            f"/v1/markets/{mid}/offers", headers=world.seller_a, json=good
        ).status_code
        == 201
    )
    assert (
        c.post(
            f"/v1/markets/{mid}/offers", headers=world.seller_b, json=good
        ).status_code
        == 409
    )
    # orders: learner/partition mismatch and the missing extra
    order = {"learner": "secure_vertical_logistic", "budget": 5.0, "gamma": 1.0}
    r = c.post(
        f"/v1/markets/{world.market_id}/orders", headers=world.buyer_a, json=order
    )
    assert (r.status_code, r.json()["field"]) == (422, "learner")
    r = c.post(
        f"/v1/markets/{mid}/orders",
        headers=world.buyer_a,
        json={**order, "learner": "hetero_dp_logistic"},
    )
    assert (r.status_code, r.json()["field"]) == (422, "learner")
    from learners.secure_vertical import _mpyc_backend

    monkeypatch.setattr(_mpyc_backend, "mpc_available", lambda: False)
    r = c.post(
        f"/v1/markets/{mid}/orders",
        headers=world.buyer_a,
        json={**order, "params": {"backend": "mpc"}},
    )
    assert (r.status_code, r.json()["field"]) == (422, "params.backend")
    assert "extra 'mpc'" in r.json()["detail"]
    assert count_rows(world.api, Order) == 0
