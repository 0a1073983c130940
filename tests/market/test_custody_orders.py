"""Seller-custody orders in process: priced from costs and public data, then
collected round by round from sellers that keep their records (their client answers
with the library's randomizer); delivery decides who is paid and charged."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sqlmodel import Session, func, select

from api.main import create_app
from market.store import (
    CustodyRun,
    LedgerEntry,
    LedgerKind,
    Order,
    ReportRequest,
    Role,
    session_scope,
)
from tests.api.conftest import fast_settings
from tests.market.custody_helpers import (
    Holder,
    add_holder,
    custody_market_body,
    run_worker,
)

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r".*starlette\.testclient.*httpx2")
    from fastapi.testclient import TestClient


class World:
    def __init__(self, client: Any) -> None:
        from market.access import accounts

        self.client = client
        self.engine = client.app.state.engine
        with session_scope(self.engine, write=True) as s:
            _, key = accounts.create_account(
                s, role=Role.ADMIN, name="root", settings=client.app.state.settings
            )
        self.admin = {"Authorization": f"Bearer {key}"}
        r = client.post("/v1/buyers", json={"name": "buyer"})
        self.buyer = {"Authorization": f"Bearer {r.json()['api_key']}"}

    def market(self, **overrides: Any) -> int:
        r = self.client.post(
            "/v1/markets", headers=self.admin, json=custody_market_body(**overrides)
        )
        assert r.status_code == 201, r.text
        return int(r.json()["id"])

    def order(self, market_id: int, **body: Any) -> int:
        payload = {"learner": "onebit_quantile", "budget": 1000.0, "gamma": 0.001}
        payload.update(body)
        r = self.client.post(
            f"/v1/markets/{market_id}/orders", headers=self.buyer, json=payload
        )
        assert r.status_code == 202, r.text
        return int(r.json()["id"])

    def seller_client(self, holder: Holder, **kw: Any) -> Any:
        from api.client import SellerClient

        return SellerClient(
            "http://testserver",
            holder.key,
            transport=self.client._transport,
            **kw,
        )


@pytest.fixture
def world(database_url: str) -> Iterator[World]:
    settings = fast_settings(database_url)
    with TestClient(create_app(settings)) as client:
        yield World(client)


def _quantile_holders(
    world: World, mid: int, n: int, rng: np.random.Generator
) -> list[Holder]:
    X = rng.uniform([0.0, -5.0], [10.0, 5.0], (n, 2))
    y = X @ np.array([1.5, -2.0]) + 4.0 + rng.normal(0, 2.0, n)
    return [
        add_holder(world.client, mid, f"s{i}", X[i : i + 1], y[i : i + 1], cost=0.1)
        for i in range(n)
    ]


def test_onebit_order_collects_reports_and_settles(world: World, tmp_path: Any) -> None:
    rng = np.random.default_rng(5)
    mid = world.market()
    holders = _quantile_holders(world, mid, 40, rng)
    oid = world.order(mid)
    run_worker(world.engine)
    status = world.client.get(f"/v1/orders/{oid}", headers=world.buyer).json()
    assert status["progress"]["stage"] == "collecting", status
    assert status["status"] == "running"
    answered = 0
    for h in holders:
        with world.seller_client(h, log_path=tmp_path / f"{h.name}.jsonl") as sc:
            answered += sc.answer_requests(mid, h.X, h.y, wait=0.0)
    assert answered > 0
    run_worker(world.engine)
    status = world.client.get(f"/v1/orders/{oid}", headers=world.buyer).json()
    assert status["status"] == "succeeded", status
    assert status["summary"]["custody"] == "seller"
    model = world.client.get(f"/v1/orders/{oid}/model", headers=world.buyer).json()
    assert model["privacy"]["custody"] == "seller"
    assert model["privacy"]["guarantee"] == "local"


def _requests_of(world: World, h: Holder, status: str = "open") -> list[dict[str, Any]]:
    r = world.client.get(
        f"/v1/sellers/me/report-requests?status={status}", headers=h.headers
    )
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


def _ledger(world: World, order_id: int) -> dict[tuple[int, str], float]:
    out: dict[tuple[int, str], float] = {}
    with Session(world.engine) as s:
        for e in s.exec(select(LedgerEntry).where(LedgerEntry.order_id == order_id)):
            amount = e.amount_minor if e.kind == LedgerKind.MONEY else e.epsilon
            key = (e.account_id, e.kind)
            out[key] = out.get(key, 0.0) + float(amount or 0.0)
    return out


def _pass_deadline(world: World, order_id: int) -> None:
    """Let the current round's deadline pass (moved into the past, not waited for)."""
    from datetime import timedelta

    from market.store import utcnow

    past = utcnow() - timedelta(seconds=1)
    with session_scope(world.engine, write=True) as s:
        crun = s.get(CustodyRun, order_id)
        assert crun is not None
        crun.round_deadline = past
        s.add(crun)
        for r in s.exec(
            select(ReportRequest).where(ReportRequest.order_id == order_id)
        ).all():
            r.deadline = past
            s.add(r)
        # and the order claimable now (a collecting order waits out its poll delay)
        order = s.get(Order, order_id)
        assert order is not None
        if order.status == "queued":
            order.lease_expires_at = past
            s.add(order)
        s.commit()


