"""Markets: admins create, patch and tune them; every role reads the public settings."""

from typing import Annotated, Literal

from fastapi import APIRouter, Query, status

from api.deps import AdminAccount, CurrentAccount, MarketId, SessionDep
from api.errors import ERROR_RESPONSES
from api.links import MARKET_CREATED, MARKETS_LISTED, TRADEOFF_ACCEPTED
from market import markets, offers
from market.orders import jobs
from market.schemas import (
    JobAccepted,
    MarketCreate,
    MarketOfferSummary,
    MarketPublic,
    MarketUpdate,
    Page,
    TradeoffRequest,
)

router = APIRouter(
    prefix="/markets",
    tags=["markets"],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 422)},
)


@router.post("", status_code=status.HTTP_201_CREATED, responses=MARKET_CREATED)
def create_market(
    session: SessionDep, admin: AdminAccount, body: MarketCreate
) -> MarketPublic:
    """Create a market (admin)."""
    return markets.to_public(
        session, markets.create_market(session, body=body, admin=admin)
    )


@router.get("", responses=MARKETS_LISTED)
def list_markets(
    session: SessionDep,
    _account: CurrentAccount,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> Page[MarketPublic]:
    """List markets with their public settings."""
    return markets.list_markets(session, limit=limit, offset=offset)


@router.get("/{market_id}")
def get_market(
    session: SessionDep, _account: CurrentAccount, market_id: MarketId
) -> MarketPublic:
    """Return a market's public settings."""
    return markets.to_public(session, markets.get_market_or_raise(session, market_id))


@router.patch("/{market_id}", responses={409: ERROR_RESPONSES[409]})
def patch_market(
    session: SessionDep, admin: AdminAccount, market_id: MarketId, body: MarketUpdate
) -> MarketPublic:
    """Change settings (admin); mechanism changes apply to orders created afterwards."""
    market = markets.update_market(session, market_id=market_id, body=body, admin=admin)
    return markets.to_public(session, market)


@router.post(
    "/{market_id}/tradeoff",
    status_code=status.HTTP_202_ACCEPTED,
    responses=TRADEOFF_ACCEPTED,
)
def start_tradeoff(
    session: SessionDep,
    admin: AdminAccount,
    market_id: MarketId,
    body: TradeoffRequest | None = None,
) -> JobAccepted:
    """Queue the validation-error vs total-payment curve over a γ grid (admin)."""
    job = jobs.create_tradeoff_job(session, market_id=market_id, admin=admin, body=body)
    return JobAccepted(job_id=job.id)  # type: ignore[arg-type]


@router.get("/{market_id}/offers")
def list_market_offers(
    session: SessionDep,
    _admin: AdminAccount,
    market_id: MarketId,
    status: Annotated[
        Literal["active", "replaced", "withdrawn"] | None,
        Query(description="Only offers in this status"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> Page[MarketOfferSummary]:
    """List a market's offers with their sellers, newest first, without records
    (admin)."""
    markets.get_market_or_raise(session, market_id)
    return offers.list_market_offers(
        session, market_id=market_id, status=status, limit=limit, offset=offset
    )
