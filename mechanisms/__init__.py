"""Pure numerics of the market mechanism (spec ``mechanism.md``).

The public facade. Subpackages, in dependency order, each with its own facade:

* :mod:`mechanisms.priors`: cost priors, virtual costs, regularity and ironing (§2);
* :mod:`mechanisms.allocation`: :func:`allocate` (§4) returning an :class:`Allocation`,
  and the paper-style reference solver :func:`reference_allocate`;
* :mod:`mechanisms.payments`: Myerson payments (§5) and their executors;
* :mod:`mechanisms.tuning`: hyperparameter selection, the trade-off curve and the
  ``γ`` that fits a budget (§4.3);
* :mod:`mechanisms.audit`: the incentive audit (§6), the allocation-monotonicity audit
  (:func:`audit_monotonicity`) and the variant for a ``γ`` re-chosen from the reports
  (:func:`audit_gamma_choice`).

Shared value types live at the top: :class:`Instance` (``instance``: the validated
arrays of one round, taken by :func:`allocate` and :func:`myerson_payments`),
:class:`MechanismConfig` (``config``), the solver results (``result``) and money
rounding (``money``).
"""

from mechanisms.allocation import allocate, reference_allocate
from mechanisms.allocation._range._certify import AllocationCertificate
from mechanisms.audit import (
    AuditReport,
    ChoiceRegretReport,
    audit_gamma_choice,
    audit_incentives,
)
from mechanisms.audit._monotonicity import MonotonicityReport, audit_monotonicity
from mechanisms.config import MechanismConfig
from mechanisms.instance import Instance
from mechanisms.money import fits_budget, payment_units, round_up
from mechanisms.payments import (
    PaymentResult,
    expected_payments,
    myerson_payments,
    myerson_total,
)
from mechanisms.payments._seller_certificate import SellerCertificate
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
from mechanisms.tuning import (
    GammaChoice,
    Selection,
    TradeoffPoint,
    choose_gamma,
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
    "Instance",
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
    "payment_units",
    "prior_from_dict",
    "reference_allocate",
    "round_up",
    "select_hyperparameters",
    "tradeoff_curve",
    "virtual_costs",
]
