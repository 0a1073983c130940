"""Seller-custody vertical markets over HTTP: keys-only offers, node registration and
session polling; bad input is a 422/403 naming the field with nothing stored."""

from __future__ import annotations

from typing import Any

import pytest

from market.store import FitSession, Offer, PartyNode
from tests.api.conftest import Api, count_rows

FEATURES = [{"name": f"x{j}", "low": -4.0, "high": 4.0} for j in range(1, 7)]
PARTIES = [
    {"name": "A", "features": ["x1", "x2", "x3"]},
    {"name": "B", "features": ["x4", "x5", "x6"]},
]


def custody_vertical_market(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "name": "vertical-custody",
        "task": "classification",
        "features": FEATURES,
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "lifetime_epsilon_cap": 10.0,
        "partition": "vertical",
        "record_key": "person_id",
        "parties": PARTIES,
        "custody": "seller",
    }
    body.update(overrides)
    return body


def keys_offer(
    party: str, keys: list[str], cost: float = 0.1, **extra: Any
) -> dict[str, Any]:
    return {"party": party, "keys": keys, "reported_cost": cost, **extra}


def _setup(api: Api) -> tuple[int, dict[str, str], dict[str, str]]:
    admin = api.admin()
    r = api.client.post("/v1/markets", headers=admin, json=custody_vertical_market())
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    return mid, api.register("seller", "a"), api.register("seller", "b")


def test_keys_only_offers_and_node_registration(api: Api) -> None:
    mid, a, b = _setup(api)
    keys = [f"p{i:03d}" for i in range(20)]
    r = api.client.post(
        f"/v1/markets/{mid}/offers", headers=a, json=keys_offer("A", keys)
    )
    assert r.status_code == 201, r.text
    assert r.json()["n_records"] == 20
    assert r.json()["party"] == "A"
    r = api.client.post(f"/v1/markets/{mid}/offers", headers=b,
                        json=keys_offer("B", keys[5:], cost=0.2))  # fmt: skip
    assert r.status_code == 201, r.text
    body = {
        "party": "A",
        "host": "127.0.0.1",
        "port": 7001,
        "features": ["x1", "x2", "x3"],
    }
    r = api.client.post(f"/v1/markets/{mid}/nodes", headers=a, json=body)
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "connected"
    assert r.json()["last_session_id"] is None
    # moving the node keeps one row per party
    r = api.client.post(
        f"/v1/markets/{mid}/nodes", headers=a, json={**body, "port": 7002}
    )
    assert r.status_code == 201, r.text
    assert count_rows(api, PartyNode) == 1
    r = api.client.get(f"/v1/markets/{mid}/nodes/A", headers=a)
    assert r.json()["port"] == 7002
    r = api.client.get(f"/v1/markets/{mid}/sessions", headers=a, params={"party": "A"})
    assert r.status_code == 200, r.text
    assert r.json() == {"items": []}
    assert count_rows(api, FitSession) == 0


@pytest.mark.parametrize(
    ("offer", "field"),
    [
        (
            {
                "party": "A",
                "records": [{"key": "k1", "x": [0.1, 0.2, 0.3], "y": 1.0}],
                "reported_cost": 0.1,
            },
            "records",
        ),
        (keys_offer("A", ["k1", "k2", "k1"]), "keys[2]"),
        (keys_offer("C", ["k1"]), "party"),
        ({"party": "A", "reported_cost": 0.1}, "keys"),
        (keys_offer("A", ["k1", "k2"], n_records=3), "n_records"),
    ],
)
def test_bad_custody_offers_are_refused_naming_the_field(
    api: Api, offer: dict[str, Any], field: str
) -> None:
    mid, a, _ = _setup(api)
    r = api.client.post(f"/v1/markets/{mid}/offers", headers=a, json=offer)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert count_rows(api, Offer) == 0


def test_keys_refused_on_a_platform_custody_market(api: Api) -> None:
    admin = api.admin()
    body = custody_vertical_market(custody="platform")
    mid = api.client.post("/v1/markets", headers=admin, json=body).json()["id"]
    a = api.register("seller", "a")
    offer = {**keys_offer("A", ["k1"]),
             "records": [{"key": "k1", "x": [0.1, 0.2, 0.3], "y": 1.0}]}  # fmt: skip
    r = api.client.post(f"/v1/markets/{mid}/offers", headers=a, json=offer)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "keys"
    assert count_rows(api, Offer) == 0


@pytest.mark.parametrize(
    ("who", "node", "status", "field"),
    [
        ("b", {"party": "A"}, 403, None),  # B's key does not hold A's offer
        ("a", {"party": "C"}, 422, "party"),
        ("a", {"features": ["x1", "x2"]}, 422, "features"),
        ("a", {"features": ["x2", "x1", "x3"]}, 422, "features"),
        ("a", {"host": "bad host!"}, 422, "host"),
        ("a", {"port": 0}, 422, "port"),
    ],
)
def test_bad_node_registrations_are_refused(
    api: Api, who: str, node: dict[str, Any], status: int, field: str | None
) -> None:
    mid, a, b = _setup(api)
    keys = [f"p{i}" for i in range(5)]
    assert api.client.post(f"/v1/markets/{mid}/offers", headers=a,
                           json=keys_offer("A", keys)).status_code == 201  # fmt: skip
    assert api.client.post(f"/v1/markets/{mid}/offers", headers=b,
                           json=keys_offer("B", keys)).status_code == 201  # fmt: skip
    body = {"party": "A", "host": "127.0.0.1", "port": 7001,
            "features": ["x1", "x2", "x3"], **node}  # fmt: skip
    r = api.client.post(
        f"/v1/markets/{mid}/nodes", headers={"a": a, "b": b}[who], json=body
    )
    assert r.status_code == status, r.text
    if field is not None:
        assert r.json()["field"] == field
    assert count_rows(api, PartyNode) == 0
    # polling needs a node of one's own party
    r = api.client.get(f"/v1/markets/{mid}/sessions", headers=b, params={"party": "A"})
    assert r.status_code == 403, r.text


