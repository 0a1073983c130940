"""Order execution: caps from the ledger, settlement, budgets, failures with reasons.

Payments are the stand-in of ``pipeline_helpers`` (fast, not Myerson); what is tested
here is the pipeline around them.
"""

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sqlmodel import Session, select

from api.main import create_app
from market import numerics
from market.pipeline import instance as order_inputs
from market.runtime import worker
from market.store import Allocation, LedgerEntry, LedgerKind, Order
from tests.api.conftest import TestClient, fast_settings
from tests.market.pipeline_helpers import (
    add_sellers,
    market_body,
    stand_in_payments,
    wisconsin_raw,
)

__all__ = ["stand_in_payments"]


class Env:
    def __init__(self, client: Any, admin: dict[str, str], rng: np.random.Generator):
        self.client, self.admin, self.rng = client, admin, rng
        self.engine = client.app.state.engine
        r = client.post("/v1/buyers", json={"name": "buyer"})
        self.buyer = {"Authorization": f"Bearer {r.json()['api_key']}"}

    def market(self, n_sellers: int = 30, **kw: Any) -> int:
        r = self.client.post(
            "/v1/markets", headers=self.admin, json=market_body(rng=self.rng, **kw)
        )
        assert r.status_code == 201, r.text
        mid = int(r.json()["id"])
        self.sellers = add_sellers(self.client, mid, n_sellers, rng=self.rng)
        return mid

    def order(self, market_id: int, **body: Any) -> int:
        payload = {"learner": "hetero_dp_logistic", "budget": 100.0, "gamma": 1.0}
        payload.update(body)
        r = self.client.post(
            f"/v1/markets/{market_id}/orders", headers=self.buyer, json=payload
        )
        assert r.status_code == 202, r.text
        return int(r.json()["id"])

    def drain(self) -> None:
        w = worker.Worker(self.engine, lease_seconds=30)
        while w.run_once():
            pass

    def status(self, order_id: int) -> dict[str, Any]:
        r = self.client.get(f"/v1/orders/{order_id}", headers=self.buyer)
        assert r.status_code == 200
        return r.json()


@pytest.fixture
def env(database_url: str, rng: np.random.Generator) -> Iterator[Env]:
    from market.access import accounts
    from market.store import Role, session_scope

    settings = fast_settings(database_url)
    with TestClient(create_app(settings)) as client:
        with session_scope(client.app.state.engine, write=True) as s:  # type: ignore[attr-defined]
            _, key = accounts.create_account(
                s, role=Role.ADMIN, name="root", settings=settings
            )
        yield Env(client, {"Authorization": f"Bearer {key}"}, rng)


def _ledger(env: Env, order_id: int) -> list[LedgerEntry]:
    with Session(env.engine) as s:
        return list(s.exec(select(LedgerEntry).where(LedgerEntry.order_id == order_id)))


def test_order_settles_once_with_balanced_ledgers(
    env: Env, stand_in_payments: Any
) -> None:
    mid = env.market(cap=10.0)
    oid = env.order(mid, budget=50.0)
    env.drain()
    st = env.status(oid)
    assert st["status"] == "succeeded", st
    assert st["progress"] == {"stage": "done", "fraction": 1.0}
    allocs = env.client.get(f"/v1/orders/{oid}/allocations", headers=env.admin).json()
    items = allocs["items"]
    assert items
    total_minor = sum(a["payment_minor"] for a in items)
    assert total_minor <= 5000
    entries = _ledger(env, oid)
    money = [e for e in entries if e.kind == LedgerKind.MONEY]
    eps = [e for e in entries if e.kind == LedgerKind.EPSILON]
    assert sum(e.amount_minor for e in money) == 0  # type: ignore[misc]
    by_seller = {a["seller_id"]: a for a in items}
    assert {e.account_id: e.epsilon for e in eps} == {
        s: a["epsilon"] for s, a in by_seller.items()
    }
    # every debit is the release's guarantee: a_i·η + 2 ln(1 + a_i/(4λ)) ≤ cap
    assert all(0 < a["epsilon"] <= 10.0 for a in items)
    summary = st["summary"]
    assert summary["sellers_used"] == len(items)
    eps_values = sorted(a["epsilon"] for a in items)
    assert summary["epsilon"]["max"] == pytest.approx(eps_values[-1])
    assert summary["epsilon"]["min"] == pytest.approx(eps_values[0])
    assert summary["total_paid"] == pytest.approx(total_minor / 100)


def test_model_coefficients_are_in_raw_units(env: Env, stand_in_payments: Any) -> None:
    """Scoring the public validation records with the published raw-unit model gives
    the validation error the pipeline computed in the scaled space."""
    mid = env.market()
    oid = env.order(mid)
    env.drain()
    model = env.client.get(f"/v1/orders/{oid}/model", headers=env.buyer).json()
    assert set(model) >= {"coefficients", "intercept", "feature_names", "privacy"}
    market = env.client.get(f"/v1/markets/{mid}", headers=env.admin).json()
    val = market_body(rng=np.random.default_rng(0))  # same bounds
    low = np.array([f["low"] for f in val["features"]])
    high = np.array([f["high"] for f in val["features"]])
    with Session(env.engine) as s:
        from market.store import Market

        records = s.get(Market, mid).validation  # type: ignore[union-attr]
    X = np.clip(np.array([r["x"] for r in records]), low, high)
    y = np.array([r["y"] for r in records])
    score = X @ np.array(model["coefficients"]) + model["intercept"]
    err = float(np.mean(np.where(score >= 0, 1, -1) != y))
    assert err == pytest.approx(model["metrics"]["validation_error"], abs=1e-12)
    assert "records" not in str(model)
    assert market["name"] == "wisconsin"


