"""Run one claimed order: load (``market.pipeline.instance``) → compute
(``market.pipeline.compute``: allocate or choose ``γ``, Myerson payments, the learner's
release) → settle, with progress persisted by stage and every write fenced by the lease.

Stages: ``loading``, ``allocating`` | ``choosing_gamma``, ``payments`` (fraction from
the payments' progress callback), ``releasing``, ``settling``, ``done``.

Settlement is one transaction (``store.write_session``: ``BEGIN IMMEDIATE`` on SQLite,
row locks on PostgreSQL): fence on the lease, lock the sellers, re-check the remaining
budgets against ``ε_total``; if another order used a seller's budget meanwhile nothing
is written and the order goes **back to the queue** with a jittered backoff that grows
with how long it has waited (:func:`settle_backoff`), to start over from loading with
the new caps; it fails only when that has gone on for longer than its time budget since
it first started (sellers' budgets kept changing under it). A released model that is
not settled is discarded unseen.

Each run has a time budget (``Settings.order_time_limit_seconds``,
:class:`market.pipeline.deadline.Deadline`), checked at every stage, progress report and
payment re-solve: over it the order fails with that reason, nothing settled. A worker
that is stopping (:func:`market.pipeline.deadline.request_stop`) hands the order back
to the queue at the next check; that claim does not count as a crash attempt.
"""

import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy.engine import Engine
from sqlmodel import select

from market import ledgers, store
from market.config import get_settings
from market.errors import InvalidInputError, PrivacyBudgetExhaustedError
from market.pipeline import instance, results
from market.pipeline.compute import OrderFailedError, compute_order
from market.pipeline.deadline import (
    Deadline,
    TimeBudgetExceededError,
    WorkerStoppingError,
)
from market.pipeline.instance import OrderRun
from market.pipeline.results import Outcome
from market.runtime import custody_runner, leases
from market.runtime.custody_runner import CustodyTiming
from market.runtime.party_sessions import NodeSessions
from market.store import Market, Order, RunStatus, utcnow

log = logging.getLogger(__name__)
BACKOFF_MIN, BACKOFF_MAX = 0.05, 5.0
"""Seconds a contended order waits in the queue before it is claimed again (bounds)."""
STAGE_HOOKS: list[Callable[[int, str], None]] = []
"""Test hooks called as ``hook(order_id, stage)`` when a stage starts."""
SLEEP_ENV = "PRIVMARKET_TEST_STAGE_SLEEP"
"""Test hook for crash tests: ``"<stage>:<seconds>"`` sleeps when that stage starts."""


class LeaseLostError(Exception):
    """Another worker took the order over; stop without writing."""


class OrderCancelledError(Exception):
    """The order's buyer or an admin cancelled it while it ran."""


def _cancel_requested(db_engine: Engine, order_id: int) -> bool:
    with store.session_scope(db_engine) as session:
        order = session.get(Order, order_id)
        return order is not None and order.cancel_requested_at is not None


