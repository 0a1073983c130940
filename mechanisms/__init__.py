"""Pure numerics of the market mechanism (spec ``mechanism.md``).

The public facade: cost priors and virtual costs (§2), :class:`MechanismConfig`,
:func:`allocate` (§4) returning an :class:`Allocation`, the paper-style reference solver
:func:`reference_allocate`, Myerson payments and money rounding (§5), the incentive audit
(§6), the allocation-monotonicity audit (:func:`audit_monotonicity`) and its variant for a ``γ`` re-chosen from the reports (:func:`audit_gamma_choice`),
hyperparameter and ``γ`` selection including "fit this budget" (§4.3).
"""

from mechanisms._certify import AllocationCertificate
from mechanisms._monotonicity import MonotonicityReport, audit_monotonicity
from mechanisms._seller_certificate import SellerCertificate
from mechanisms.allocation import allocate
from mechanisms.audit import AuditReport, audit_incentives
from mechanisms.budget import GammaChoice, choose_gamma
from mechanisms.choice_audit import ChoiceRegretReport, audit_gamma_choice
from mechanisms.config import MechanismConfig
from mechanisms.payments import (
    PaymentResult,
    expected_payments,
    fits_budget,
    myerson_payments,
    myerson_total,
    round_down,
)
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
from mechanisms.reference import reference_allocate
from mechanisms.result import Allocation, KKTResiduals, SolverError, SolveStatus
from mechanisms.selection import (
    Selection,
    TradeoffPoint,
    select_hyperparameters,
    tradeoff_curve,
)

__all__ = [
    "Allocation",
    "AllocationCertificate",
    "AuditReport",
    "BetaPrior",
    "ChoiceRegretReport",
    "CostPrior",
    "EmpiricalPrior",
    "ExponentialPrior",
    "GammaChoice",
    "GaussianMixturePrior",
    "IronedPrior",
    "KKTResiduals",
    "LogNormalPrior",
    "MechanismConfig",
    "MonotonicityReport",
    "PaymentResult",
    "RegularityReport",
    "Selection",
    "SellerCertificate",
    "SolveStatus",
    "SolverError",
    "TradeoffPoint",
    "TruncatedNormalPrior",
    "UniformPrior",
    "allocate",
    "audit_gamma_choice",
    "audit_incentives",
    "audit_monotonicity",
    "choose_gamma",
    "ensure_regular",
    "expected_payments",
    "fits_budget",
    "myerson_payments",
    "myerson_total",
    "prior_from_dict",
    "reference_allocate",
    "round_down",
    "select_hyperparameters",
    "tradeoff_curve",
    "virtual_costs",
]
