"""Myerson threshold payments for the allocation rule (spec ``mechanism.md`` §5).

    t_i = c_i·u(ε_i(c_i, c_-i)) + ∫_{c_i}^{c̄_i} u(ε_i(s, c_-i)) ds

with ``ε_i`` the total per-seller guarantee of spec §3 (``Allocation.epsilon_total``)
and ``ε_i(s, c_-i)`` the allocation re-solved with seller ``i`` reporting ``s`` and
everything else frozen: what :func:`mechanisms.allocate` returns for that report. One
seller's payment is :func:`mechanisms.payments._seller_payment.seller_payment` (critical cost,
kinks, quadrature, certified shortcut re-solves); this module validates the inputs,
solves the base allocation, maps sellers over an executor
(:mod:`mechanisms.payments._executors`), decides which winners' shortcuts are checked against
cold full solves (:func:`verification_sample`, escalating to all on a mismatch), and
collects a :class:`PaymentResult` with the worst monotonicity violation of any sweep.

The paper's Thm 3.2 quantity ``Ψ_i·u(ε_i)`` equals the payment only in expectation over
costs; it is offered only as :func:`expected_payments` (a diagnostic).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms._inputs import check_problem
from mechanisms.allocation._blas import one_blas_thread
from mechanisms.allocation._eta_search import (
    eta_bounds,
    forced_at_infinite_cost,
    solve_allocation,
)
from mechanisms.allocation._problem import Problem, utility
from mechanisms.allocation._range._candidate_range import scenario_virtual_costs
from mechanisms.config import MechanismConfig
from mechanisms.money import (
    fits_budget,
    payment_units,
    round_up,
    to_minor_units,
)
from mechanisms.payments._executors import Progress, map_chunks
from mechanisms.payments._resolve._local_resolve import base_hessian, stale_nodes
from mechanisms.payments._resolve._seller_curve import Solver
from mechanisms.payments._resolve._strict_resolve import strict_resolver
from mechanisms.payments._seller_payment import (
    PaymentJob,
    SellerPayment,
    seller_payment,
)
from mechanisms.priors import CostPrior, ensure_regular
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]
__all__ = [
    "PaymentJob",
    "PaymentResult",
    "SellerPayment",
    "expected_payments",
    "fits_budget",
    "myerson_payments",
    "myerson_total",
    "payment_job",
    "payment_units",
    "round_up",
    "seller_payment",
    "to_minor_units",
    "verification_sample",
]
MIN_VERIFIED = 32  # fewest winners checked against cold full solves (verify="sample")


@dataclass(frozen=True, eq=False)
class PaymentResult:
    """Myerson payments for the sellers computed (zeros elsewhere).

    Attributes
    ----------
    payments : ndarray of shape (m,)
        ``t_i`` (floats; a ledger pays :meth:`PaymentResult.units`, rounded up).
    epsilon : ndarray of shape (m,)
        ``ε_i^total`` the payments are for (``allocation.epsilon_total``).
    expected_payments : ndarray of shape (m,)
        The paper's ``Ψ_i·u(ε_i)`` — equal to ``t_i`` only in expectation over costs.
    computed : ndarray of bool, shape (m,)
    max_monotonicity_violation : float
        Worst upward step of any seller's sweep (0 when all are non-increasing).
    n_verified : int
        Winners whose shortcut re-solves were checked against cold full re-solves.
    max_shortcut_mismatch : float
        Largest ``|Δε_i|`` those checks found (a mismatch above tolerance makes that
        seller recompute with full re-solves only).
    escalated : bool
        Whether a sampled check failed, so every winner was recomputed with checks.
    privacy_costs : ndarray of shape (m,) or None
        ``c_i·u(ε_i^total)``: each seller's reported cost of the privacy it gives (the
        IR floor of :func:`mechanisms.money.payment_units`).
    sellers : tuple of SellerPayment
        Per-seller results; each carries a ``certificate``
        (:class:`mechanisms.payments._seller_certificate.SellerCertificate`: method
        ``"shortcut_certified"``, ``"full_solve"`` or ``"report_independent"``, KKT
        residuals, the range certificate's gap, the allocation status). No payment
        rests on an unchecked shortcut: a shortcut re-solve is used only with its own
        certificate.
    """

    payments: FloatArray
    epsilon: FloatArray
    expected_payments: FloatArray
    computed: NDArray[np.bool_]
    critical_costs: FloatArray
    max_monotonicity_violation: float
    sellers: tuple[SellerPayment, ...]
    allocation: Allocation
    timings: dict[str, float] = field(default_factory=dict)
    n_verified: int = 0
    max_shortcut_mismatch: float = 0.0
    escalated: bool = False
    privacy_costs: FloatArray | None = None

    @property
    def total(self) -> float:
        return float(self.payments.sum())

    @property
    def converged(self) -> bool:
        return all(s.converged for s in self.sellers)

    @property
    def certificates(self) -> dict[int, Any]:
        """Seller index → :class:`SellerCertificate` (computed sellers)."""
        return {s.index: s.certificate for s in self.sellers}

    @property
    def rule_certified(self) -> bool:
        """Every computed seller's sweep rests on certified global optima."""
        return all(
            s.certificate is not None and s.certificate.rule_certified
            for s in self.sellers
        )

    def units(self, unit: float | str) -> NDArray[np.int64]:
        """Whole ledger units paid to each seller (:func:`mechanisms.money.payment_units`:
        ``t_i`` rounded up, never below ``c_i·u(ε_i)``, at least one unit if ``ε_i > 0``)."""
        return payment_units(
            self.payments, unit, privacy_costs=self.privacy_costs, epsilon=self.epsilon
        )

    def paid(self, unit: float | str) -> FloatArray:
        """The amounts paid: :meth:`units` × ``unit``."""
        return round_up(
            self.payments, unit, privacy_costs=self.privacy_costs, epsilon=self.epsilon
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary."""
        return {
            "payments": self.payments.tolist(),
            "epsilon": self.epsilon.tolist(),
            "expected_payments": self.expected_payments.tolist(),
            "computed": self.computed.tolist(),
            "critical_costs": self.critical_costs.tolist(),
            "total": self.total,
            "max_monotonicity_violation": self.max_monotonicity_violation,
            "converged": self.converged,
            "n_solves": int(sum(s.n_solves for s in self.sellers)),
            "n_verified": self.n_verified,
            "max_shortcut_mismatch": self.max_shortcut_mismatch,
            "escalated": self.escalated,
            "timings": dict(self.timings),
            "allocation_status": str(self.allocation.status),
            "rule_certified": self.rule_certified,
            "certificates": {
                str(s.index): (
                    None if s.certificate is None else s.certificate.to_dict()
                )
                for s in self.sellers
            },
        }


def payment_job(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    eps_max: ArrayLike | None = None,
    *,
    base: Allocation | None = None,
    solver: Solver = solve_allocation,
) -> PaymentJob:
    """Validate inputs and solve (or adopt) the base allocation of the frozen rule."""
    X, y, c, e = check_problem(X, y, costs, prior, cfg, eps_max)
    if cfg.mode == "paper":
        raise ValueError(
            "cfg.mode: payments need a rule that is fixed given the reports; the paper "
            "mode's objective depends on a realised noise draw"
        )
    if cfg.gamma == 0 and not np.isfinite(float(prior.high)):
        raise ValueError(
            "cfg.gamma: with gamma = 0 the allocation ignores the reports, so Myerson "
            "payments over an unbounded prior support are infinite"
        )
    regular = ensure_regular(prior)
    psi = np.asarray(regular.virtual_cost(c), dtype=float)
    prob = Problem(
        X, y, psi, e, cfg, scenario_psi=scenario_virtual_costs(prior, X.shape[0])
    )
    if not np.isfinite(float(prior.high)):
        forced = never_excluded(prob)
        if forced.size:
            raise ValueError(
                f"cfg.k: with k = {cfg.k:g} and {prob.m} sellers the caps "
                f"a_i <= k/m force weight on seller {int(forced[0])} whatever it "
                "reports, so its Myerson payment over an unbounded prior support is "
                "infinite (raise k above m/(m-1), add sellers, or use a bounded prior)"
            )
    top = forced_at_infinite_cost(prob)
    if top.size:
        raise ValueError(
            f"cfg.k: seller {int(top[0])} reports {c[int(top[0])]:g}, where the "
            f"prior's virtual cost is infinite, and with k = {cfg.k:g} and {prob.m} "
            "sellers the caps a_i <= k/m force weight on it, so every allocation "
            "costs infinity (raise k above m/(m-1) or add sellers)"
        )
    if base is None:
        base = solver(prob, warm_start=None)
    elif base.weights.shape != (prob.m,) or not np.allclose(
        base.virtual_costs, prob.psi
    ):
        raise ValueError(
            "base: not an allocation of these reports (virtual costs differ)"
        )
    base.raise_for_status()
    full = solver is solve_allocation
    # Where strict mode's lean re-solver applies, the sweeps re-solve through it and
    # the stale nodes (a dozen fixed-η solves here, before any seller runs) would
    # serve only a declined lean re-solve, which then certifies from the coarse grid.
    lean = full and strict_resolver(prob, base) is not None
    nodes = stale_nodes(prob, base) if full and not lean else None
    hessian = base_hessian(prob, base) if full else None
    return PaymentJob(
        prob, base, regular, c, solver=solver, nodes=nodes, hessian=hessian
    )


def never_excluded(prob: Problem) -> NDArray[np.intp]:
    """Sellers who keep weight at every report: ``ε_i^max > 0`` and
    ``Σ_{j≠i} h_j(η_lo) < 1``, with ``h_j(η) = min(k/m, ε_j^max/η)`` the caps and
    ``η_lo`` the bottom of the feasible ``η`` range (caps are loosest there; the range
    does not depend on the reports).

    Such a seller's ``ε_i(s) ≥ (1 − Σ_{j≠i} h_j(η)) η ≥ (1 − Σ_{j≠i} h_j(η_lo)) η_lo > 0``
    for every ``s``, so its threshold payment ``∫_{c_i}^{c̄} u(ε_i(s)) ds`` (spec §5) is
    infinite when ``c̄ = ∞``. Empty when no ``η`` is feasible (the allocation reports
    that itself).
    """
    bounds = eta_bounds(prob)
    if bounds is None:
        return np.empty(0, dtype=np.intp)
    caps = prob.caps(bounds[0])
    others = float(caps.sum()) - caps
    return np.flatnonzero((prob.eps_max > 0) & (others < 1.0))


def _chunk(job: PaymentJob, sellers: list[int]) -> list[SellerPayment]:
    with one_blas_thread():  # parallel over sellers, not inside BLAS
        return [seller_payment(job, i) for i in sellers]


def myerson_payments(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    eps_max: ArrayLike | None = None,
    sellers: ArrayLike | None = None,
    executor: Executor | None = None,
    *,
    base: Allocation | None = None,
    progress: Progress | None = None,
    chunk_size: int | None = None,
    verify: str = "sample",
    rtol: float | None = None,
    checkpoint: Callable[[], None] | None = None,
) -> PaymentResult:
    """Myerson payments ``t_i`` of spec §5 for the allocation of ``costs``.

    Parameters
    ----------
    X, y, costs, prior, cfg, eps_max
        As for :func:`mechanisms.allocate` (``cfg.mode`` must not be ``"paper"``).
    sellers : array-like of int, optional
        Indices to compute (default all); the others get payment 0 and
        ``computed = False``.
    executor : Executor, optional
        Where sellers run (in chunks); default a process pool
        (:func:`mechanisms.payments._executors.map_chunks`).
    base : Allocation, optional
        The allocation of these reports if already solved (it fixes the warm starts).
    progress : callable, optional
        ``progress(done, total)`` in sellers.
    chunk_size : int, optional
        Sellers per executor task.
    verify : {"sample", "all"}
        Which winners' shortcut re-solves are checked against cold full re-solves
        (what :func:`mechanisms.allocate` returns for the changed report). ``"all"``:
        every one. ``"sample"`` (default): those of ``sellers`` in
        :func:`verification_sample` of all the base's winners (about
        ``√(winners)``, at least ``MIN_VERIFIED``), so a seller is checked or not
        whichever other sellers the call computes (a market paid in parts gets
        the payments of one call for all); if any sampled check finds a
        mismatch, every other winner is recomputed with the checks on. These
        cross-checks are extra: a shortcut re-solve is used at all only
        when the base allocation is certified and the re-solve carries its own
        closed certificate (else the full search runs), for every seller in or out
        of the sample; see each seller's ``certificate``.
    rtol : float, optional
        Relative tolerance of each seller's integral and critical-cost bracket
        (default ``PaymentJob.rtol``, 1e-5); the IC-regret audits use a tighter one.
    checkpoint : callable, optional
        Called before every re-solve (``PaymentJob.checkpoint``); raise from it to
        stop the payments (e.g. a time budget). Must be picklable for process pools.

    Returns
    -------
    PaymentResult
    """
    if verify not in ("sample", "all"):
        raise ValueError(f"verify must be 'sample' or 'all', got {verify!r}")
    t0 = time.perf_counter()
    job = payment_job(X, y, costs, prior, cfg, eps_max, base=base)
    if rtol is not None:
        if not (0.0 < rtol < 1.0):
            raise ValueError(f"rtol must be in (0, 1), got {rtol!r}")
        job = dataclasses.replace(job, rtol=float(rtol))
    if checkpoint is not None:
        job = dataclasses.replace(job, checkpoint=checkpoint)
    idx = _seller_indices(sellers, job.prob.m)
    if verify == "sample":
        sample = verification_sample(job.base, list(range(job.prob.m)))
        job = dataclasses.replace(job, unverified=frozenset(idx) - sample)
        idx = spread_out(idx, sample)
    t1 = time.perf_counter()
    run = functools.partial(
        map_chunks, _chunk, executor=executor, chunk_size=chunk_size
    )
    done = run(job, idx, progress=progress)
    escalated = any(sp.fell_back for sp in done if sp.verified)
    if escalated:
        redo = [sp.index for sp in done if not sp.verified]
        job = dataclasses.replace(job, unverified=frozenset())
        again = {sp.index: sp for sp in run(job, redo)}
        done = [again.get(sp.index, sp) for sp in done]
    timings = {"base": t1 - t0, "sellers": time.perf_counter() - t1}
    return collect(job, done, timings, escalated=escalated)


def spread_out(items: list[int], heavy: frozenset[int]) -> list[int]:
    """``items`` with those in ``heavy`` moved to evenly spaced places, the others in
    their order around them. The executor takes contiguous chunks: a cross-checked
    seller costs a few full solves (about ten times an unchecked one), and the
    sample is spread over the sellers ordered by ``ε_i``, not by index, so in index
    order a chunk could hold several times its share (9 of 32 in one of 8 chunks on
    Wisconsin, the last worker finishing alone). The payments do not depend on the
    order (each seller's is computed alone and collected by index)."""
    hot = [i for i in items if i in heavy]
    if not hot or len(hot) == len(items):
        return items
    cold = [i for i in items if i not in heavy]
    n, k = len(items), len(hot)
    slots = {int((j + 0.5) * n / k) for j in range(k)}
    out: list[int] = []
    h = c = 0
    for pos in range(n):
        if (pos in slots and h < k) or c == len(cold):
            out.append(hot[h])
            h += 1
        else:
            out.append(cold[c])
            c += 1
    return out


def verification_sample(base: Allocation, sellers: list[int]) -> frozenset[int]:
    """Winners whose shortcut is checked against cold full solves (``verify="sample"``).

    ``max(MIN_VERIFIED, ⌈√n⌉)`` of the ``n`` winners among ``sellers``, spread evenly
    over them ordered by ``ε_i`` (so the smallest — nearest their cut-off, where a
    switch of local optimum would move the critical cost — and the largest are both
    in); all winners when there are fewer. Losers need no check: their payment is 0
    from the base solve alone. Deterministic.

    What it guarantees: a sampled winner is checked exactly as with ``verify="all"``;
    an unsampled one is not. If none of ``k`` sampled winners mismatches, the share of
    winners whose shortcut would is below ``3/k`` at 95 % confidence (rule of three,
    treating the spread sample as random). Measured: no mismatch in any of 400
    Wisconsin and 2,000 synthetic sellers checked (``benchmarks/RESULTS.md``); one of
    22 winners on a small, very selective instance (``μ = 1``, ``k = 2``, ``m = 40``),
    which is why every winner is checked below ``MIN_VERIFIED`` winners.
    """
    eps = np.asarray(base.epsilon_total, dtype=float)
    idx = np.asarray(sellers, dtype=np.intp).reshape(-1)
    cand = idx[eps[idx] > 0.0]
    winners = cand[np.lexsort((cand, eps[cand]))]  # by ε_i, ties by index
    k = max(MIN_VERIFIED, math.ceil(math.sqrt(winners.size)))
    if k >= winners.size:
        return frozenset(int(i) for i in winners)
    pick = np.unique(np.linspace(0, winners.size - 1, k).round().astype(int))
    return frozenset(int(winners[j]) for j in pick)


def collect(
    job: PaymentJob,
    done: list[SellerPayment],
    timings: dict[str, float],
    *,
    escalated: bool = False,
) -> PaymentResult:
    """Assemble per-seller results into a :class:`PaymentResult`."""
    m = job.prob.m
    pay, crit = np.zeros(m), np.full(m, np.nan)
    computed = np.zeros(m, dtype=bool)
    for sp in done:
        pay[sp.index], crit[sp.index] = sp.payment, sp.critical_cost
        computed[sp.index] = True
    eps = np.array(job.base.epsilon_total, dtype=float)
    return PaymentResult(
        payments=pay,
        epsilon=eps,
        expected_payments=expected_payments(job.base),
        computed=computed,
        critical_costs=crit,
        max_monotonicity_violation=max(
            (sp.monotonicity_violation for sp in done), default=0.0
        ),
        sellers=tuple(sorted(done, key=lambda sp: sp.index)),
        allocation=job.base,
        timings=timings,
        n_verified=sum(sp.verified and sp.epsilon > 0 for sp in done),
        max_shortcut_mismatch=max((sp.fast_mismatch for sp in done), default=0.0),
        escalated=escalated,
        privacy_costs=np.where(
            computed & (eps > 0), job.reports * utility(eps, job.prob.cfg), 0.0
        ),
    )


def _seller_indices(sellers: ArrayLike | None, m: int) -> list[int]:
    if sellers is None:
        return list(range(m))
    idx = np.asarray(sellers)
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"sellers must be a 1-D array of integers, got {sellers!r}")
    bad = (idx < 0) | (idx >= m)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise ValueError(f"sellers[{j}] = {int(idx[j])} is not in [0, {m})")
    if np.unique(idx).size != idx.size:
        raise ValueError("sellers must not repeat an index")
    return [int(v) for v in idx]


def expected_payments(alloc: Allocation) -> FloatArray:
    """The paper's Thm 3.2 ``Ψ_i·u(ε_i^total)``: the payment **in expectation over
    costs** (what the objective's ``γ`` term prices), not an incentive-compatible
    payment (spec §5, Correction). Diagnostic only."""
    eps = np.asarray(alloc.epsilon_total, dtype=float)
    return np.asarray(alloc.virtual_costs * utility(eps, alloc.config), dtype=float)


def myerson_total(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    eps_max: ArrayLike | None = None,
    *,
    executor: Executor | None = None,
    base: Allocation | None = None,
) -> float:
    """``Σ_i t_i`` (for trade-off curves; :func:`myerson_payments` has the details)."""
    return myerson_payments(
        X, y, costs, prior, cfg, eps_max, executor=executor, base=base
    ).total


PaymentsFn = Callable[..., PaymentResult]
