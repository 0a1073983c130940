"""Report requests and reports (seller custody).

A seller lists its open requests (one per round of an order that allocated it ε) and
answers each with the report its client computed on its own machine. A report is
stored only if it lies in the randomizer's output space (``numerics.custody``) and the
request is the seller's, still open and before its deadline; otherwise nothing is
stored and the reason is named (``422`` the field, ``403`` not yours, ``404`` no such
request, ``409`` answered already or closed).
"""

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, func, select

from market import ledgers, numerics
from market.errors import ConflictError, ForbiddenError, NotFoundError
from market.schemas import (
    CollectionPublic,
    CollectionSeller,
    ReportAccepted,
    ReportIn,
    ReportRequestPublic,
    ReportRequestsPublic,
)
from market.store import (
    Account,
    CustodyRun,
    CustodySeller,
    Order,
    ReportRequest,
    RequestStatus,
    Role,
    RunStatus,
    utcnow,
)

REQUESTS_MAX = 500
"""Most requests returned by one listing (oldest first)."""


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _public(row: ReportRequest) -> ReportRequestPublic:
    return ReportRequestPublic(
        id=row.id,  # type: ignore[arg-type]
        order_id=row.order_id,
        market_id=row.market_id,
        round=row.round,
        randomizer=row.randomizer,
        epsilon=row.epsilon,
        public=dict(row.request.get("public") or {}),
        request=dict(row.request),
        deadline=row.deadline,
        status=row.status,
        answered_at=row.answered_at,
    )


def list_requests(
    session: Session,
    *,
    seller: Account,
    market_id: int | None = None,
    status: str = "open",
) -> ReportRequestsPublic:
    """The seller's report requests, oldest first: ``open`` (unanswered and before
    their deadline), or ``all``."""
    stmt = select(ReportRequest).where(ReportRequest.seller_id == seller.id)
    if market_id is not None:
        stmt = stmt.where(ReportRequest.market_id == market_id)
    if status == "open":
        stmt = stmt.where(
            ReportRequest.status == RequestStatus.OPEN,
            col(ReportRequest.deadline) > utcnow(),
        )
    rows = session.exec(stmt.order_by(col(ReportRequest.id)).limit(REQUESTS_MAX)).all()
    return ReportRequestsPublic(items=[_public(r) for r in rows])


def _refusal(row: ReportRequest) -> ConflictError:
    if row.status == RequestStatus.ANSWERED:
        return ConflictError(
            f"request {row.id} was answered already; a report is sent once"
        )
    return ConflictError(
        f"request {row.id} is closed: its deadline "
        f"{_utc(row.deadline).isoformat()} has passed"
    )


def submit_report(
    session: Session, *, seller: Account, request_id: int, body: ReportIn
) -> ReportAccepted:
    """Store a seller's report for one of its open requests.

    Raises
    ------
    NotFoundError
        No such request.
    ForbiddenError
        The request is another seller's.
    ConflictError
        Answered already (a duplicate), or closed / past its deadline.
    InvalidInputError
        The report is outside the randomizer's output space (``report.<field>``).
    """
    row = session.get(ReportRequest, request_id)
    if row is None:
        raise NotFoundError(f"report request {request_id} not found")
    if row.seller_id != seller.id:
        raise ForbiddenError(f"report request {request_id} is not yours")
    now = utcnow()
    if row.status != RequestStatus.OPEN or _utc(row.deadline) <= now:
        raise _refusal(row)
    numerics.custody.validate_report(row.request, body.report)
    table: Any = ReportRequest.__table__  # type: ignore[attr-defined]
    stmt = (
        sa.update(table)
        .where(
            table.c.id == request_id,
            table.c.status == RequestStatus.OPEN.value,
            table.c.deadline > now,
        )
        .values(
            status=RequestStatus.ANSWERED.value, report=body.report, answered_at=now
        )
    )
    result = session.execute(stmt)
    if not result.rowcount:  # type: ignore[attr-defined]
        session.rollback()
        session.refresh(row)
        raise _refusal(row)
    _wake_if_complete(session, row, now)
    session.commit()
    return ReportAccepted(
        request_id=request_id,
        order_id=row.order_id,
        round=row.round,
        status=RequestStatus.ANSWERED.value,
    )


def _wake_if_complete(session: Session, row: ReportRequest, now: datetime) -> None:
    """The round's last report: make the collecting order claimable at once."""
    left = session.exec(
        select(func.count())
        .select_from(ReportRequest)
        .where(
            ReportRequest.order_id == row.order_id,
            ReportRequest.round == row.round,
            ReportRequest.status == RequestStatus.OPEN,
        )
    ).one()
    if int(left):
        return
    order_table: Any = Order.__table__  # type: ignore[attr-defined]
    session.execute(
        sa.update(order_table)
        .where(
            order_table.c.id == row.order_id,
            order_table.c.status == RunStatus.QUEUED.value,
            order_table.c.progress_stage == "collecting",
        )
        .values(lease_expires_at=now)
    )


def collection_view(
    session: Session, *, order_id: int, account: Account
) -> CollectionPublic:
    """The collecting stage of a seller-custody order (its buyer or an admin).

    Raises
    ------
    NotFoundError
        Not visible to ``account``, or not a seller-custody order past its pricing.
    """
    order = session.get(Order, order_id)
    visible = order is not None and (
        account.role == Role.ADMIN or order.buyer_id == account.id
    )
    crun = session.get(CustodyRun, order_id) if visible else None
    if crun is None:
        raise NotFoundError(f"order {order_id} has no report collection")
    rows = session.exec(
        select(ReportRequest.round, ReportRequest.status).where(
            ReportRequest.order_id == order_id
        )
    ).all()
    in_round = [s for r, s in rows if r == crun.round]
    sellers = None
    if account.role == Role.ADMIN:
        sellers = [
            CollectionSeller(
                seller_id=s.seller_id,
                offer_id=s.offer_id,
                epsilon_allocated=s.epsilon,
                epsilon_spent=s.epsilon_spent,
                payment_at_allocation=ledgers.to_major(s.payment_minor),
                rounds_answered=s.rounds_answered,
                delivered=s.delivered,
            )
            for s in session.exec(
                select(CustodySeller)
                .where(CustodySeller.order_id == order_id)
                .order_by(col(CustodySeller.seller_index))
            ).all()
        ]
    return CollectionPublic(
        order_id=order_id,
        status=crun.status,
        round=crun.round,
        deadline=crun.round_deadline,
        round_reports_expected=len(in_round),
        round_reports_received=sum(1 for s in in_round if s == RequestStatus.ANSWERED),
        reports_expected=len(rows),
        reports_received=sum(1 for _, s in rows if s == RequestStatus.ANSWERED),
        sellers=sellers,
    )
