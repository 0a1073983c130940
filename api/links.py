"""OpenAPI links (OpenAPI 3.1 "Link Object"): from each operation that creates or
lists something to the operations that read or change it, with the id taken from the
response. Clients see how ids flow; a stateful fuzzer (schemathesis) follows them to
chain create → read calls.

Each constant is a ``responses`` entry for the route decorator, keyed by the
operation's success status (operation ids are ``<tag>-<function name>``,
``api.main._operation_id``).
"""

from typing import Any


def _links(
    status: int, description: str, targets: dict[str, tuple[str, str, str]]
) -> dict[int | str, dict[str, Any]]:
    """``{status: {"description", "links"}}`` with one link per ``name: (operation
    id, path parameter, runtime expression)``."""
    return {
        status: {
            "description": description,
            "links": {
                name: {"operationId": op, "parameters": {param: expr}}
                for name, (op, param, expr) in targets.items()
            },
        }
    }


_MARKET = "$response.body#/id"
MARKET_CREATED = _links(
    201,
    "The market's public settings",
    {
        "GetMarket": ("markets-get_market", "market_id", _MARKET),
        "PatchMarket": ("markets-patch_market", "market_id", _MARKET),
        "CreateOffer": ("offers-create_offer", "market_id", _MARKET),
        "CreateOrder": ("orders-create_order", "market_id", _MARKET),
        "StartTradeoff": ("markets-start_tradeoff", "market_id", _MARKET),
    },
)
_FIRST = "$response.body#/items/0/id"
MARKETS_LISTED = _links(
    200,
    "A page of markets",
    {
        "GetFirstMarket": ("markets-get_market", "market_id", _FIRST),
        "CreateOfferOnFirst": ("offers-create_offer", "market_id", _FIRST),
        "CreateOrderOnFirst": ("orders-create_order", "market_id", _FIRST),
        "StartTradeoffOnFirst": ("markets-start_tradeoff", "market_id", _FIRST),
    },
)
_OFFER = "$response.body#/id"
_OFFER_TARGETS = {
    "GetOffer": ("offers-get_offer", "offer_id", _OFFER),
    "ReplaceOffer": ("offers-replace_offer", "offer_id", _OFFER),
    "WithdrawOffer": ("offers-withdraw_offer", "offer_id", _OFFER),
}
OFFER_CREATED = _links(201, "The stored offer", _OFFER_TARGETS)
OFFER_REPLACED = _links(200, "The new offer (the old one is replaced)", _OFFER_TARGETS)
_ORDER = "$response.body#/id"
ORDER_ACCEPTED = _links(
    202,
    "The queued order (or the same order again for a repeated Idempotency-Key)",
    {
        "GetOrder": ("orders-get_order", "order_id", _ORDER),
        "GetModel": ("orders-get_model", "order_id", _ORDER),
        "GetAllocations": ("orders-get_allocations", "order_id", _ORDER),
    },
)
TRADEOFF_ACCEPTED = _links(
    202,
    "The queued trade-off job",
    {"GetJob": ("jobs-get_job", "job_id", "$response.body#/job_id")},
)
