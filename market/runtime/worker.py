"""Background workers: claim orders and jobs, run them under a lease, recover after
crashes.

Claiming is one atomic transaction: the oldest claimable row is selected ``FOR UPDATE
SKIP LOCKED`` (PostgreSQL; concurrent claimers skip each other's rows) or under the
database write lock (SQLite, ``BEGIN IMMEDIATE``), then marked ``running`` with a lease.
Claimable rows are ``queued`` ones and ``running`` ones whose lease expired (a crashed
worker); a row claimed ``MAX_ATTEMPTS`` times is failed with a reason instead of being
retried forever. The recovery sweep (:func:`recover`, run at worker start) does the
same for every abandoned row at once, and treats a lease held by a dead process on this
host as expired. Orders are re-run from scratch (settlement is one fenced transaction,
so a re-run never settles twice); trade-off jobs are recomputed. A queued row whose
``lease_expires_at`` lies in the future was handed back with a backoff (settlement
contention, ``order_runner.requeue``) and is not claimable before that time.

Stopping (SIGTERM, app shutdown): :meth:`Worker.stop` asks the running order to stop
at its next cooperative check (``market.pipeline.deadline``: every stage, progress
report and payment re-solve, well under a second apart), which hands it back to the
queue; :func:`start_threads`' stopper waits at most ``STOP_GRACE_SECONDS`` for that.
"""

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, or_, select

from market import store
from market.config import Settings
from market.pipeline import deadline
from market.runtime import job_runner, leases, order_runner
from market.runtime.custody_runner import CustodyTiming
from market.store import Job, Order, RunStatus, utcnow

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 3
"""Claims per order or job before it is failed ("worker lost ... times")."""
STOP_GRACE_SECONDS = 5.0
"""How long a stopping app waits for its worker threads to hand back their orders."""


def _give_up(row: Order | Job) -> None:
    row.status = RunStatus.FAILED
    row.error = (
        f"abandoned: the worker running it stopped {row.attempts} times "
        "(crash or restart); not retried again"
    )
    row.finished_at, row.lease_owner, row.lease_expires_at = utcnow(), None, None


def _claimable(table: leases.LeasedTable) -> Any:
    now = utcnow()
    expired = sa.and_(
        col(table.status) == RunStatus.RUNNING, col(table.lease_expires_at) < now
    )
    ready = sa.and_(
        col(table.status) == RunStatus.QUEUED,
        or_(col(table.lease_expires_at).is_(None), col(table.lease_expires_at) < now),
    )
    return (
        select(table)
        .where(or_(ready, expired))
        .order_by(col(table.id))
        .limit(1)
        .with_for_update(skip_locked=True)
    )


def claim(
    engine: Engine, table: leases.LeasedTable, *, owner: str, lease_seconds: float
) -> int | None:
    """Claim the oldest claimable row of ``table``; return its id (``None``: none)."""
    while True:
        with store.write_session(engine) as session:
            row = session.exec(_claimable(table)).first()
            if row is None:
                return None
            if row.attempts >= MAX_ATTEMPTS:
                _give_up(row)
                session.add(row)
                continue
            now = utcnow()
            row.status, row.attempts = RunStatus.RUNNING, row.attempts + 1
            row.lease_owner, row.heartbeat_at = owner, now
            row.lease_expires_at = now + timedelta(seconds=lease_seconds)
            row.started_at = row.started_at or now
            if row.progress_stage != "collecting":  # a collecting order keeps its stage
                row.progress_stage, row.progress_fraction = "loading", 0.0
            session.add(row)
            session.flush()
            return int(row.id)  # type: ignore[arg-type]


def _requeue(session: Session, row: Order | Job) -> str:
    if row.attempts >= MAX_ATTEMPTS:
        _give_up(row)
        action = "failed"
    else:
        row.status, row.lease_owner, row.lease_expires_at = RunStatus.QUEUED, None, None
        row.progress_stage, row.progress_fraction = "queued", 0.0
        action = "requeued"
    session.add(row)
    return action


