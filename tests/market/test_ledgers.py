"""Ledgers: money rounding, append-only settlement, and the lifetime cap under
concurrent settlements (T-DP-6(b) in small size) on SQLite and PostgreSQL."""

import threading
import time
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from market import ledgers
from market.errors import PrivacyBudgetExhaustedError
from market.store import (
    Account,
    Allocation,
    LedgerEntry,
    Market,
    MarketParameters,
    Offer,
    Order,
    db,
)

CAP = 3.0
EPS = 0.375  # exactly CAP / 8 in binary floating point


@given(cents=st.integers(min_value=0, max_value=10**13))
def test_to_minor_is_exact_for_two_decimal_amounts(cents: int) -> None:
    assert ledgers.to_minor(float(Decimal(cents) / 100)) == cents


@given(amount=st.floats(min_value=0, max_value=1e12, allow_nan=False))
def test_to_minor_rounds_down_never_up(amount: float) -> None:
    minor = ledgers.to_minor(amount)
    exact = Decimal(repr(amount)) * 100
    assert minor <= exact < minor + 1


def test_to_minor_rejects_non_finite() -> None:
    with pytest.raises(ValueError, match="amount must be finite"):
        ledgers.to_minor(float("inf"))


def _setup(
    engine: Engine, *, n_sellers: int, n_orders: int, budget_minor: int = 10_000
) -> dict[str, list[int]]:
    with Session(engine) as s:
        admin = Account(role="admin", name="a", key_prefix="p0", key_hash="h")
        buyer = Account(role="buyer", name="b", key_prefix="p1", key_hash="h")
        sellers = [
            Account(role="seller", name=f"s{i}", key_prefix=f"s{i}", key_hash="h")
            for i in range(n_sellers)
        ]
        s.add_all([admin, buyer, *sellers])
        s.flush()
        market = Market(
            name="m",
            task="classification",
            features=[{"name": "f", "low": 0, "high": 1}],
            cost_prior={"family": "uniform", "params": {"low": 0, "high": 1}},
            lifetime_epsilon_cap=CAP,
            created_by=admin.id,
        )
        s.add(market)
        s.flush()
        params = MarketParameters(
            market_id=market.id, version=1, values={}, created_by=admin.id
        )
        offers = [
            Offer(
                market_id=market.id,
                seller_id=x.id,
                records=[],
                records_scaled=[],
                n_records=1,
                reported_cost=0.1,
            )
            for x in sellers
        ]
        s.add_all([params, *offers])
        s.flush()
        orders = [
            Order(
                market_id=market.id,
                buyer_id=buyer.id,
                learner="hetero_dp_logistic",
                budget_minor=budget_minor,
                parameters_id=params.id,
                params={},
            )
            for _ in range(n_orders)
        ]
        s.add_all(orders)
        s.commit()
        return {
            "market": [market.id],
            "buyer": [buyer.id],
            "sellers": [x.id for x in sellers],
            "offers": [o.id for o in offers],
            "orders": [o.id for o in orders],
        }


def _settle(
    engine: Engine, ids: dict[str, list[int]], order_id: int, *, eps: float, pay: int
) -> bool:
    spends = [
        ledgers.SellerSpend(s, o, eps, pay)
        for s, o in zip(ids["sellers"], ids["offers"], strict=True)
    ]
    try:
        with db.write_session(engine) as session:
            order = session.get(Order, order_id)
            market = session.get(Market, ids["market"][0])
            assert order is not None
            assert market is not None
            ledgers.settle_order(session, order=order, market=market, spends=spends)
    except PrivacyBudgetExhaustedError:
        return False
    return True


def _spent(engine: Engine, market_id: int, sellers: list[int]) -> dict[int, float]:
    with Session(engine) as s:
        return ledgers.epsilon_spent(s, market_id=market_id, seller_ids=sellers)


def test_settlement_writes_balanced_money_and_privacy(engine: Engine) -> None:
    ids = _setup(engine, n_sellers=3, n_orders=1)
    assert _settle(engine, ids, ids["orders"][0], eps=0.5, pay=333)
    with Session(engine) as s:
        assert ledgers.money_balance(s, account_id=ids["buyer"][0]) == -999
        for seller in ids["sellers"]:
            assert ledgers.money_balance(s, account_id=seller) == 333
        total = s.exec(
            select(func.sum(LedgerEntry.amount_minor)).where(
                LedgerEntry.kind == "money"
            )
        ).one()
        assert total == 0  # double entry: what the buyer pays, the sellers earn
        assert len(s.exec(select(Allocation)).all()) == 3
    assert set(_spent(engine, ids["market"][0], ids["sellers"]).values()) == {0.5}


def test_cap_is_enforced_sequentially_to_the_last_exact_unit(engine: Engine) -> None:
    ids = _setup(engine, n_sellers=2, n_orders=10)
    results = [_settle(engine, ids, o, eps=EPS, pay=1) for o in ids["orders"]]
    assert results == [True] * 8 + [False] * 2
    assert set(_spent(engine, ids["market"][0], ids["sellers"]).values()) == {CAP}


def test_concurrent_settlements_never_exceed_the_cap(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """24 orders × 8 threads demand 3× each seller's cap; exactly 8 may settle."""
    ids = _setup(engine, n_sellers=3, n_orders=24)
    original = ledgers._check_caps

    def slow_check(session: Session, **kw: object) -> None:
        original(session, **kw)  # type: ignore[arg-type]
        time.sleep(
            0.005
        )  # widen the check-then-write window: unlocked code would overdraw

    monkeypatch.setattr(ledgers, "_check_caps", slow_check)
    outcomes: list[bool] = []
    lock = threading.Lock()
    queue = list(ids["orders"])

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                order_id = queue.pop()
            ok = _settle(engine, ids, order_id, eps=EPS, pay=1)
            with lock:
                outcomes.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outcomes) == 24
    assert sum(outcomes) == 8
    spent = _spent(engine, ids["market"][0], ids["sellers"])
    assert max(spent.values()) <= CAP
    assert set(spent.values()) == {CAP}
    with Session(engine) as s:
        assert len(s.exec(select(Allocation)).all()) == 8 * 3
