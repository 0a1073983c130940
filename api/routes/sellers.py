"""A seller's own views: offers, earnings and privacy spent per market."""

from fastapi import APIRouter

from api.deps import SellerAccount, SessionDep
from api.errors import ERROR_RESPONSES
from market import ledgers, offers
from market.schemas import EarningsPublic, OfferSummaries, PrivacyPublic

router = APIRouter(
    prefix="/sellers/me",
    tags=["sellers"],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403)},
)


@router.get("/earnings")
def my_earnings(session: SessionDep, seller: SellerAccount) -> EarningsPublic:
    """Return ε and payment per order that used you, and the total paid."""
    return ledgers.earnings(session, seller_id=seller.id)  # type: ignore[arg-type]


@router.get("/privacy")
def my_privacy(session: SessionDep, seller: SellerAccount) -> PrivacyPublic:
    """Return ε spent, the lifetime cap and what remains, per market."""
    return ledgers.privacy(session, seller_id=seller.id)  # type: ignore[arg-type]


@router.get("/offers")
def my_offers(session: SessionDep, seller: SellerAccount) -> OfferSummaries:
    """Return your offers in every market (newest first), without their records."""
    return offers.list_own_offers(session, seller_id=seller.id)  # type: ignore[arg-type]
