"""Empirical privacy audit of the private sampling randomizer (issue 10).

For the worst pair of inputs ``v = G·w`` and ``v' = −G·w`` (spec §3: the density ratio
``e^ε`` is attained on the hemisphere facing ``w``), draw 10⁵ reports per side, bound
``P(S | v)`` from below and ``P(S | v')`` from above with Clopper–Pearson intervals
(each side at level ``α/4``; two events, ``S`` and its complement), and report
``ε_lb = max_S log(P_low(S | v)/P_high(S | v'))``. A correct randomizer has
``ε_lb ≤ ε`` (with probability ≥ 1 − α); a broken twin that is calibrated for ``2ε``
(hemisphere probability and radius of ``2ε``) but claims ``ε`` must fail the same test.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy.stats import beta as beta_dist

from learners.ldp_missing import private_sampling

G = math.sqrt(2.0)
DRAWS = 100_000
ALPHA = 1e-6

Sampler = Callable[[np.ndarray, float, np.random.Generator], np.ndarray]


def _honest(V: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    return private_sampling(V, bound=G, epsilon=eps, rng=rng)


def _broken_twin(V: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Claims ``ε`` but randomizes with the radius and hemisphere probability of 2ε."""
    return private_sampling(V, bound=G, epsilon=2.0 * eps, rng=rng)


def _clopper_pearson(k: int, n: int, a: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta_dist.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(1 - a, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(
    sampler: Sampler, eps: float, *, d: int, rng: np.random.Generator
) -> float:
    """The audit's ``ε_lb`` (module docstring) for the worst pair of inputs."""
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    inside = []
    for v in (G * w, -G * w):
        Z = sampler(np.tile(v, (DRAWS, 1)), eps, rng)
        inside.append(int(np.sum(Z @ w > 0)))
    best = -math.inf
    for k_v, k_vp in ((inside[0], inside[1]), (DRAWS - inside[1], DRAWS - inside[0])):
        lo, _ = _clopper_pearson(k_v, DRAWS, ALPHA / 4)
        _, hi = _clopper_pearson(k_vp, DRAWS, ALPHA / 4)
        best = max(best, math.log(lo / hi))
    return best


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("d", [2, 5])
def test_randomizer_passes_and_its_broken_twin_fails(
    eps: float, d: int, rng: np.random.Generator
) -> None:
    honest = epsilon_lower_bound(_honest, eps, d=d, rng=rng)
    broken = epsilon_lower_bound(_broken_twin, eps, d=d, rng=rng)
    assert honest <= eps
    assert honest > 0.8 * eps  # the audit is tight enough to mean something
    assert broken > eps
