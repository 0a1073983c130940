"""Run a seller-custody order: price it, then collect its rounds of reports.

A seller-custody market holds no record. Its order is loaded and priced as any order
(``market.pipeline.custody``: strict-mode allocation and Myerson payments from the
reported costs and public data), then enters the stage ``collecting``:

1. :func:`start` (first claim): price, build the learner's local protocol over the
   included sellers (their allocated ``ε_i`` and public record counts), and in one
   fenced transaction store the protocol's JSON state (``custody_run``), each
   seller's allocation (``custody_seller``, whose ``ε_i`` is now held against its
   lifetime cap: ``ledgers.epsilon_reserved``) and the first round's report requests
   (``report_request``, each with its deadline); the order goes back to the queue,
   stage ``collecting``, to be looked at again after ``poll_seconds``.
2. :func:`advance` (each later claim): while the round has open requests before its
   deadline, back to the queue (a round's last report wakes the order at once). Then
   the round is closed in one transaction (open requests become ``missed``; their
   sellers get no further request of this order), the answered reports are handed to
   the protocol, and either the next round's requests are published or, after the
   last round, the protocol fits the learner from the reports and the order settles:
   each seller is charged the ε of the reports it sent and paid its allocation-time
   payment only if it answered every request; the buyer pays the sum of those
   payments. Too few deliverers: the order fails with the protocol's reason; the ε of
   the reports received is still recorded (the reports were disclosed) and nobody is
   paid or charged money.

The protocol state is persisted after every round (``LocalProtocol.to_state``), so a
worker restart resumes the order where it was. Every write is fenced by the lease.
"""

import logging
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from market import ledgers, numerics
from market.errors import InvalidInputError, PrivacyBudgetExhaustedError
from market.ledgers import SellerSpend
from market.pipeline import results
from market.pipeline.compute import OrderFailedError
from market.pipeline.custody import CustodyPricing, custody_outcome, price_custody_order
from market.pipeline.instance import OrderInstance, OrderRun, validation_set
from market.pipeline.results import Outcome
from market.store import (
    CollectionStatus,
    CustodyRun,
    CustodySeller,
    Market,
    MarketParameters,
    Order,
    ReportRequest,
    RequestStatus,
    RunStatus,
    lock_rows,
    session_scope,
    utcnow,
    write_session,
)

log = logging.getLogger(__name__)
STAGE = "collecting"


@dataclass(frozen=True)
class CustodyTiming:
    """How long a round stays open, how often a collecting order is looked at, and
    the test-only seed of the protocols' public generator (``Settings.custody_*``)."""

    round_seconds: float = 600.0
    poll_seconds: float = 1.0
    seed: int | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> "CustodyTiming":
        return cls(
            round_seconds=float(settings.custody_round_seconds),
            poll_seconds=float(settings.custody_poll_seconds),
            seed=settings.custody_protocol_seed,
        )


class LeaseLost(Exception):
    """The order is no longer ours; stop without writing."""


def has_run(engine: Engine, order_id: int) -> bool:
    """Whether the order is a seller-custody order past its pricing."""
    with session_scope(engine) as session:
        return session.get(CustodyRun, order_id) is not None


def is_seller_custody(run: OrderRun) -> bool:
    """Whether a loaded order runs on a seller-custody market."""
    return run.instance.custody == "seller"


def _fenced_order(session: Session, order_id: int, owner: str) -> Order:
    stmt = select(Order).where(Order.id == order_id).with_for_update()
    order = session.exec(stmt).one()
    if order.status != RunStatus.RUNNING or order.lease_owner != owner:
        raise LeaseLost(f"order {order_id}: lease lost")
    return order


def _back_to_queue(order: Order, *, delay: float, fraction: float) -> None:
    """Hand the order back to the queue, stage ``collecting``, claimable after
    ``delay`` seconds (the claim is not counted as a crash attempt)."""
    order.status = RunStatus.QUEUED
    order.lease_owner = None
    order.lease_expires_at = utcnow() + timedelta(seconds=max(delay, 0.0))
    order.attempts = max(order.attempts - 1, 0)
    order.progress_stage = STAGE
    order.progress_fraction = float(min(max(fraction, 0.0), 1.0))


