"""Cost priors and virtual costs (spec ``mechanism.md`` §2).

Every prior is a frozen dataclass subclass of :class:`CostPrior` with virtual cost
``Ψ(c) = c + F(c)/f(c)``; the payments of spec §5 need ``Ψ`` non-decreasing (regular),
which :func:`ensure_regular` secures by ironing. The pieces live in private modules:

* ``_cost_prior``: :class:`CostPrior`, :class:`RegularityReport`, the shared validators;
* ``_closed_form``: :class:`UniformPrior`, :class:`ExponentialPrior`;
* ``_parametric``: :class:`TruncatedNormalPrior`, :class:`BetaPrior`,
  :class:`LogNormalPrior`;
* ``_gaussian_mixture``: :class:`GaussianMixturePrior`;
* ``_empirical``: :class:`EmpiricalPrior` (smoothed past bids);
* ``_ironing``: :class:`IronedPrior`;
* ``_virtual_costs``: :func:`virtual_costs`, :func:`ensure_regular`;
* ``_codec``: :func:`prior_from_dict`;
* ``_usable``: :func:`check_usable` (finite ``f > 0``, ``Ψ``, ``Ψ'`` on the central quantiles);
* ``_log_space``: log-space helpers of the Gaussian families.
"""

from mechanisms.priors._closed_form import ExponentialPrior, UniformPrior
from mechanisms.priors._codec import prior_from_dict
from mechanisms.priors._cost_prior import CostPrior, RegularityReport
from mechanisms.priors._empirical import EmpiricalPrior
from mechanisms.priors._gaussian_mixture import GaussianMixturePrior
from mechanisms.priors._ironing import IronedPrior
from mechanisms.priors._parametric import (
    BetaPrior,
    LogNormalPrior,
    TruncatedNormalPrior,
)
from mechanisms.priors._usable import check_usable
from mechanisms.priors._virtual_costs import ensure_regular, virtual_costs

__all__ = [
    "BetaPrior",
    "CostPrior",
    "EmpiricalPrior",
    "ExponentialPrior",
    "GaussianMixturePrior",
    "IronedPrior",
    "LogNormalPrior",
    "RegularityReport",
    "TruncatedNormalPrior",
    "UniformPrior",
    "check_usable",
    "ensure_regular",
    "prior_from_dict",
    "virtual_costs",
]
