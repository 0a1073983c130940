"""Offers: a seller's records (or a party's column block) offered to a market at a
reported cost.

- :mod:`market.offers.crud`: create, replace, withdraw and read offers (this facade);
- :mod:`market.offers.intake`: single-offer intake under load (group commit, caches);
- :mod:`market.offers.bulk`: an admin's bulk ingestion of many sellers at once;
- :mod:`market.offers.records`: record schema checks and public-bounds scaling;
- :mod:`market.offers.vertical`: column blocks and keys of vertical markets.
"""

from market.offers.crud import (
    DUPLICATE,
    RECORDS_PER_SELLER,
    ActiveOffer,
    active_offer,
    create_offer,
    get_own_offer_or_raise,
    list_active_offers,
    list_market_offers,
    list_own_offers,
    offer_size,
    offers_in_use,
    replace_offer,
    to_public,
    validate_offer,
    withdraw_offer,
)

__all__ = [
    "DUPLICATE",
    "RECORDS_PER_SELLER",
    "ActiveOffer",
    "active_offer",
    "create_offer",
    "get_own_offer_or_raise",
    "list_active_offers",
    "list_market_offers",
    "list_own_offers",
    "offer_size",
    "offers_in_use",
    "replace_offer",
    "to_public",
    "validate_offer",
    "withdraw_offer",
]
