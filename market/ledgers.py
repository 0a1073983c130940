"""Append-only money and privacy ledgers; balances are sums of entries.

Money entries carry integer minor units (``models.MINOR_UNITS`` per unit); privacy
entries carry ``ε``. Nothing here updates or deletes a row, and nothing commits: the
caller's use case commits once, so a settlement and its order land together.

Cap invariant (per seller ``i`` and market): ``Σ ε entries ≤ lifetime_epsilon_cap``.
:func:`settle_order` checks it under the write lock (``db.write_session`` +
``db.lock_rows``), so two orders settling at once cannot both pass the check.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, func, select

from market import numerics
from market.errors import ConflictError, PrivacyBudgetExhaustedError
from market.schemas import EarningsItem, EarningsPublic, PrivacyItem, PrivacyPublic
from market.store import (
    Allocation,
    CollectionStatus,
    CustodyRun,
    CustodySeller,
    LedgerEntry,
    LedgerKind,
    Market,
    Offer,
    Order,
    db,
    utcnow,
)

CAP_RTOL = 1e-12
"""Relative slack on the cap check, for float sums of the same numbers in another order."""


@dataclass(frozen=True, slots=True)
class SellerSpend:
    """One seller's part of a finished order: ``ε`` debited and payment earned."""

    seller_id: int
    offer_id: int
    epsilon: float
    payment_minor: int
    certificate: dict[str, Any] | None = None


def to_minor(amount: float) -> int:
    """Convert money to minor units, rounding down so budgets are never exceeded (the
    one money rule, ``mechanisms.money``: ``0.29`` becomes 29, not 28)."""
    if not math.isfinite(amount):
        raise ValueError(f"amount must be finite, got {amount!r}")
    return numerics.to_minor(amount)


def to_major(amount_minor: int) -> float:
    """Convert minor units to currency units."""
    return numerics.to_major(amount_minor)


def add_money(
    session: Session,
    *,
    account_id: int,
    amount_minor: int,
    market_id: int | None = None,
    order_id: int | None = None,
) -> LedgerEntry:
    """Append a money entry (positive: credit, negative: debit)."""
    entry = LedgerEntry(
        account_id=account_id,
        market_id=market_id,
        order_id=order_id,
        kind=LedgerKind.MONEY,
        amount_minor=int(amount_minor),
    )
    session.add(entry)
    return entry


def add_epsilon(
    session: Session,
    *,
    account_id: int,
    epsilon: float,
    market_id: int,
    order_id: int | None = None,
) -> LedgerEntry:
    """Append a privacy entry (positive: spend; negative: release a reservation)."""
    entry = LedgerEntry(
        account_id=account_id,
        market_id=market_id,
        order_id=order_id,
        kind=LedgerKind.EPSILON,
        epsilon=float(epsilon),
    )
    session.add(entry)
    return entry


def money_balance(session: Session, *, account_id: int) -> int:
    """Return the account's money balance in minor units."""
    stmt = select(func.coalesce(func.sum(LedgerEntry.amount_minor), 0)).where(
        LedgerEntry.account_id == account_id, LedgerEntry.kind == LedgerKind.MONEY
    )
    return int(session.exec(stmt).one())


def epsilon_spent(
    session: Session, *, market_id: int, seller_ids: Iterable[int]
) -> dict[int, float]:
    """Return ``Σ ε`` per seller in a market (0 for sellers without entries)."""
    ids = list(seller_ids)
    spent = dict.fromkeys(ids, 0.0)
    if not ids:
        return spent
    for where in db.id_in(session, col(LedgerEntry.account_id), ids):
        stmt = (
            select(LedgerEntry.account_id, func.sum(LedgerEntry.epsilon))
            .where(
                LedgerEntry.market_id == market_id,
                LedgerEntry.kind == LedgerKind.EPSILON,
                where,
            )
            .group_by(col(LedgerEntry.account_id))
        )
        for account_id, total in session.exec(stmt).all():
            spent[int(account_id)] = float(total or 0.0)
    return spent


