"""Request dependencies: database session, settings, the authenticated account, roles."""

from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from sqlalchemy.engine import Engine
from sqlmodel import Session

from market import access
from market.config import Settings
from market.store import Account, Role, session_scope

bearer = HTTPBearer(auto_error=False, description="API key: `Bearer pm_...`")


def get_settings(request: Request) -> Settings:
    """Return the settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


def get_engine(request: Request) -> Engine:
    """Return the app's database engine."""
    engine: Engine = request.app.state.engine
    return engine


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def get_session(
    request: Request, engine: Annotated[Engine, Depends(get_engine)]
) -> Iterator[Session]:
    """Yield one session per request; unsafe methods get a writer session."""
    write = request.method not in SAFE_METHODS
    with session_scope(engine, write=write) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
EngineDep = Annotated[Engine, Depends(get_engine)]


def _unauthorized() -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail="missing or invalid API key",
        headers={"WWW-Authenticate": "Bearer"},
    )


def request_account(request: Request, settings: Settings) -> Account | None:
    """Return the account of the request's bearer key, or ``None`` (missing, invalid).

    Authenticates once per request: the result is kept on ``request.state``, so the
    rate limiter (which runs first) and :func:`get_current_account` share it. The
    lookup runs in its own short read-only session: in the request's writer session
    it would take SQLite's write lock (``BEGIN IMMEDIATE``) for a read.
    """
    if hasattr(request.state, "account"):
        cached: Account | None = request.state.account
        return cached
    scheme, key = get_authorization_scheme_param(request.headers.get("Authorization"))
    account = None
    if scheme.lower() == "bearer" and key:
        with session_scope(get_engine(request)) as reader:
            account = access.authenticate(reader, key, settings=settings)
    request.state.account = account
    return account


def get_current_account(
    request: Request,
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Account:
    """Return the account of the bearer key; 401 if missing or invalid."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise _unauthorized()
    account = request_account(request, settings)
    if account is None:
        raise _unauthorized()
    return account


CurrentAccount = Annotated[Account, Depends(get_current_account)]


def require_role(*roles: Role) -> Callable[[Account], Account]:
    """Return a dependency that admits only ``roles`` (403 otherwise)."""
    allowed = {r.value for r in roles}

    def dependency(account: CurrentAccount) -> Account:
        if account.role not in allowed:
            raise HTTPException(
                status_code=status.HTTP_403_FORBIDDEN,
                detail=f"requires role {' or '.join(sorted(allowed))}",
            )
        return account

    return dependency


AdminAccount = Annotated[Account, Depends(require_role(Role.ADMIN))]
SellerAccount = Annotated[Account, Depends(require_role(Role.SELLER))]
BuyerAccount = Annotated[Account, Depends(require_role(Role.BUYER))]
BuyerOrAdmin = Annotated[Account, Depends(require_role(Role.BUYER, Role.ADMIN))]

MAX_ID = 2**31 - 1
"""Largest id a table's INTEGER primary key can hold (PostgreSQL ``integer``)."""


def id_path(description: str) -> Any:
    """Return a ``Path`` for an object id: ``1 ≤ id ≤ 2³¹ − 1`` (else 422, not a 500)."""
    return Path(ge=1, le=MAX_ID, description=description)


MarketId = Annotated[int, id_path("Market id")]
OfferId = Annotated[int, id_path("Offer id")]
OrderId = Annotated[int, id_path("Order id")]
JobId = Annotated[int, id_path("Job id")]
