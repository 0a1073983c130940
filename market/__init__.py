"""The market's domain, grouped by concept, with the numerics behind one adapter.

From the bottom up:

- :mod:`market.config`, :mod:`market.errors`, :mod:`market.datasets`: settings, the
  domain's errors, the public data sets;
- :mod:`market.store`: tables, engines, sessions, group commit;
- :mod:`market.numerics`: the only door to ``mechanisms`` and ``learners``;
- :mod:`market.schemas`, :mod:`market.prior_schemas`: request and response shapes;
- :mod:`market.access`: accounts, API keys, rate limits;
- :mod:`market.markets`, :mod:`market.offers`, :mod:`market.orders`,
  :mod:`market.ledgers`: the domain itself;
- :mod:`market.pipeline`: one run of an order or job (never imported by the domain);
- :mod:`market.runtime`: the workers that claim runs and persist their outcome.
"""
