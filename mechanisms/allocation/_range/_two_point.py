"""The two-point lower bound of an ``η`` cell (spec ``mechanism.md`` §4.2), compiled.

One scalar function for both branch-and-bounds over ``log η`` cells: the range
certificate (:func:`mechanisms.allocation._range._certify.certify_range`, which unpacks
``σ, γ`` from its problem) and the strict-mode re-solve kernel
(:mod:`mechanisms.payments._resolve._strict_kernel`).
"""

from __future__ import annotations

import math

from mechanisms.allocation._weights_kernel import _jit


@_jit
def two_point_bound(
    sigma: float, gamma: float, e1: float, l1: float, e2: float, l2: float
) -> float:
    """Lower bound of ``G`` over the cell ``[e1, e2]`` from certified bounds ``l1, l2``
    at its ends (``e1 < e2``).

    For a fixed ``x = (w, a)``, ``G(x, η) = H(x) + σ/η + γηS(x)`` with ``S = ΣΨ_i a_i``
    (spec (4.1) with linear ``u``), and (when the feasible set does not depend on ``η``)
    ``G(x, η_j) ≥ l_j``. So
    ``G(x, η) ≥ max(l1 + σ(1/η − 1/η₁) + γ(η − η₁)S, l2 + σ(1/η − 1/η₂) − γ(η₂ − η)S)``,
    whose minimum over ``S`` sits where the two cross, at
    ``S* = (l2 − l1 + σ(1/η₁ − 1/η₂)) / (γ(η₂ − η₁))`` for every ``η``. The bound is
    ``min_η l1 + σ(1/η − 1/η₁) + γ(η − η₁)S*`` — exact to second order in the width —
    attained at ``η = √(σ/(γS*))`` clipped to the cell. With ``γ ≤ 0``,
    ``G(x, η) = H(x) + σ/η``: both end bounds fall in ``η``, take ``η₂``. The result is
    never above ``min(l1, l2)``.
    """
    if gamma <= 0.0:
        return min(max(l1 + sigma * (1.0 / e2 - 1.0 / e1), l2), l1, l2)
    # S = ΣΨ_i a_i ≥ 0: a negative crossing means the first bound is the larger at
    # every S ≥ 0, and its minimum (S = 0, η = η₂) is the bound.
    s_star = max((l2 - l1 + sigma * (1.0 / e1 - 1.0 / e2)) / (gamma * (e2 - e1)), 0.0)
    if s_star <= 0.0:
        eta = e2
    elif sigma <= 0.0:
        eta = e1
    else:
        eta = min(max(math.sqrt(sigma / (gamma * s_star)), e1), e2)
    val = l1 + sigma * (1.0 / eta - 1.0 / e1) + gamma * (eta - e1) * s_star
    return min(val, l1, l2)
