"""Is a prior numerically usable by the mechanism? (spec ``mechanism.md`` §2)

The allocation weighs each seller by the virtual cost ``Ψ(c) = c + F(c)/f(c)`` and the
payments integrate it (§5), so ``F``, ``f``, ``Ψ`` and ``Ψ'`` must be finite, with
``f > 0``, wherever costs can fall. A prior whose parameters are each in range can still
fail this (a beta law with ``alpha = 1000``, ``beta = 0.01`` has ``f`` underflowing to 0
inside its support; a mixture whose mass lies far below ``low`` carries almost none on
the support). :func:`check_usable` probes the central quantiles once, when the prior
is declared, so such a prior is refused up front instead of failing an order later.
"""

from __future__ import annotations

import numpy as np

from mechanisms.priors._cost_prior import CostPrior

__all__ = ["check_usable"]

PROBE_QUANTILES = np.linspace(1e-3, 1.0 - 1e-3, 999)
"""Where :func:`check_usable` evaluates the prior: the central 99.8 % of its mass."""


def check_usable(prior: CostPrior) -> None:
    """Raise ``ValueError`` unless ``c = F⁻¹(q)``, ``f(c) > 0``, ``Ψ(c)`` and ``Ψ'(c)``
    are finite at every probe quantile ``q`` (:data:`PROBE_QUANTILES`).

    Raises
    ------
    ValueError
        Naming the quantity and the first quantile where it fails.
    """
    with np.errstate(all="ignore"):
        c = np.asarray(prior.ppf(PROBE_QUANTILES), dtype=float)
        _require(np.isfinite(c), "the quantile function F⁻¹(q)")
        pdf = np.asarray(prior.pdf(c), dtype=float)
        _require(np.isfinite(pdf) & (pdf > 0), "the density f(c) (0 or not finite)")
        phi = np.asarray(prior.virtual_cost(c), dtype=float)
        _require(np.isfinite(phi), "the virtual cost Ψ(c) = c + F(c)/f(c)")
        dphi = np.asarray(prior.virtual_cost_derivative(c), dtype=float)
        _require(np.isfinite(dphi), "the virtual cost's derivative Ψ'(c)")


def _require(ok: np.ndarray, what: str) -> None:
    if not np.all(ok):
        q = float(PROBE_QUANTILES[int(np.argmin(ok))])
        raise ValueError(
            f"{what} is not usable at the prior's {q:.1%} quantile; the parameters "
            "are outside the range the mechanism can compute with"
        )
