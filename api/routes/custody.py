"""Seller custody: sellers read their report requests and post randomized reports;
buyers and admins follow an order's collecting stage."""

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from api.deps import MAX_ID, BuyerOrAdmin, OrderId, SellerAccount, SessionDep
from api.errors import ERROR_RESPONSES
from market import custody
from market.schemas import (
    CollectionPublic,
    ReportAccepted,
    ReportIn,
    ReportRequestsPublic,
)

router = APIRouter(
    tags=["custody"],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 422)},
)
RequestId = Annotated[int, Path(ge=1, le=MAX_ID, description="Report request id")]


@router.get("/sellers/me/report-requests")
def my_report_requests(
    session: SessionDep,
    seller: SellerAccount,
    market_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    status: Literal["open", "all"] = "open",
) -> ReportRequestsPublic:
    """Your report requests (oldest first): ``open`` ones (unanswered, before their
    deadline) or ``all``. Each names the order, the round, the randomizer and its
    version, your ε share for the round, the round's public parameters and the
    deadline; answer it with the randomizer run on your own records."""
    return custody.list_requests(
        session, seller=seller, market_id=market_id, status=status
    )


@router.post(
    "/report-requests/{request_id}/report",
    responses={409: ERROR_RESPONSES[409]},
)
def post_report(
    session: SessionDep, seller: SellerAccount, request_id: RequestId, body: ReportIn
) -> ReportAccepted:
    """Send the randomized report for one of your open requests. It must lie in the
    randomizer's output space (``422`` naming ``report.<field>``); a request that is
    not yours is ``403``, unknown ``404``, answered already or past its deadline
    ``409``. Nothing is stored then."""
    return custody.submit_report(
        session, seller=seller, request_id=request_id, body=body
    )


@router.get("/orders/{order_id}/collection")
def order_collection(
    session: SessionDep, account: BuyerOrAdmin, order_id: OrderId
) -> CollectionPublic:
    """A seller-custody order's collecting stage: the round, its deadline, reports
    received / expected (admins also see each seller's ε, payment and delivery)."""
    return custody.collection_view(session, order_id=order_id, account=account)
