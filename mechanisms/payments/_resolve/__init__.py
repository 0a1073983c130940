"""One seller's allocation curve ``s ↦ ε_i(s, c_-i)`` and the re-solves behind it
(spec ``mechanism.md`` §5).

Private modules, in dependency order: ``_local_resolve`` (the certified shortcut
re-solve when a seller's virtual cost goes up, and the stale certified nodes a payment
job shares), ``_range_resolve`` (the lean re-solve under the default candidate-range
rule, its O(m) work done once per base) and ``_seller_curve`` (:class:`SellerCurve`:
every evaluation cached, taken by the lean re-solve, the shortcut or the full search).
The rest of the package reads re-solves only through ``_seller_curve`` and
``_local_resolve.stale_nodes``.
"""
