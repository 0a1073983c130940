"""The numerics of a seller-custody order, on a loaded instance: no database access.

Pricing (before any report exists): the market runs in strict mode, where the
allocation's search value replaces each seller's loss by a public constant (spec
``mechanism.md`` §4.4), so the allocation and the Myerson payments are functions of
the reported costs, the prior, the caps and the public settings alone. The mechanism
is given public rows (zeros, with a ``+1`` label for the logistic loss), never a
record: the platform holds none. Payments are computed and checked against the
budget here, as for any order, and settled later for the sellers who delivered.

Release: the learner's local protocol (:mod:`market.numerics.custody`) turns the
reports of the sellers who answered into the fitted learner; :func:`custody_outcome`
builds the order's :class:`~market.pipeline.results.Outcome` with each seller's ε
as the ε of the reports it sent and its payment only if it answered every request.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from market import numerics
from market.pipeline.compute import (
    OrderFailedError,
    PricedRows,
    Progress,
    _allocate_and_pay,
    _payments_within_budget,
    _validation_error,
)
from market.pipeline.instance import OrderRun
from market.pipeline.results import Outcome


@dataclass(frozen=True)
class CustodyPricing:
    """The mechanism's outcome of a seller-custody order (per included seller)."""

    epsilon: list[float]
    payments_minor: list[int]
    certificates: list[dict[str, Any] | None]
    gamma: float
    gamma_source: str
    eta: float


def public_rows(run: OrderRun) -> PricedRows:
    """The rows the mechanism is given: public zeros (module docstring)."""
    inst = run.instance
    m = len(inst.seller_ids)
    d = len(inst.features)
    label = 1.0 if inst.task == "classification" else 0.0
    return PricedRows(X=np.zeros((m, d)), y=np.full(m, label), X_val=None)


def price_custody_order(
    run: OrderRun, rep: Progress, checkpoint: Any = None
) -> CustodyPricing:
    """Allocate and price a seller-custody order (strict mode, ``γ`` given).

    Raises
    ------
    OrderFailedError
        No ``γ`` (it cannot be chosen without records), the allocation did not solve,
        the payments exceed the budget, or it allocated ε to fewer than two sellers.
    """
    if run.gamma is None:
        raise OrderFailedError(
            "a seller-custody order needs gamma: choosing it for the budget would fit "
            "the learner on records the platform never holds"
        )
    priced = _allocate_and_pay(run, public_rows(run), rep, checkpoint)
    alloc, pay, gamma, source = priced.alloc, priced.pay, priced.gamma, priced.source
    minor = _payments_within_budget(run, pay, gamma)
    eps = np.asarray(alloc.epsilon_total, dtype=float)
    if int(np.sum(eps > 0)) < numerics.SMALLEST_ORDER:
        raise OrderFailedError(
            f"the mechanism allocated privacy to {int(np.sum(eps > 0))} seller(s); a "
            f"seller-custody order needs at least {numerics.SMALLEST_ORDER} (raise the "
            "budget or gamma)"
        )
    certs = numerics.payment_certificates(pay) or [None] * len(minor)
    return CustodyPricing(
        epsilon=[float(v) for v in eps],
        payments_minor=[int(v) for v in minor],
        certificates=list(certs),
        gamma=float(gamma),
        gamma_source=source,
        eta=float(alloc.eta),
    )


def custody_outcome(
    run: OrderRun,
    pricing: CustodyPricing,
    learner: Any,
    *,
    delivered: set[int],
    spent: list[float],
) -> Outcome:
    """The order's outcome: seller ``i`` is charged the ε of the reports it sent
    (``spent[i]``, never more than its allocated ``ε_i``) and paid its allocation-time
    payment only if it answered every request (``i`` in ``delivered``); the buyer pays
    the sum of those payments.

    Raises
    ------
    OrderFailedError
        A seller's reports spent more ε than it was allocated (internal check).
    """
    inst = run.instance
    eps = np.asarray(spent, dtype=float)
    allocated = np.asarray(pricing.epsilon, dtype=float)
    if np.any(eps > allocated * (1 + 1e-9) + 1e-12):
        raise OrderFailedError(
            "internal inconsistency: a seller spent more ε than allocated"
        )
    minor = [
        pay if i in delivered else 0 for i, pay in enumerate(pricing.payments_minor)
    ]
    certs = [
        cert if i in delivered else None for i, cert in enumerate(pricing.certificates)
    ]
    report = learner.privacy_report_
    error = _validation_error(learner, inst.X_val, inst.y_val, inst.task)
    return Outcome(
        gamma=pricing.gamma,
        gamma_source=pricing.gamma_source,
        eta=pricing.eta,
        epsilon_total=eps,
        payments_minor=minor,
        model=learner.export_model(),
        guarantee=str(report.guarantee),
        stages=report.stage_summary(),
        validation_error=error,
        timings={},
        certificates=certs,
        custody=str(getattr(report, "custody", "seller")),
    )