def epsilon_reserved(
    session: Session,
    *,
    market_id: int,
    seller_ids: Iterable[int],
    exclude_order_id: int | None = None,
) -> dict[int, float]:
    """Return per seller the ``ε`` allocated to it by seller-custody orders that are
    still collecting reports (a seller may answer any of their requests, so that ε is
    held until the order settles), except ``exclude_order_id``'s own."""
    ids = list(seller_ids)
    out = dict.fromkeys(ids, 0.0)
    if not ids:
        return out
    for where in db.id_in(session, col(CustodySeller.seller_id), ids):
        stmt = (
            select(CustodySeller.seller_id, func.sum(CustodySeller.epsilon))
            .join(CustodyRun, col(CustodyRun.order_id) == col(CustodySeller.order_id))
            .join(Order, col(Order.id) == col(CustodySeller.order_id))
            .where(
                CustodySeller.market_id == market_id,
                where,
                CustodyRun.status == CollectionStatus.COLLECTING,
                col(Order.status).in_(("queued", "running")),
            )
            .group_by(col(CustodySeller.seller_id))
        )
        if exclude_order_id is not None:
            stmt = stmt.where(CustodySeller.order_id != exclude_order_id)
        for seller_id, total in session.exec(stmt).all():
            out[int(seller_id)] = float(total or 0.0)
    return out


def remaining_epsilon(
    session: Session,
    *,
    market: Market,
    seller_ids: Iterable[int],
    exclude_order_id: int | None = None,
) -> dict[int, float]:
    """Return ``max(cap − spent − reserved, 0)`` per seller: the ``ε_max`` an order may
    use (``reserved``: :func:`epsilon_reserved`, without ``exclude_order_id``'s own)."""
    ids = list(seller_ids)
    spent = epsilon_spent(session, market_id=market.id, seller_ids=ids)  # type: ignore[arg-type]
    held = epsilon_reserved(
        session,
        market_id=market.id,  # type: ignore[arg-type]
        seller_ids=ids,
        exclude_order_id=exclude_order_id,
    )
    cap = market.lifetime_epsilon_cap
    return {i: max(cap - s - held[i], 0.0) for i, s in spent.items()}


def _check_caps(
    session: Session,
    *,
    market: Market,
    spends: Sequence[SellerSpend],
    order_id: int | None = None,
) -> None:
    remaining = remaining_epsilon(
        session,
        market=market,
        seller_ids=[s.seller_id for s in spends],
        exclude_order_id=order_id,
    )
    cap = market.lifetime_epsilon_cap
    for s in spends:
        if s.epsilon < 0:
            raise ConflictError(f"negative epsilon for seller {s.seller_id}")
        if s.epsilon > remaining[s.seller_id] + CAP_RTOL * cap:
            raise PrivacyBudgetExhaustedError(
                f"seller {s.seller_id} has {remaining[s.seller_id]:.6g} of its privacy budget"
                f" left in market {market.id}, the order needs {s.epsilon:.6g}"
            )


def settle_order(
    session: Session, *, order: Order, market: Market, spends: Sequence[SellerSpend]
) -> None:
    """Write allocations, payments and privacy spends of a finished order (no commit).

    Must run inside ``db.write_session``; locks the sellers' rows first (PostgreSQL).
    Money: each seller ``+payment``, the buyer ``−Σ payments``.

    Raises
    ------
    ConflictError
        The payments exceed the order's budget, or an amount is negative.
    PrivacyBudgetExhaustedError
        A spend would push a seller past the market's lifetime cap.
    """
    total = sum(int(s.payment_minor) for s in spends)
    if any(s.payment_minor < 0 for s in spends) or total > order.budget_minor:
        raise ConflictError(
            f"payments {total} exceed the budget {order.budget_minor} (minor units)"
        )
    db.lock_rows(session, account_ids=[s.seller_id for s in spends])
    _check_caps(session, market=market, spends=spends, order_id=order.id)
    # Multi-row INSERTs of the Core tables (SQLAlchemy batches the parameter sets),
    # not one ORM object per row: at 10⁴ sellers the per-object unit of work was ~3 ms
    # a seller on PostgreSQL (``benchmarks/settlement.py``). The rows and their
    # values are the ones the per-row version wrote; they share one timestamp.
    now = utcnow()
    session.flush()
    if spends:
        session.execute(
            sa.insert(_table(Allocation)),
            [
                {
                    "order_id": order.id,
                    "seller_id": s.seller_id,
                    "offer_id": s.offer_id,
                    "epsilon": float(s.epsilon),
                    "payment_minor": int(s.payment_minor),
                    "certificate": s.certificate,
                }
                for s in spends
            ],
        )
        entries = []
        for s in spends:
            entries.append(
                _entry(s.seller_id, market.id, order.id, LedgerKind.EPSILON, now,
                       epsilon=float(s.epsilon))
            )  # fmt: skip
            entries.append(
                _entry(s.seller_id, market.id, order.id, LedgerKind.MONEY, now,
                       amount_minor=int(s.payment_minor))
            )  # fmt: skip
        session.execute(sa.insert(_table(LedgerEntry)), entries)
    add_money(
        session,
        account_id=order.buyer_id,
        amount_minor=-total,
        market_id=market.id,
        order_id=order.id,
    )
    session.flush()


