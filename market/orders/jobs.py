"""Background jobs (``kind="tradeoff"``): creating and reading them. Running a claimed
job is ``market.runtime.job_runner``; its numerics are ``market.pipeline.compute``.
"""

import numpy as np
from sqlmodel import Session

from market import markets, numerics
from market.errors import InvalidInputError, NotFoundError
from market.schemas import JobPublic, Progress, TradeoffRequest
from market.store import Account, Job, Role, RunStatus

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
    learner = body.learner if body and body.learner else None
    learner = learner or numerics.default_learner(market.task, market.features)
    params = numerics.check_order_learner(
        learner,
        (body.params if body else None) or {},
        task=market.task,
        features=market.features,
        partition=market.partition,
    )
    job = Job(
        kind=TRADEOFF,
        market_id=market_id,
        created_by=admin.id,  # type: ignore[arg-type]
        params={
            "gammas": list(gammas or DEFAULT_GAMMAS),
            "learner": learner,
            "params": params,
        },
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
