"""Console pages. Each route renders a shell; the data comes from ``/v1`` in the
browser with the user's own key, so a page shows exactly what that key may read."""

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from api.deps import id_path

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

ObjectId = Annotated[int, id_path("Id of the page's object")]

PAGES: tuple[tuple[str, str, str, str | None], ...] = (
    # (path, template, title, the id's name in the template), with who reads what:
    ("/", "home", "Home", None),  # every role: sign in, then your links
    ("/markets", "markets", "Markets", None),  # every role: public settings
    ("/markets/{object_id}", "market", "Market", "market_id"),  # admin: curve, set γ
    ("/buy", "buy", "Order a model", None),  # buyer: learner form from the schema
    ("/orders/{object_id}", "order", "Order", "order_id"),  # buyer, admin: progress
    ("/orders/{object_id}/allocations", "allocations", "Allocation", "order_id"),
    ("/seller", "seller", "Your data", None),  # seller: privacy, earnings, offers
    ("/offers/{object_id}", "offer", "Offer", "offer_id"),  # seller: own offer
)
"""The pages; each page's script checks the role (``data-roles`` in its template)."""


def _render(request: Request, template: str, title: str, **ids: int) -> HTMLResponse:
    response = templates.TemplateResponse(
        request, f"{template}.html", {"title": title, "ids": ids}
    )
    response.headers.update(SECURITY_HEADERS)
    return response


def _add_page(path: str, template: str, title: str, id_name: str | None) -> None:
    if id_name is None:

        def page(request: Request) -> HTMLResponse:
            return _render(request, template, title)

    else:

        def page(request: Request, object_id: ObjectId) -> HTMLResponse:  # type: ignore[misc]
            return _render(request, template, title, **{id_name: object_id})

    router.add_api_route(path, page, name=template, response_class=HTMLResponse)


for _page in PAGES:
    _add_page(*_page)
