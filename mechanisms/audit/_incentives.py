"""Incentive self-audits of the mechanism (spec ``mechanism.md`` §6; reliability T-MD-1…5).

For the production rule (allocation + Myerson payments) on one instance:

- **IC regret**: for sampled sellers and a grid of misreports ``c'`` (factors of the true
  cost, plus points just either side of the seller's critical cost), the seller's
  utility ``t_i(c') − c_i·u(ε_i(c'))`` — with ``t_i(c')`` recomputed by the production
  payment code for the misreported instance — minus its truthful utility; the largest
  such gain is the regret (0 for an IC mechanism, up to solver/quadrature tolerance).
- **IR**: ``t_i − c_i·u(ε_i^total) ≥ 0`` for every seller.
- **Budget**: ``Σ t_i ≤ B`` (in whole ledger units after rounding down).
- **Monotonicity**: the worst upward step of ``ε_i(s)`` over every evaluated sweep and
  over each audited seller's truthful and misreported allocations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms.allocation._eta_search import solve_allocation
from mechanisms.allocation._problem import utility
from mechanisms.config import MechanismConfig
from mechanisms.payments._executors import Progress, map_chunks
from mechanisms.payments._payments import (
    PaymentJob,
    PaymentResult,
    SellerPayment,
    collect,
    fits_budget,
    payment_job,
    seller_payment,
)
from mechanisms.payments._resolve._local_resolve import stale_nodes
from mechanisms.payments._resolve._seller_curve import Solver
from mechanisms.priors import CostPrior

FloatArray = NDArray[np.float64]
PaymentRule = Callable[[PaymentJob, int], SellerPayment]
DEFAULT_FACTORS = (0.25, 0.5, 0.8, 0.95, 1.05, 1.25, 2.0, 4.0)


@dataclass(frozen=True, eq=False)
class AuditReport:
    """Results of :func:`audit_incentives` (all money in the payments' units)."""

    ic_regret_max: float
    ic_regret_by_seller: dict[int, float]
    worst_deviation: dict[str, float] | None
    ir_min_utility: float
    ir_violations: list[int]
    budget: float | None
    budget_total: float
    budget_ok: bool | None
    monotonicity_max_violation: float
    max_payment: float
    payments: PaymentResult
    n_deviations: int
    misreports: dict[int, list[float]] = field(default_factory=dict)

    def ic_ok(self, rtol: float = 1e-3) -> bool:
        """Regret at most ``rtol`` times the largest payment."""
        return self.ic_regret_max <= rtol * max(self.max_payment, 1e-300)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe report (one JSON object per run, reliability spec)."""
        return {
            "ic_regret_max": self.ic_regret_max,
            "ic_regret_by_seller": {
                str(k): v for k, v in self.ic_regret_by_seller.items()
            },
            "worst_deviation": self.worst_deviation,
            "ir_min_utility": self.ir_min_utility,
            "ir_violations": list(self.ir_violations),
            "budget": self.budget,
            "budget_total": self.budget_total,
            "budget_ok": self.budget_ok,
            "monotonicity_max_violation": self.monotonicity_max_violation,
            "max_payment": self.max_payment,
            "n_deviations": self.n_deviations,
            "payments_converged": self.payments.converged,
        }


@dataclass(frozen=True)
class _AuditJob:
    truthful: PaymentJob
    rule: PaymentRule
    solver: Solver


def audit_incentives(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    *,
    eps_max: ArrayLike | None = None,
    budget: float | None = None,
    unit: float | str = 0.01,
    sellers: ArrayLike | None = None,
    n_sellers: int = 5,
    misreports: Sequence[float] = DEFAULT_FACTORS,
    executor: Executor | None = None,
    progress: Progress | None = None,
    random_state: int | np.random.Generator | None = None,
    payment_rule: PaymentRule = seller_payment,
    solver: Solver = solve_allocation,
) -> AuditReport:
    """Audit IC, IR, budget and monotonicity of the mechanism on one instance.

    Parameters
    ----------
    X, y, costs, prior, cfg, eps_max
        The instance, as for :func:`mechanisms.allocate`.
    budget : float, optional
        Checked as ``Σ ⌊t_i/unit⌋ ≤ ⌊B/unit⌋``.
    sellers : array-like of int, optional
        Sellers whose misreports are tried; default ``n_sellers`` drawn at random
        (``random_state``), always including the winner closest to its cut-off.
    misreports : sequence of float
        Factors ``f``: misreport ``c' = f·c_i`` (clipped to the support), plus
        ``s*_i·(1 ± 1e-3)`` around each sampled seller's critical cost.
    payment_rule, solver
        The production rule by default; replaced only by planted-bug tests.
    """
    job = payment_job(X, y, costs, prior, cfg, eps_max, solver=solver)
    audit = _AuditJob(job, payment_rule, solver)
    m = job.prob.m
    if sellers is not None:
        _check_sellers(sellers, m)
    truth = map_chunks(
        _pay_chunk, audit, list(range(m)), executor=executor, progress=progress
    )
    pay = collect(job, truth, {})
    chosen = _choose_sellers(pay, sellers, n_sellers, random_state)
    tries = [(i, r) for i in chosen for r in _misreports(job, pay, i, misreports)]
    dev = map_chunks(_deviation_chunk, audit, tries, executor=executor)
    return _report(job, pay, tries, dev, budget, unit)


def _pay_chunk(audit: _AuditJob, sellers: list[int]) -> list[SellerPayment]:
    return [audit.rule(audit.truthful, i) for i in sellers]


def _deviation_chunk(
    audit: _AuditJob, tries: list[tuple[int, float]]
) -> list[tuple[float, float, float]]:
    """For each ``(i, c')``: ``(t_i(c'), ε_i(c'), sweep monotonicity violation)``."""
    out = []
    job = audit.truthful
    for i, r in tries:
        reports = job.reports.copy()
        reports[i] = r
        psi_i = float(np.asarray(job.prior.virtual_cost(np.array([r])))[0])
        prob = job.prob.with_seller_psi(i, psi_i)
        base = audit.solver(prob, warm_start=None)
        # The truthful base's stale nodes bound problems with Ψ at least the truthful
        # one's; a downward misreport lowers Ψ_i, so the deviated base gets its own.
        nodes = None if job.nodes is None else stale_nodes(prob, base)
        dev_job = dataclasses.replace(
            job, prob=prob, base=base, reports=reports, nodes=nodes
        )
        sp = audit.rule(dev_job, i)
        out.append((sp.payment, sp.epsilon, sp.monotonicity_violation))
    return out


def _choose_sellers(
    pay: PaymentResult,
    sellers: ArrayLike | None,
    n_sellers: int,
    random_state: int | np.random.Generator | None,
) -> list[int]:
    m = pay.payments.size
    if sellers is not None:
        return _check_sellers(sellers, m)
    rng = np.random.default_rng(random_state)
    winners = np.flatnonzero(pay.epsilon > 0)
    picked: list[int] = []
    if (
        winners.size and n_sellers > 0
    ):  # the winner nearest its cut-off (relative margin)
        margin = (pay.critical_costs[winners] - _reports(pay)[winners]) / np.maximum(
            pay.critical_costs[winners], 1e-300
        )
        picked.append(int(winners[int(np.argmin(margin))]))
    rest = [i for i in range(m) if i not in picked]
    k = max(0, min(n_sellers - len(picked), len(rest)))
    picked += [int(v) for v in rng.choice(rest, size=k, replace=False)]
    return sorted(picked)


def _check_sellers(sellers: ArrayLike, m: int) -> list[int]:
    idx = [int(v) for v in np.asarray(sellers, dtype=np.int64).ravel()]
    bad = [v for v in idx if not 0 <= v < m]
    if bad:
        raise ValueError(f"sellers: index {bad[0]} is not in [0, {m})")
    return idx


def _reports(pay: PaymentResult) -> FloatArray:
    return np.array([sp.report for sp in pay.sellers])


def _misreports(
    job: PaymentJob, pay: PaymentResult, i: int, factors: Sequence[float]
) -> list[float]:
    c = float(job.reports[i])
    lo, hi = float(job.prior.low), float(job.prior.high)
    cands = [f * c for f in factors]
    s_star = float(pay.critical_costs[i])
    if np.isfinite(s_star) and s_star > c:
        cands += [s_star * (1 - 1e-3), s_star * (1 + 1e-3)]
    out = sorted({float(np.clip(v, lo, hi)) for v in cands} - {c})
    return [v for v in out if np.isfinite(v)]


def _misreport_monotonicity(
    c: FloatArray,
    eps: FloatArray,
    tries: list[tuple[int, float]],
    dev: list[tuple[float, float, float]],
) -> float:
    """Worst upward step of ``ε_i`` over each audited seller's reports (truthful and
    misreported; the misreported allocations come from cold solves)."""
    by_seller: dict[int, list[tuple[float, float]]] = {}
    for (i, r), (_, e, _) in zip(tries, dev, strict=True):
        by_seller.setdefault(i, [(float(c[i]), float(eps[i]))]).append((r, e))
    worst = 0.0
    for pts in by_seller.values():
        vals = np.array([e for _, e in sorted(pts)])
        if vals.size > 1:
            run_min = np.minimum.accumulate(vals)
            worst = max(worst, float((vals[1:] - run_min[:-1]).max()))
    return worst


def _report(
    job: PaymentJob,
    pay: PaymentResult,
    tries: list[tuple[int, float]],
    dev: list[tuple[float, float, float]],
    budget: float | None,
    unit: float | str,
) -> AuditReport:
    cfg = job.prob.cfg
    c = job.reports
    u_true = utility(pay.epsilon, cfg)
    truthful_utility = pay.payments - c * u_true
    regret: dict[int, float] = {}
    worst: dict[str, float] | None = None
    misreports: dict[int, list[float]] = {}
    mono = pay.max_monotonicity_violation
    for (i, r), (t, eps, viol) in zip(tries, dev, strict=True):
        gain = t - c[i] * float(utility(np.array([eps]), cfg)[0]) - truthful_utility[i]
        misreports.setdefault(i, []).append(r)
        mono = max(mono, viol)
        if gain > regret.get(i, -np.inf):
            regret[i] = gain
        if worst is None or gain > worst["gain"]:
            worst = {"seller": float(i), "misreport": r, "gain": gain}
    mono = max(mono, _misreport_monotonicity(c, pay.epsilon, tries, dev))
    reg = {i: max(g, 0.0) for i, g in regret.items()}
    ir_viol = [int(i) for i in np.flatnonzero(truthful_utility < 0)]
    return AuditReport(
        ic_regret_max=max(reg.values(), default=0.0),
        ic_regret_by_seller=reg,
        worst_deviation=worst,
        ir_min_utility=float(truthful_utility.min()),
        ir_violations=ir_viol,
        budget=budget,
        budget_total=pay.total,
        budget_ok=None
        if budget is None
        else fits_budget(
            pay.payments,
            budget,
            unit,
            privacy_costs=pay.privacy_costs,
            epsilon=pay.epsilon,
        ),
        monotonicity_max_violation=mono,
        max_payment=float(pay.payments.max()),
        payments=pay,
        n_deviations=len(tries),
        misreports=misreports,
    )
