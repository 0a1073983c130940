"""Orders (buyers): placement with ``Idempotency-Key`` semantics, status, model and
allocations views. Running an order (claiming, the mechanism, settlement) is the order
pipeline's part, below the marked line.

State machine: ``queued → running → succeeded | failed``.
"""

import hashlib
import json
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from market import ledgers, markets, numerics, offers
from market.errors import (
    ConflictError,
    InvalidInputError,
    InvalidTransitionError,
    NotFoundError,
)
from market.schemas import (
    AllocationPublic,
    AllocationsPublic,
    LearnerPublic,
    LearnersPublic,
    OrderCreate,
    OrderPublic,
    Page,
    Progress,
)
from market.store import (
    Account,
    Allocation,
    Market,
    MarketParameters,
    Offer,
    Order,
    Role,
    RunStatus,
    db,
)


def _request_hash(market_id: int, body: OrderCreate) -> str:
    payload = json.dumps({"market_id": market_id, **body.model_dump()}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _validate(market: Market, body: OrderCreate) -> tuple[int, dict[str, Any]]:
    """The budget in minor units and the learner's params with defaults filled in.

    Learner params come from the learner's schema (never a noise seed: a buyer who knew
    the noise could remove it).
    """
    params = numerics.check_order_learner(
        body.learner,
        body.params,
        task=market.task,
        features=market.features,
        partition=market.partition,
    )
    budget_minor = ledgers.to_minor(body.budget)
    if budget_minor < 1:
        raise InvalidInputError("budget", "must be at least one minor unit (0.01)")
    return budget_minor, params


def _check_offers_fit_learner(
    session: Session, *, market_id: int, learner: str
) -> None:
    """Refuse an order whose learner cannot take the market's current offers (e.g. a
    user-level learner and sellers with fewer records than it needs), naming how many
    sellers fall short. Checked again when the order runs (offers may change)."""
    counts = [
        o.n_records for o in offers.list_active_offers(session, market_id=market_id)
    ]
    reason = numerics.records_per_seller_shortfall(learner, counts)
    if reason is not None:
        raise InvalidInputError("learner", reason)


def _existing(
    session: Session, *, buyer: Account, key: str, request_hash: str
) -> Order | None:
    stmt = select(Order).where(Order.buyer_id == buyer.id, Order.idempotency_key == key)
    order = session.exec(stmt).first()
    if order is not None and order.request_hash != request_hash:
        raise ConflictError("Idempotency-Key was already used with a different request")
    return order


def place_order(
    session: Session,
    *,
    market_id: int,
    buyer: Account,
    body: OrderCreate,
    idempotency_key: str | None = None,
) -> tuple[Order, bool]:
    """Record a queued order; return ``(order, created)``.

    With an ``idempotency_key`` a retry of the same request returns the same order
    (``created=False``).

    Raises
    ------
    NotFoundError, InvalidInputError
    ConflictError
        The key was used before with a different request.
    """
    market = markets.get_market_or_raise(session, market_id)
    request_hash = _request_hash(market_id, body)
    if idempotency_key is not None:
        found = _existing(
            session, buyer=buyer, key=idempotency_key, request_hash=request_hash
        )
        if found is not None:
            return found, False
    budget_minor, learner_params = _validate(market, body)
    _check_offers_fit_learner(session, market_id=market_id, learner=body.learner)
    params = markets.current_parameters(session, market_id)
    order = Order(
        market_id=market_id,
        buyer_id=buyer.id,  # type: ignore[arg-type]
        learner=body.learner,
        budget_minor=budget_minor,
        gamma=body.gamma,
        params=learner_params,
        parameters_id=params.id,  # type: ignore[arg-type]
        idempotency_key=idempotency_key,
        request_hash=request_hash,
    )
    session.add(order)
    try:
        session.commit()
    except IntegrityError:  # a concurrent retry with the same key won
        session.rollback()
        assert idempotency_key is not None
        found = _existing(
            session, buyer=buyer, key=idempotency_key, request_hash=request_hash
        )
        if found is None:
            raise
        return found, False
    session.refresh(order)
    return order, True


def get_order_or_raise(session: Session, *, order_id: int, account: Account) -> Order:
    """Return the order if ``account`` is its buyer or an admin; ``NotFoundError`` else."""
    order = session.get(Order, order_id)
    visible = order is not None and (
        account.role == Role.ADMIN or order.buyer_id == account.id
    )
    if not visible:
        raise NotFoundError(f"order {order_id} not found")
    assert order is not None
    return order


def to_public(session: Session, order: Order) -> OrderPublic:
    """Return the status view of an order."""
    params = session.get(MarketParameters, order.parameters_id)
    return OrderPublic(
        id=order.id,  # type: ignore[arg-type]
        market_id=order.market_id,
        status=order.status,
        learner=order.learner,
        budget=ledgers.to_major(order.budget_minor),
        gamma=order.gamma,
        parameters_version=params.version if params else 0,
        progress=Progress(stage=order.progress_stage, fraction=order.progress_fraction),
        error=order.error,
        summary=order.summary,
        created_at=order.created_at,
    )


def list_orders(
    session: Session,
    *,
    account: Account,
    market_id: int | None,
    limit: int,
    offset: int,
) -> Page[OrderPublic]:
    """Return a page of orders, newest first: a buyer's own, or every order (admin)."""
    stmt = select(Order)
    if account.role != Role.ADMIN:
        stmt = stmt.where(Order.buyer_id == account.id)
    if market_id is not None:
        stmt = stmt.where(Order.market_id == market_id)
    return db.paginate(
        session,
        stmt.order_by(col(Order.id).desc()),
        limit=limit,
        offset=offset,
        convert=lambda order: to_public(session, order),
    )


def get_model(session: Session, *, order_id: int, buyer: Account) -> dict[str, Any]:
    """Return the released model of the buyer's succeeded order.

    Raises
    ------
    NotFoundError
        Not the buyer's order.
    InvalidTransitionError
        The order has not succeeded (yet).
    """
    order = session.get(Order, order_id)
    if order is None or order.buyer_id != buyer.id:
        raise NotFoundError(f"order {order_id} not found")
    if order.status != RunStatus.SUCCEEDED or order.model is None:
        raise InvalidTransitionError(
            f"order {order_id} is {order.status}; the model exists once it has succeeded"
        )
    return order.model


def list_allocations(session: Session, *, order_id: int) -> AllocationsPublic:
    """Return per-seller ``ε`` and payment of an order (admin view), with each
    seller's ``c·u(ε)`` and whether IR holds in whole minor units, without slack."""
    order = session.get(Order, order_id)
    if order is None:
        raise NotFoundError(f"order {order_id} not found")
    params = session.get(MarketParameters, order.parameters_id)
    mech = dict(params.values if params is not None else {})
    u, u_power = str(mech.get("u", "linear")), float(mech.get("u_power", 2.0))
    rows = session.exec(
        select(Allocation, Offer.reported_cost)
        .join(Offer, col(Offer.id) == col(Allocation.offer_id))
        .where(Allocation.order_id == order_id)
        .order_by(col(Allocation.seller_id))
    ).all()
    items = [
        AllocationPublic(
            seller_id=a.seller_id,
            offer_id=a.offer_id,
            reported_cost=cost,
            epsilon=a.epsilon,
            payment=ledgers.to_major(a.payment_minor),
            payment_minor=a.payment_minor,
            privacy_cost=numerics.privacy_cost(cost, a.epsilon, u=u, u_power=u_power),
            individually_rational=numerics.individually_rational(
                a.payment_minor, cost, a.epsilon, u=u, u_power=u_power
            ),
            certificate=a.certificate,
        )
        for a, cost in rows
    ]
    total = sum(a.payment_minor for a, _ in rows)
    return AllocationsPublic(
        order_id=order_id,
        items=items,
        total_payment=ledgers.to_major(total),
        individually_rational=sum(a.individually_rational for a in items),
    )


def list_learners() -> LearnersPublic:
    """Every orderable learner (the registry), for any authenticated role."""
    return LearnersPublic(
        items=[LearnerPublic(**item) for item in numerics.list_learners()]
    )