def test_fixed_gamma_over_budget_fails_and_writes_nothing(
    env: Env, stand_in_payments: Any
) -> None:
    mid = env.market()
    oid = env.order(mid, budget=0.01)
    env.drain()
    st = env.status(oid)
    assert st["status"] == "failed"
    assert "over the budget" in st["error"]
    assert _ledger(env, oid) == []


def test_sequential_orders_never_pass_the_cap(env: Env, stand_in_payments: Any) -> None:
    cap = 2.0  # usable with λ = 0.3: the overhead at two sellers is 2·ln(1 + 1/1.2)
    mid = env.market(n_sellers=20, cap=cap, sigma=50.0, lam=0.3)
    ids = [env.order(mid, budget=100.0) for _ in range(4)]
    env.drain()
    statuses = [env.status(i) for i in ids]
    with Session(env.engine) as s:
        spent: dict[int, float] = {}
        for e in s.exec(select(LedgerEntry).where(LedgerEntry.kind == "epsilon")):
            spent[e.account_id] = spent.get(e.account_id, 0.0) + float(e.epsilon)  # type: ignore[arg-type]
    assert spent
    assert max(spent.values()) <= cap * (1 + 1e-12)
    assert statuses[0]["status"] == "succeeded"
    for st in statuses:
        assert st["status"] == "succeeded" or st["error"], st


@pytest.mark.parametrize(
    ("adapter", "stage"), [("myerson_payments", "payments"), ("release", "releasing")]
)
def test_internal_errors_fail_the_order_without_details_or_writes(
    env: Env,
    monkeypatch: pytest.MonkeyPatch,
    stand_in_payments: Any,
    adapter: str,
    stage: str,
) -> None:
    def boom(*_a: Any, **_k: Any) -> None:
        raise RuntimeError("secret detail 0.123456")

    monkeypatch.setattr(numerics, adapter, boom)
    mid = env.market()
    oid = env.order(mid)
    env.drain()
    st = env.status(oid)
    assert st["status"] == "failed"
    assert st["error"] == f"internal error in stage {stage} (RuntimeError)"
    assert "secret" not in st["error"]  # details only in the server log
    assert _ledger(env, oid) == []


def test_two_identical_orders_get_different_noise(
    env: Env, stand_in_payments: Any
) -> None:
    mid = env.market()
    a, b = env.order(mid), env.order(mid)
    env.drain()
    ma = env.client.get(f"/v1/orders/{a}/model", headers=env.buyer).json()
    mb = env.client.get(f"/v1/orders/{b}/model", headers=env.buyer).json()
    assert ma["coefficients"] != mb["coefficients"]


def test_seller_caps_fixed_point(rng: np.random.Generator) -> None:
    """Included sellers: ε_max + Δ_upper(m) ≤ min(remaining, max_ε) with m the number
    included; excluded sellers could not get a positive ε_max at that m either."""
    k, lam = 4.0, 0.05
    for _ in range(50):
        n = int(rng.integers(1, 40))
        remaining = rng.uniform(0, 4, n)
        max_eps = np.where(rng.random(n) < 0.3, rng.uniform(0, 4, n), np.inf)
        inc, eps_max = order_inputs.seller_caps(
            remaining, max_eps, k=k, lam=lam, learner="hetero_dp_logistic"
        )
        m = int(inc.sum())
        if m == 0:
            assert np.all(eps_max == 0)
            continue
        du = 2 * np.log(1 + min(k / m, 1) / (4 * lam))
        limit = np.minimum(remaining, max_eps)
        assert np.all(eps_max[inc] > 0)
        assert np.all(eps_max[inc] + du <= limit[inc] + 1e-12)
        assert np.all(limit[~inc] - du <= order_inputs.EPS_MAX_FLOOR + 1e-12)
        assert np.all(eps_max[~inc] == 0)


def test_orders_record_the_offers_they_used(env: Env, stand_in_payments: Any) -> None:
    mid = env.market(n_sellers=12)
    oid = env.order(mid)
    env.drain()
    with Session(env.engine) as s:
        order = s.get(Order, oid)
        used = {a.offer_id for a in s.exec(select(Allocation))}
    assert order is not None
    assert used <= set(order.offer_ids or [])
    X, _ = wisconsin_raw()
    assert X.shape[1] == 30