def _seller_id(world: World, h: Holder) -> int:
    return int(
        world.client.get(f"/v1/offers/{h.offer_id}", headers=h.headers).json()[
            "seller_id"
        ]
    )


def test_sellers_who_never_answer_are_neither_paid_nor_charged(
    world: World, tmp_path: Any
) -> None:
    from market.runtime.custody_runner import CustodyTiming

    rng = np.random.default_rng(11)
    mid = world.market()
    holders = _quantile_holders(world, mid, 12, rng)
    oid = world.order(mid)
    timing = CustodyTiming(round_seconds=60.0, poll_seconds=0.05)
    run_worker(world.engine, timing)
    asked = [h for h in holders if _requests_of(world, h)]
    assert len(asked) >= 6, "the allocation should ask most sellers"
    silent, answering = asked[:3], asked[3:]
    for h in answering:
        with world.seller_client(h, log_path=tmp_path / f"{h.name}.jsonl") as sc:
            assert sc.answer_requests(mid, h.X, h.y, wait=0.0) == 1
            assert sc.epsilon_logged(mid) > 0
    run_worker(world.engine, timing)  # the round is still open for the silent ones
    assert (
        world.client.get(f"/v1/orders/{oid}", headers=world.buyer).json()["progress"][
            "stage"
        ]
        == "collecting"
    )
    _pass_deadline(world, oid)
    run_worker(world.engine, timing)
    status = world.client.get(f"/v1/orders/{oid}", headers=world.buyer).json()
    assert status["status"] == "succeeded", status
    assert status["summary"]["delivery"]["sellers_delivered"] == len(answering)
    assert status["summary"]["delivery"]["reports_received"] == len(answering)
    assert status["summary"]["delivery"]["reports_expected"] == len(asked)

    ledger = _ledger(world, oid)
    admin_view = world.client.get(
        f"/v1/orders/{oid}/collection", headers=world.admin
    ).json()
    by_seller = {s["seller_id"]: s for s in admin_view["sellers"]}
    paid_total = 0
    for h in silent:
        sid = _seller_id(world, h)
        assert ledger.get((sid, "money"), 0) == 0
        assert ledger.get((sid, "epsilon"), 0) == 0
        assert by_seller[sid]["delivered"] is False
        # a late report is refused and stores nothing
        req = _requests_of(world, h, "all")[0]
        r = world.client.post(
            f"/v1/report-requests/{req['id']}/report",
            headers=h.headers,
            json={"report": {"z": [1], "x": [[0.1, 0.1]]}},
        )
        assert r.status_code == 409, r.text
    for h in answering:
        sid = _seller_id(world, h)
        row = by_seller[sid]
        assert row["delivered"] is True
        assert ledger[(sid, "epsilon")] == pytest.approx(row["epsilon_allocated"])
        expected_minor = round(row["payment_at_allocation"] * 100)
        assert ledger.get((sid, "money"), 0) == expected_minor
        paid_total += expected_minor
    buyer_id = (
        next(k[0] for k, v in ledger.items() if k[1] == "money" and v < 0)
        if paid_total
        else None
    )
    money = [v for (acc, kind), v in ledger.items() if kind == "money"]
    assert sum(money) == 0  # the ledgers balance
    if buyer_id is not None:
        assert ledger[(buyer_id, "money")] == -paid_total
    assert status["summary"]["total_paid_minor"] == paid_total
    earnings = world.client.get("/v1/sellers/me/earnings", headers=silent[0].headers)
    assert all(i["order_id"] != oid for i in earnings.json()["items"])


