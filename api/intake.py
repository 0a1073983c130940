"""HTTP side of single-offer intake: an async admission dependency and the glue that
awaits :class:`market.group_commit.GroupCommitWriter` jobs from the event loop.

``POST /v1/markets/{id}/offers`` runs no synchronous dependency (each would be a hop
to the thread pool) and opens no session: :func:`admit_seller` authenticates and
counts the request in one writer job (:func:`market.offer_intake.admission_job`) and
raises, in the order of the session path's dependencies, ``429`` (limit used up),
``401`` (missing or wrong key) and ``403`` (not a seller); the route then validates the
records and awaits its insert job, which is answered only after its commit. The route
is therefore mounted outside the routers that carry the ``rate_limit`` dependency
(``api.main``): its admission counts it instead, under the same identity and budget.
"""

import asyncio
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials
from fastapi.security.utils import get_authorization_scheme_param

from api.deps import _unauthorized, bearer, get_engine, get_settings
from api.rate_limit import client_identity, route_group
from market import accounts
from market.db import session_scope
from market.errors import RateLimitedError
from market.group_commit import GroupCommitWriter, Job
from market.key_secret import resolve_key_secret
from market.models import Role
from market.offer_intake import Admission, admission_job


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
    """The API-key HMAC secret, resolved once per app (``market.key_secret``)."""
    state = request.app.state
    secret: bytes | None = getattr(state, "key_secret", None)
    if secret is None:
        secret = state.key_secret = resolve_key_secret(get_settings(request))
    return secret


def _verify_legacy(request: Request, key: str) -> tuple[int, str] | None:
    """Verify (and migrate) a legacy Argon2 key in a worker thread: once per key."""
    with session_scope(get_engine(request)) as session:
        account = accounts.authenticate(session, key, settings=get_settings(request))
    if account is None:
        return None
    return int(account.id), account.role  # type: ignore[arg-type]


async def admit(request: Request) -> Admission:
    """Authenticate and count the request in one writer job (legacy keys: two)."""
    state = request.app.state
    scheme, key = get_authorization_scheme_param(request.headers.get("Authorization"))
    presented = key if scheme.lower() == "bearer" and key else None
    limiter = state.rate_limiter

    def identity(account_id: int | None) -> str:
        return client_identity(request, account_id)

    def job(presented: str | None, verified: tuple[int, str] | None = None) -> Job:
        return admission_job(
            limiter,
            key=presented,
            secret=key_secret(request),
            identity=identity,
            group=route_group(request.method),
            now=limiter.clock(),
            verified=verified,
        )

    admission: Admission = await run_job(state.writer, job(presented), durable=False)
    if admission.legacy:
        assert presented is not None
        verified = await run_in_threadpool(_verify_legacy, request, presented)
        admission = await run_job(state.writer, job(None, verified), durable=False)
    return admission


async def admit_seller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> int:
    """Return the id of the seller sending the request; ``429``, ``401``, ``403``
    as the session path's ``rate_limit`` and ``SellerAccount`` dependencies."""
    admission = await admit(request)
    decision = admission.decision
    if decision is not None and not decision.allowed:
        raise RateLimitedError(decision.retry_after, decision.limit)
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise _unauthorized()
    if admission.account_id is None:
        raise _unauthorized()
    if admission.role != Role.SELLER.value:
        raise HTTPException(
            status_code=status.HTTP_403_FORBIDDEN,
            detail=f"requires role {Role.SELLER.value}",
        )
    return admission.account_id


AdmittedSeller = Annotated[int, Depends(admit_seller)]
"""The id of the authenticated seller of an intake request (already rate-counted)."""
