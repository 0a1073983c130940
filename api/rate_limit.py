"""HTTP side of rate limiting: the dependency every ``/v1`` route runs first.

The counting lives in :mod:`market.access.rate_limits`; this module picks the identity (the
authenticated account, else the client address) and the route group (reads: ``GET``,
``HEAD``; writes: everything else; open registration additionally draws on its own
per-address budget, :func:`registration_budget`). An exhausted budget raises
``RateLimitedError``, which ``api.errors`` turns into
``429 {"detail", "code": "rate_limited"}`` with ``Retry-After`` (documented on every
``/v1`` operation). The client address is the
connection's peer: behind a reverse proxy, run uvicorn with ``--proxy-headers`` and
``--forwarded-allow-ips`` so that it is the real client's.
"""

from fastapi import Request

from api.deps import SAFE_METHODS, SessionDep, SettingsDep, request_account
from market.access import RateLimiter, RouteGroup


def route_group(method: str) -> RouteGroup:
    """Return the budget a request method draws on."""
    return RouteGroup.READ if method.upper() in SAFE_METHODS else RouteGroup.WRITE


def client_identity(request: Request, account_id: int | None) -> str:
    """Return ``account:<id>`` for an authenticated request, else ``ip:<address>``."""
    if account_id is not None:
        return f"account:{account_id}"
    host = request.client.host if request.client is not None else "unknown"
    return f"ip:{host}"


def get_rate_limiter(request: Request) -> RateLimiter:
    """Return the app's limiter (``app.state.rate_limiter``)."""
    limiter: RateLimiter = request.app.state.rate_limiter
    return limiter


def rate_limit(request: Request, session: SessionDep, settings: SettingsDep) -> None:
    """Count the request against its identity's budget; ``429`` when it is used up."""
    limiter = get_rate_limiter(request)
    group = route_group(request.method)
    if not limiter.rules[group].enabled:
        return
    account = request_account(request, settings)
    identity = client_identity(request, account.id if account is not None else None)
    limiter.check(session, identity=identity, group=group)


def registration_budget(request: Request, session: SessionDep) -> None:
    """Count an open registration against its client address's own budget
    (``rate_limit_registrations`` per window); ``429`` when it is used up.

    Registration needs no key, so the address is the only identity; this budget is
    separate from (and on top of) the general write budget, so that account creation
    can be kept rare without slowing other writes.
    """
    limiter = get_rate_limiter(request)
    if limiter.rules[RouteGroup.REGISTER].enabled:
        identity = client_identity(request, None)
        limiter.check(session, identity=identity, group=RouteGroup.REGISTER)
