"""Helpers of the seller-custody tests: markets, sellers that keep their records, and
an in-process worker run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from market.runtime import worker
from market.runtime.custody_runner import CustodyTiming

QUANTILE_FEATURES = [
    {"name": "load", "low": 0.0, "high": 10.0, "public": True},
    {"name": "temp", "low": -5.0, "high": 5.0, "public": True},
]
"""Public features: ``onebit_quantile`` with public X sends them with its bits."""
QUANTILE_TARGET = {"low": -20.0, "high": 40.0}


def custody_market_body(**overrides: Any) -> dict[str, Any]:
    """A seller-custody quantile market (strict mode, uniform cost prior, cap 100)."""
    body: dict[str, Any] = {
        "name": "turbine",
        "task": "quantile",
        "custody": "seller",
        "features": QUANTILE_FEATURES,
        "target": QUANTILE_TARGET,
        "out_of_bounds": "clip",
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "mechanism": {"gamma": 0.001, "lam": 0.01, "eps_avg_max": 4.0, "k": 4.0},
        "lifetime_epsilon_cap": 100.0,
    }
    body.update(overrides)
    return body


@dataclass
class Holder:
    """A seller that keeps its records: its key, its offer and its raw ``X``/``y``."""

    name: str
    key: str
    offer_id: int
    X: np.ndarray
    y: np.ndarray
    headers: dict[str, str] = field(default_factory=dict)


def add_holder(
    client: Any, market_id: int, name: str, X: np.ndarray, y: np.ndarray, cost: float
) -> Holder:
    """Register a seller and offer ``len(y)`` records it keeps (no records sent)."""
    r = client.post("/v1/sellers", json={"name": name})
    assert r.status_code == 201, r.text
    key = r.json()["api_key"]
    headers = {"Authorization": f"Bearer {key}"}
    body = {"n_records": len(y), "reported_cost": float(cost)}
    r = client.post(f"/v1/markets/{market_id}/offers", headers=headers, json=body)
    assert r.status_code == 201, r.text
    return Holder(name, key, int(r.json()["id"]), X, y, headers)


def run_worker(engine: Any, timing: CustodyTiming | None = None) -> int:
    """Claim and run every claimable order or job once over; return how many runs."""
    w = worker.Worker(engine, lease_seconds=30, custody=timing or FAST)
    n = 0
    while w.run_once():
        n += 1
    return n


FAST = CustodyTiming(round_seconds=30.0, poll_seconds=0.05)
