"""Offers: sellers upload, read, replace and withdraw their own records."""

from fastapi import APIRouter, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from api.deps import (
    AdminAccount,
    MarketId,
    OfferId,
    SellerAccount,
    SessionDep,
    SettingsDep,
)
from api.errors import ERROR_RESPONSES
from api.intake import PendingSeller, run_job
from api.links import OFFER_CREATED, OFFER_REPLACED
from market import markets, offers
from market.errors import MarketError, NotFoundError
from market.offers import bulk
from market.offers import intake as offer_intake
from market.schemas import (
    BulkOffersCreate,
    BulkOffersCreated,
    OfferCreate,
    OfferPublic,
)

_RESPONSES = {k: ERROR_RESPONSES[k] for k in (401, 403, 404, 413, 422)}
router = APIRouter(tags=["offers"], responses=_RESPONSES)
intake_router = APIRouter(tags=["offers"], responses=_RESPONSES)
"""Single-offer intake: counted by its own admission (``api.intake``), so mounted
without the ``rate_limit`` dependency (``api.main``)."""

INLINE_VALUES = 4096
"""Offers with at most this many feature values are validated on the event loop (tens
of microseconds); larger ones in a worker thread."""


@intake_router.post(
    "/markets/{market_id}/offers",
    status_code=status.HTTP_201_CREATED,
    responses={409: ERROR_RESPONSES[409], **OFFER_CREATED},
)
async def create_offer(
    request: Request, seller: PendingSeller, market_id: MarketId, body: OfferCreate
) -> OfferPublic:
    """Offer records to a market (one active offer per seller and market).

    Answered after the offer is committed; concurrent offers share commits (group
    commit, ``market.store.group_commit``).
    """
    state = request.app.state
    cache: offer_intake.MarketCache = state.market_cache
    try:
        rules = cache.cached(market_id) or await run_in_threadpool(cache.get, market_id)
        if rules is None:
            raise NotFoundError(f"market {market_id} not found")
        size = sum(len(r.x) for r in body.records or ())
        if size <= INLINE_VALUES:
            prepared = offer_intake.prepare(rules, body)
        else:
            prepared = await run_in_threadpool(offer_intake.prepare, rules, body)
    except MarketError:
        refusal = await seller.admit_alone()  # counted, and 429/401/403 win
        if refusal is not None:
            raise refusal from None
        raise
    limiter = state.rate_limiter
    job = offer_intake.intake_job(limiter, prepared, **seller.job_arguments())
    intake: offer_intake.Intake = await run_job(state.writer, job)
    if intake.admission.legacy:
        arguments = await seller.after_legacy()
        job = offer_intake.intake_job(limiter, prepared, **arguments)
        intake = await run_job(state.writer, job)
    refusal = seller.refusal(intake.admission)
    if refusal is not None:
        raise refusal
    if intake.conflict is not None:
        raise intake.conflict
    return offer_intake.to_public(prepared, intake)


@router.post(
    "/markets/{market_id}/offers:bulk",
    status_code=status.HTTP_201_CREATED,
    responses={409: ERROR_RESPONSES[409]},
)
def create_offers_in_bulk(
    session: SessionDep,
    settings: SettingsDep,
    _admin: AdminAccount,
    market_id: MarketId,
    body: BulkOffersCreate,
) -> BulkOffersCreated:
    """Offer many sellers' records at once (admin): all rows or none.

    Each row is an offer (the single-offer body) plus ``seller_id`` (an existing
    seller) or ``seller_name`` (a new seller account; its API key is in the response,
    shown once). The first bad row gives ``422`` naming its index
    (``offers[3].records[0].x[1]``), a seller with an active offer ``409``; nothing
    is stored then. Bodies may be up to ``max_bulk_request_bytes`` (64 MiB).
    """
    market = markets.get_market_or_raise(session, market_id)
    return bulk.create_offers(
        session, market=market, rows=body.offers, settings=settings
    )


@router.get("/offers/{offer_id}")
def get_offer(
    session: SessionDep, seller: SellerAccount, offer_id: OfferId
) -> OfferPublic:
    """Return one of your offers, with its records."""
    return offers.to_public(
        offers.get_own_offer_or_raise(session, offer_id=offer_id, seller=seller)
    )


@router.put(
    "/offers/{offer_id}", responses={409: ERROR_RESPONSES[409], **OFFER_REPLACED}
)
def replace_offer(
    session: SessionDep, seller: SellerAccount, offer_id: OfferId, body: OfferCreate
) -> OfferPublic:
    """Replace an active offer; the response is the new offer (``replaces_id`` links back)."""
    return offers.to_public(
        offers.replace_offer(session, offer_id=offer_id, seller=seller, body=body)
    )


@router.delete(
    "/offers/{offer_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={409: ERROR_RESPONSES[409]},
)
def withdraw_offer(
    session: SessionDep, seller: SellerAccount, offer_id: OfferId
) -> Response:
    """Withdraw an offer; finished orders keep the data they used."""
    offers.withdraw_offer(session, offer_id=offer_id, seller=seller)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