class Reporter:
    """Persists progress (fenced by the lease) and runs the stage hooks."""

    def __init__(
        self,
        db_engine: Engine,
        order_id: int,
        *,
        owner: str,
        lease_seconds: float,
        deadline: Deadline | None = None,
    ) -> None:
        self.db_engine, self.order_id = db_engine, order_id
        self.owner, self.lease_seconds = owner, lease_seconds
        self.deadline = deadline or Deadline.start(owner, math.inf)
        self.lost = threading.Event()
        self.timings: dict[str, float] = {}
        self._stage, self._t0, self._last = "loading", time.perf_counter(), 0.0

    def _write(self, stage: str, fraction: float) -> None:
        ok = leases.touch(
            self.db_engine,
            Order,
            self.order_id,
            owner=self.owner,
            lease_seconds=self.lease_seconds,
            progress_stage=stage,
            progress_fraction=float(min(max(fraction, 0.0), 1.0)),
        )
        if not ok:
            self.lost.set()

    def stage(self, name: str) -> None:
        """Enter stage ``name`` (fraction 0); raises ``LeaseLostError`` if taken over,
        the deadline's errors when the run must stop."""
        self.deadline.check()
        now = time.perf_counter()
        self.timings[self._stage] = round(now - self._t0, 4)
        self._stage, self._t0 = name, now
        self._write(name, 0.0)
        if self.lost.is_set():
            raise LeaseLostError(f"order {self.order_id}: lease lost")
        if _cancel_requested(self.db_engine, self.order_id):
            raise OrderCancelledError(self.order_id)
        for hook in STAGE_HOOKS:
            hook(self.order_id, name)
        spec = os.environ.get(SLEEP_ENV, "")
        if spec.partition(":")[0] == name:
            self._sleep(float(spec.partition(":")[2]))

    def _sleep(self, seconds: float) -> None:
        """The test hook's sleep, as long work would: checking the deadline (time
        budget, stop requests) every 0.1 s."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.deadline.check()
            time.sleep(min(0.1, left))

    def fraction(self, done: int, total: int) -> None:
        """Progress callback ``(done, total)``; writes at most twice a second. Checks
        the deadline first (raising stops the computation that reports)."""
        self.deadline.check()
        now = time.monotonic()
        if now - self._last < 0.5 and done < total:
            return
        self._last = now
        try:
            self._write(self._stage, done / max(total, 1))
        except Exception:  # progress is best effort; the heartbeat keeps the lease
            log.warning("order %s: progress write failed", self.order_id)


def compute(run: OrderRun, rep: Reporter) -> Outcome:
    """The run's numerics (``market.pipeline.compute``) with the stage timings; a fit
    between party nodes runs through :class:`~market.runtime.party_sessions.NodeSessions`."""
    settings = get_settings()
    cert, key, ca = settings.node_tls_cert, settings.node_tls_key, settings.node_tls_ca
    tls = (str(cert), str(key), str(ca)) if cert and key and ca else None
    sessions = NodeSessions(
        rep.db_engine, compute_host=settings.node_compute_host, tls=tls
    )
    out = compute_order(
        run, rep, checkpoint=rep.deadline.checkpoint(), secure_session=sessions
    )
    return replace(out, timings=dict(rep.timings))


def _settle(db_engine: Engine, run: OrderRun, out: Outcome, *, owner: str) -> None:
    """Write allocations, ledgers and the result in ONE transaction (module docstring).

    Raises
    ------
    LeaseLostError
        The order is no longer ours (nothing written).
    PrivacyBudgetExhaustedError
        A seller's remaining budget shrank meanwhile (nothing written).
    """
    with store.write_session(db_engine) as session:
        stmt = select(Order).where(Order.id == run.order_id).with_for_update()
        order = session.exec(stmt).one()
        if order.status != RunStatus.RUNNING or order.lease_owner != owner:
            raise LeaseLostError(f"order {run.order_id}: lease lost before settlement")
        if order.cancel_requested_at is not None:
            raise OrderCancelledError(run.order_id)
        market = session.get(Market, run.instance.market_id)
        assert market is not None
        items = results.spends(run.instance, out)
        ledgers.settle_order(session, order=order, market=market, spends=items)
        results.record_success(order, run, out)
        session.add(order)


def _load(db_engine: Engine, order_id: int, *, owner: str) -> OrderRun:
    with store.session_scope(db_engine) as session:
        order = session.get(Order, order_id)
        if order is None or order.lease_owner != owner:
            raise LeaseLostError(f"order {order_id}: not ours")
        try:
            return instance.load_order(session, order)
        except (ValueError, InvalidInputError) as exc:  # the reason names the field
            raise OrderFailedError(str(exc)) from exc


def fail(db_engine: Engine, order_id: int, *, owner: str, reason: str) -> bool:
    """Mark our running order ``failed`` with ``reason``; ``False`` if not ours."""
    return leases.touch(
        db_engine,
        Order,
        order_id,
        owner=owner,
        lease_seconds=0.0,
        status=RunStatus.FAILED,
        error=reason,
        finished_at=utcnow(),
        lease_owner=None,
    )


def _record_snapshot(rep: Reporter, run: OrderRun) -> None:
    """Record the offers the run uses (``PUT`` of those offers waits for the order)."""
    leases.touch(
        rep.db_engine,
        Order,
        rep.order_id,
        owner=rep.owner,
        lease_seconds=rep.lease_seconds,
        offer_ids=list(run.instance.offer_ids),
    )


def settle_backoff(waited_seconds: float) -> float:
    """Seconds before a contended order may be claimed again: a quarter of the time it
    has waited since it first started, within ``[BACKOFF_MIN, BACKOFF_MAX]``, times a
    jitter in ``[0.5, 1.5)`` so racing orders spread out."""
    base = min(max(0.25 * waited_seconds, BACKOFF_MIN), BACKOFF_MAX)
    return base * (0.5 + random.random())


def requeue(
    db_engine: Engine, order_id: int, *, owner: str, delay: float, reason: str
) -> bool:
    """Hand our running order back to the queue, claimable again after ``delay`` s
    (``lease_expires_at`` of a queued row is its not-before time); the claim is not
    counted as a crash attempt. ``False`` if the order is no longer ours."""
    log.info("order %s: back to the queue in %.2f s (%s)", order_id, delay, reason)
    return leases.touch(
        db_engine,
        Order,
        order_id,
        owner=owner,
        lease_seconds=delay,
        status=RunStatus.QUEUED,
        lease_owner=None,
        attempts=Order.attempts - 1,
        progress_stage="queued",
        progress_fraction=0.0,
    )


def _waited(db_engine: Engine, order_id: int) -> float:
    """Seconds since the order first started running."""
    with store.session_scope(db_engine) as session:
        order = session.get(Order, order_id)
        started = None if order is None else order.started_at
    if started is None:
        return 0.0
    now = utcnow()
    if started.tzinfo is None:
        started = started.replace(tzinfo=now.tzinfo)
    return max((now - started).total_seconds(), 0.0)


def _contended(db_engine: Engine, order_id: int, *, owner: str, patience: float) -> str:
    """Settlement lost a race for sellers' budgets: requeue with backoff, or fail once
    the order has waited longer than ``patience`` seconds since it first started."""
    waited = _waited(db_engine, order_id)
    if waited > patience:
        reason = (
            f"sellers' privacy budgets kept changing under other orders for "
            f"{waited:.0f} s (more than the order's time budget of {patience:g} s); "
            "nothing was charged"
        )
        fail(db_engine, order_id, owner=owner, reason=reason)
        return RunStatus.FAILED
    delay = settle_backoff(waited)
    if not requeue(
        db_engine, order_id, owner=owner, delay=delay, reason="settlement contention"
    ):
        return "lost"
    return RunStatus.QUEUED


def run_order(
    db_engine: Engine,
    order_id: int,
    *,
    owner: str,
    lease_seconds: float,
    time_limit: float = math.inf,
    custody: CustodyTiming | None = None,
) -> str:
    """Run a claimed order to ``succeeded`` or ``failed``, or hand it back to the queue
    (``queued``: settlement contention or the worker stopping); return that status
    (``"lost"`` when another worker took it over).

    ``time_limit`` is the run's time budget in seconds (module docstring); ``custody``
    the round timing of seller-custody orders (``market.runtime.custody_runner``, which
    runs them: priced, then collecting reports round by round). Failures
    are recorded with a buyer-safe reason; unexpected errors are logged with their
    details and recorded as an internal error of the stage.
    """
    deadline = Deadline.start(owner, time_limit)
    rep = Reporter(
        db_engine, order_id, owner=owner, lease_seconds=lease_seconds, deadline=deadline
    )
    timing = custody or CustodyTiming()
    try:
        if custody_runner.has_run(db_engine, order_id):
            deadline.check()
            return custody_runner.advance(
                db_engine, order_id, owner=owner, timing=timing
            )
        rep.stage("loading")
        run = _load(db_engine, order_id, owner=owner)
        _record_snapshot(rep, run)
        if custody_runner.is_seller_custody(run):
            try:
                return custody_runner.start(
                    db_engine, run, rep, owner=owner, timing=timing
                )
            except PrivacyBudgetExhaustedError:
                return _contended(db_engine, order_id, owner=owner, patience=time_limit)
        out = compute(run, rep)
        rep.stage("settling")
        try:
            _settle(db_engine, run, out, owner=owner)
        except PrivacyBudgetExhaustedError:
            return _contended(db_engine, order_id, owner=owner, patience=time_limit)
        settled = round(time.perf_counter() - rep._t0, 4)
        log.info(
            "order %s: stage seconds %s", order_id, {**rep.timings, "settling": settled}
        )
        return RunStatus.SUCCEEDED
    except (LeaseLostError, custody_runner.LeaseLost):
        return "lost"
    except OrderCancelledError:
        ok = leases.touch(
            db_engine,
            Order,
            order_id,
            owner=owner,
            lease_seconds=0.0,
            status=RunStatus.CANCELLED,
            error=f"cancelled in stage {rep._stage}; nothing was charged or paid",
            progress_stage="cancelled",
            finished_at=utcnow(),
            lease_owner=None,
        )
        return RunStatus.CANCELLED if ok else "lost"
    except WorkerStoppingError:
        ok = requeue(db_engine, order_id, owner=owner, delay=0.0, reason="worker stop")
        return RunStatus.QUEUED if ok else "lost"
    except TimeBudgetExceededError as exc:
        reason = (
            f"the order exceeded its time budget of {exc.seconds:g} s in stage "
            f"{rep._stage}; nothing was charged"
        )
    except OrderFailedError as exc:
        reason = str(exc)
    except Exception as exc:  # recorded on the order, details only in the log
        log.exception("order %s failed in stage %s", order_id, rep._stage)
        reason = f"internal error in stage {rep._stage} ({type(exc).__name__})"
    try:
        custody_runner.end_collection(db_engine, order_id, owner=owner)
    except Exception:  # the failure is recorded below whatever happens here
        log.exception("order %s: ending its report collection failed", order_id)
    fail(db_engine, order_id, owner=owner, reason=reason)
    return RunStatus.FAILED
