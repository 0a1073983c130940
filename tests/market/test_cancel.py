"""Cancelling an order: a queued order at once, a running one at its next stage
boundary; nothing is charged or paid, and a finished order cannot be cancelled."""

from typing import Any

import pytest
from sqlmodel import Session, select

from market.runtime import order_runner
from market.store import Allocation, LedgerEntry
from tests.market.pipeline_helpers import stand_in_payments
from tests.market.test_orders_run import Env, env

__all__ = ["env", "stand_in_payments"]


def _rows(env: Env, order_id: int) -> tuple[list[Any], list[Any]]:
    with Session(env.engine) as s:
        ledger = list(s.exec(select(LedgerEntry).where(LedgerEntry.order_id == order_id)))
        allocs = list(s.exec(select(Allocation).where(Allocation.order_id == order_id)))
    return ledger, allocs


def _cancel(env: Env, order_id: int, headers: dict[str, str] | None = None) -> Any:
    return env.client.post(f"/v1/orders/{order_id}:cancel", headers=headers or env.buyer)


def test_a_queued_order_is_cancelled_at_once_and_never_runs(
    env: Env, stand_in_payments: Any
) -> None:
    mid = env.market(cap=10.0)
    oid = env.order(mid, budget=50.0)
    r = _cancel(env, oid)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled"
    env.drain()  # the worker finds nothing to claim
    st = env.status(oid)
    assert st["status"] == "cancelled"
    assert st["summary"] is None
    assert _rows(env, oid) == ([], [])
    # cancelling again is a no-op, not an error
    assert _cancel(env, oid).json()["status"] == "cancelled"


@pytest.mark.parametrize("stage", ["allocating", "payments", "releasing", "settling"])
def test_a_running_order_stops_at_the_next_stage_and_charges_nothing(
    env: Env, stand_in_payments: Any, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    mid = env.market(cap=10.0)
    oid = env.order(mid, budget=50.0)
    seen: list[str] = []

    def cancel_on(order_id: int, name: str) -> None:
        seen.append(name)
        if name == stage:  # the buyer cancels while the order is in this stage
            r = _cancel(env, order_id)
            assert r.status_code == 200, r.text
            assert r.json()["status"] == "running"

    monkeypatch.setattr(order_runner, "STAGE_HOOKS", [cancel_on])
    env.drain()
    assert stage in seen
    st = env.status(oid)
    assert st["status"] == "cancelled", st
    assert "nothing was charged" in st["error"]
    assert _rows(env, oid) == ([], [])
    # the sellers' budgets are untouched: the same market can still settle an order
    monkeypatch.setattr(order_runner, "STAGE_HOOKS", [])
    again = env.order(mid, budget=50.0)
    env.drain()
    assert env.status(again)["status"] == "succeeded"
    assert _rows(env, again)[0]


def test_a_finished_order_cannot_be_cancelled(env: Env, stand_in_payments: Any) -> None:
    mid = env.market(cap=10.0)
    oid = env.order(mid, budget=50.0)
    env.drain()
    assert env.status(oid)["status"] == "succeeded"
    r = _cancel(env, oid)
    assert r.status_code == 409
    assert "succeeded" in r.json()["detail"]


def test_only_the_buyer_or_an_admin_can_cancel(env: Env, stand_in_payments: Any) -> None:
    mid = env.market(cap=10.0)
    oid = env.order(mid, budget=50.0)
    other = env.client.post("/v1/buyers", json={"name": "other"}).json()["api_key"]
    r = _cancel(env, oid, {"Authorization": f"Bearer {other}"})
    assert r.status_code == 404
    assert env.status(oid)["status"] == "queued"
    r = _cancel(env, oid, env.admin)
    assert r.status_code == 200
    assert r.json()["status"] == "cancelled"
