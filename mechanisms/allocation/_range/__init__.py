"""The allocation's range searches: global optima over a declared ``η`` range (spec §4).

Private modules, in dependency order: ``_two_point`` (the two-point lower bound of an
``η`` cell, compiled, for ``_certify`` and the strict re-solve kernel), ``_certify``
(the convexity certificate ``λ > λ_conv`` and the ``η``-range branch-and-bound that
certifies an allocation's global optimum), ``_one_seller_search`` (the payment
re-solve's branch-and-bound, compiled) and ``_candidate_range`` (the default rule: the
global optimum over public candidate models, its branch-and-bound and the one-seller
re-solve). They stand on the fixed-``η`` solvers of the parent package (``_problem``,
``_weights_kernel``, ``_weights_step``, ``_reduced_newton``, ``_block_solver``) and
are called by its ``η`` search (``_eta_search``).
"""