def _new_requests(
    order: Order,
    run: CustodyRun,
    sellers: list[CustodySeller],
    planned: dict[int, dict[str, Any]],
    *,
    round_seconds: float,
) -> list[ReportRequest]:
    deadline = utcnow() + timedelta(seconds=round_seconds)
    by_index = {s.seller_index: s for s in sellers}
    out = []
    for index, req in sorted(planned.items()):
        seller = by_index[index]
        out.append(
            ReportRequest(
                order_id=order.id,  # type: ignore[arg-type]
                market_id=order.market_id,
                seller_id=seller.seller_id,
                round=int(req["round"]),
                randomizer=str(req["randomizer"]),
                epsilon=float(req["epsilon"]),
                request=req,
                deadline=deadline,
            )
        )
    run.round_deadline = deadline
    return out


def start(
    engine: Engine, run: OrderRun, rep: Any, *, owner: str, timing: CustodyTiming
) -> str:
    """Price a seller-custody order and publish its first round (module docstring).

    Returns the order's status afterwards (``queued``: collecting). Raises
    ``OrderFailedError`` (the buyer-safe reason), ``PrivacyBudgetExhaustedError``
    (a seller's budget changed meanwhile: nothing written), ``LeaseLost``.
    """
    inst = run.instance
    pricing = price_custody_order(run, rep, rep.deadline.checkpoint())
    assert inst.n_records is not None
    try:
        protocol = numerics.custody.build_protocol(
            inst.learner,
            inst.params,
            config=inst.config(gamma=pricing.gamma),
            task=inst.task,
            schema=inst.schema(),
            epsilon=pricing.epsilon,
            n_records=inst.n_records,
            seed=timing.seed,
        )
    except InvalidInputError as exc:
        raise OrderFailedError(str(exc)) from exc
    planned = numerics.custody.next_round(protocol)
    if planned is None:
        raise OrderFailedError("the learner's protocol has no round to run")
    state = numerics.custody.protocol_state(protocol)
    with write_session(engine) as session:
        order = _fenced_order(session, run.order_id, owner)
        market = session.get(Market, inst.market_id)
        assert market is not None
        _check_reservable(session, market, inst.seller_ids, pricing)
        crun = CustodyRun(
            order_id=run.order_id,
            market_id=inst.market_id,
            state=state,
            round=0,
            round_seconds=timing.round_seconds,
            gamma=pricing.gamma,
            gamma_source=pricing.gamma_source,
            eta=pricing.eta,
        )
        sellers = [
            CustodySeller(
                order_id=run.order_id,
                market_id=inst.market_id,
                seller_id=seller_id,
                offer_id=offer_id,
                seller_index=i,
                n_records=int(inst.n_records[i]),
                epsilon=pricing.epsilon[i],
                payment_minor=pricing.payments_minor[i],
                certificate=pricing.certificates[i],
            )
            for i, (seller_id, offer_id) in enumerate(
                zip(inst.seller_ids, inst.offer_ids, strict=True)
            )
        ]
        requests = _new_requests(
            order, crun, sellers, planned, round_seconds=timing.round_seconds
        )
        session.add(crun)
        session.add_all(sellers)
        session.add_all(requests)
        _back_to_queue(order, delay=timing.poll_seconds, fraction=0.0)
        session.add(order)
    log.info(
        "order %s: collecting round 0 from %d sellers", run.order_id, len(requests)
    )
    return RunStatus.QUEUED


def _check_reservable(
    session: Session, market: Market, seller_ids: list[int], pricing: CustodyPricing
) -> None:
    """Every seller's allocated ε still fits its remaining budget (net of other
    collecting orders' reservations), checked under the write lock."""
    lock_rows(session, account_ids=seller_ids)
    remaining = ledgers.remaining_epsilon(session, market=market, seller_ids=seller_ids)
    cap = market.lifetime_epsilon_cap
    for seller_id, eps in zip(seller_ids, pricing.epsilon, strict=True):
        if eps > remaining[seller_id] + ledgers.CAP_RTOL * cap:
            raise PrivacyBudgetExhaustedError(
                f"seller {seller_id} has {remaining[seller_id]:.6g} of its privacy "
                f"budget left in market {market.id}, the order needs {eps:.6g}"
            )


def _round_requests(session: Session, crun: CustodyRun) -> list[ReportRequest]:
    stmt = select(ReportRequest).where(
        ReportRequest.order_id == crun.order_id, ReportRequest.round == crun.round
    )
    return list(session.exec(stmt.order_by(col(ReportRequest.id))).all())


def _as_utc(value: Any) -> Any:
    now = utcnow()
    return value if value.tzinfo is not None else value.replace(tzinfo=now.tzinfo)


