"""Monotonicity audit of the allocation rule (spec §5, §6).

Myerson's payment identity makes truthful reporting dominant only if each seller's
``s ↦ ε_i(s, c_-i)`` is non-increasing. :func:`audit_monotonicity` sweeps each audited
seller's report over an evenly spaced grid of the prior's support and re-solves the
allocation **cold** at every point — exactly what :func:`mechanisms.allocate` returns
for that report — and counts upward steps against the running minimum.

A step counts as a violation when it exceeds ``rtol·(1 + max ε)``: the solves stop at
KKT tolerance (~1e-9), so a certified rule shows steps of that size at most; a switch
between local optima (a local, uncertified search) shows steps of the size of ``ε_i`` itself.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms._inputs import check_problem
from mechanisms.allocation._eta_search import solve_allocation
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range._candidate_range import scenario_virtual_costs
from mechanisms.config import MechanismConfig
from mechanisms.priors import ensure_regular
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]
RTOL = 1e-6


@dataclass(frozen=True, slots=True)
class SellerSweep:
    """One seller's sweep: reports, ``ε_i^total`` at each, statuses seen."""

    index: int
    reports: tuple[float, ...]
    epsilon: tuple[float, ...]
    max_violation: float
    n_violations: int
    statuses: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "max_violation": self.max_violation,
            "n_violations": self.n_violations,
            "statuses": sorted(set(self.statuses)),
        }


@dataclass(frozen=True, slots=True)
class MonotonicityReport:
    """Result of :func:`audit_monotonicity`.

    ``n_violations``: upward steps above ``tolerance`` summed over the sellers;
    ``max_violation``: the largest upward step (absolute, in ``ε``);
    ``certified``: every re-solve had ``status == "optimal"``.
    """

    sweeps: tuple[SellerSweep, ...]
    n_points: int
    tolerance: float
    n_violations: int
    max_violation: float
    certified: bool
    base_status: str

    @property
    def ok(self) -> bool:
        return self.n_violations == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_points": self.n_points,
            "tolerance": self.tolerance,
            "n_violations": self.n_violations,
            "max_violation": self.max_violation,
            "certified": self.certified,
            "base_status": self.base_status,
            "ok": self.ok,
            "sellers": [s.to_dict() for s in self.sweeps],
        }


def _sweep(
    job: tuple[Problem, Any, int, FloatArray, Allocation],
) -> tuple[list[float], list[str]]:
    """``ε_i^total`` along the reports (increasing). A full solve at every point; with
    the candidate-model rule each solve reuses the base's models (a function of the
    records and settings only, so identical to recomputing them) and the previous
    point's closed search (valid lower bounds, since ``Ψ_i`` only grows)."""
    prob, prior, i, reports, base = job
    reuse = base.certificate is not None and base.certificate.models is not None
    prev = base if reuse else None
    eps, statuses = [], []
    for s in reports:
        psi_i = float(np.asarray(prior.virtual_cost(np.array([s])))[0])
        alloc = solve_allocation(prob.with_seller_psi(i, psi_i), warm_start=prev)
        if reuse:
            prev = alloc
        eps.append(float(alloc.epsilon_total[i]) if alloc.success else 0.0)
        statuses.append(str(alloc.status))
    return eps, statuses


def violations(eps: ArrayLike, tol: float) -> tuple[float, int]:
    """``(largest upward step over the running minimum, steps above tol)``."""
    e = np.asarray(eps, dtype=float)
    if e.size < 2:
        return 0.0, 0
    run_min = np.minimum.accumulate(e)
    up = e[1:] - run_min[:-1]
    return float(max(0.0, float(up.max()))), int((up > tol).sum())


def audit_monotonicity(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: Any,
    cfg: MechanismConfig,
    eps_max: ArrayLike | None = None,
    *,
    sellers: ArrayLike | None = None,
    n_points: int = 400,
    rtol: float = RTOL,
    executor: Executor | None = None,
    reports: ArrayLike | None = None,
) -> MonotonicityReport:
    """Sweep each seller's report over ``n_points`` evenly spaced points of the
    prior's support (``[low, high]``; the 0.999 quantile replaces an infinite top)
    with full re-solves (see :func:`_sweep`), and count upward steps of
    ``ε_i^total``.

    Parameters
    ----------
    sellers : array-like of int, optional
        Sellers to audit (default all).
    executor : Executor, optional
        Runs sellers in parallel (default: in this process).
    reports : array-like, optional
        Explicit increasing report points (replaces the even grid; ``n_points`` is
        then their number).
    """
    if reports is None and n_points < 2:
        raise ValueError(f"n_points must be >= 2, got {n_points!r}")
    X, y, c, e = check_problem(X, y, costs, prior, cfg, eps_max)
    regular = ensure_regular(prior)
    psi = np.asarray(regular.virtual_cost(c), dtype=float)
    scen = scenario_virtual_costs(prior, X.shape[0])
    prob = Problem(X, y, psi, e, cfg, scenario_psi=scen)
    base = solve_allocation(prob)
    if reports is None:
        low, high = float(prior.low), float(prior.high)
        if not np.isfinite(high):
            high = float(prior.quantile(0.999))
        reports = np.linspace(low, high, n_points)
    reports = np.asarray(reports, dtype=float)
    if reports.ndim != 1 or np.any(np.diff(reports) <= 0):
        raise ValueError("reports must be a strictly increasing 1-D array")
    n_points = int(reports.size)
    idx = (
        list(range(prob.m))
        if sellers is None
        else [int(v) for v in np.asarray(sellers).ravel()]
    )
    jobs = [(prob, regular, i, reports, base) for i in idx]
    results = list(executor.map(_sweep, jobs) if executor else map(_sweep, jobs))
    all_eps = [v for eps, _ in results for v in eps]
    tol = rtol * (1.0 + max([0.0, *all_eps]))
    sweeps = []
    for i, (eps, statuses) in zip(idx, results, strict=True):
        worst, count = violations(eps, tol)
        sweeps.append(
            SellerSweep(i, tuple(reports.tolist()), tuple(eps), worst, count,
                        tuple(statuses))
        )  # fmt: skip
    return MonotonicityReport(
        sweeps=tuple(sweeps),
        n_points=n_points,
        tolerance=tol,
        n_violations=sum(s.n_violations for s in sweeps),
        max_violation=max((s.max_violation for s in sweeps), default=0.0),
        certified=base.certified
        and all(st == "optimal" for s in sweeps for st in s.statuses),
        base_status=str(base.status),
    )
