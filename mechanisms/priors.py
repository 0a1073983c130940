"""Public import path of every cost prior and its helpers (spec ``mechanism.md`` §2).

Every prior is a frozen dataclass subclass of :class:`CostPrior` with virtual cost
``Ψ(c) = c + F(c)/f(c)``; the payments of spec §5 need ``Ψ`` non-decreasing (regular),
which :func:`ensure_regular` secures by ironing. The pieces live in:

* :mod:`mechanisms.cost_prior`: :class:`CostPrior`, :class:`RegularityReport`, the
  shared validators;
* :mod:`mechanisms.closed_form_priors`: :class:`UniformPrior`, :class:`ExponentialPrior`;
* :mod:`mechanisms.parametric_priors`: :class:`TruncatedNormalPrior`,
  :class:`BetaPrior`, :class:`LogNormalPrior`;
* :mod:`mechanisms.gaussian_mixture`: :class:`GaussianMixturePrior`;
* :mod:`mechanisms.empirical_prior`: :class:`EmpiricalPrior` (smoothed past bids);
* :mod:`mechanisms.ironing`: :class:`IronedPrior`;
* :mod:`mechanisms.virtual_costs`: :func:`virtual_costs`, :func:`ensure_regular`;
* :mod:`mechanisms.prior_codec`: :func:`prior_from_dict`.
"""

from mechanisms.closed_form_priors import ExponentialPrior, UniformPrior
from mechanisms.cost_prior import CostPrior, RegularityReport
from mechanisms.empirical_prior import EmpiricalPrior
from mechanisms.gaussian_mixture import GaussianMixturePrior
from mechanisms.ironing import IronedPrior
from mechanisms.parametric_priors import BetaPrior, LogNormalPrior, TruncatedNormalPrior
from mechanisms.prior_codec import prior_from_dict
from mechanisms.virtual_costs import ensure_regular, virtual_costs

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
    "ensure_regular",
    "prior_from_dict",
    "virtual_costs",
]
