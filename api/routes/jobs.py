"""Background job status (admin)."""

from fastapi import APIRouter

from api.deps import AdminAccount, JobId, SessionDep
from api.errors import ERROR_RESPONSES
from market.orders import jobs
from market.schemas import JobPublic

router = APIRouter(
    prefix="/jobs",
    tags=["jobs"],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404)},
)


@router.get("/{job_id}")
def get_job(session: SessionDep, admin: AdminAccount, job_id: JobId) -> JobPublic:
    """Return a job's status; a finished trade-off job carries its points."""
    return jobs.to_public(jobs.get_job_or_raise(session, job_id=job_id, account=admin))
