"""Order placement: Idempotency-Key under concurrent retries (T-DUR-2, small size)."""

import threading

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from market import orders
from market.errors import ConflictError
from market.schemas import OrderCreate
from market.store import Account, Offer, Order, Role, db
from tests.market.dbfixtures import add_market_and_buyer


def _setup(engine: Engine) -> tuple[int, int]:
    """A market with the two active offers an order needs, and a buyer."""
    with Session(engine, expire_on_commit=False) as s:
        market, buyer = add_market_and_buyer(s)
        for i in range(2):
            seller = Account(role=Role.SELLER, name=f"s{i}", key_prefix=f"s{i}", key_hash="h")
            s.add(seller)
            s.commit()
            record = {"x": [0.5], "y": 1}
            s.add(Offer(market_id=market.id, seller_id=seller.id, records=[record],
                        records_scaled=[record], n_records=1, reported_cost=0.5))  # fmt: skip
        s.commit()
        return market.id, buyer.id  # type: ignore[return-value]


def test_concurrent_retries_with_one_key_create_one_order(engine: Engine) -> None:
    market_id, buyer_id = _setup(engine)
    body = OrderCreate(learner="hetero_dp_logistic", budget=4.0, gamma=1.0)
    ids: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def retry() -> None:
        try:
            with db.session_scope(engine, write=True) as s:
                barrier.wait()
                buyer = s.get(Account, buyer_id)
                assert buyer is not None
                order, _ = orders.place_order(
                    s,
                    market_id=market_id,
                    buyer=buyer,
                    body=body,
                    idempotency_key="same",
                )
                ids.append(order.id)  # type: ignore[arg-type]
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=retry) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(ids) == 8
    assert len(set(ids)) == 1
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(Order)).one() == 1


def test_same_key_different_body_is_a_conflict(engine: Engine) -> None:
    market_id, buyer_id = _setup(engine)
    with Session(engine, expire_on_commit=False) as s:
        buyer = s.get(Account, buyer_id)
        assert buyer is not None
        _, created = orders.place_order(
            s,
            market_id=market_id,
            buyer=buyer,
            body=OrderCreate(learner="hetero_dp_logistic", budget=4.0, gamma=1.0),
            idempotency_key="k",
        )
        assert created
        with pytest.raises(ConflictError, match="Idempotency-Key"):
            orders.place_order(
                s,
                market_id=market_id,
                buyer=buyer,
                body=OrderCreate(learner="hetero_dp_logistic", budget=5.0),
                idempotency_key="k",
            )
