"""Pure numerics of the market mechanism (spec ``mechanism.md``).

The public facade: cost priors and virtual costs (§2), :class:`MechanismConfig`, and
:func:`allocate` (§4), returning an :class:`Allocation`.
"""

from mechanisms.allocation import allocate
from mechanisms.config import MechanismConfig
from mechanisms.priors import (
    BetaPrior,
    CostPrior,
    EmpiricalPrior,
    ExponentialPrior,
    GaussianMixturePrior,
    IronedPrior,
    LogNormalPrior,
    RegularityReport,
    TruncatedNormalPrior,
    UniformPrior,
    ensure_regular,
    prior_from_dict,
    virtual_costs,
)
from mechanisms.result import Allocation, KKTResiduals, SolverError, SolveStatus

__all__ = [
    "Allocation",
    "BetaPrior",
    "CostPrior",
    "EmpiricalPrior",
    "ExponentialPrior",
    "GaussianMixturePrior",
    "IronedPrior",
    "KKTResiduals",
    "LogNormalPrior",
    "MechanismConfig",
    "RegularityReport",
    "SolveStatus",
    "SolverError",
    "TruncatedNormalPrior",
    "UniformPrior",
    "allocate",
    "ensure_regular",
    "prior_from_dict",
    "virtual_costs",
]
