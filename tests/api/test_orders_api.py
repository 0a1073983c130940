"""Orders over HTTP: placement, Idempotency-Key, status/model/allocations visibility,
and the seller views after a settlement (seller → buyer → payments → earnings)."""

from typing import Any

import pytest
from sqlmodel import Session, col, update

from market import ledgers
from market.errors import ConflictError, PrivacyBudgetExhaustedError
from market.store import Market, Order, RunStatus, db
from tests.api.conftest import World, count_rows, market_body, offer_body, seed_offers

ORDER = {"learner": "hetero_dp_logistic", "budget": 12.5}


def _place(world: World, body: dict[str, Any] | None = None, **headers: str) -> Any:
    return world.api.client.post(
        f"/v1/markets/{world.market_id}/orders",
        headers={**world.buyer_a, **headers},
        json=body or ORDER,
    )


def test_place_order_is_202_queued_and_stores_budget_in_minor_units(
    world: World,
) -> None:
    seed_offers(world)
    r = _place(world, {**ORDER, "budget": 0.29, "gamma": 0.5})
    assert r.status_code == 202
    assert r.json()["status"] == "queued"
    order_id = r.json()["id"]
    with Session(world.api.client.app.state.engine) as session:  # type: ignore[attr-defined]
        order = session.get(Order, order_id)
        assert order is not None
        assert order.budget_minor == 29  # 0.29 is 29 cents, not 28
        assert order.gamma == 0.5
    view = world.api.client.get(f"/v1/orders/{order_id}", headers=world.buyer_a).json()
    assert view["status"] == "queued"
    assert view["progress"] == {"stage": "queued", "fraction": 0.0}
    assert view["error"] is None
    assert view["budget"] == 0.29


def test_idempotency_key_returns_the_same_order(world: World) -> None:
    seed_offers(world)
    first = _place(world, **{"Idempotency-Key": "abc"})
    again = _place(world, **{"Idempotency-Key": "abc"})
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    assert again.headers.get("idempotent-replayed") == "true"
    assert count_rows(world.api, Order) == 1
    different = _place(world, {**ORDER, "budget": 99.0}, **{"Idempotency-Key": "abc"})
    assert different.status_code == 409
    assert count_rows(world.api, Order) == 1
    # Keys are per buyer; no key means a new order each time.
    other = world.api.client.post(
        f"/v1/markets/{world.market_id}/orders",
        headers={**world.buyer_b, "Idempotency-Key": "abc"},
        json=ORDER,
    )
    assert other.json()["id"] != first.json()["id"]
    assert _place(world).json()["id"] != _place(world).json()["id"]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({**ORDER, "budget": 0}, "budget"),
        ({**ORDER, "budget": -3}, "budget"),
        ({**ORDER, "budget": 0.001}, "budget"),
        ({**ORDER, "gamma": -1}, "gamma"),
        ({**ORDER, "learner": "magic"}, "learner"),
        ({**ORDER, "params": {"random_state": 0}}, "params.random_state"),
        ({**ORDER, "params": {"fit_intercept": "yes"}}, "params.fit_intercept"),
        ({**ORDER, "status": "succeeded"}, "status"),
        ({**ORDER, "budget_minor": 1}, "budget_minor"),
        ({**ORDER, "parameters_id": 1}, "parameters_id"),
        ({"budget": 1.0}, "learner"),
    ],
)
def test_bad_orders_are_422_and_nothing_stored(
    world: World, body: dict[str, Any], where: str
) -> None:
    r = _place(world, body)
    assert r.status_code == 422, r.text
    detail = r.json()
    names = (
        [str(p) for e in detail["detail"] for p in e["loc"]]
        if isinstance(detail["detail"], list)
        else [detail["field"]]
    )
    assert any(where.split(".")[-1] in n for n in names), detail
    assert count_rows(world.api, Order) == 0


