"""The `/v1` additions the console reads: order lists, a seller's own offers, reported
costs in the admin's allocations, and per-γ sellers and ε on the trade-off points."""

import pytest
from sqlmodel import Session

from market import ledgers, numerics
from market.store import Job
from tests.api.conftest import World, offer_body, seed_offers
from tests.api.test_markets_api import _run_job
from tests.api.test_orders_api import ORDER, _finish, _ids, _place


def test_order_list_shows_a_buyer_only_its_own_orders_and_an_admin_all(
    world: World,
) -> None:
    c = world.api.client
    seed_offers(world)
    mine = _place(world).json()["id"]
    theirs = c.post(
        f"/v1/markets/{world.market_id}/orders", headers=world.buyer_b, json=ORDER
    ).json()["id"]
    as_a = c.get("/v1/orders", headers=world.buyer_a).json()
    assert [o["id"] for o in as_a["items"]] == [mine]
    assert as_a["total"] == 1
    as_admin = c.get(
        "/v1/orders", headers=world.admin, params={"market_id": world.market_id}
    ).json()
    assert [o["id"] for o in as_admin["items"]] == [theirs, mine]  # newest first
    none = c.get("/v1/orders", headers=world.admin, params={"market_id": 999}).json()
    assert none["items"] == []
    assert c.get("/v1/orders", headers=world.seller_a).status_code == 403
    assert c.get("/v1/orders").status_code == 401


def test_a_seller_lists_only_its_own_offers_without_records(world: World) -> None:
    c = world.api.client
    _, offer_a, _, offer_b = _ids(world)
    items = c.get("/v1/sellers/me/offers", headers=world.seller_a).json()["items"]
    assert [o["id"] for o in items] == [offer_a]
    assert offer_b not in {o["id"] for o in items}
    assert items[0]["reported_cost"] == 0.3
    assert items[0]["status"] == "active"
    assert "records" not in items[0]
    assert c.get("/v1/sellers/me/offers", headers=world.buyer_a).status_code == 403


def test_allocations_carry_each_sellers_reported_cost(world: World) -> None:
    c = world.api.client
    sa, oa, sb, ob = _ids(world)
    oid = _place(world).json()["id"]
    spends = [
        ledgers.SellerSpend(sa, oa, 0.75, 125),
        ledgers.SellerSpend(sb, ob, 0.5, 175),
    ]
    _finish(world, oid, spends)
    alloc = c.get(f"/v1/orders/{oid}/allocations", headers=world.admin).json()
    assert [(i["seller_id"], i["reported_cost"]) for i in alloc["items"]] == [
        (sa, 0.3),
        (sb, 0.3),
    ]


def _queue_tradeoff(world: World) -> int:
    """Two sellers' offers (λ = 1 so both fit the lifetime cap of 3), then a queued
    trade-off job over γ ∈ {0.1, 10}; return its id."""
    c = world.api.client
    lam = {"mechanism": {"lam": 1.0}}
    c.patch(f"/v1/markets/{world.market_id}", headers=world.admin, json=lam)
    for headers, x, y in (
        (world.seller_a, [1.0, 0.0], 1),
        (world.seller_b, [9.0, 0.5], -1),
    ):
        r = c.post(
            f"/v1/markets/{world.market_id}/offers",
            headers=headers,
            json=offer_body(x=x, y=y),
        )
        assert r.status_code == 201, r.text
    return int(
        c.post(
            f"/v1/markets/{world.market_id}/tradeoff",
            headers=world.admin,
            json={"gammas": [0.1, 10.0]},
        ).json()["job_id"]
    )


def test_tradeoff_points_report_sellers_used_and_epsilon_range(world: World) -> None:
    c = world.api.client
    job_id = _queue_tradeoff(world)
    assert _run_job(c.app.state.engine, job_id) == "succeeded"  # type: ignore[attr-defined]
    points = c.get(f"/v1/jobs/{job_id}", headers=world.admin).json()["points"]
    assert [p["gamma"] for p in points] == [0.1, 10.0]
    for p in points:
        assert 0 <= p["sellers_used"] <= 2
        eps = p["epsilon"]
        assert set(eps) == {"min", "median", "max"}
        assert 0 <= eps["min"] <= eps["median"] <= eps["max"]
        assert (p["sellers_used"] == 0) == (eps["max"] == 0)


def test_a_tradeoff_job_persists_its_progress_while_it_runs(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = world.api.client
    engine = c.app.state.engine  # type: ignore[attr-defined]
    job_id = _queue_tradeoff(world)
    seen: list[tuple[str, float]] = []

    def fake_tradeoff(X, y, costs, **kw):  # type: ignore[no-untyped-def]
        kw["progress"](1, 2)  # what the console's progress bar reads meanwhile
        with Session(engine) as session:
            job = session.get(Job, job_id)
            assert job is not None
            seen.append((job.progress_stage, job.progress_fraction))
        return [
            {"gamma": g, "validation_error": 0.5, "total_payment": 1.0}
            for g in kw["gammas"]
        ]

    monkeypatch.setattr(numerics, "tradeoff", fake_tradeoff)
    assert _run_job(engine, job_id) == "succeeded", c.get(
        f"/v1/jobs/{job_id}", headers=world.admin
    ).json()["error"]
    assert seen == [("computing", 0.5)]
