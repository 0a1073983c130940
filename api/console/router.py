"""Console pages. Each route renders a shell; the data comes from ``/v1`` in the
browser with the user's own key, so a page shows exactly what that key may read."""

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from api.deps import MarketId, OfferId, OrderId

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"
templates = Jinja2Templates(directory=HERE / "templates")  # autoescapes .html

CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
"""No inline script or style, no third-party origin: injected markup cannot run."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

router = APIRouter(prefix="/console", include_in_schema=False)


def _page(request: Request, template: str, title: str, **ids: Any) -> HTMLResponse:
    response = templates.TemplateResponse(
        request, template, {"title": title, "ids": ids}
    )
    response.headers.update(SECURITY_HEADERS)
    return response


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> HTMLResponse:
    """Sign in with an API key; then the links of your role."""
    return _page(request, "home.html", "Sign in")


@router.get("/markets", response_class=HTMLResponse)
def markets_page(request: Request) -> HTMLResponse:
    """Markets and their public settings."""
    return _page(request, "markets.html", "Markets")


@router.get("/markets/{market_id}", response_class=HTMLResponse)
def market_page(request: Request, market_id: MarketId) -> HTMLResponse:
    """Admin: a market's settings, its trade-off curve (set γ from it) and orders."""
    return _page(request, "market.html", "Market", market_id=market_id)


@router.get("/buy", response_class=HTMLResponse)
def buy_page(request: Request) -> HTMLResponse:
    """Buyer: place an order (learner and params from ``GET /v1/learners``)."""
    return _page(request, "buy.html", "Order a model")


@router.get("/orders/{order_id}", response_class=HTMLResponse)
def order_page(request: Request, order_id: OrderId) -> HTMLResponse:
    """Buyer or admin: an order's progress; the buyer's model once it succeeded."""
    return _page(request, "order.html", "Order", order_id=order_id)


@router.get("/orders/{order_id}/allocations", response_class=HTMLResponse)
def allocations_page(request: Request, order_id: OrderId) -> HTMLResponse:
    """Admin: per-seller ε histogram and payment vs reported cost·ε (IR line)."""
    return _page(request, "allocations.html", "Allocation", order_id=order_id)


@router.get("/seller", response_class=HTMLResponse)
def seller_page(request: Request) -> HTMLResponse:
    """Seller: your offers, earnings per order and privacy spent per market."""
    return _page(request, "seller.html", "Your data")


@router.get("/offers/{offer_id}", response_class=HTMLResponse)
def offer_page(request: Request, offer_id: OfferId) -> HTMLResponse:
    """Seller: one of your offers with its records."""
    return _page(request, "offer.html", "Offer", offer_id=offer_id)