def test_too_few_deliverers_fail_with_the_reason_and_no_money_moves(
    world: World, tmp_path: Any
) -> None:
    from market.runtime.custody_runner import CustodyTiming

    rng = np.random.default_rng(12)
    mid = world.market()
    holders = _quantile_holders(world, mid, 6, rng)
    oid = world.order(mid)
    timing = CustodyTiming(round_seconds=60.0, poll_seconds=0.05)
    run_worker(world.engine, timing)
    asked = [h for h in holders if _requests_of(world, h)]
    with world.seller_client(asked[0], log_path=tmp_path / "one.jsonl") as sc:
        assert sc.answer_requests(mid, asked[0].X, asked[0].y, wait=0.0) == 1
    _pass_deadline(world, oid)
    run_worker(world.engine, timing)
    status = world.client.get(f"/v1/orders/{oid}", headers=world.buyer).json()
    assert status["status"] == "failed", status
    assert "too few sellers delivered" in status["error"]
    ledger = _ledger(world, oid)
    assert all(v == 0 for (_, kind), v in ledger.items() if kind == "money")
    # the one report received was disclosed: its ε is on its seller's ledger
    sid = _seller_id(world, asked[0])
    assert ledger[(sid, "epsilon")] > 0
    others = [_seller_id(world, h) for h in asked[1:]]
    assert all(ledger.get((o, "epsilon"), 0) == 0 for o in others)


def test_bad_reports_are_refused_naming_the_reason_and_nothing_is_stored(
    world: World, tmp_path: Any
) -> None:
    rng = np.random.default_rng(13)
    mid = world.market()
    holders = _quantile_holders(world, mid, 8, rng)
    world.order(mid)
    run_worker(world.engine)
    asked = [h for h in holders if _requests_of(world, h)]
    a, b = asked[0], asked[1]
    req = _requests_of(world, a)[0]
    url = f"/v1/report-requests/{req['id']}/report"

    def stored() -> int:
        with Session(world.engine) as s:
            return int(
                s.exec(
                    select(func.count())
                    .select_from(ReportRequest)
                    .where(ReportRequest.status == "answered")
                ).one()
            )

    cases = [
        ({"report": {"z": [2], "x": [[0.1, 0.1]]}}, 422, "report.z"),
        ({"report": {"z": [1, 0], "x": [[0.1, 0.1]]}}, 422, "report.z"),
        ({"report": {"z": [1], "x": [[0.1, float("inf")]]}}, 422, None),
        ({"report": {"z": [1], "x": [[0.1, 0.1]], "y": [3.0]}}, 422, "report.y"),
        ({"report": {"z": [True], "x": [[0.1, 0.1]]}}, 422, "report.z"),
        ({"report": "bits"}, 422, "report"),
        ({}, 422, "report"),
    ]
    for body, code, field in cases:
        if body.get("report") is not None and not isinstance(body["report"], str):
            import json

            try:
                json.dumps(body, allow_nan=False)
            except ValueError:
                continue  # JSON cannot carry inf; the client cannot send it
        r = world.client.post(url, headers=a.headers, json=body)
        assert r.status_code == code, (body, r.text)
        if field is not None:
            assert r.json()["field"] == field, r.json()
    assert stored() == 0
    # another seller's request: 403; an unknown one: 404
    r = world.client.post(url, headers=b.headers, json={"report": {"z": [1]}})
    assert r.status_code == 403, r.text
    r = world.client.post(
        "/v1/report-requests/999999/report", headers=a.headers, json={"report": {}}
    )
    assert r.status_code == 404, r.text
    assert stored() == 0
    # a valid report is stored once; the duplicate is 409
    with world.seller_client(a, log_path=tmp_path / "a.jsonl") as sc:
        report = sc.answer(req, a.X, a.y)
    r = world.client.post(url, headers=a.headers, json={"report": report})
    assert r.status_code == 200, r.text
    r = world.client.post(url, headers=a.headers, json={"report": report})
    assert r.status_code == 409, r.text
    assert stored() == 1
    # a buyer cannot post reports
    r = world.client.post(url, headers=world.buyer, json={"report": report})
    assert r.status_code == 403


def test_only_local_learners_on_seller_custody_markets(world: World) -> None:
    mid = world.market(
        task="classification",
        target=None,
        features=[{"name": "a", "low": 0.0, "high": 1.0}],
    )
    for body, field in (
        ({"learner": "hetero_dp_logistic"}, "learner"),
        ({"learner": "ldp_missing_logistic", "gamma": None}, "gamma"),
    ):
        payload = {"learner": "x", "budget": 10.0, "gamma": 1.0, **body}
        r = world.client.post(
            f"/v1/markets/{mid}/orders", headers=world.buyer, json=payload
        )
        assert r.status_code == 422, r.text
        assert r.json()["field"] == field
    with Session(world.engine) as s:
        assert int(s.exec(select(func.count()).select_from(Order)).one()) == 0
    r = world.client.get(f"/v1/learners?market_id={mid}", headers=world.buyer)
    names = {i["name"] for i in r.json()["items"]}
    assert "hetero_dp_logistic" not in names
    assert "ldp_missing_logistic" in names
    assert all(i["seller_custody"] for i in r.json()["items"])
    every = world.client.get("/v1/learners", headers=world.buyer).json()["items"]
    assert {i["name"] for i in every} > names