def _close_round(engine: Engine, order_id: int, *, owner: str) -> bool:
    """Close the current round if it is complete or past its deadline (open requests
    become ``missed``; the answered set is then fixed). Returns whether it is closed;
    if not, the order goes back to the queue until the deadline or the next poll."""
    with write_session(engine) as session:
        _fenced_order(session, order_id, owner)
        crun = session.get(CustodyRun, order_id)
        assert crun is not None
        reqs = _round_requests(session, crun)
        open_ = [r for r in reqs if r.status == RequestStatus.OPEN]
        if not open_:
            return True
        deadline = crun.round_deadline
        if deadline is not None and utcnow() < _as_utc(deadline):
            return False
        for r in open_:
            r.status = RequestStatus.MISSED
            session.add(r)
        return True


def _requeue_waiting(engine: Engine, order_id: int, *, owner: str, poll: float) -> str:
    with write_session(engine) as session:
        order = _fenced_order(session, order_id, owner)
        crun = session.get(CustodyRun, order_id)
        assert crun is not None
        reqs = _round_requests(session, crun)
        answered = sum(1 for r in reqs if r.status == RequestStatus.ANSWERED)
        delay = poll
        if crun.round_deadline is not None:
            left = (_as_utc(crun.round_deadline) - utcnow()).total_seconds()
            delay = min(poll, max(left, 0.0))
        _back_to_queue(order, delay=delay, fraction=answered / max(len(reqs), 1))
        session.add(order)
    return RunStatus.QUEUED


def advance(engine: Engine, order_id: int, *, owner: str, timing: CustodyTiming) -> str:
    """Move a collecting order on (module docstring); returns its status afterwards.

    Raises ``OrderFailedError`` with the buyer-safe reason when the fit cannot be made
    (after recording the ε of the reports received), ``LeaseLost``.
    """
    if not _close_round(engine, order_id, owner=owner):
        return _requeue_waiting(engine, order_id, owner=owner, poll=timing.poll_seconds)
    with session_scope(engine) as session:
        crun = session.get(CustodyRun, order_id)
        assert crun is not None
        if crun.status != CollectionStatus.COLLECTING:
            raise OrderFailedError("the order's collection has already ended")
        sellers = list(
            session.exec(
                select(CustodySeller).where(CustodySeller.order_id == order_id)
            ).all()
        )
        reqs = _round_requests(session, crun)
        state = dict(crun.state)
        round_no = crun.round
        session.expunge_all()
    index_of = {s.seller_id: s.seller_index for s in sellers}
    reports = {
        index_of[r.seller_id]: r.report
        for r in reqs
        if r.status == RequestStatus.ANSWERED and r.report is not None
    }
    protocol = numerics.custody.restore_protocol(state)
    if protocol.round == round_no and protocol.pending is not None:
        numerics.custody.submit(protocol, reports)
    planned = numerics.custody.next_round(protocol)
    if planned is not None:
        return _publish(engine, order_id, owner, protocol, planned, timing, reports)
    return _finish(engine, order_id, owner, protocol, sellers, reports)


def _count_answers(session: Session, order_id: int, reports: dict[int, Any]) -> None:
    """Credit the sellers who answered the round just closed."""
    for s in session.exec(
        select(CustodySeller).where(CustodySeller.order_id == order_id)
    ).all():
        if s.seller_index in reports:
            s.rounds_answered += 1
            session.add(s)


def _publish(
    engine: Engine,
    order_id: int,
    owner: str,
    protocol: Any,
    planned: dict[int, dict[str, Any]],
    timing: CustodyTiming,
    reports: dict[int, Any],
) -> str:
    """Store the protocol after a closed round and publish the next round."""
    state = numerics.custody.protocol_state(protocol)
    with write_session(engine) as session:
        order = _fenced_order(session, order_id, owner)
        crun = session.get(CustodyRun, order_id)
        assert crun is not None
        _count_answers(session, order_id, reports)
        sellers = list(
            session.exec(
                select(CustodySeller).where(CustodySeller.order_id == order_id)
            ).all()
        )
        crun.state = state
        crun.round = int(protocol.round)
        crun.updated_at = utcnow()
        requests = _new_requests(
            order, crun, sellers, planned, round_seconds=crun.round_seconds
        )
        session.add_all(requests)
        session.add(crun)
        _back_to_queue(order, delay=timing.poll_seconds, fraction=0.0)
        session.add(order)
    log.info(
        "order %s: collecting round %d from %d sellers",
        order_id,
        protocol.round,
        len(planned),
    )
    return RunStatus.QUEUED


