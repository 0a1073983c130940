"""Orders (buyers): placement with ``Idempotency-Key`` semantics, status, model and
allocations views. Running an order (claiming, the mechanism, settlement) is the order
pipeline's part, below the marked line.

State machine: ``queued → running → succeeded | failed``.
"""

import hashlib
import json
from typing import Any

import numpy as np
import sqlalchemy as sa
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
    EpsilonHistogram,
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
    CollectionStatus,
    CustodyRun,
    Market,
    MarketParameters,
    Offer,
    Order,
    Role,
    RunStatus,
    db,
    utcnow,
)


def _request_hash(market_id: int, body: OrderCreate) -> str:
    payload = json.dumps({"market_id": market_id, **body.model_dump()}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _validate(market: Market, body: OrderCreate) -> tuple[int, dict[str, Any]]:
    """The budget in minor units and the learner's params with defaults filled in.

    Learner params come from the learner's schema (never a noise seed: a buyer who knew
    the noise could remove it).
    """
    numerics.custody.check_custody_learner(
        body.learner, market.custody, market.partition
    )
    params = numerics.check_order_learner(
        body.learner,
        body.params,
        task=market.task,
        features=market.features,
        partition=market.partition,
    )
    if market.custody == "seller" and body.gamma is None:
        raise InvalidInputError(
            "gamma",
            "required on a seller-custody market: choosing gamma for the budget fits "
            "the learner on records, which this market never holds",
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
    active = offers.list_active_offers(session, market_id=market_id, with_records=False)
    counts = [o.n_records for o in active]
    if len(counts) < numerics.SMALLEST_ORDER:
        raise InvalidInputError(
            "offers",
            f"the market has {len(counts)} active offer(s); an order needs at least "
            f"{numerics.SMALLEST_ORDER}",
        )
    reason = numerics.records_per_seller_shortfall(learner, counts)
    if reason is not None:
        raise InvalidInputError("learner", reason)


def _check_gamma_choosable(market: Market, body: OrderCreate) -> None:
    """Refuse ``gamma: null`` (choose ``γ`` for the budget) where it cannot run: it
    scores candidates on the market's public validation set, which vertical markets
    never have and a horizontal market may lack."""
    if body.gamma is not None:
        return
    reason = numerics.gamma_choice_refusal(
        partition=market.partition, has_validation=bool(market.validation)
    )
    if reason is not None:
        raise InvalidInputError("gamma", reason)


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
    _check_gamma_choosable(market, body)
    params = markets.current_parameters(session, market_id)
    if market.custody == "seller" and market.partition != "vertical":
        numerics.custody.check_clear_features(
            body.learner,
            learner_params,
            config=numerics.learner_config(
                params.values, learner=body.learner, params=learner_params
            ),
            task=market.task,
            schema={
                "task": market.task,
                "features": market.features,
                "target": market.target,
            },
        )
    _check_offers_fit_learner(session, market_id=market_id, learner=body.learner)
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


def cancel_order(session: Session, *, order_id: int, account: Account) -> Order:
    """Cancel an order of ``account`` (its buyer or an admin); return it.

    A queued order is cancelled at once. A running one is asked to stop: its worker
    ends it ``cancelled`` at the next stage boundary, and settlement refuses it, so
    nothing is charged and nothing is paid. Cancelling a cancelled order is a no-op.

    Raises
    ------
    NotFoundError
        No such order visible to ``account``.
    ConflictError
        The order already finished (``succeeded`` or ``failed``), or it is a
        seller-custody order collecting reports.
    """
    order = get_order_or_raise(session, order_id=order_id, account=account)
    custody = session.get(CustodyRun, order_id)
    if custody is not None and custody.status == CollectionStatus.COLLECTING:
        # Sellers may already have disclosed reports, whose ε must be accounted:
        # the collection runs to its end (sellers who did not answer are neither
        # paid nor charged).
        raise ConflictError(
            f"order {order_id} is collecting reports from its sellers; a collecting "
            "order cannot be cancelled"
        )
    now = utcnow()
    queued = (
        sa.update(Order)
        .where(Order.id == order_id, Order.status == RunStatus.QUEUED)  # type: ignore[arg-type]
        .values(status=RunStatus.CANCELLED, finished_at=now, cancel_requested_at=now,
                progress_stage="cancelled", error="cancelled before it ran; nothing was charged")
    )  # fmt: skip
    running = (
        sa.update(Order)
        .where(
            Order.id == order_id,  # type: ignore[arg-type]
            Order.status == RunStatus.RUNNING,  # type: ignore[arg-type]
            Order.cancel_requested_at.is_(None),  # type: ignore[union-attr]
        )
        .values(cancel_requested_at=now)
    )
    for stmt in (queued, running):
        if session.execute(stmt).rowcount:  # type: ignore[attr-defined]
            break
    session.commit()
    session.refresh(order)
    if order.status in (RunStatus.SUCCEEDED, RunStatus.FAILED):
        raise ConflictError(
            f"order {order_id} already {order.status}; it cannot be cancelled"
        )
    return order


def public_status(order: Order) -> str:
    """The order's status as shown: a seller-custody order collecting reports is
    ``running`` (it waits in the queue between looks at its round)."""
    if order.status == RunStatus.QUEUED and order.progress_stage == "collecting":
        return RunStatus.RUNNING
    return order.status


def to_public(session: Session, order: Order) -> OrderPublic:
    """Return the status view of an order."""
    params = session.get(MarketParameters, order.parameters_id)
    return OrderPublic(
        id=order.id,  # type: ignore[arg-type]
        market_id=order.market_id,
        status=public_status(order),
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


def get_model_onnx(session: Session, *, order_id: int, buyer: Account) -> bytes:
    """The buyer's model as ONNX (:func:`market.orders.onnx_model.model_to_onnx`).

    Raises
    ------
    NotFoundError
        Not the buyer's order.
    InvalidTransitionError
        The order has not succeeded (yet), or its model has no linear predictor.
    """
    from market.orders.onnx_model import model_to_onnx  # onnx loads only when asked

    model = get_model(session, order_id=order_id, buyer=buyer)
    try:
        return model_to_onnx(model, name=f"privmarket_order_{order_id}")
    except ValueError as err:
        raise InvalidTransitionError(f"order {order_id}: {err}") from err


ALLOCATIONS_PAGE = 1000
"""Default rows of one page of an order's allocation (admin view)."""
ALLOCATIONS_PAGE_MAX = 10_000
"""Largest page of an order's allocation."""
EPSILON_BINS = 12
"""Bins of the allocation's ``ε`` histogram."""


def epsilon_histogram(eps: np.ndarray, bins: int = EPSILON_BINS) -> EpsilonHistogram:
    """``eps`` in ``bins`` equal-width bins from its smallest to its largest value (the
    largest in the last bin; one unit wide bins when all are equal)."""
    lo, hi = float(eps.min()), float(eps.max())
    width = (hi - lo) / bins if hi > lo else 1.0
    idx = np.minimum(bins - 1, np.floor((eps - lo) / width).astype(np.int64))
    counts = np.bincount(idx, minlength=bins)
    return EpsilonHistogram(
        low=lo, high=lo + width * bins, counts=[int(n) for n in counts]
    )


def list_allocations(
    session: Session,
    *,
    order_id: int,
    limit: int = ALLOCATIONS_PAGE,
    offset: int = 0,
) -> AllocationsPublic:
    """Return one page (by seller id) of an order's per-seller ``ε`` and payment
    (admin view), with each seller's ``c·u(ε)`` and whether IR holds in whole minor
    units, without slack; the totals, the IR count and the ``ε`` histogram are over
    the whole allocation (read as three columns, whatever the page)."""
    order = session.get(Order, order_id)
    if order is None:
        raise NotFoundError(f"order {order_id} not found")
    params = session.get(MarketParameters, order.parameters_id)
    mech = dict(params.values if params is not None else {})
    u, u_power = str(mech.get("u", "linear")), float(mech.get("u_power", 2.0))
    joined = (
        select(Allocation.epsilon, Allocation.payment_minor, Offer.reported_cost)
        .join(Offer, col(Offer.id) == col(Allocation.offer_id))
        .where(Allocation.order_id == order_id)
    )
    every = session.exec(joined).all()
    eps = np.array([r[0] for r in every], dtype=float)
    minor = np.array([r[1] for r in every], dtype=np.int64)
    costs = np.array([r[2] for r in every], dtype=float)
    ir_all = numerics.individually_rational_all(minor, costs, eps, u=u, u_power=u_power)
    rows = session.exec(
        select(
            Allocation.seller_id,
            Allocation.offer_id,
            Offer.reported_cost,
            Allocation.epsilon,
            Allocation.payment_minor,
            Allocation.certificate,
        )
        .join(Offer, col(Offer.id) == col(Allocation.offer_id))
        .where(Allocation.order_id == order_id)
        .order_by(col(Allocation.seller_id))
        .limit(limit)
        .offset(offset)
    ).all()
    page_cost = [float(r[2]) for r in rows]
    page_eps = [float(r[3]) for r in rows]
    page_minor = [int(r[4]) for r in rows]
    privacy = numerics.privacy_costs(page_cost, page_eps, u=u, u_power=u_power)
    ir = numerics.individually_rational_all(
        page_minor, page_cost, page_eps, u=u, u_power=u_power
    )
    items = [
        AllocationPublic(
            seller_id=seller,
            offer_id=offer,
            reported_cost=cost,
            epsilon=e,
            payment=ledgers.to_major(n),
            payment_minor=n,
            privacy_cost=float(p),
            individually_rational=bool(ok),
            certificate=cert,
        )
        for (seller, offer, _, _, _, cert), cost, e, n, p, ok in zip(
            rows, page_cost, page_eps, page_minor, privacy, ir, strict=True
        )
    ]
    return AllocationsPublic(
        order_id=order_id,
        items=items,
        total_payment=ledgers.to_major(int(minor.sum())),
        individually_rational=int(ir_all.sum()),
        total=len(every),
        limit=limit,
        offset=offset,
        sellers_used=int(np.sum(eps > 0)),
        epsilon_histogram=epsilon_histogram(eps) if eps.size else None,
    )


def market_takes(market: Market, learner: str) -> bool:
    """Whether ``market`` can take an order for ``learner``: its task, partition and
    missing values (``market.numerics.market_refusal``) and its custody (a
    seller-custody market takes only learners with a local protocol). Every rule a
    market puts on its learners is one condition here."""
    refusal = numerics.market_refusal(
        learner, task=market.task, partition=market.partition, features=market.features
    )
    custody = numerics.custody.takes_custody(learner, market.custody, market.partition)
    return refusal is None and custody


def list_learners(market: Market | None = None) -> LearnersPublic:
    """Every orderable learner (the registry); with a ``market``, only those it can
    take (:func:`market_takes`)."""
    items = [LearnerPublic(**item) for item in numerics.list_learners()]
    if market is not None:
        items = [item for item in items if market_takes(market, item.name)]
    return LearnersPublic(items=items)
