"""Run a claimed background job (``kind="tradeoff"``) to ``succeeded`` or ``failed``.

The trade-off curve is computed by ``market.pipeline.compute.compute_tradeoff`` on the
instance of ``market.pipeline.instance.load_tradeoff``: the same loader as orders, so
the curve uses the rows, costs and lifetime caps an order would.
"""

import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from market.errors import InvalidInputError
from market.orders.jobs import TRADEOFF
from market.pipeline.compute import OrderFailedError, compute_tradeoff
from market.pipeline.instance import load_tradeoff
from market.runtime import leases
from market.store import Job, RunStatus, session_scope, utcnow

log = logging.getLogger(__name__)

_EXPLAINED = (InvalidInputError, OrderFailedError, ValueError)
"""Failures whose message is the reason shown to the admin (else, or when the message
is empty, "internal error" with the type name: never a bare class name)."""


def _compute(
    db_engine: Engine, job_id: int, progress: Callable[[int, int], None]
) -> dict[str, Any]:
    with session_scope(db_engine) as session:
        job = session.get(Job, job_id)
        if job is None or job.kind != TRADEOFF:
            raise InvalidInputError("kind", "unknown job kind")
        inst = load_tradeoff(session, job)
        gammas = list(job.params["gammas"])
    return compute_tradeoff(inst, gammas=gammas, progress=progress)


def _progress(touch: Callable[..., bool], job_id: int) -> Callable[[int, int], None]:
    """A ``(done, total)`` callback persisting the fraction at most twice a second
    (best effort: a failed write is not the job's failure)."""
    last = 0.0

    def report(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < 0.5 and done < total:
            return
        last = now
        try:
            touch(progress_fraction=min(1.0, done / max(total, 1)))
        except Exception:
            log.warning("job %s: progress write failed", job_id)

    return report


def run_claimed_job(
    db_engine: Engine, job_id: int, *, owner: str, lease_seconds: float
) -> str:
    """Run a claimed job to ``succeeded`` or ``failed``; every write is fenced by the
    lease (``market.runtime.leases``), so a job taken over by another worker is left
    alone.

    Returns the final status, or ``"lost"``.
    """

    def touch(**values: Any) -> bool:
        return leases.touch(
            db_engine, Job, job_id, owner=owner, lease_seconds=lease_seconds, **values
        )

    if not touch(progress_stage="computing", progress_fraction=0.0):
        return "lost"
    try:
        result = _compute(db_engine, job_id, _progress(touch, job_id))
    except Exception as exc:  # recorded on the job, not lost
        explained = str(exc) if isinstance(exc, _EXPLAINED) else ""
        reason = explained or f"internal error computing the job ({type(exc).__name__})"
        ok = touch(
            status=RunStatus.FAILED,
            error=reason,
            finished_at=utcnow(),
            lease_owner=None,
        )
        return RunStatus.FAILED if ok else "lost"
    ok = touch(
        status=RunStatus.SUCCEEDED,
        result=result,
        error=None,
        progress_stage="done",
        progress_fraction=1.0,
        finished_at=utcnow(),
        lease_owner=None,
    )
    return RunStatus.SUCCEEDED if ok else "lost"