def test_learner_must_fit_the_market_task(world: World) -> None:
    body = market_body(name="reg", task="regression", target={"low": -1, "high": 1})
    mid = world.api.client.post("/v1/markets", headers=world.admin, json=body).json()[
        "id"
    ]
    r = world.api.client.post(
        f"/v1/markets/{mid}/orders", headers=world.buyer_a, json=ORDER
    )
    assert r.status_code == 422
    assert r.json()["field"] == "learner"


def test_order_roles_and_visibility(world: World) -> None:
    c = world.api.client
    for headers in (world.seller_a, world.admin):
        r = c.post(f"/v1/markets/{world.market_id}/orders", headers=headers, json=ORDER)
        assert r.status_code == 403
    assert (
        c.post(f"/v1/markets/{world.market_id}/orders", json=ORDER).status_code == 401
    )
    assert (
        c.post("/v1/markets/42/orders", headers=world.buyer_a, json=ORDER).status_code
        == 404
    )
    seed_offers(world)
    oid = _place(world).json()["id"]
    assert c.get(f"/v1/orders/{oid}", headers=world.buyer_a).status_code == 200
    assert c.get(f"/v1/orders/{oid}", headers=world.admin).status_code == 200
    assert c.get(f"/v1/orders/{oid}", headers=world.buyer_b).status_code == 404
    assert c.get(f"/v1/orders/{oid}", headers=world.seller_a).status_code == 403
    assert c.get("/v1/orders/999", headers=world.admin).status_code == 404
    assert (
        c.get(f"/v1/orders/{oid}/allocations", headers=world.buyer_a).status_code == 403
    )
    assert (
        c.get(f"/v1/orders/{oid}/allocations", headers=world.admin).status_code == 200
    )
    assert c.get("/v1/orders/999/allocations", headers=world.admin).status_code == 404
    assert c.get(f"/v1/orders/{oid}/model", headers=world.buyer_a).status_code == 409
    assert c.get(f"/v1/orders/{oid}/model", headers=world.buyer_b).status_code == 404
    assert c.get(f"/v1/orders/{oid}/model", headers=world.admin).status_code == 403


MODEL = {
    "learner": "hetero_dp_logistic",
    "coefficients": [0.5, -0.25],
    "intercept": 0.1,
    "feature_names": ["radius", "texture"],
    "metrics": {"validation_error": 0.1},
    "privacy": {
        "guarantee": "conditional_on_allocation",
        "epsilon": {"min": 0.5, "median": 1.0, "max": 1.5},
        "sellers_used": 2,
    },
    "payments": {"total": 3.0, "budget": 12.5},
}


def _finish(world: World, order_id: int, spends: list[ledgers.SellerSpend]) -> None:
    """Settle an order as the pipeline would: one write transaction."""
    engine = world.api.client.app.state.engine  # type: ignore[attr-defined]
    with db.write_session(engine) as session:
        order = session.get(Order, order_id)
        market = session.get(Market, world.market_id)
        assert order is not None
        assert market is not None
        ledgers.settle_order(session, order=order, market=market, spends=spends)
        order.status, order.model = RunStatus.SUCCEEDED, MODEL
        order.summary = {"sellers_used": len(spends)}
        session.add(order)


def _ids(world: World) -> tuple[int, int, int, int]:
    c = world.api.client
    a = c.post(
        f"/v1/markets/{world.market_id}/offers",
        headers=world.seller_a,
        json=offer_body(),
    ).json()
    b = c.post(
        f"/v1/markets/{world.market_id}/offers",
        headers=world.seller_b,
        json=offer_body(y=-1),
    ).json()
    return a["seller_id"], a["id"], b["seller_id"], b["id"]


