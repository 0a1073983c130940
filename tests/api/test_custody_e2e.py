"""Records stay with their sellers, end to end with real processes.

A server (``privmarket serve``) runs a seller-custody market; every seller is its own
``privmarket seller serve`` process holding only its own CSV file with high-entropy
canary values in every cell the learner's model keeps private (``y`` always; ``x``
unless the market declares the feature public). The order must succeed with the
seller-custody guarantee, and none of the canaries may appear in the database file,
the server's log or any API response the test received.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from tests.api.custody_e2e import (
    canary,
    register_sellers,
    scan,
    start_sellers,
    start_server,
    wait_order,
    wait_sellers,
)

QUANTILE_FEATURES = [
    {"name": "load", "low": 0.0, "high": 10.0},
    {"name": "temp", "low": -5.0, "high": 5.0},
]
TARGET = {"low": -20.0, "high": 40.0}


def _market(server: Any, **body: Any) -> int:
    payload: dict[str, Any] = {
        "name": "custody",
        "custody": "seller",
        "out_of_bounds": "clip",
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "mechanism": {"gamma": 0.001, "lam": 0.01, "eps_avg_max": 4.0},
        "lifetime_epsilon_cap": 100.0,
    }
    payload.update(body)
    r = server.call("POST", "/v1/markets", server.admin_key, json=payload)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _buyer(server: Any) -> str:
    r = server.call("POST", "/v1/buyers", json={"name": "buyer"})
    assert r.status_code == 201, r.text
    return str(r.json()["api_key"])


def _run(
    tmp_path: Path,
    *,
    market: dict[str, Any],
    order: dict[str, Any],
    data: list[tuple[np.ndarray, np.ndarray]],
    secret: list[float],
    until_idle: float = 6.0,
) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """Run one seller-custody order end to end; return its status, its model and
    the sellers (with their CLI output). Asserts no canary leaked."""
    server = start_server(tmp_path)
    try:
        mid = _market(server, **market)
        names = [f["name"] for f in market["features"]]
        costs = [0.1 + 0.01 * (i % 7) for i in range(len(data))]
        sellers = register_sellers(server, mid, data, names, tmp_path, costs)
        buyer = _buyer(server)
        r = server.call("POST", f"/v1/markets/{mid}/orders", buyer, json=order)
        assert r.status_code == 202, r.text
        oid = int(r.json()["id"])
        start_sellers(server, mid, sellers, until_idle=until_idle)
        status = wait_order(server, oid, buyer)
        wait_sellers(sellers)
        assert status["status"] == "succeeded", status
        model = server.call("GET", f"/v1/orders/{oid}/model", buyer).json()
        server.call("GET", f"/v1/orders/{oid}/collection", buyer)
        server.call("GET", f"/v1/orders/{oid}/allocations", server.admin_key)
        for s in sellers:
            server.call("GET", "/v1/sellers/me/earnings", s.key)
            server.call("GET", "/v1/sellers/me/report-requests?status=all", s.key)
    finally:
        server.stop()
    leaks = scan(server, secret)
    assert not leaks, leaks
    # positive controls: the same scan finds the canaries where they are (the
    # sellers' own files), and the database does hold the reports it was sent
    assert len(scan(server, secret, extra=[s.csv for s in sellers])) >= len(secret)
    with sqlite3.connect(server.db) as conn:
        stored = conn.execute(
            "SELECT count(*) FROM report_request WHERE report IS NOT NULL"
        ).fetchone()[0]
        offered = conn.execute("SELECT records FROM offer").fetchall()
    assert stored >= 2
    assert all(row[0] == "[]" for row in offered)
    assert any('"round"' in r for r in server.responses)
    return status, model, sellers


def _check_seller_custody(status: dict[str, Any], model: dict[str, Any]) -> None:
    assert status["summary"]["custody"] == "seller"
    assert model["privacy"]["custody"] == "seller"
    assert status["summary"]["delivery"]["sellers_delivered"] >= 2


def test_onebit_public_x_records_stay_with_their_sellers(tmp_path: Path) -> None:
    """``onebit_quantile`` with public X (features declared public, sent in the
    clear as the model says); every ``y`` is a canary."""
    n = 8
    rng = np.random.default_rng(7)
    feats = [{**f, "public": True} for f in QUANTILE_FEATURES]
    data, secret = [], []
    for _ in range(n):
        X = rng.uniform([0.0, -5.0], [10.0, 5.0], (1, 2))
        y = np.array([canary(TARGET["low"], TARGET["high"])])
        data.append((X, y))
        secret.append(float(y[0]))
    status, model, sellers = _run(
        tmp_path,
        market={"task": "quantile", "features": feats, "target": TARGET},
        order={"learner": "onebit_quantile", "budget": 1000.0, "gamma": 0.001},
        data=data,
        secret=secret,
    )
    _check_seller_custody(status, model)
    assert model["privacy"]["guarantee"] == "local"
    assert any("sent request" in s.output for s in sellers)
