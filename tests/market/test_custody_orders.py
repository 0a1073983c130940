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


def test_onebit_order_collects_reports_and_settles(
    world: World, tmp_path: Any
) -> None:
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