def test_a_collecting_order_survives_a_worker_restart(
    world: World, tmp_path: Any
) -> None:
    """The protocol state is in the database between rounds: a worker that dies
    while holding the order leaves it to another, which resumes the collection."""
    from datetime import timedelta

    from market.store import utcnow

    rng = np.random.default_rng(14)
    mid = world.market()
    holders = _quantile_holders(world, mid, 8, rng)
    oid = world.order(mid)
    run_worker(world.engine)
    with Session(world.engine) as s:
        crun = s.get(CustodyRun, oid)
        assert crun is not None
        assert crun.state["kind"] == "onebit_quantile"
    for h in holders:
        with world.seller_client(h, log_path=tmp_path / f"{h.name}.jsonl") as sc:
            sc.answer_requests(mid, h.X, h.y, wait=0.0)
    # a worker claimed it and died: running, lease expired, owner gone
    with session_scope(world.engine, write=True) as s:
        order = s.get(Order, oid)
        assert order is not None
        order.status, order.lease_owner = "running", "dead-host:1:x"
        order.lease_expires_at = utcnow() - timedelta(seconds=1)
        s.add(order)
        s.commit()
    run_worker(world.engine)
    status = world.client.get(f"/v1/orders/{oid}", headers=world.buyer).json()
    assert status["status"] == "succeeded", status


def test_seller_custody_fit_equals_the_library_fit_on_the_same_reports(
    world: World, tmp_path: Any
) -> None:
    """Seeded test mode: the platform's protocol seeded as the library's seeded fit
    seeds its public generator, seller ``i``'s client with the library's generator
    ``i``; the model the buyer gets equals the library fit's (raw units)."""
    from learners import LEARNERS, ReleaseContext
    from learners.local_protocol import seller_generators
    from market.offers import records
    from market.pipeline.results import raw_coefficients
    from market.runtime.custody_runner import CustodyTiming
    from market.store import CustodySeller

    seed = 20261126
    rng = np.random.default_rng(15)
    mid = world.market()
    holders = _quantile_holders(world, mid, 10, rng)
    oid = world.order(mid)
    timing = CustodyTiming(round_seconds=30.0, poll_seconds=0.05, seed=seed)
    run_worker(world.engine, timing)
    _, gens = seller_generators(seed, len(holders))
    for h, gen in zip(holders, gens, strict=True):
        log = tmp_path / f"{h.name}.jsonl"
        with world.seller_client(h, log_path=log, random_state=gen) as sc:
            sc.answer_requests(mid, h.X, h.y, wait=0.0)
    run_worker(world.engine, timing)
    status = world.client.get(f"/v1/orders/{oid}", headers=world.buyer).json()
    assert status["status"] == "succeeded", status
    model = world.client.get(f"/v1/orders/{oid}/model", headers=world.buyer).json()

    with Session(world.engine) as s:
        order = s.get(Order, oid)
        assert order is not None
        params = dict(order.params)
        rows = s.exec(
            select(CustodySeller)
            .where(CustodySeller.order_id == oid)
            .order_by(CustodySeller.seller_index)  # type: ignore[arg-type]
        ).all()
        eps = np.array([r.epsilon for r in rows])
        offer_order = [r.offer_id for r in rows]
    assert offer_order == [h.offer_id for h in holders]
    market = world.client.get(f"/v1/markets/{mid}", headers=world.buyer).json()
    raw = [{"x": h.X[0].tolist(), "y": float(h.y[0])} for h in holders]
    X, y = records.scale_records(
        raw,
        features=market["features"],
        task="quantile",
        target=market["target"],
        out_of_bounds="clip",
    )
    ctx = ReleaseContext(
        lam=market["mechanism"]["lam"],
        allocation_uses_data=False,
        task="quantile",
        market={
            "task": "quantile",
            "features": market["features"],
            "target": market["target"],
        },
    )
    est = LEARNERS["onebit_quantile"].for_order(params, context=ctx)
    est.set_params(random_state=seed)
    est.fit(X, y, sample_epsilon=eps)
    exported = est.export_model()
    coef, intercept = raw_coefficients(
        np.asarray(exported["coef"], dtype=float),
        float(exported.get("intercept") or 0.0),
        market["features"],
        market["target"],
    )
    np.testing.assert_allclose(model["coefficients"], coef, rtol=1e-9, atol=1e-12)
    assert model["intercept"] == pytest.approx(intercept, rel=1e-9, abs=1e-12)
    # the same seeds with another seller's generator give another model (the test
    # would notice a mismatch)
    est2 = LEARNERS["onebit_quantile"].for_order(params, context=ctx)
    est2.set_params(random_state=seed + 1)
    est2.fit(X, y, sample_epsilon=eps)
    assert not np.allclose(est2.export_model()["coef"], exported["coef"])


