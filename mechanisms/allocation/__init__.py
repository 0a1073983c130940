"""The allocation: choose ``(a, η)`` and so every seller's ``ε_i`` (spec ``mechanism.md`` §4).

:func:`allocate` is the structured solver (the ``η`` search over block-exact solves);
:func:`reference_allocate` the paper-style projected-gradient reference. Private
modules, in dependency order: ``_problem`` (the objective ``G`` of spec §4.1),
``_weights_kernel`` (the compiled kernels), ``_weights_step`` (the closed-form
``a``-block, paper Thm 3.3), ``_reduced_newton`` (Newton on ``F(w) = min_a G``),
``_block_solver`` (block-exact solve at fixed ``η``), the subpackage ``_range`` (the
range searches: the global-optimality certificate, the default candidate-range rule and
its compiled one-seller search), ``_eta_search`` (the global ``η`` search, spec §4.2),
``_reference`` and ``_allocate`` (the public entry point: an
:class:`mechanisms.Instance` or the positional arrays); ``_blas`` limits BLAS threads.
"""

from mechanisms.allocation._allocate import allocate
from mechanisms.allocation._reference import reference_allocate

__all__ = ["allocate", "reference_allocate"]
