"""Small instances shared by the payment, audit and budget tests (no tests here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mechanisms import MechanismConfig, UniformPrior

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Instance:
    X: FloatArray
    y: FloatArray
    costs: FloatArray
    prior: UniformPrior
    cfg: MechanismConfig


def small_instance(rng: np.random.Generator, m: int = 6, d: int = 2) -> Instance:
    """Separable-ish logistic data in the unit ball, costs ~ U[0, 1].

    ``μ = 1`` spreads weight over several sellers with ``k = 2`` caps, so some sellers
    win, some are excluded and some sit at their caps (kinks in ``ε_i(s)``).
    """
    X = rng.normal(size=(m, d))
    X /= 1.2 * np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ np.ones(d) + 0.3 * rng.normal(size=m) >= 0, 1.0, -1.0)
    costs = rng.uniform(0.02, 0.6, size=m)
    cfg = MechanismConfig(gamma=1.0, lam=1e-2, mu=1.0, sigma=1.0, k=2.0, n_grid=12)
    return Instance(X, y, costs, UniformPrior(0.0, 1.0), cfg)


def toy_instance() -> Instance:
    """Paper Appendix C: D = {(1, 1), (−1, −1)}, c = (0.1, 0.6), prior U[0, 1]."""
    X = np.array([[1.0], [-1.0]])
    y = np.array([1.0, -1.0])
    cfg = MechanismConfig(gamma=1.0, lam=1e-2, mu=0.5, sigma=1.0, k=2.0, n_grid=12)
    return Instance(X, y, np.array([0.1, 0.6]), UniformPrior(0.0, 1.0), cfg)


def broad_instance(rng: np.random.Generator, m: int = 60, d: int = 4) -> Instance:
    """Many winners (``μ = 10`` spreads the weight; costs ~ U[1e-4, 5e-4]), as in
    ``benchmarks/payments_speed.py`` but smaller: more winners than the payments'
    verification sample."""
    X = rng.normal(size=(m, d)) / (3.0 * np.sqrt(d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ rng.normal(size=d) >= 0, 1.0, -1.0)
    y = np.where(rng.random(m) < 0.1, -y, y)
    prior = UniformPrior(1e-4, 5e-4)
    cfg = MechanismConfig(gamma=1.0, lam=1e-2, mu=10.0, sigma=100.0, k=4.0, n_grid=12)
    return Instance(X, y, prior.sample(m, rng=rng), prior, cfg)
