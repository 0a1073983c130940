"""``docs/api.md`` is kept current with what the service serves.

Every ``/v1`` operation and probe the application routes is documented there as
``METHOD /path`` (path parameters named as the code names them), and every
``METHOD /v1/...`` any page of the documentation mentions is served.
"""

from __future__ import annotations

import re
from pathlib import Path

from api.main import create_app
from market.config import Settings

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MENTION = re.compile(
    r"\b(GET|POST|PUT|PATCH|DELETE) (/v1/[^\s`?)\"',]*|/healthz|/readyz)"
)


def _served() -> set[str]:
    """``METHOD /path`` of every ``/v1`` operation and probe, from the application's
    own OpenAPI schema (built from its routes)."""
    app = create_app(Settings(database_url="sqlite://", workers=0))
    methods = {"get", "post", "put", "patch", "delete"}
    return {
        f"{method.upper()} {path}"
        for path, item in app.openapi()["paths"].items()
        if path.startswith("/v1/") or path in ("/healthz", "/readyz")
        for method in item
        if method in methods
    }


def _shape(operation: str) -> str:
    """``GET /v1/orders/{order_id}`` → ``GET /v1/orders/{}``: compare paths, not the
    names a page gives their parameters."""
    return re.sub(r"\{[^}]*\}", "{}", operation)


def test_every_served_operation_is_in_the_api_reference() -> None:
    served = _served()
    assert len(served) > 20  # the check sees the application's routes
    reference = (ROOT / "docs" / "api.md").read_text()
    missing = sorted(op for op in served if op not in reference)
    assert missing == [], f"document these in docs/api.md: {missing}"


def test_every_operation_the_docs_mention_is_served() -> None:
    served = {_shape(op) for op in _served()}
    stale = sorted(
        f"{page.relative_to(ROOT)}: {method} {path}"
        for page in PAGES
        for method, path in MENTION.findall(page.read_text())
        if _shape(f"{method} {path.rstrip('.')}") not in served
    )
    assert stale == []