def recover(engine: Engine) -> list[tuple[str, int, str]]:
    """Requeue (or fail after ``MAX_ATTEMPTS``) every abandoned running row.

    Abandoned: the lease expired, or its owner is a dead process on this host.
    Returns ``[(table, id, "requeued" | "failed")]``.
    """
    done: list[tuple[str, int, str]] = []
    now = utcnow()
    for table in (Order, Job):
        with store.write_session(engine) as session:
            stmt = (
                select(table)
                .where(col(table.status) == RunStatus.RUNNING)
                .order_by(col(table.id))
                .with_for_update(skip_locked=True)
            )
            for row in session.exec(stmt).all():
                expires = row.lease_expires_at
                if expires is not None and expires.tzinfo is None:
                    expires = expires.replace(tzinfo=now.tzinfo)
                expired = expires is None or expires < now
                if expired or leases.owner_is_dead(row.lease_owner):
                    action = _requeue(session, row)
                    done.append((table.__tablename__, int(row.id), action))  # type: ignore[arg-type]
    for name, row_id, action in done:
        log.warning("recovery: %s %d %s", name, row_id, action)
    return done


class Worker:
    """Claims and runs orders, then trade-off jobs, one at a time."""

    def __init__(
        self,
        engine: Engine,
        *,
        lease_seconds: float = 60.0,
        poll_seconds: float = 0.5,
        time_limit: float = math.inf,
        custody: CustodyTiming | None = None,
    ) -> None:
        self.engine, self.lease_seconds = engine, lease_seconds
        self.poll_seconds, self.time_limit = poll_seconds, time_limit
        self.custody = custody or CustodyTiming()
        self.owner = leases.new_owner()

    @classmethod
    def from_settings(cls, engine: Engine, settings: Settings) -> "Worker":
        """A worker with the deployment's lease length and per-order time budget."""
        return cls(
            engine,
            lease_seconds=settings.job_lease_seconds,
            time_limit=settings.order_time_limit_seconds,
            custody=CustodyTiming.from_settings(settings),
        )

    def stop(self) -> None:
        """Ask the running order (if any) to hand itself back to the queue now."""
        deadline.request_stop(self.owner)

    def _run(self, table: leases.LeasedTable, row_id: int) -> None:
        run: Callable[..., Any] = job_runner.run_claimed_job
        kwargs: dict[str, Any] = {}
        if table is Order:
            run = order_runner.run_order
            kwargs = {"time_limit": self.time_limit, "custody": self.custody}
        with leases.heartbeat(
            self.engine,
            table,
            row_id,
            owner=self.owner,
            lease_seconds=self.lease_seconds,
        ):
            run(
                self.engine,
                row_id,
                owner=self.owner,
                lease_seconds=self.lease_seconds,
                **kwargs,
            )

    def run_once(self) -> bool:
        """Claim and run one order (else one job); return whether there was work."""
        if deadline.stop_requested(self.owner):
            return False
        for table in (Order, Job):
            row_id = claim(
                self.engine, table, owner=self.owner, lease_seconds=self.lease_seconds
            )
            if row_id is not None:
                self._run(table, row_id)
                return True
        return False

    def run_forever(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set; errors are logged, never kill the loop."""
        while not stop.is_set():
            try:
                busy = self.run_once()
            except Exception:
                log.exception("worker %s: claim loop error", self.owner)
                busy = False
            if not busy:
                stop.wait(self.poll_seconds)


def start_threads(engine: Engine, settings: Settings) -> Callable[[], None]:
    """Run the recovery sweep, start ``settings.workers`` worker threads; return a
    function that stops them: running orders are handed back to the queue at their
    next cooperative check; it waits at most ``STOP_GRACE_SECONDS`` (a job or a
    release still running then is left to its lease, which expires)."""
    recover(engine)
    stop = threading.Event()
    workers = [Worker.from_settings(engine, settings) for _ in range(settings.workers)]
    threads = [
        threading.Thread(
            target=w.run_forever,
            args=(stop,),
            name=f"privmarket-worker-{i}",
            daemon=True,
        )
        for i, w in enumerate(workers)
    ]
    for t in threads:
        t.start()

    def stopper() -> None:
        stop.set()
        for w in workers:
            w.stop()
        end = time.monotonic() + STOP_GRACE_SECONDS
        for t in threads:
            t.join(timeout=max(end - time.monotonic(), 0.0))
        for w in workers:
            deadline.clear_stop(w.owner)

    return stopper


def app_hook(app: Any) -> Callable[[], None] | None:
    """``app.state.on_startup`` hook of ``api.main``: in-process worker threads."""
    settings: Settings = app.state.settings
    if settings.workers <= 0:
        return None
    return start_threads(app.state.engine, settings)
