"""Run one claimed order: load (``market.pipeline.instance``) → compute
(``market.pipeline.compute``: allocate or choose ``γ``, Myerson payments, the learner's
release) → settle, with progress persisted by stage and every write fenced by the lease.

Stages: ``loading``, ``allocating`` | ``choosing_gamma``, ``payments`` (fraction from
the payments' progress callback), ``releasing``, ``settling``, ``done``.

Settlement is one transaction (``db.write_session``: ``BEGIN IMMEDIATE`` on SQLite,
row locks on PostgreSQL): fence on the lease, lock the sellers, re-check the remaining
budgets against ``ε_total``; if another order used a seller's budget meanwhile the run
starts over from loading with the new caps (at most ``MAX_RUNS`` times), never
over-debiting. A released model that is not settled is discarded unseen.
"""

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy.engine import Engine
from sqlmodel import select

from market import db, ledgers
from market.errors import InvalidInputError, PrivacyBudgetExhaustedError
from market.models import Market, Order, RunStatus, utcnow
from market.pipeline import instance, results
from market.pipeline.compute import OrderFailedError, compute_order
from market.pipeline.instance import OrderRun
from market.pipeline.results import Outcome
from market.runtime import leases

log = logging.getLogger(__name__)
MAX_RUNS = 3
STAGE_HOOKS: list[Callable[[int, str], None]] = []
"""Test hooks called as ``hook(order_id, stage)`` when a stage starts."""
SLEEP_ENV = "PRIVMARKET_TEST_STAGE_SLEEP"
"""Test hook for crash tests: ``"<stage>:<seconds>"`` sleeps when that stage starts."""


class LeaseLostError(Exception):
    """Another worker took the order over; stop without writing."""


class Reporter:
    """Persists progress (fenced by the lease) and runs the stage hooks."""

    def __init__(
        self, db_engine: Engine, order_id: int, *, owner: str, lease_seconds: float
    ) -> None:
        self.db_engine, self.order_id = db_engine, order_id
        self.owner, self.lease_seconds = owner, lease_seconds
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
        """Enter stage ``name`` (fraction 0); raises ``LeaseLostError`` if taken over."""
        now = time.perf_counter()
        self.timings[self._stage] = round(now - self._t0, 4)
        self._stage, self._t0 = name, now
        self._write(name, 0.0)
        if self.lost.is_set():
            raise LeaseLostError(f"order {self.order_id}: lease lost")
        for hook in STAGE_HOOKS:
            hook(self.order_id, name)
        spec = os.environ.get(SLEEP_ENV, "")
        if spec.partition(":")[0] == name:
            time.sleep(float(spec.partition(":")[2]))

    def fraction(self, done: int, total: int) -> None:
        """Progress callback ``(done, total)``; writes at most twice a second."""
        now = time.monotonic()
        if now - self._last < 0.5 and done < total:
            return
        self._last = now
        try:
            self._write(self._stage, done / max(total, 1))
        except Exception:  # progress is best effort; the heartbeat keeps the lease
            log.warning("order %s: progress write failed", self.order_id)


def compute(run: OrderRun, rep: Reporter) -> Outcome:
    """The run's numerics (``market.pipeline.compute``) with the stage timings."""
    out = compute_order(run, rep)
    return replace(out, timings=dict(rep.timings))


def _settle(
    db_engine: Engine, run: OrderRun, out: Outcome, *, owner: str, attempts: int
) -> None:
    """Write allocations, ledgers and the result in ONE transaction (module docstring).

    Raises
    ------
    LeaseLostError
        The order is no longer ours (nothing written).
    PrivacyBudgetExhaustedError
        A seller's remaining budget shrank meanwhile (nothing written).
    """
    with db.write_session(db_engine) as session:
        stmt = select(Order).where(Order.id == run.order_id).with_for_update()
        order = session.exec(stmt).one()
        if order.status != RunStatus.RUNNING or order.lease_owner != owner:
            raise LeaseLostError(f"order {run.order_id}: lease lost before settlement")
        market = session.get(Market, run.instance.market_id)
        assert market is not None
        items = results.spends(run.instance, out)
        ledgers.settle_order(session, order=order, market=market, spends=items)
        order.summary = results.summary(run, out, attempts=attempts)
        order.model = results.model_json(run, out)
        order.status, order.error = RunStatus.SUCCEEDED, None
        order.progress_stage, order.progress_fraction = "done", 1.0
        order.finished_at, order.lease_owner, order.lease_expires_at = (
            utcnow(),
            None,
            None,
        )
        session.add(order)


def _load(db_engine: Engine, order_id: int, *, owner: str) -> OrderRun:
    with db.session_scope(db_engine) as session:
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


def run_order(
    db_engine: Engine, order_id: int, *, owner: str, lease_seconds: float
) -> str:
    """Run a claimed order to ``succeeded`` or ``failed``; return the final status
    (``"lost"`` when another worker took it over).

    Failures are recorded with a buyer-safe reason; unexpected errors are logged with
    their details and recorded as an internal error of the stage.
    """
    rep = Reporter(db_engine, order_id, owner=owner, lease_seconds=lease_seconds)
    try:
        for attempt in range(1, MAX_RUNS + 1):
            rep.stage("loading")
            run = _load(db_engine, order_id, owner=owner)
            _record_snapshot(rep, run)
            out = compute(run, rep)
            rep.stage("settling")
            try:
                _settle(db_engine, run, out, owner=owner, attempts=attempt)
            except PrivacyBudgetExhaustedError:
                log.info(
                    "order %s: budgets changed, re-running (%d)", order_id, attempt
                )
                continue
            return RunStatus.SUCCEEDED
        raise OrderFailedError(
            f"sellers' privacy budgets changed during {MAX_RUNS} runs (other orders "
            "settled first); place the order again"
        )
    except LeaseLostError:
        return "lost"
    except OrderFailedError as exc:
        reason = str(exc)
    except Exception as exc:  # recorded on the order, details only in the log
        log.exception("order %s failed in stage %s", order_id, rep._stage)
        reason = f"internal error in stage {rep._stage} ({type(exc).__name__})"
    fail(db_engine, order_id, owner=owner, reason=reason)
    return RunStatus.FAILED
