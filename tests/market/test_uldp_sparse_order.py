"""``uldp_sparse_linear`` ordered through the HTTP API on a regression market (issue 11).

Sellers offer several records each; the mechanism prices one summary row per seller
(its mean scaled record and target, ``compute.seller_summary_rows``) with the squared
loss, pays per seller, and the learner fits on all records with ``groups`` = seller and
every record at its seller's ``ε_i``. The model comes back with the selected support,
raw-unit coefficients (zero off the support) and the ``user_level_local`` guarantee.

Payments are the fast stand-in of ``pipeline_helpers`` (the allocation is the real one).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sqlmodel import Session, func, select

from market.store import LedgerEntry, LedgerKind, Order
from tests.market.pipeline_helpers import (
    create_priced_market,
    offer_as_new_seller,
    stand_in_payments,
)
from tests.market.test_orders_run import Env, env

__all__ = ["env", "stand_in_payments"]

D = 8
FEATURES = [{"name": f"f{j}", "low": -3.0, "high": 3.0} for j in range(D)]
TARGET = {"low": -12.0, "high": 12.0}
TRUE = {0: 2.0, 5: -2.0}  # raw units; the rest are 0
NOISE = 0.5


def _draw(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = np.clip(rng.standard_normal((n, D)), -3.0, 3.0)
    y = sum(c * X[:, j] for j, c in TRUE.items()) + NOISE * rng.standard_normal(n)
    return X, np.asarray(y)


def _market(env: Env, records: list[int], *, eps_avg_max: float = 6.0) -> int:
    mid = create_priced_market(
        env.client,
        env.admin,
        name="sensors",
        task="regression",
        features=FEATURES,
        target=TARGET,
        eps_avg_max=eps_avg_max,
    )
    for j, n in enumerate(records):
        X, y = _draw(n, env.rng)
        offer_as_new_seller(
            env.client,
            mid,
            name=f"u{j}",
            records=[
                {"x": x.tolist(), "y": float(v)} for x, v in zip(X, y, strict=True)
            ],
            cost=float(env.rng.uniform(0.05, 0.95)),
        )
    return mid


def _n_orders(env: Env) -> int:
    with Session(env.engine) as s:
        return int(s.exec(select(func.count()).select_from(Order)).one())


def test_order_returns_support_and_coefficients_with_per_seller_epsilon(
    env: Env, stand_in_payments: Any
) -> None:
    n_sellers = 240
    records = [int(n) for n in env.rng.integers(10, 21, n_sellers)]
    mid = _market(env, records)
    oid = env.order(
        mid,
        learner="uldp_sparse_linear",
        budget=10_000.0,
        gamma=0.001,
        params={"sparsity": 3, "k_sel": 1, "n_bins": 4, "bound": 0.75},
    )
    env.drain()
    st = env.status(oid)
    assert st["status"] == "succeeded", st["error"]
    model = env.client.get(f"/v1/orders/{oid}/model", headers=env.buyer).json()
    assert model["learner"] == "uldp_sparse_linear"
    assert model["privacy"]["guarantee"] == "user_level_local"
    assert model["privacy"]["unit"] == "seller"
    # the selected support (3 indices): with 120 selection sellers the heavy-hitter
    # oracle misses a true feature in about 1 % of fits (a statistical property tested
    # in tests/learners/uldp_sparse), so this plumbing test asserts what always holds:
    # a true feature is selected, the coefficients are zero off the support, and each
    # selected true feature has the right sign in raw units
    support = model["support"]
    assert len(support) == 3
    assert set(TRUE) & set(support), support
    coef = np.asarray(model["coefficients"])
    off = [j for j in range(D) if j not in support]
    assert np.all(coef[off] == 0.0)
    for j, c in TRUE.items():
        if j in support:
            assert np.sign(coef[j]) == np.sign(c), (j, coef[j])
    assert model["intercept"] is not None
    # the true intercept is 0; its LDP estimate had a standard deviation of about 0.7
    # (raw units) over 12 fits, with Laplace tails (2.7 seen once in CI), while a
    # mistake in the raw-unit mapping moves it by the target's half span (12)
    assert abs(model["intercept"]) < 4.0
    # one allocation and one ε debit per seller, covering all of its records
    allocs = env.client.get(f"/v1/orders/{oid}/allocations", headers=env.admin).json()
    items = allocs["items"]
    eps = np.array([a["epsilon"] for a in items])
    assert len(items) == len({a["seller_id"] for a in items}) >= 100
    assert np.all(eps > 0)
    with Session(env.engine) as s:
        debits = list(
            s.exec(
                select(LedgerEntry).where(
                    LedgerEntry.order_id == oid, LedgerEntry.kind == LedgerKind.EPSILON
                )
            )
        )
    assert sorted(e.epsilon for e in debits) == pytest.approx(sorted(eps.tolist()))
    assert len({e.account_id for e in debits}) == len(debits)
    # every participating seller sent exactly one message at its full ε_i: the stages'
    # largest spends are the largest allocated ε, and the summary's max is the same
    stages = model["privacy"]["stages"]
    assert {s["stage"] for s in stages} == {
        "selection: heavy-hitter bit",
        "estimation (2-SLR): bin-localization bit",
        "estimation (2-SLR): Laplace mean report",
    }
    assert max(s["max"] for s in stages) == pytest.approx(eps.max(), rel=1e-12)
    assert model["privacy"]["epsilon"]["max"] == pytest.approx(eps.max(), rel=1e-12)


def test_sellers_with_too_few_records_are_refused_at_order_time(env: Env) -> None:
    mid = _market(env, [12, 3, 15, 2, 11])
    before = _n_orders(env)
    r = env.client.post(
        f"/v1/markets/{mid}/orders",
        headers=env.buyer,
        json={"learner": "uldp_sparse_linear", "budget": 10.0, "gamma": 1.0},
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "learner"
    assert "2 of 5 sellers have fewer" in r.text
    assert _n_orders(env) == before


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"algorithm": "three_round"}, "params.algorithm"),
        ({"sparsity": 0}, "params.sparsity"),
        ({"n_bins": 1}, "params.n_bins"),
        ({"bound": 0.0}, "params.bound"),
        ({"hh_alpha": 1.0}, "params.hh_alpha"),
        ({"k_sel": 0}, "params.k_sel"),
        ({"batch_size": 1}, "params.batch_size"),
        ({"seed": 3}, "params.seed"),
    ],
)
def test_bad_params_are_422_naming_the_field_and_store_nothing(
    env: Env, params: dict[str, Any], field: str
) -> None:
    mid = _market(env, [10, 10])
    before = _n_orders(env)
    r = env.client.post(
        f"/v1/markets/{mid}/orders",
        headers=env.buyer,
        json={
            "learner": "uldp_sparse_linear",
            "budget": 10.0,
            "gamma": 1.0,
            "params": params,
        },
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert _n_orders(env) == before


def test_learner_is_listed_for_regression_markets_with_its_record_minimum(
    env: Env,
) -> None:
    items = {
        i["name"]: i
        for i in env.client.get("/v1/learners", headers=env.buyer).json()["items"]
    }
    spec = items["uldp_sparse_linear"]
    assert spec["tasks"] == ["regression"]
    assert spec["privacy_model"] == "user_level_local"
    assert spec["mechanism_loss"] == "squared"
    assert 1 < spec["min_records_per_seller"] <= 10


def test_seller_summary_rows_are_means_inside_the_unit_ball(
    rng: np.random.Generator,
) -> None:
    """The priced row of a seller is the mean of its scaled records (and targets): no
    scaling or clipping from the data, and it stays in the unit ball."""
    from market.pipeline.compute import seller_summary_rows

    groups = np.repeat(np.arange(30), rng.integers(5, 15, 30))
    Z = rng.standard_normal((groups.size, 4))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)  # records on the unit sphere
    y = rng.uniform(-1, 1, groups.size)
    X, ybar = seller_summary_rows(Z, y, groups, 30)
    for i in range(30):
        np.testing.assert_allclose(X[i], Z[groups == i].mean(axis=0), rtol=1e-12)
        assert ybar[i] == pytest.approx(y[groups == i].mean(), rel=1e-12)
    assert np.all(np.linalg.norm(X, axis=1) <= 1.0 + 1e-12)
    assert np.all(np.abs(ybar) <= 1.0)