def test_features_sent_in_the_clear_must_be_declared_public(world: World) -> None:
    """``onebit_quantile`` with public X sends the features with its bits: on a
    seller-custody market that is refused unless the market declares them public;
    with private X (randomized bits) the same market takes the order."""
    features = [
        {"name": "load", "low": 0.0, "high": 10.0},
        {"name": "temp", "low": -5.0, "high": 5.0, "public": True},
    ]
    mid = world.market(features=features)
    _quantile_holders(world, mid, 3, np.random.default_rng(17))
    url = f"/v1/markets/{mid}/orders"
    body = {"learner": "onebit_quantile", "budget": 10.0, "gamma": 0.001}
    r = world.client.post(url, headers=world.buyer, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "params"
    assert "load" in r.json()["detail"]
    assert "temp" not in r.json()["detail"]
    with Session(world.engine) as s:
        assert int(s.exec(select(func.count()).select_from(Order)).one()) == 0
    _quantile_holders(world, mid, 2, np.random.default_rng(3))  # an order needs two
    body["params"] = {"private_x": True}
    r = world.client.post(url, headers=world.buyer, json=body)
    assert r.status_code == 202, r.text


def test_an_internal_error_ends_the_collection_and_releases_the_held_epsilon(
    world: World, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from market import ledgers, numerics
    from market.store import CollectionStatus, Market

    rng = np.random.default_rng(16)
    mid = world.market()
    holders = _quantile_holders(world, mid, 6, rng)
    oid = world.order(mid)
    run_worker(world.engine)
    ids = [_seller_id(world, h) for h in holders]
    with Session(world.engine) as s:
        market = s.get(Market, mid)
        assert market is not None
        held = ledgers.epsilon_reserved(s, market_id=mid, seller_ids=ids)
    assert sum(held.values()) > 0
    for h in holders:
        with world.seller_client(h, log_path=tmp_path / f"{h.name}.jsonl") as sc:
            sc.answer_requests(mid, h.X, h.y, wait=0.0)

    def broken(protocol: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(numerics.custody, "result", broken)
    run_worker(world.engine)
    status = world.client.get(f"/v1/orders/{oid}", headers=world.buyer).json()
    assert status["status"] == "failed"
    assert "internal error" in status["error"]
    with Session(world.engine) as s:
        crun = s.get(CustodyRun, oid)
        assert crun is not None
        assert crun.status == CollectionStatus.FAILED
        held = ledgers.epsilon_reserved(s, market_id=mid, seller_ids=ids)
    assert sum(held.values()) == 0
    ledger = _ledger(world, oid)
    assert all(v == 0 for (_, kind), v in ledger.items() if kind == "money")
    assert sum(v for (_, kind), v in ledger.items() if kind == "epsilon") > 0


def test_a_collecting_order_cannot_be_cancelled_but_a_queued_one_can(
    world: World, tmp_path: Any
) -> None:
    from market.runtime.custody_runner import CustodyTiming

    rng = np.random.default_rng(21)
    mid = world.market()
    _quantile_holders(world, mid, 6, rng)
    queued = world.order(mid)
    r = world.client.post(f"/v1/orders/{queued}:cancel", headers=world.buyer)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled"
    oid = world.order(mid)
    run_worker(world.engine, CustodyTiming(round_seconds=60.0, poll_seconds=0.05))
    with Session(world.engine) as s:
        assert s.get(CustodyRun, oid) is not None  # requests are out
        assert s.get(CustodyRun, queued) is None  # the cancelled one never ran
    r = world.client.post(f"/v1/orders/{oid}:cancel", headers=world.buyer)
    assert r.status_code == 409
    assert "collecting" in r.json()["detail"]