def _finish(
    engine: Engine,
    order_id: int,
    owner: str,
    protocol: Any,
    sellers: list[CustodySeller],
    reports: dict[int, Any],
) -> str:
    """Fit from the reports and settle (or record the ε received and fail)."""
    with session_scope(engine) as session:
        order = session.get(Order, order_id)
        assert order is not None
        run = _settlement_run(session, order)
    delivered = numerics.custody.delivered(protocol)
    spent = numerics.custody.spent(protocol)
    try:
        learner = numerics.custody.result(protocol)
    except ValueError as exc:
        _record_failed(engine, order_id, owner, run, sellers, spent, reports, str(exc))
        raise OrderFailedError(
            f"{exc}; sellers who did not answer are neither paid nor charged, no "
            "payment was made"
        ) from exc
    pricing = _pricing_of(engine, order_id, sellers)
    out = custody_outcome(run, pricing, learner, delivered=delivered, spent=spent)
    expected, received = _report_counts(engine, order_id, reports)
    out = _with_delivery(out, len(sellers), delivered, pricing, expected, received)
    _settle(engine, order_id, owner, run, out, sellers, delivered, spent, reports)
    return RunStatus.SUCCEEDED


def _settlement_run(session: Session, order: Order) -> OrderRun:
    """The order's run as priced: its market settings, learner, validation set and
    the sellers of ``custody_seller`` in pricing order (whatever their offers and
    budgets became since; the ε they were allocated is held for this order)."""
    market = session.get(Market, order.market_id)
    params = session.get(MarketParameters, order.parameters_id)
    assert market is not None
    assert params is not None
    sellers = list(
        session.exec(
            select(CustodySeller)
            .where(CustodySeller.order_id == order.id)
            .order_by(col(CustodySeller.seller_index))
        ).all()
    )
    X_val, y_val = validation_set(market)
    inst = OrderInstance(
        market_id=market.id,  # type: ignore[arg-type]
        task=market.task,
        learner=order.learner,
        params=dict(order.params),
        values=dict(params.values),
        parameters_version=params.version,
        prior=numerics.build_prior(market.cost_prior),
        features=list(market.features),
        target=dict(market.target) if market.target else None,
        offer_ids=[s.offer_id for s in sellers],
        seller_ids=[s.seller_id for s in sellers],
        X=np.zeros((0, len(market.features))),
        y=np.zeros(0),
        groups=np.zeros(0, dtype=np.int64),
        costs=np.zeros(len(sellers)),
        eps_max=np.zeros(len(sellers)),
        n_offers=len(sellers),
        X_val=X_val,
        y_val=y_val,
        custody="seller",
        n_records=[s.n_records for s in sellers],
    )
    return OrderRun(
        order_id=order.id,  # type: ignore[arg-type]
        budget_minor=order.budget_minor,
        gamma=order.gamma,
        instance=inst,
    )


def _pricing_of(
    engine: Engine, order_id: int, sellers: list[CustodySeller]
) -> CustodyPricing:
    with session_scope(engine) as session:
        crun = session.get(CustodyRun, order_id)
        assert crun is not None
        ordered = sorted(sellers, key=lambda s: s.seller_index)
        return CustodyPricing(
            epsilon=[s.epsilon for s in ordered],
            payments_minor=[int(s.payment_minor) for s in ordered],
            certificates=[s.certificate for s in ordered],
            gamma=crun.gamma,
            gamma_source=crun.gamma_source,
            eta=crun.eta,
        )


def _report_counts(
    engine: Engine, order_id: int, reports: dict[int, Any]
) -> tuple[int, int]:
    with session_scope(engine) as session:
        rows = session.exec(
            select(ReportRequest.status).where(ReportRequest.order_id == order_id)
        ).all()
    return len(rows), sum(1 for s in rows if s == RequestStatus.ANSWERED)


def _with_delivery(
    out: Outcome,
    n_sellers: int,
    delivered: set[int],
    pricing: CustodyPricing,
    expected: int,
    received: int,
) -> Outcome:
    allocated = sum(1 for e in pricing.epsilon if e > 0)
    return replace(
        out,
        delivery={
            "sellers_allocated": allocated,
            "sellers_delivered": len(delivered),
            "reports_expected": expected,
            "reports_received": received,
        },
    )


def _seller_spends(
    sellers: list[CustodySeller], eps: list[float], pay: list[int], certs: list[Any]
) -> list[SellerSpend]:
    ordered = sorted(sellers, key=lambda s: s.seller_index)
    return [
        SellerSpend(
            seller_id=s.seller_id,
            offer_id=s.offer_id,
            epsilon=float(eps[s.seller_index]),
            payment_minor=int(pay[s.seller_index]),
            certificate=certs[s.seller_index],
        )
        for s in ordered
        if eps[s.seller_index] > 0 or pay[s.seller_index] > 0
    ]


