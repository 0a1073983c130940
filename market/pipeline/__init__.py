"""The order pipeline: one loader, one adapter to the numerics, the computation.

- :mod:`market.pipeline.numerics`: the only market module that imports ``mechanisms`` or
  ``learners`` (learners only through their registry); the one money rule.
- :mod:`market.pipeline.instance`: the one loader (records, costs, prior, lifetime caps)
  for orders and trade-off jobs.
- :mod:`market.pipeline.compute`: allocate / choose ``γ``, Myerson payments, the
  learner's release, the trade-off curve — no database access.
- :mod:`market.pipeline.results`: what a finished order stores (spends, summary, model).
"""
