"""Helpers for the order-pipeline tests: a Wisconsin market over HTTP, sellers with
one record each, a fast stand-in for the payments, and a worker that drains the queue.

The stand-in payments (:func:`fake_payments`) are *not* Myerson payments: they pay
``1.5·c_i·ε_i`` for the allocation's own ``ε_i`` so the pipeline tests (ledgers,
caps, budgets, durability) run in milliseconds. The real payments are exercised by the
``slow`` flow test.
"""

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from market import numerics
from market.datasets import WBC_FEATURE_BOUNDS

NAMES = [str(n) for n in load_breast_cancer().feature_names]


def wisconsin_raw() -> tuple[np.ndarray, np.ndarray]:
    """Raw Wisconsin features and ``±1`` labels (+1 benign)."""
    data = load_breast_cancer()
    return np.asarray(data.data), np.where(data.target == 1, 1, -1)


def market_body(
    *, n_val: int = 80, cap: float = 10.0, rng: np.random.Generator, **mechanism: Any
) -> dict[str, Any]:
    """A Wisconsin classification market with a public validation set of ``n_val``."""
    X, y = wisconsin_raw()
    val = rng.choice(len(y), size=n_val, replace=False)
    settings: dict[str, Any] = {"gamma": 1.0, "lam": 0.1, "mu": 1.0, "sigma": 1.0}
    settings.update(mechanism)
    return {
        "name": "wisconsin",
        "task": "classification",
        "features": [
            {"name": n, "low": lo, "high": hi}
            for n, (lo, hi) in zip(NAMES, WBC_FEATURE_BOUNDS, strict=True)
        ],
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "mechanism": settings,
        "validation": [{"x": X[i].tolist(), "y": int(y[i])} for i in val],
        "lifetime_epsilon_cap": cap,
    }


@dataclass
class Seller:
    headers: dict[str, str]
    offer_id: int
    cost: float


def offer_as_new_seller(
    client: Any,
    market_id: int,
    *,
    name: str,
    records: list[dict[str, Any]],
    cost: float,
) -> Seller:
    """Register seller ``name`` and post its offer of ``records`` at ``cost``."""
    r = client.post("/v1/sellers", json={"name": name})
    assert r.status_code == 201, r.text
    headers = {"Authorization": f"Bearer {r.json()['api_key']}"}
    body = {"records": records, "reported_cost": cost}
    r = client.post(f"/v1/markets/{market_id}/offers", headers=headers, json=body)
    assert r.status_code == 201, r.text
    return Seller(headers=headers, offer_id=r.json()["id"], cost=cost)


def add_sellers(
    client: Any, market_id: int, n: int, *, rng: np.random.Generator
) -> list[Seller]:
    """Register ``n`` sellers, each offering one Wisconsin record at a cost ~ U[0, 1]."""
    X, y = wisconsin_raw()
    rows = rng.choice(len(y), size=n, replace=False)
    return [
        offer_as_new_seller(
            client,
            market_id,
            name=f"s{j}",
            records=[{"x": X[i].tolist(), "y": int(y[i])}],
            cost=float(rng.uniform(0.05, 0.95)),
        )
        for j, i in enumerate(rows)
    ]


def create_priced_market(
    client: Any,
    admin: dict[str, str],
    *,
    name: str,
    task: str,
    features: list[dict[str, Any]],
    target: dict[str, Any],
    eps_avg_max: float,
) -> int:
    """A market of ``task`` over ``features`` with the learner-order tests' settings
    (uniform cost prior, small γ and λ, lifetime cap 100, out-of-bounds clipped);
    returns its id."""
    body = {
        "name": name,
        "task": task,
        "features": features,
        "target": target,
        "out_of_bounds": "clip",
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "mechanism": {
            "gamma": 0.001,
            "lam": 0.01,
            "mu": 100.0,
            "sigma": 1e5,
            "eps_avg_max": eps_avg_max,
        },
        "lifetime_epsilon_cap": 100.0,
    }
    r = client.post("/v1/markets", headers=admin, json=body)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def fake_payments(X: Any, y: Any, costs: Any, **kw: Any) -> SimpleNamespace:
    """Stand-in payments (module docstring): ``1.5·c_i·ε_i^total`` of a fresh allocation."""
    alloc = kw.get("allocation")
    eps = np.asarray(alloc.epsilon_total, dtype=float)
    progress = kw.get("progress")
    if progress is not None:
        progress(len(costs), len(costs))
    return SimpleNamespace(payments=1.5 * np.asarray(costs) * eps, epsilon=eps)


@pytest.fixture
def stand_in_payments(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Replace ``market.numerics.myerson_payments`` by :func:`fake_payments`."""
    monkeypatch.setattr(numerics, "myerson_payments", fake_payments)
    return fake_payments


CHUNK_MARK_ENV = "PRIVMARKET_TEST_CHUNK_MARK"
"""A directory where :func:`endless_chunk` records the pid of each payment process
that started one (process-level stop tests)."""


def endless_chunk(job: Any, sellers: list[int]) -> list[Any]:
    """A payment chunk that never finishes but calls the job's checkpoint before each
    "re-solve" (every 20 ms) as real ones do; stands in for
    ``mechanisms.payments._payments._chunk`` in a payments process pool."""
    import os
    import time
    from pathlib import Path

    mark = os.environ.get(CHUNK_MARK_ENV)
    if mark:
        (Path(mark) / str(os.getpid())).touch()
    while True:
        if job.checkpoint is not None:
            job.checkpoint()
        time.sleep(0.02)