def _mark_sellers(
    session: Session,
    order_id: int,
    delivered: set[int],
    spent: list[float],
    reports: dict[int, Any],
) -> None:
    _count_answers(session, order_id, reports)
    for s in session.exec(
        select(CustodySeller).where(CustodySeller.order_id == order_id)
    ).all():
        s.delivered = s.seller_index in delivered
        s.epsilon_spent = float(spent[s.seller_index])
        session.add(s)


def _settle(
    engine: Engine,
    order_id: int,
    owner: str,
    run: OrderRun,
    out: Outcome,
    sellers: list[CustodySeller],
    delivered: set[int],
    spent: list[float],
    reports: dict[int, Any],
) -> None:
    with write_session(engine) as session:
        order = _fenced_order(session, order_id, owner)
        crun = session.get(CustodyRun, order_id)
        market = session.get(Market, order.market_id)
        assert crun is not None
        assert market is not None
        _mark_sellers(session, order_id, delivered, spent, reports)
        crun.status = CollectionStatus.DONE
        crun.updated_at = utcnow()
        session.add(crun)
        session.flush()  # the reservation ends with the settlement
        items = _seller_spends(
            sellers,
            [float(v) for v in out.epsilon_total],
            out.payments_minor,
            list(out.certificates or [None] * len(sellers)),
        )
        ledgers.settle_order(session, order=order, market=market, spends=items)
        results.record_success(order, run, out)
        session.add(order)


def _record_failed(
    engine: Engine,
    order_id: int,
    owner: str,
    run: OrderRun,
    sellers: list[CustodySeller],
    spent: list[float],
    reports: dict[int, Any],
    reason: str,
) -> None:
    """The fit failed: record the ε of the reports received (no money moves), end the
    collection; the caller fails the order with the reason."""
    with write_session(engine) as session:
        order = _fenced_order(session, order_id, owner)
        crun = session.get(CustodyRun, order_id)
        market = session.get(Market, order.market_id)
        assert crun is not None
        assert market is not None
        _mark_sellers(session, order_id, set(), spent, reports)
        crun.status = CollectionStatus.FAILED
        crun.updated_at = utcnow()
        session.add(crun)
        session.flush()
        n = len(sellers)
        items = _seller_spends(sellers, spent, [0] * n, [None] * n)
        ledgers.settle_order(session, order=order, market=market, spends=items)
    log.info("order %s: collection failed (%s)", order_id, reason)


def end_collection(engine: Engine, order_id: int, *, owner: str) -> None:
    """A collecting order is failing for another reason (time budget, an internal
    error): end its collection, recording the ε of the reports received (they were
    disclosed) and moving no money. A no-op for other orders or lost leases."""
    with session_scope(engine) as session:
        crun = session.get(CustodyRun, order_id)
        if crun is None or crun.status != CollectionStatus.COLLECTING:
            return
        sellers = list(
            session.exec(
                select(CustodySeller).where(CustodySeller.order_id == order_id)
            ).all()
        )
        answered = session.exec(
            select(ReportRequest.seller_id, ReportRequest.epsilon).where(
                ReportRequest.order_id == order_id,
                ReportRequest.status == RequestStatus.ANSWERED,
            )
        ).all()
        session.expunge_all()
    by_seller: dict[int, float] = {}
    for seller_id, eps in answered:
        by_seller[int(seller_id)] = by_seller.get(int(seller_id), 0.0) + float(eps)
    spent = [0.0] * len(sellers)
    for s in sellers:
        spent[s.seller_index] = by_seller.get(s.seller_id, 0.0)
    try:
        with write_session(engine) as session:
            order = _fenced_order(session, order_id, owner)
            crun = session.get(CustodyRun, order_id)
            market = session.get(Market, order.market_id)
            assert crun is not None
            assert market is not None
            for s in session.exec(
                select(CustodySeller).where(CustodySeller.order_id == order_id)
            ).all():
                s.delivered = False
                s.epsilon_spent = spent[s.seller_index]
                session.add(s)
            crun.status = CollectionStatus.FAILED
            crun.updated_at = utcnow()
            session.add(crun)
            session.flush()
            n = len(sellers)
            items = _seller_spends(sellers, spent, [0] * n, [None] * n)
            ledgers.settle_order(session, order=order, market=market, spends=items)
    except LeaseLost:
        return
