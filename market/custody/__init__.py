"""Seller custody: a market whose records stay with their sellers.

- :mod:`market.custody.reports`: a seller's report requests and the reports it posts
  (validated against the randomizer's output space; only reports are stored), and the
  collecting stage of an order as its buyer and admins see it.

Running the rounds (pricing, publishing requests, closing rounds, the fit from the
reports and settlement of the deliverers) is :mod:`market.runtime.custody_runner`.
"""

from market.custody.reports import (
    collection_view,
    list_requests,
    submit_report,
)

__all__ = ["collection_view", "list_requests", "submit_report"]
