"""Settlement of one finished order with ``m`` sellers (``market.ledgers.settle_order``):
allocation rows, privacy and money ledger rows, under the write lock, on PostgreSQL
(a private schema, dropped afterwards) and SQLite (a temporary file).

Times the settlement alone (accounts, offers and the order are written before the
clock starts) and reports the log-log slope of time in ``m`` (1.0 = linear).

Run: ``python benchmarks/settlement.py --sizes 1000 10000 100000
--postgres postgresql+psycopg://postgres@127.0.0.1:5432/test``
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from sqlmodel import Session, func, select

from market import ledgers
from market.store import (
    Account,
    LedgerEntry,
    Market,
    MarketParameters,
    Offer,
    Order,
    create_all,
    db,
    make_engine,
)


def setup(engine: sa.engine.Engine, m: int) -> tuple[int, int, list[int], list[int]]:
    """Admin, buyer, ``m`` sellers with one offer each, one order; ids."""
    with Session(engine) as s:
        admin = Account(role="admin", name="a", key_prefix="p0", key_hash="h")
        buyer = Account(role="buyer", name="b", key_prefix="p1", key_hash="h")
        s.add_all([admin, buyer])
        s.flush()
        rows = [
            {"role": "seller", "name": f"s{i}", "key_prefix": f"s{i}", "key_hash": "h"}
            for i in range(m)
        ]
        s.execute(sa.insert(Account), rows)  # type: ignore[arg-type]
        sellers = list(
            s.exec(
                select(Account.id).where(Account.role == "seller").order_by(Account.id)
            )
        )
        market = Market(
            name="m", task="classification",
            features=[{"name": "f", "low": 0, "high": 1}],
            cost_prior={"family": "uniform", "params": {"low": 0, "high": 1}},
            lifetime_epsilon_cap=10.0, created_by=admin.id,
        )  # fmt: skip
        s.add(market)
        s.flush()
        params = MarketParameters(
            market_id=market.id, version=1, values={}, created_by=admin.id
        )
        s.add(params)
        s.flush()
        s.execute(
            sa.insert(Offer),
            [
                {
                    "market_id": market.id,
                    "seller_id": sid,
                    "records": [],
                    "records_scaled": [],
                    "n_records": 1,
                    "reported_cost": 0.1,
                }
                for sid in sellers
            ],
        )
        offers = list(
            s.exec(
                select(Offer.id).where(Offer.market_id == market.id).order_by(Offer.id)
            )
        )
        order = Order(
            market_id=market.id, buyer_id=buyer.id, learner="hetero_dp_logistic",
            budget_minor=10**15, parameters_id=params.id, params={},
        )  # fmt: skip
        s.add(order)
        s.commit()
        return int(order.id), int(market.id), sellers, offers  # type: ignore[arg-type]


def settle(engine: sa.engine.Engine, m: int) -> float:
    order_id, market_id, sellers, offers = setup(engine, m)
    rng = np.random.default_rng(0)
    spends = [
        ledgers.SellerSpend(s, o, float(e), int(p), {"kind": "bench"})
        for s, o, e, p in zip(
            sellers, offers, rng.uniform(0, 1, m), rng.integers(0, 1000, m), strict=True
        )
    ]
    t0 = time.perf_counter()
    with db.write_session(engine) as session:
        order = session.get(Order, order_id)
        market = session.get(Market, market_id)
        assert order is not None
        assert market is not None
        ledgers.settle_order(session, order=order, market=market, spends=spends)
    secs = time.perf_counter() - t0
    with Session(engine) as s:  # balanced: sellers' credits = the buyer's debit
        n = s.exec(select(func.count()).select_from(LedgerEntry)).one()
        total = s.exec(
            select(func.sum(LedgerEntry.amount_minor)).where(
                LedgerEntry.kind == "money"
            )
        ).one()
    assert n == 2 * m + 1, n
    assert total == 0, total
    return secs


def slope(ms: list[int], ts: list[float]) -> float:
    return float(np.polyfit(np.log(ms), np.log(ts), 1)[0]) if len(ms) > 1 else math.nan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000])
    ap.add_argument("--postgres", default=None)
    ap.add_argument("--no-sqlite", action="store_true")
    args = ap.parse_args()
    backends: list[tuple[str, str]] = []
    schema = f"pm_bench_{uuid.uuid4().hex[:12]}"
    tmp = tempfile.TemporaryDirectory()
    if args.postgres:
        backends.append(("postgres", args.postgres))
    if not args.no_sqlite:
        backends.append(("sqlite", "sqlite"))
    for name, base in backends:
        ts = []
        for m in args.sizes:
            if name == "postgres":
                admin = sa.create_engine(base)
                with admin.begin() as conn:
                    conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                    conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
                url = (
                    sa.engine.make_url(base)
                    .update_query_dict({"options": f"-csearch_path={schema}"})
                    .render_as_string(hide_password=False)
                )
            else:
                path = Path(tmp.name) / f"s{m}.db"
                url = f"sqlite:///{path}"
            engine = make_engine(url)
            create_all(engine)
            try:
                ts.append(settle(engine, m))
            finally:
                engine.dispose()
                if name == "postgres":
                    with admin.begin() as conn:
                        conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
                    admin.dispose()
            print(f"{name} m={m}: settle {ts[-1]:.3f} s ({1e6 * ts[-1] / m:.1f} µs/seller)",
                  flush=True)  # fmt: skip
        print(f"{name}: log-log slope {slope(args.sizes, ts):.2f}", flush=True)
    tmp.cleanup()


if __name__ == "__main__":
    main()
