"""The full flow over HTTP with the in-process worker: sellers offer Wisconsin records,
a buyer orders a model under a budget, the worker runs it, and the money and privacy
views of every role agree with the admin's allocations.

The default test uses the stand-in payments (fast); the ``slow`` one runs the real
Myerson payments and, when available, ``choose_gamma`` (``gamma: null``).
"""

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.api.conftest import Api
from tests.market.pipeline_helpers import add_sellers, market_body, stand_in_payments

__all__ = ["stand_in_payments"]


def _poll(api: Api, order_id: int, headers: dict[str, str], timeout: float) -> Any:
    stages: list[str] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = api.client.get(f"/v1/orders/{order_id}", headers=headers).json()
        stages.append(st["progress"]["stage"])
        if st["status"] in ("succeeded", "failed"):
            return st, stages
        time.sleep(0.05)
    raise AssertionError(f"order {order_id} did not finish: stages {stages[-5:]}")


def _flow(
    api: Api, rng: np.random.Generator, order: dict[str, Any], timeout: float
) -> None:
    admin = api.admin()
    r = api.client.post(
        "/v1/markets", headers=admin, json=market_body(rng=rng, cap=10.0)
    )
    mid = r.json()["id"]
    sellers = add_sellers(api.client, mid, 20, rng=rng)
    buyer = api.register("buyer", "b")
    body = {"learner": "hetero_dp_logistic", "budget": 40.0, **order}
    key = {"Idempotency-Key": "order-1"}
    r = api.client.post(
        f"/v1/markets/{mid}/orders", headers={**buyer, **key}, json=body
    )
    assert r.status_code == 202
    assert r.json()["status"] == "queued"
    oid = r.json()["id"]
    st, stages = _poll(api, oid, buyer, timeout)
    assert st["status"] == "succeeded", st
    assert stages[-1] == "done"
    replay = api.client.post(
        f"/v1/markets/{mid}/orders", headers={**buyer, **key}, json=body
    )
    assert replay.json()["id"] == oid

    model = api.client.get(f"/v1/orders/{oid}/model", headers=buyer).json()
    assert model["payments"]["total"] <= model["payments"]["budget"] == 40.0
    assert model["privacy"]["guarantee"] in ("conditional_on_allocation", "end_to_end")
    allocs = api.client.get(f"/v1/orders/{oid}/allocations", headers=admin).json()
    assert allocs["total_payment"] == pytest.approx(model["payments"]["total"])
    by_seller = {a["seller_id"]: a for a in allocs["items"]}
    assert model["privacy"]["sellers_used"] == len(by_seller) > 0
    for key_name in ("min", "median", "max"):
        want = getattr(np, key_name)([a["epsilon"] for a in allocs["items"]])
        assert model["privacy"]["epsilon"][key_name] == pytest.approx(want)

    for s in sellers:
        me = api.client.get("/v1/sellers/me/earnings", headers=s.headers).json()
        priv = api.client.get("/v1/sellers/me/privacy", headers=s.headers).json()
        (item,) = priv["items"]
        mine = [a for a in allocs["items"] if a["offer_id"] == s.offer_id]
        if not mine:
            assert me["items"] == []
            assert item["epsilon_spent"] == 0
            continue
        (a,) = mine
        (e,) = me["items"]
        assert (e["order_id"], e["epsilon"], e["payment"]) == (
            oid,
            a["epsilon"],
            a["payment"],
        )
        assert me["total_payment"] == a["payment"]
        assert item["epsilon_spent"] == pytest.approx(a["epsilon"])
        assert item["remaining"] == pytest.approx(10.0 - a["epsilon"])
    # buyers and sellers never see per-seller allocations
    assert (
        api.client.get(f"/v1/orders/{oid}/allocations", headers=buyer).status_code
        == 403
    )
    s0 = sellers[0].headers
    assert api.client.get(f"/v1/orders/{oid}/model", headers=s0).status_code == 403


def test_full_flow_with_in_process_worker(
    make_api: Callable[..., Api], rng: np.random.Generator, stand_in_payments: Any
) -> None:
    api = make_api(workers=1, job_lease_seconds=10)
    _flow(api, rng, {"gamma": 1.0}, timeout=60)


@pytest.mark.slow
def test_full_flow_with_real_payments(
    make_api: Callable[..., Api], rng: np.random.Generator
) -> None:
    api = make_api(workers=1, job_lease_seconds=30)
    _flow(api, rng, {"gamma": None}, timeout=1800)