def test_full_flow_seller_buyer_payments_earnings(world: World) -> None:
    c = world.api.client
    sa, oa, sb, ob = _ids(world)
    oid = _place(world).json()["id"]
    _finish(
        world,
        oid,
        [ledgers.SellerSpend(sa, oa, 0.75, 125), ledgers.SellerSpend(sb, ob, 0.5, 175)],
    )
    assert (
        c.get(f"/v1/orders/{oid}", headers=world.buyer_a).json()["status"]
        == "succeeded"
    )
    model = c.get(f"/v1/orders/{oid}/model", headers=world.buyer_a)
    assert model.status_code == 200
    assert model.json() == MODEL
    alloc = c.get(f"/v1/orders/{oid}/allocations", headers=world.admin).json()
    assert alloc["total_payment"] == 3.0
    assert [(i["seller_id"], i["epsilon"], i["payment"]) for i in alloc["items"]] == [
        (sa, 0.75, 1.25),
        (sb, 0.5, 1.75),
    ]
    earn_a = c.get("/v1/sellers/me/earnings", headers=world.seller_a).json()
    assert earn_a == {
        "items": [
            {
                "order_id": oid,
                "market_id": world.market_id,
                "epsilon": 0.75,
                "payment": 1.25,
            }
        ],
        "total_payment": 1.25,
    }
    priv_b = c.get("/v1/sellers/me/privacy", headers=world.seller_b).json()
    assert priv_b == {
        "items": [
            {
                "market_id": world.market_id,
                "epsilon_spent": 0.5,
                "lifetime_epsilon_cap": 3.0,
                "remaining": 2.5,
            }
        ]
    }


def test_seller_views_are_seller_only_and_empty_at_first(world: World) -> None:
    c = world.api.client
    for path in ("/v1/sellers/me/earnings", "/v1/sellers/me/privacy"):
        assert c.get(path).status_code == 401
        assert c.get(path, headers=world.buyer_a).status_code == 403
        assert c.get(path, headers=world.admin).status_code == 403
    assert c.get("/v1/sellers/me/earnings", headers=world.seller_a).json() == {
        "items": [],
        "total_payment": 0.0,
    }
    assert c.get("/v1/sellers/me/privacy", headers=world.seller_a).json() == {
        "items": []
    }


def test_settlement_over_budget_or_cap_writes_nothing(world: World) -> None:
    c = world.api.client
    sa, oa, sb, ob = _ids(world)
    oid = _place(world, {**ORDER, "budget": 1.0}).json()["id"]
    with pytest.raises(ConflictError, match="exceed the budget"):
        _finish(
            world,
            oid,
            [
                ledgers.SellerSpend(sa, oa, 0.1, 60),
                ledgers.SellerSpend(sb, ob, 0.1, 41),
            ],
        )
    with pytest.raises(PrivacyBudgetExhaustedError, match="privacy budget"):
        _finish(world, oid, [ledgers.SellerSpend(sa, oa, 3.5, 10)])
    assert (
        c.get(f"/v1/orders/{oid}", headers=world.buyer_a).json()["status"] == "queued"
    )
    assert (
        c.get(f"/v1/orders/{oid}/allocations", headers=world.admin).json()["items"]
        == []
    )
    assert (
        c.get("/v1/sellers/me/earnings", headers=world.seller_a).json()["items"] == []
    )


def test_placement_answers_queued_even_if_a_worker_claims_the_order_at_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 202 answers for the placement: a worker claiming the order between its
    commit and the response (the in-process worker can) does not change it."""
    from market import orders

    seed_offers(world)
    place = orders.place_order

    def place_then_claim(session: Session, **kwargs: Any) -> Any:
        order, created = place(session, **kwargs)
        # the row as a worker's claim leaves it, before the response is built
        session.execute(
            update(Order).where(col(Order.id) == order.id).values(status="running")
        )
        session.commit()
        session.refresh(order)
        assert order.status == RunStatus.RUNNING
        return order, created

    monkeypatch.setattr(orders, "place_order", place_then_claim)
    r = _place(world, **{"Idempotency-Key": "race"})
    assert r.status_code == 202
    assert r.json()["status"] == "queued"
    replay = _place(world, **{"Idempotency-Key": "race"})
    assert replay.json()["status"] == "running"  # a replay reports the order as it is
