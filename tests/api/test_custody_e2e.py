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
import pytest

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
    until_idle: float = 45.0,
) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """Run one seller-custody order end to end; return its status, its model and
    the sellers (with their CLI output). Asserts no canary leaked. The seller agents
    quit after ``until_idle`` seconds without a request: long enough for an order's
    first allocation on a loaded machine with cold numba caches (20 s was not)."""
    server = start_server(tmp_path)
    try:
        mid = _market(server, **market)
        names = [f["name"] for f in market["features"]]
        costs = [0.1 + 0.01 * (i % 7) for i in range(len(data))]
        sellers = register_sellers(server, mid, data, names, tmp_path, costs)
        buyer = _buyer(server)
        start_sellers(server, mid, sellers, until_idle=until_idle)
        r = server.call("POST", f"/v1/markets/{mid}/orders", buyer, json=order)
        assert r.status_code == 202, r.text
        oid = int(r.json()["id"])
        status = wait_order(server, oid, buyer)
        if status["status"] != "succeeded":
            for s in sellers:
                if s.proc is not None and s.proc.poll() is None:
                    s.proc.kill()
            outputs = [
                f"{s.name}: {s.proc.communicate()[0]}" for s in sellers if s.proc
            ]
            raise AssertionError(f"{status}\n" + "\n".join(outputs))
        wait_sellers(sellers)
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


@pytest.mark.slow
def test_onebit_private_x_records_stay_with_their_sellers(tmp_path: Path) -> None:
    """``onebit_quantile`` with private X: every ``x`` and ``y`` is a canary."""
    n = 8
    data, secret = [], []
    for _ in range(n):
        x = [canary(f["low"], f["high"]) for f in QUANTILE_FEATURES]
        y = canary(TARGET["low"], TARGET["high"])
        data.append((np.array([x]), np.array([y])))
        secret += [*x, y]
    status, model, _ = _run(
        tmp_path,
        market={"task": "quantile", "features": QUANTILE_FEATURES, "target": TARGET},
        order={
            "learner": "onebit_quantile",
            "budget": 1000.0,
            "gamma": 0.001,
            "params": {"private_x": True},
        },
        data=data,
        secret=secret,
    )
    _check_seller_custody(status, model)
    assert model["privacy"]["guarantee"] == "local"


@pytest.mark.slow
def test_ldp_missing_logistic_records_stay_with_their_sellers(tmp_path: Path) -> None:
    """``ldp_missing_logistic`` (two phases, several rounds, missing cells): every
    observed ``x`` is a canary (labels are ±1)."""
    features = [
        {"name": "a", "low": -2.0, "high": 2.0, "missable": True},
        {"name": "b", "low": 0.0, "high": 5.0, "missable": True},
    ]
    n = 10
    rng = np.random.default_rng(3)
    data, secret = [], []
    for i in range(n):
        x = [canary(f["low"], f["high"]) for f in features]
        if i % 3 == 0:
            x[i % 2] = float("nan")  # a missing cell: an empty CSV cell
        label = 1.0 if rng.random() < 0.5 else -1.0
        data.append((np.array([x]), np.array([label])))
        secret += [v for v in x if not np.isnan(v)]
    status, model, _ = _run(
        tmp_path,
        market={"task": "classification", "features": features},
        order={
            "learner": "ldp_missing_logistic",
            "budget": 1000.0,
            "gamma": 0.001,
            "params": {"algorithm": "two_phase", "round_size": 4},
        },
        data=data,
        secret=secret,
    )
    _check_seller_custody(status, model)
    assert model["privacy"]["guarantee"] == "local"
    assert status["summary"]["delivery"]["reports_expected"] > n  # several rounds


@pytest.mark.slow
def test_uldp_sparse_linear_records_stay_with_their_sellers(tmp_path: Path) -> None:
    """``uldp_sparse_linear`` (several records per seller, localization then
    estimation rounds): every ``x`` and ``y`` is a canary."""
    features = [{"name": f"f{j}", "low": -3.0, "high": 3.0} for j in range(4)]
    target = {"low": -12.0, "high": 12.0}
    n, per = 16, 6
    data, secret = [], []
    for _ in range(n):
        X = np.array([[canary(-3.0, 3.0) for _ in features] for _ in range(per)])
        y = np.array([canary(-12.0, 12.0) for _ in range(per)])
        data.append((X, y))
        secret += [*X.ravel().tolist(), *y.tolist()]
    status, model, _ = _run(
        tmp_path,
        market={"task": "regression", "features": features, "target": target},
        order={
            "learner": "uldp_sparse_linear",
            "budget": 1000.0,
            "gamma": 0.001,
            "params": {"sparsity": 2, "k_sel": 1, "n_bins": 2, "bound": 0.75},
        },
        data=data,
        secret=secret,
    )
    _check_seller_custody(status, model)
    assert model["privacy"]["guarantee"] == "user_level_local"
