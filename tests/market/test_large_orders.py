"""What an order with very many sellers reads and locks: id lists longer than a
statement's parameter limit (PostgreSQL 65,535, SQLite 32,766), and the active offers
read as columns, on SQLite and PostgreSQL."""

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from market import ledgers, offers
from market.store import Account, Market, Offer, OfferStatus, db
from tests.market.test_ledgers import _settle, _setup

PAST_THE_LIMIT = 70_000


def test_ledger_sums_and_locks_take_more_ids_than_a_statement_has_parameters(
    engine: Engine,
) -> None:
    ids = _setup(engine, n_sellers=5, n_orders=2)
    assert _settle(engine, ids, ids["orders"][0], eps=0.5, pay=10)
    assert _settle(engine, ids, ids["orders"][1], eps=0.25, pay=10)
    absent = max(ids["sellers"]) + 1
    many = [*range(absent, absent + PAST_THE_LIMIT), *ids["sellers"]]
    with Session(engine) as s:
        spent = ledgers.epsilon_spent(s, market_id=ids["market"][0], seller_ids=many)
        assert len(spent) == len(many)
        assert {spent[i] for i in ids["sellers"]} == {0.75}
        assert set(spent.values()) == {0.0, 0.75}
        assert sum(v > 0 for v in spent.values()) == 5
        market = s.get(Market, ids["market"][0])
        assert market is not None
        left = ledgers.remaining_epsilon(s, market=market, seller_ids=many)
        assert {left[i] for i in ids["sellers"]} == {market.lifetime_epsilon_cap - 0.75}
    with db.write_session(engine) as s:
        db.lock_rows(s, account_ids=many)


@pytest.mark.parametrize("size", [1, 2, 3, 5000])
def test_id_filters_select_exactly_the_rows_of_the_ids(
    engine: Engine, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunked ``IN`` lists (SQLite) and one array (PostgreSQL) select the same rows
    as a plain ``IN`` whatever the chunk size."""
    monkeypatch.setattr(db, "IN_CHUNK", size)
    ids = _setup(engine, n_sellers=7, n_orders=0)
    wanted = [ids["sellers"][k] for k in (0, 2, 3, 6)] + [10**9]
    with Session(engine) as s:
        found = []
        for where in db.id_in(s, col(Account.id), wanted):
            found += list(s.exec(select(Account.id).where(where)).all())
        plain = s.exec(select(Account.id).where(col(Account.id).in_(wanted))).all()
    assert sorted(found) == sorted(plain) == sorted(wanted[:-1])


def test_active_offers_read_as_columns_are_the_stored_offers(engine: Engine) -> None:
    ids = _setup(engine, n_sellers=4, n_orders=0)
    scaled = [
        [{"x": [0.25, None], "y": 1.0}],
        [{"x": [-0.5, 0.125], "y": -1.0}, {"x": [0.0, 0.0], "y": 1.0}],
        [],
        [{"x": [1e-300, -0.3333333333333333], "y": -1.0}],
    ]
    with Session(engine) as s:
        rows = s.exec(select(Offer).where(col(Offer.id).in_(ids["offers"]))).all()
        for k, o in enumerate(sorted(rows, key=lambda o: o.id or 0)):
            o.records_scaled = scaled[k]
            o.n_records = len(scaled[k])
            o.reported_cost = 0.1 * (k + 1)
            o.max_epsilon = None if k % 2 else 2.5
            o.party = "p" if k == 3 else None
            o.status = OfferStatus.WITHDRAWN if k == 2 else OfferStatus.ACTIVE
            s.add(o)
        s.commit()
        active = offers.list_active_offers(s, market_id=ids["market"][0])
        lean = offers.list_active_offers(
            s, market_id=ids["market"][0], with_records=False
        )
        stored = s.exec(
            select(Offer)
            .where(Offer.status == OfferStatus.ACTIVE)
            .order_by(col(Offer.id))
        ).all()
    assert (
        [o.id for o in active]
        == [o.id for o in stored]
        == [ids["offers"][k] for k in (0, 1, 3)]
    )
    for got, want in zip(active, stored, strict=True):
        assert (got.seller_id, got.n_records, got.reported_cost, got.max_epsilon,
                got.party, got.records_scaled) == (
            want.seller_id, want.n_records, want.reported_cost, want.max_epsilon,
            want.party, want.records_scaled,
        )  # fmt: skip
    assert [o.records_scaled for o in lean] == [[], [], []]
    assert [o.n_records for o in lean] == [o.n_records for o in active]
