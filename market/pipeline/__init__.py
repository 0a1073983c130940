"""The order pipeline: one run of an order or a trade-off job, above the domain.

- :mod:`market.pipeline.instance`: the one loader (records, costs, prior, lifetime caps)
  for orders and trade-off jobs.
- :mod:`market.pipeline.compute`: allocate / choose ``γ``, Myerson payments, the
  learner's release, the trade-off curve — no database access; every numerics call
  goes through :mod:`market.numerics`.
- :mod:`market.pipeline.results`: what a finished order stores (spends, summary, model).
- :mod:`market.pipeline.deadline`: the run's time budget and cooperative stop.
- :mod:`market.pipeline.audits`: the incentive self-audit of a market's current state.
"""
