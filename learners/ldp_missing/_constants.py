"""Constants of the ℓ2-ball private sampling mechanism (spec §3).

For a budget ``ε > 0`` and dimension ``d ≥ 1``:

    C_ε = (e^ε + 1)/(e^ε − 1),    π_ε = e^ε/(e^ε + 1),
    κ_d = √π · Γ((d+1)/2) / Γ(d/2) = 1 / E|u₁|   (u uniform on S^{d−1}),
    B   = G · C_ε · κ_d                           (the output radius).

References
----------
.. [DJW18] J. C. Duchi, M. I. Jordan, M. J. Wainwright, "Minimax optimal procedures
   for locally private estimation", JASA 113 (2018).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln

__all__ = ["c_epsilon", "check_epsilon", "kappa", "pi_epsilon", "sampling_radius"]


def check_epsilon(epsilon: ArrayLike, *, name: str = "epsilon") -> NDArray[np.float64]:
    """Return ``epsilon`` as a float array after checking every entry is finite and > 0.

    Raises
    ------
    ValueError
        Naming ``name`` (and the first bad index for arrays): a randomizer never runs
        with ``ε ≤ 0``.
    """
    eps = np.asarray(epsilon, dtype=float)
    bad = ~np.isfinite(eps) | (eps <= 0)
    if bad.any():
        if eps.ndim == 0:
            raise ValueError(f"{name} must be finite and > 0, got {float(eps)!r}")
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(
            f"{name} must be finite and > 0; {name}[{i}] = {eps.ravel()[i]!r}"
        )
    return eps


def kappa(d: int) -> float:
    """``κ_d = √π Γ((d+1)/2)/Γ(d/2)`` (spec §3), computed with log-gamma.

    Examples
    --------
    >>> round(kappa(2), 12) == round(math.pi / 2, 12), round(kappa(3), 12)
    (True, 2.0)
    """
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"d must be a positive integer, got {d!r}")
    return math.sqrt(math.pi) * math.exp(gammaln((d + 1) / 2.0) - gammaln(d / 2.0))


def c_epsilon(epsilon: ArrayLike) -> NDArray[np.float64]:
    """``C_ε = (e^ε + 1)/(e^ε − 1) = 1/tanh(ε/2)`` (stable for small and large ε)."""
    eps = check_epsilon(epsilon)
    return np.asarray(1.0 / np.tanh(eps / 2.0), dtype=float)


def pi_epsilon(epsilon: ArrayLike) -> NDArray[np.float64]:
    """``π_ε = e^ε/(e^ε + 1)``, the probability of the hemisphere facing the input."""
    eps = check_epsilon(epsilon)
    return np.asarray(1.0 / (1.0 + np.exp(-eps)), dtype=float)


def sampling_radius(bound: float, d: int, epsilon: ArrayLike) -> NDArray[np.float64]:
    """Output radius ``B = G·C_ε·κ_d`` of ``Q_ps`` (spec §3), per entry of ``epsilon``.

    Parameters
    ----------
    bound : float
        Public input bound ``G > 0`` (``‖v‖₂ ≤ G``).
    d : int
        Dimension of the reports.
    epsilon : float or array-like
        Budgets ``ε > 0``.

    Examples
    --------
    >>> round(float(sampling_radius(math.sqrt(2), 2, 1.0)), 4)
    4.8071
    """
    g = float(bound)
    if not (math.isfinite(g) and g > 0):
        raise ValueError(f"bound must be finite and > 0, got {bound!r}")
    return np.asarray(g * c_epsilon(epsilon) * kappa(d), dtype=float)