def _table(model: type[Any]) -> sa.Table:
    """The Core table of a model: an INSERT of it with many parameter sets runs as
    multi-row INSERTs (the ORM's bulk INSERT of the entity ran one statement a row on
    PostgreSQL)."""
    table = model.__table__
    assert isinstance(table, sa.Table)
    return table


def _entry(
    account_id: int,
    market_id: int | None,
    order_id: int | None,
    kind: str,
    created_at: datetime,
    *,
    epsilon: float | None = None,
    amount_minor: int | None = None,
) -> dict[str, Any]:
    """One ledger row as the values :func:`add_money` / :func:`add_epsilon` write."""
    return {
        "account_id": account_id,
        "market_id": market_id,
        "order_id": order_id,
        "kind": str(kind),
        "amount_minor": amount_minor,
        "epsilon": epsilon,
        "created_at": created_at,
    }


def earnings(session: Session, *, seller_id: int) -> EarningsPublic:
    """Return the seller's per-order ``ε`` and payment, from the ledger."""
    rows = session.exec(
        select(
            LedgerEntry.order_id,
            LedgerEntry.market_id,
            LedgerEntry.kind,
            LedgerEntry.amount_minor,
            LedgerEntry.epsilon,
        )
        .where(
            LedgerEntry.account_id == seller_id, col(LedgerEntry.order_id).is_not(None)
        )
        .order_by(col(LedgerEntry.id))
    ).all()
    items: dict[int, dict[str, float | int]] = {}
    for order_id, market_id, kind, amount_minor, epsilon in rows:
        item = items.setdefault(
            int(order_id), {"market_id": int(market_id), "epsilon": 0.0, "minor": 0}
        )
        if kind == LedgerKind.MONEY:
            item["minor"] = int(item["minor"]) + int(amount_minor)
        else:
            item["epsilon"] = float(item["epsilon"]) + float(epsilon)
    out = [
        EarningsItem(
            order_id=o,
            market_id=int(v["market_id"]),
            epsilon=float(v["epsilon"]),
            payment=to_major(int(v["minor"])),
        )
        for o, v in items.items()
    ]
    total = sum(int(v["minor"]) for v in items.values())
    return EarningsPublic(items=out, total_payment=to_major(total))


def privacy(session: Session, *, seller_id: int) -> PrivacyPublic:
    """Return spent, cap and remaining ``ε`` for every market the seller is in."""
    offered = select(Offer.market_id).where(Offer.seller_id == seller_id)
    spent_in = select(LedgerEntry.market_id).where(
        LedgerEntry.account_id == seller_id, LedgerEntry.kind == LedgerKind.EPSILON
    )
    ids = {int(m) for m in session.exec(offered).all()} | {
        int(m) for m in session.exec(spent_in).all() if m is not None
    }
    items = []
    for market_id in sorted(ids):
        market = session.get(Market, market_id)
        assert market is not None
        spent = epsilon_spent(session, market_id=market_id, seller_ids=[seller_id])[
            seller_id
        ]
        cap = market.lifetime_epsilon_cap
        items.append(
            PrivacyItem(
                market_id=market_id,
                epsilon_spent=spent,
                lifetime_epsilon_cap=cap,
                remaining=max(cap - spent, 0.0),
            )
        )
    return PrivacyPublic(items=items)
