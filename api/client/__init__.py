"""Python clients of the privmarket HTTP API, one per role.

The clients speak only HTTP (``httpx``); they import no server code, so they run on a
seller's or a buyer's own machine with the package installed and nothing else.

- :class:`SellerClient`: a seller answering report requests from its own records.
- :class:`PartyNode`: a data party of a vertical market taking part in secure fits.
- :class:`BuyerClient`: a buyer placing orders and fetching models.
- :class:`AdminClient`: an admin creating and tuning markets.
"""

from __future__ import annotations

import importlib
from typing import Any

from api.client._http import ApiClient, ApiError

_LAZY = {
    "SellerClient": "api.client.seller",
    "PartyNode": "api.client.party",
    "BuyerClient": "api.client.buyer",
    "AdminClient": "api.client.admin",
}

__all__ = [
    "AdminClient",
    "ApiClient",
    "ApiError",
    "BuyerClient",
    "PartyNode",
    "SellerClient",
]


def __getattr__(name: str) -> Any:
    """Import a role's client on first use (a seller needs no buyer code)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'api.client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
