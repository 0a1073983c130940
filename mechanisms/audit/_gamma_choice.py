"""IC regret when ``γ`` is re-chosen from the reports (spec ``mechanism.md`` §5, §6).

Myerson payments are exactly IC for a **frozen** rule (:func:`mechanisms.audit_incentives`). When a
buyer's order asks for "the most accurate ``γ`` that fits my budget"
(:func:`mechanisms.choose_gamma`), ``γ`` itself is computed from the reported costs, so
one seller's report can move it, and with it every ``ε_j`` and payment. The spec asks
to measure that regret rather than ignore it. For sampled sellers ``i`` and misreports
``c'``, the whole order is re-run on the misreported instance (choose ``γ``, allocate,
pay, round down), and the seller's utility there, measured at its **true** cost,

    U_i(c') = t_i(c') − c_i·u(ε_i(c'))

is compared with its truthful utility ``U_i(c_i)``; the largest gain is the regret.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms.allocation._problem import utility
from mechanisms.audit._incentives import DEFAULT_FACTORS
from mechanisms.config import MechanismConfig
from mechanisms.priors import CostPrior
from mechanisms.tuning._gamma_for_budget import GammaChoice, choose_gamma

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class ChoiceRegretReport:
    """Result of :func:`audit_gamma_choice`.

    ``regret_max`` is the largest ``U_i(c') − U_i(c_i)`` (0 if no misreport gains);
    ``deviations`` lists ``(seller, misreport, γ chosen, gain)``; ``gamma`` the ``γ``
    chosen for the truthful reports; ``max_payment`` the largest truthful payment.
    """

    regret_max: float
    gamma: float | None
    max_payment: float
    deviations: list[tuple[int, float, float | None, float]]

    @property
    def gamma_moved(self) -> bool:
        """Whether any misreport changed the chosen ``γ``."""
        return any(g != self.gamma for _, _, g, _ in self.deviations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "regret_max": self.regret_max,
            "gamma": self.gamma,
            "max_payment": self.max_payment,
            "gamma_moved": self.gamma_moved,
            "deviations": [list(d) for d in self.deviations],
        }


def audit_gamma_choice(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    *,
    budget: float,
    X_val: ArrayLike,
    y_val: ArrayLike,
    sellers: Sequence[int],
    misreports: Sequence[float] = DEFAULT_FACTORS,
    executor: Executor | None = None,
    random_state: int = 0,
    **choose_kwargs: Any,
) -> ChoiceRegretReport:
    """Measure the IC regret of "choose ``γ`` for the budget, then pay Myerson".

    Parameters
    ----------
    budget, X_val, y_val, choose_kwargs
        As for :func:`mechanisms.choose_gamma` (one fixed ``random_state``, so the
        validation noise is the same for every run and only the report differs).
    sellers : sequence of int
        Sellers whose misreports are tried.
    misreports : sequence of float
        Factors ``f``: misreport ``f·c_i`` clipped to the prior's support.
    """
    c = np.asarray(costs, dtype=float)
    m = c.size
    bad = [int(i) for i in sellers if not 0 <= int(i) < m]
    if bad:
        raise ValueError(f"sellers: index {bad[0]} is not in [0, {m})")

    def run(reports: FloatArray) -> GammaChoice:
        return choose_gamma(
            X,
            y,
            reports,
            prior,
            cfg,
            budget=budget,
            X_val=X_val,
            y_val=y_val,
            executor=executor,
            random_state=random_state,
            **choose_kwargs,
        )

    truth = run(c)
    true_u = _utilities(truth, c, cfg)
    deviations: list[tuple[int, float, float | None, float]] = []
    lo, hi = float(prior.low), float(prior.high)
    for i in (int(v) for v in sellers):
        for r in sorted({float(np.clip(f * c[i], lo, hi)) for f in misreports}):
            if r == c[i] or not np.isfinite(r):
                continue
            reports = c.copy()
            reports[i] = r
            dev = run(reports)
            gain = float(_utilities(dev, c, cfg)[i] - true_u[i])
            deviations.append((i, r, dev.gamma, gain))
    pay = truth.payments
    return ChoiceRegretReport(
        regret_max=max([0.0, *(g for *_, g in deviations)]),
        gamma=truth.gamma,
        max_payment=float(pay.max()) if pay is not None else 0.0,
        deviations=deviations,
    )


def _utilities(choice: GammaChoice, true_costs: FloatArray, cfg: Any) -> FloatArray:
    """``t_j − c_j·u(ε_j)`` at the true costs (0 for everyone if nothing fitted)."""
    if choice.payments is None or choice.allocation is None:
        return np.zeros_like(true_costs)
    eps = np.asarray(choice.allocation.epsilon_total, dtype=float)
    return np.asarray(choice.payments, dtype=float) - true_costs * utility(eps, cfg)
