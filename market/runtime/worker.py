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
so a re-run never settles twice); trade-off jobs are recomputed.
"""

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, or_, select

from market import db
from market.config import Settings
from market.models import Job, Order, RunStatus, utcnow
from market.runtime import job_runner, leases, order_runner

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 3
"""Claims per order or job before it is failed ("worker lost ... times")."""


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
    return (
        select(table)
        .where(or_(col(table.status) == RunStatus.QUEUED, expired))
        .order_by(col(table.id))
        .limit(1)
        .with_for_update(skip_locked=True)
    )


def claim(
    engine: Engine, table: leases.LeasedTable, *, owner: str, lease_seconds: float
) -> int | None:
    """Claim the oldest claimable row of ``table``; return its id (``None``: none)."""
    while True:
        with db.write_session(engine) as session:
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
        with db.write_session(engine) as session:
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
        self, engine: Engine, *, lease_seconds: float = 60.0, poll_seconds: float = 0.5
    ) -> None:
        self.engine, self.lease_seconds = engine, lease_seconds
        self.poll_seconds = poll_seconds
        self.owner = leases.new_owner()

    def _run(self, table: leases.LeasedTable, row_id: int) -> None:
        run: Callable[..., Any] = (
            order_runner.run_order if table is Order else job_runner.run_claimed_job
        )
        with leases.heartbeat(
            self.engine,
            table,
            row_id,
            owner=self.owner,
            lease_seconds=self.lease_seconds,
        ):
            run(self.engine, row_id, owner=self.owner, lease_seconds=self.lease_seconds)

    def run_once(self) -> bool:
        """Claim and run one order (else one job); return whether there was work."""
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
    function that stops them (waits for running work up to the lease length)."""
    recover(engine)
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=Worker(engine, lease_seconds=settings.job_lease_seconds).run_forever,
            args=(stop,),
            name=f"privmarket-worker-{i}",
            daemon=True,
        )
        for i in range(settings.workers)
    ]
    for t in threads:
        t.start()

    def stopper() -> None:
        stop.set()
        for t in threads:
            t.join(timeout=settings.job_lease_seconds)

    return stopper


def app_hook(app: Any) -> Callable[[], None] | None:
    """``app.state.on_startup`` hook of ``api.main``: in-process worker threads."""
    settings: Settings = app.state.settings
    if settings.workers <= 0:
        return None
    return start_threads(app.state.engine, settings)
