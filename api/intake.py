"""HTTP side of single-offer intake: an async admission dependency and the glue that
awaits :class:`market.store.group_commit.GroupCommitWriter` jobs from the event loop.

``POST /v1/markets/{id}/offers`` runs no synchronous dependency (each would be a hop
to the thread pool) and opens no session. Its dependency :func:`pending_admission`
only remembers the key; the route validates the records and awaits one writer job
(:func:`market.offers.intake.intake_job`) that checks the key, counts the request and
inserts the offer, answered after its commit. Errors keep the session path's order
(``429``, ``401``, ``403``, then ``422``/``404``/``409``): a request that fails before its
job (FastAPI's body validation, through the ``before_validation_error`` hook that
``api.errors`` calls; an unknown market; invalid records) runs an admission-only job
first. The route is mounted outside the routers that carry the ``rate_limit``
dependency (``api.main``): its admission counts it instead, under the same identity
and budget.
"""

import asyncio
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials
from fastapi.security.utils import get_authorization_scheme_param

from api.deps import _unauthorized, bearer, get_engine, get_settings
from api.rate_limit import client_identity, route_group
from market import access
from market.access import resolve_key_secret
from market.errors import RateLimitedError
from market.offers.intake import Admission, admission_job
from market.store import GroupCommitWriter, Job, Role, session_scope


async def run_job(writer: GroupCommitWriter, job: Job, *, durable: bool = True) -> Any:
    """Submit ``job`` to the writer and await its answer without blocking the loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, exc: BaseException | None) -> None:
        if future.done():  # the request was cancelled meanwhile
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    def done(result: Any, exc: BaseException | None) -> None:
        loop.call_soon_threadsafe(settle, result, exc)

    writer.submit(job, done, durable=durable)
    return await future


def key_secret(request: Request) -> bytes:
    """The API-key HMAC secret, resolved once per app (``market.access.key_secret``)."""
    state = request.app.state
    secret: bytes | None = getattr(state, "key_secret", None)
    if secret is None:
        secret = state.key_secret = resolve_key_secret(get_settings(request))
    return secret


def _verify_legacy(request: Request, key: str) -> tuple[int, str] | None:
    """Verify (and migrate) a legacy Argon2 key in a worker thread: once per key."""
    with session_scope(get_engine(request)) as session:
        account = access.authenticate(session, key, settings=get_settings(request))
    if account is None:
        return None
    return int(account.id), account.role  # type: ignore[arg-type]


@dataclass(slots=True)
class PendingAdmission:
    """The key an intake request presented; its admission (count, key check) runs
    later, in the request's one writer job, or alone if the request fails first."""

    request: Request
    key: str | None
    bearer: bool
    """Whether an ``Authorization: Bearer`` credential was given at all."""
    done: bool = False

    def job_arguments(self, verified: tuple[int, str] | None = None) -> dict[str, Any]:
        """Keyword arguments of ``admission_job`` / ``intake_job`` for this request."""
        request = self.request
        limiter = request.app.state.rate_limiter

        def identity(account_id: int | None) -> str:
            return client_identity(request, account_id)

        return {
            "key": None if verified is not None else self.key,
            "secret": key_secret(request),
            "identity": identity,
            "group": route_group(request.method),
            "now": limiter.clock(),
            "verified": verified,
        }

    async def after_legacy(self) -> dict[str, Any]:
        """Verify (and migrate) a legacy Argon2 key in a worker thread, once per key;
        return the job arguments for the retry: the verified account, or no key (a
        wrong one, counted under the client address)."""
        assert self.key is not None
        verified = await run_in_threadpool(_verify_legacy, self.request, self.key)
        if verified is None:
            return {**self.job_arguments(), "key": None}
        return self.job_arguments(verified)

    def refusal(self, admission: Admission) -> Exception | None:
        """``429``, ``401`` or ``403`` (in that order, as the session path's
        ``rate_limit`` and ``SellerAccount`` dependencies), or ``None``."""
        self.done = True
        decision = admission.decision
        if decision is not None and not decision.allowed:
            return RateLimitedError(decision.retry_after, decision.limit)
        if not self.bearer or admission.account_id is None:
            return _unauthorized()
        if admission.role != Role.SELLER.value:
            return HTTPException(
                status_code=status.HTTP_403_FORBIDDEN,
                detail=f"requires role {Role.SELLER.value}",
            )
        return None

    async def admit_alone(self) -> Exception | None:
        """Count and check the request in an admission-only job (a request that fails
        before its intake job); return its refusal, if any."""
        state = self.request.app.state
        limiter = state.rate_limiter
        job = admission_job(limiter, **self.job_arguments())
        admission: Admission = await run_job(state.writer, job, durable=False)
        if admission.legacy:
            job = admission_job(limiter, **await self.after_legacy())
            admission = await run_job(state.writer, job, durable=False)
        return self.refusal(admission)

    async def before_validation_error(self) -> Exception | None:
        """Hook of ``api.errors``: run the admission before FastAPI's ``422``."""
        if self.done:
            return None
        return await self.admit_alone()


async def pending_admission(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> PendingAdmission:
    """Remember the request's key (no I/O; the route's writer job checks it)."""
    scheme, key = get_authorization_scheme_param(request.headers.get("Authorization"))
    pending = PendingAdmission(
        request=request,
        key=key if scheme.lower() == "bearer" and key else None,
        bearer=credentials is not None and credentials.scheme.lower() == "bearer",
    )
    request.state.before_validation_error = pending.before_validation_error
    return pending


PendingSeller = Annotated[PendingAdmission, Depends(pending_admission)]
"""An intake request's key, checked (with the rate-limit count) by its writer job."""
