"""Liveness and readiness probes."""

from fastapi import APIRouter, HTTPException, status
from sqlalchemy import text

from api.deps import SessionDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Report that the process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "Database unavailable"}})
def readyz(session: SessionDep) -> dict[str, str]:
    """Report whether the database answers."""
    try:
        session.exec(text("SELECT 1"))  # type: ignore[call-overload]
    except Exception as exc:  # any driver error means "not ready"
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "database unavailable"
        ) from exc
    return {"status": "ok"}
