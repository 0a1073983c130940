"""The default protocol settings of :class:`ULDPSparseLinearRegression`, by a public rule.

No single setting serves every size (``benchmarks/RESULTS.md``, "uldp_sparse_linear:
default settings"): at the paper's default size (n = 400 users, m = 100 records each,
d = 256, ε = 4) the spec's product defaults (top-k pruning, ``N_b = 8``, ``B = 1``) have
ℓ2 error 0.69 against 0.566 for the zero estimator, while at n = 20,000 they are the
right ones. The rule below picks each setting the caller leaves at ``None`` from public
quantities only: the number ``n`` of users with ``ε_i > 0``, their median budget ``ε``,
the dimension ``d`` and the target sparsity ``k`` (spec ``uldp-sparse-linear-regression.md``
§4 and §6; the records per user ``m`` do not enter: they change how often a user's
local selector finds a true index, a property of the data).

1. **Selection strength** ``ρ = √(n₁/L) / (2k·c_ε)``, ``n₁ = ⌊n/2⌋`` selection users,
   ``L = ⌈log₂ d⌉`` tree levels, ``c_ε = (e^ε + 1)/(e^ε − 1)``: the votes of an index
   holding ``1/(2k)`` of them over the frequency oracle's standard deviation at one level
   (``γ c_ε √(n₁/L)`` with ``γ = L``, spec §4.3), up to the common factor ``n₁``.

   - ``ρ ≥ 1``: the tree can follow single indices: top-k pruning (``hh_alpha = 0``, the
     spec's default) with the users dealt to the levels that prune
     (``hh_levels = "pruned"``; with ``α = 0`` the levels ``2^ℓ ≤ k`` keep every
     candidate, so their users' bits are wasted).
   - ``ρ < 1``: it cannot (at the paper's size ``ρ = 0.30``; spec D3: a random support is
     then found at chance level whatever the pruning): the reference rule
     ``hh_alpha = 0.1`` (spec §4.3), which spends the early levels on the one strongest
     prefix and so keeps the selection to one subtree.

2. **Users per coordinate** of the 2-SLR mean ``u = ⌊(n − n₁)/2⌋ / K``,
   ``K = 2^⌈log₂ k⌉`` (each round of ULDPMean deals half the estimation users over the
   ``K`` rotated coordinates, spec §6):

   - ``n_bins = 4`` when ``u < 100`` (with a dozen users per coordinate, eight bins are
     mislocated often enough to cost more than the narrower noise saves), else 8;
   - ``bound = min(B_max, ε·√u / 56)``: the public range ``[−B, B]`` of a rotated
     coordinate narrows when the Laplace noise of the mean (standard deviation
     ``∝ B/(ε√u)``) is large, trading a bias toward 0 for less noise; ``B_max = 0.5``
     with 4 bins (the width whose bins a dozen users still locate: at ε = 16 and the
     paper's size ``B = 1`` costs 0.34 against 0.29), else the spec's 1. It is 0.253 at
     the paper's size and 1 from ``u ≥ 100`` and ``ε√u ≥ 56`` (at ε = 4 and k = 8:
     from n = 6,272 users).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from learners.uldp_sparse._heavy_hitter import tree_depth
from learners.uldp_sparse._mean import padded_dimension

SELECTION_STRENGTH_MIN = 1.0
"""``ρ`` from which top-k pruning replaces the reference ``α`` rule."""
REFERENCE_ALPHA = 0.1
"""The reference implementation's pruning share (spec §4.3)."""
FEW_USERS_PER_COORDINATE = 100
"""Below this many users per coordinate and round, ``n_bins = 4`` (else 8)."""
BOUND_SCALE = 56.0
"""``bound = min(B_max, ε√u / BOUND_SCALE)``: 0.253 at the paper's default size."""
FEW_USERS_BOUND_MAX = 0.5
"""``B_max`` below :data:`FEW_USERS_PER_COORDINATE` users per coordinate (else 1)."""


@dataclass(frozen=True)
class DefaultSettings:
    """The settings the rule chose and the public quantities it read."""

    hh_alpha: float
    hh_levels: str
    n_bins: int
    bound: float
    selection_strength: float
    users_per_coordinate: float
    epsilon: float


def oracle_constant(epsilon: float) -> float:
    """``c_ε = (e^ε + 1)/(e^ε − 1)`` (``1`` at ``ε = ∞``)."""
    if math.isinf(epsilon):
        return 1.0
    return 1.0 / math.tanh(epsilon / 2.0)


def default_settings(
    eps_user: NDArray[np.float64], *, d: int, k: int, intercept: bool = False
) -> DefaultSettings:
    """The rule of the module docstring for users with budgets ``eps_user`` (zeros take
    no part), ``d`` features and target sparsity ``k`` (``intercept``: one more
    coordinate in the 2-SLR mean).

    Examples
    --------
    >>> s = default_settings(np.full(400, 4.0), d=256, k=8)  # the paper's default size
    >>> (s.hh_alpha, s.hh_levels, s.n_bins, round(s.bound, 3))
    (0.1, 'all', 4, 0.253)
    >>> round(s.selection_strength, 2), s.users_per_coordinate
    (0.3, 12.5)
    >>> s = default_settings(np.full(20_000, 4.0), d=256, k=8)
    >>> (s.hh_alpha, s.hh_levels, s.n_bins, s.bound)
    (0.0, 'pruned', 8, 1.0)
    """
    active = eps_user[eps_user > 0]
    n = int(active.size)
    eps = float(np.median(active)) if n else 0.0
    n1 = n // 2
    levels = tree_depth(d)
    c = oracle_constant(eps) if eps > 0 else math.inf
    rho = math.sqrt(n1 / levels) / (2 * k * c) if n1 and levels else 0.0
    strong = rho >= SELECTION_STRENGTH_MIN
    u = ((n - n1) // 2) / padded_dimension(k + int(intercept))
    few = u < FEW_USERS_PER_COORDINATE
    bound_max = FEW_USERS_BOUND_MAX if few else 1.0
    if math.isinf(eps) or u <= 0:
        bound = bound_max
    else:
        bound = min(bound_max, eps * math.sqrt(u) / BOUND_SCALE)
    return DefaultSettings(
        hh_alpha=0.0 if strong else REFERENCE_ALPHA,
        hh_levels="pruned" if strong else "all",
        n_bins=4 if few else 8,
        bound=bound,
        selection_strength=rho,
        users_per_coordinate=u,
        epsilon=eps,
    )