def _fake_choice(status: str) -> Any:
    from types import SimpleNamespace

    def choose(X: Any, y: Any, costs: Any, **kw: Any) -> Any:
        cfg = kw["config"].with_(gamma=2.5)
        alloc = numerics.allocate(
            X, y, costs, prior=kw["prior"], config=cfg, eps_max=kw["eps_max"]
        )
        pay = 0.5 * np.asarray(costs) * alloc.epsilon_total
        return SimpleNamespace(
            status=status,
            gamma=2.5,
            allocation=alloc,
            payments=pay,
            total_payment=123.0,
        )

    return choose


@pytest.mark.parametrize("status", ["ok", "nothing_affordable"])
def test_gamma_null_uses_choose_gamma(
    env: Env, monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    monkeypatch.setattr(numerics, "choose_gamma", _fake_choice(status))
    mid = env.market(n_sellers=12)
    oid = env.order(mid, gamma=None)
    env.drain()
    st = env.status(oid)
    if status == "ok":
        assert st["status"] == "succeeded", st
        assert (st["summary"]["gamma"], st["summary"]["gamma_source"]) == (
            2.5,
            "chosen",
        )
    else:
        assert st["status"] == "failed"
        assert "cheapest total payment found was 123.00" in st["error"]
        assert _ledger(env, oid) == []


def test_gamma_null_needs_a_validation_set(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(numerics, "choose_gamma", _fake_choice("ok"))
    mid = env.market(n_sellers=12, n_val=0)
    payload = {"learner": "hetero_dp_logistic", "budget": 100.0, "gamma": None}
    r = env.client.post(f"/v1/markets/{mid}/orders", headers=env.buyer, json=payload)
    assert r.status_code == 422, r.text  # refused at placement, never queued
    assert r.json()["field"] == "gamma"
    assert "validation set" in r.json()["detail"]


def test_gamma_for_the_budget_on_a_strict_market_spends_what_its_label_says(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``strict`` market, γ chosen for the budget, real Myerson payments.

    A spy on the learner's ``fit`` records every array it is given. The label
    ``end_to_end`` promises that the release is the only use of the records: so the
    final release must be the only fit that sees a private record (a row of the
    release's input that is not a public validation row), and each seller's ε ledger
    entry must equal the ε that fit reports for it — nothing else was spent. The old
    search fitted ~15 releases per γ on the sellers' records and charged none of them.
    """
    from learners import LEARNERS

    cls = LEARNERS["hetero_dp_logistic"]
    fits: list[dict[str, Any]] = []
    real_fit = cls.fit

    def spy_fit(self: Any, X: Any, y: Any, **kw: Any) -> Any:
        out = real_fit(self, X, y, **kw)
        rep = self.privacy_report_
        fits.append(
            {"X": np.array(X, copy=True), "eps": np.asarray(rep.sample_epsilon_total)}
        )
        return out

    monkeypatch.setattr(cls, "fit", spy_fit)
    seen: dict[str, Any] = {}
    real_choose, real_release = numerics.choose_gamma, numerics.release

    def spy_choose(*args: Any, **kw: Any) -> Any:
        seen["X_val"] = np.asarray(kw["X_val"])
        return real_choose(*args, **kw)

    def spy_release(learner: Any, X: Any, y: Any, **kw: Any) -> Any:
        seen["records"] = np.asarray(X)
        seen["groups"] = np.asarray(kw["groups"])
        return real_release(learner, X, y, **kw)

    monkeypatch.setattr(numerics, "choose_gamma", spy_choose)
    monkeypatch.setattr(numerics, "release", spy_release)
    mid = env.market(n_sellers=12, mode="strict", gamma=1.0, mu=1.0, sigma=1.0)
    oid = env.order(mid, gamma=None, budget=5.0)
    env.drain()
    st = env.status(oid)
    assert st["status"] == "succeeded", st
    assert st["summary"]["gamma_source"] == "chosen"
    assert st["summary"]["guarantee"] == "end_to_end"
    assert "gamma_note" in st["summary"]

    public = {tuple(r) for r in np.round(seen["X_val"], 12)}
    private = {
        tuple(r) for r in np.round(seen["records"], 12) if tuple(r) not in public
    }
    assert private, "the test needs records that are not validation rows"
    touched = [
        k
        for k, f in enumerate(fits)
        if any(tuple(r) in private for r in np.round(f["X"], 12))
    ]
    assert len(fits) > 1  # the search did score releases (on public rows)
    assert touched == [len(fits) - 1], f"{len(touched)} fits saw private records"
    release = fits[-1]
    np.testing.assert_array_equal(release["X"], seen["records"])
    # the ledger holds exactly the release's ε, seller by seller
    per_seller = np.zeros(int(seen["groups"].max()) + 1)
    np.maximum.at(per_seller, seen["groups"], release["eps"])
    eps_entries = [e for e in _ledger(env, oid) if e.kind == LedgerKind.EPSILON]
    allocs = env.client.get(f"/v1/orders/{oid}/allocations", headers=env.admin).json()
    assert sorted(e.epsilon for e in eps_entries) == pytest.approx(
        sorted(float(v) for v in per_seller if v > 0), rel=1e-12
    )
    assert sum(a["payment_minor"] for a in allocs["items"]) <= 500