def test_nodes_refused_on_a_platform_custody_market(api: Api) -> None:
    admin = api.admin()
    body = custody_vertical_market(custody="platform")
    mid = api.client.post("/v1/markets", headers=admin, json=body).json()["id"]
    a = api.register("seller", "a")
    node = {
        "party": "A",
        "host": "127.0.0.1",
        "port": 7001,
        "features": ["x1", "x2", "x3"],
    }
    r = api.client.post(f"/v1/markets/{mid}/nodes", headers=a, json=node)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "custody"
    assert count_rows(api, PartyNode) == 0


def _order_and_wait(api: Api, mid: int, params: dict[str, Any]) -> dict[str, Any]:
    import time

    buyer = api.register("buyer", "buyer")
    body = {"learner": "secure_vertical_logistic", "budget": 50.0, "gamma": 0.05,
            "params": params}  # fmt: skip
    r = api.client.post(f"/v1/markets/{mid}/orders", headers=buyer, json=body)
    assert r.status_code == 202, r.text
    oid = r.json()["id"]
    end = time.monotonic() + 120
    while time.monotonic() < end:
        st: dict[str, Any] = api.client.get(f"/v1/orders/{oid}", headers=buyer).json()
        if st["status"] in ("succeeded", "failed"):
            return st
        time.sleep(0.1)
    raise AssertionError("order did not finish")


@pytest.mark.parametrize(
    ("params", "register", "reason"),
    [
        (
            {"backend": "mpc", "imputation": "complete_case"},
            False,
            "party 'A' has no node registered; nothing was charged",
        ),
        (
            {"backend": "mpc"},
            True,
            "imputation: a distributed DP fit with missing blocks",
        ),
        ({"backend": "plain", "imputation": "complete_case"}, True, "params.backend"),
    ],
)
def test_orders_that_cannot_run_between_nodes_fail_with_the_reason(
    make_api: Any, params: dict[str, Any], register: bool, reason: str
) -> None:
    """Refused before any session opens: no node, a plan the parties would refuse
    (DP with missing blocks needs complete_case), a backend that needs the blocks;
    nothing is charged."""
    api = make_api(workers=1, job_lease_seconds=30)
    mid, a, b = _setup(api)
    keys = [f"p{i:03d}" for i in range(30)]
    for h, party, held in ((a, "A", keys), (b, "B", keys[3:])):
        r = api.client.post(f"/v1/markets/{mid}/offers", headers=h,
                            json=keys_offer(party, held))  # fmt: skip
        assert r.status_code == 201, r.text
    if register:
        for h, party, feats in (
            (a, "A", ["x1", "x2", "x3"]),
            (b, "B", ["x4", "x5", "x6"]),
        ):
            node = {
                "party": party,
                "host": "127.0.0.1",
                "port": 7001,
                "features": feats,
            }
            assert api.client.post(f"/v1/markets/{mid}/nodes", headers=h,
                                   json=node).status_code == 201  # fmt: skip
    st = _order_and_wait(api, mid, params)
    assert st["status"] == "failed", st
    assert reason in st["error"], st["error"]
    assert count_rows(api, FitSession) == 0
    for h in (a, b):
        assert (
            api.client.get("/v1/sellers/me/earnings", headers=h).json()["items"] == []
        )


def test_a_node_refuses_a_session_whose_tls_setting_differs_from_its_own() -> None:
    """All parties of a session use TLS or none: a node without certificates refuses
    a TLS session (and reports it) before starting its party, and vice versa."""
    import json

    import httpx
    import numpy as np

    from api.client import PartyNode

    reports: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        reports.append(json.loads(request.content))
        return httpx.Response(200, json={})

    session = {"id": 5, "index": 0, "tls": True, "addresses": [], "plan": {},
               "deadline_at": "2099-01-01T00:00:00Z"}  # fmt: skip
    node = PartyNode("http://platform", "pm_x", 1, "A", ["k1"], np.zeros((1, 3)),
                     np.ones(1), transport=httpx.MockTransport(handler))  # fmt: skip
    out = node.run_session(session)
    assert out["status"] == "failed"
    assert out["reason"].startswith("tls: the session runs over TLS")
    assert reports == [{"party": "A", "status": "failed", "reason": out["reason"]}]
    tls_node = PartyNode("http://platform", "pm_x", 1, "A", ["k1"], np.zeros((1, 3)),
                         np.ones(1), tls=("c", "k", "a"),
                         transport=httpx.MockTransport(handler))  # fmt: skip
    out = tls_node.run_session({**session, "tls": False})
    assert out["reason"].startswith("tls: the session runs without TLS")
