"""Generic background jobs (``kind="tradeoff"``): records, reads and the trade-off
computation. Claiming and the worker loop are the order pipeline's part, below the
marked line.
"""

from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session

from market import engine, markets, offers, records
from market.db import session_scope
from market.errors import InvalidInputError, NotFoundError
from market.models import Account, Job, Role, RunStatus, utcnow
from market.schemas import JobPublic, Progress, TradeoffRequest

TRADEOFF = "tradeoff"
DEFAULT_GAMMAS = tuple(float(g) for g in np.logspace(-2, 2, 8))


def create_tradeoff_job(
    session: Session, *, market_id: int, admin: Account, body: TradeoffRequest | None
) -> Job:
    """Queue a trade-off job over a ``γ`` grid for the market's current offers.

    Raises
    ------
    NotFoundError
    InvalidInputError
        The market has no public validation set.
    """
    market = markets.get_market_or_raise(session, market_id)
    if not market.validation:
        raise InvalidInputError("validation", "the market has no public validation set")
    values = markets.current_parameters(session, market_id).values
    gammas = (body.gammas if body and body.gammas else None) or values.get(
        "grids", {}
    ).get("gamma")
    job = Job(
        kind=TRADEOFF,
        market_id=market_id,
        created_by=admin.id,  # type: ignore[arg-type]
        params={"gammas": list(gammas or DEFAULT_GAMMAS)},
    )
    session.add(job)
    session.commit()
    session.refresh(job)
    return job


def get_job_or_raise(session: Session, *, job_id: int, account: Account) -> Job:
    """Return a job to an admin; ``NotFoundError`` otherwise."""
    job = session.get(Job, job_id)
    if job is None or account.role != Role.ADMIN:
        raise NotFoundError(f"job {job_id} not found")
    return job


def to_public(job: Job) -> JobPublic:
    """Return the status view of a job; trade-off points once it has succeeded."""
    points = (
        (job.result or {}).get("points") if job.status == RunStatus.SUCCEEDED else None
    )
    return JobPublic(
        id=job.id,  # type: ignore[arg-type]
        kind=job.kind,
        market_id=job.market_id,
        status=job.status,
        progress=Progress(stage=job.progress_stage, fraction=job.progress_fraction),
        error=job.error,
        points=points,
        result=job.result if job.status == RunStatus.SUCCEEDED else None,
    )


def compute_tradeoff(session: Session, job: Job) -> dict[str, Any]:
    """Compute ``{"points": [{"gamma", "validation_error", "total_payment"}]}``."""
    market = markets.get_market_or_raise(session, job.market_id)  # type: ignore[arg-type]
    active = offers.list_active_offers(session, market_id=market.id)  # type: ignore[arg-type]
    if not active:
        raise InvalidInputError("offers", "the market has no active offers")
    d = len(market.features)
    rows = [r for o in active for r in o.records_scaled]
    X, y = records.from_json(rows, d=d)
    costs = np.array([o.reported_cost for o in active for _ in o.records_scaled])
    X_val, y_val = records.scale_records(
        market.validation or [],
        features=market.features,
        task=market.task,
        target=market.target,
        out_of_bounds="clip",
    )
    values = markets.current_parameters(session, market.id).values  # type: ignore[arg-type]
    points = engine.tradeoff(
        X,
        y,
        costs,
        prior_spec=market.cost_prior,
        values=values,
        task=market.task,
        gammas=job.params["gammas"],
        X_val=X_val,
        y_val=y_val,
    )
    return {"points": points}


def run_tradeoff_job(db_engine: Engine, job_id: int) -> None:
    """Run a claimed trade-off job to ``succeeded`` or ``failed`` (with the reason)."""
    with session_scope(db_engine) as session:
        job = session.get(Job, job_id)
        if job is None:
            raise NotFoundError(f"job {job_id} not found")
        try:
            result = compute_tradeoff(session, job)
        except Exception as exc:  # any failure is recorded on the job, not lost
            session.rollback()
            job.status, job.error = RunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        else:
            job.status, job.result, job.error = RunStatus.SUCCEEDED, result, None
            job.progress_stage, job.progress_fraction = "done", 1.0
        job.finished_at = utcnow()
        session.add(job)
        session.commit()


# ---- claiming and the worker loop are added below this line by the pipeline ----


def run_claimed_job(
    db_engine: Engine, job_id: int, *, owner: str, lease_seconds: float
) -> str:
    """Run a claimed job to ``succeeded`` or ``failed``; every write is fenced by the
    lease (``market.leases``), so a job taken over by another worker is left alone.

    Returns the final status, or ``"lost"``.
    """
    from market import leases

    def touch(**values: Any) -> bool:
        return leases.touch(
            db_engine, Job, job_id, owner=owner, lease_seconds=lease_seconds, **values
        )

    if not touch(progress_stage="computing", progress_fraction=0.0):
        return "lost"
    try:
        with session_scope(db_engine) as session:
            job = session.get(Job, job_id)
            if job is None or job.kind != TRADEOFF:
                raise InvalidInputError("kind", "unknown job kind")
            result = compute_tradeoff(session, job)
    except Exception as exc:  # recorded on the job, not lost
        reason = str(exc) if isinstance(exc, InvalidInputError) else type(exc).__name__
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
