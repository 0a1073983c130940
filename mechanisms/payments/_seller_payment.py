"""One seller's Myerson payment for a frozen rule (spec ``mechanism.md`` §5).

    t_i = c_i·u(ε_i(c_i)) + ∫_{c_i}^{s*_i} u(ε_i(s)) ds

over the seller's curve ``ε_i(s)`` (:class:`mechanisms.payments._resolve._seller_curve.SellerCurve`): the
critical cost ``s*_i`` by a secant search (:mod:`mechanisms.payments._critical_cost`), the kink
where the seller leaves its cap (:mod:`mechanisms.payments._kinks`), and Simpson–Richardson
quadrature on the smooth pieces (:mod:`mechanisms.payments._quadrature`). Re-solves take the
certified shortcut of :mod:`mechanisms.payments._resolve._local_resolve`; unless the seller is in
``job.unverified``, its values at the bracket ends and at a quadrature node (where
the quadrature evaluated one besides them: a flat first piece taken from its ends and
the slope at the report has none) are checked against cold full solves and the stage is redone with full solves on a
mismatch. :func:`mechanisms.payments.myerson_payments` maps this over sellers.
"""

from __future__ import annotations

import dataclasses
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._eta_search import solve_allocation
from mechanisms.allocation._problem import Problem, utility
from mechanisms.allocation._range._certify import Node
from mechanisms.payments._base_memo import base_memo
from mechanisms.payments._critical_cost import (
    CriticalCost,
    find_critical_cost,
    integral_lower_bound,
)
from mechanisms.payments._kinks import breakpoints, cap_exit, jumps, kink_brackets
from mechanisms.payments._quadrature import integrate
from mechanisms.payments._resolve._seller_curve import (
    SellerCurve,
    Solver,
    allocation_check,
)
from mechanisms.payments._seller_certificate import SellerCertificate
from mechanisms.priors import CostPrior
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]
# ε mismatch of the shortcut against a cold full solve that triggers a full redo,
# relative to max(ε_i, the mean ε of the winners): both solvers stop at KKT tolerance,
# so they agree to ~1e-8 in ε (measured: at most 7e-8 over 100 sellers at m = 2000),
# while a switch of local optimum moves ε_i by a fraction of itself.
FAST_TOL = 1e-5
BRACKET_SHARE = 0.25
"""Share of ``PaymentJob.rtol`` given to the critical-cost bracket (its triangle's
error is at most half of it)."""
QUAD_SHARE = 0.5
"""Share of ``PaymentJob.rtol`` given to the quadrature's estimated error."""
MAX_KINK_PASSES = 4


@dataclass(frozen=True, slots=True)
class SellerPayment:
    """One seller's payment and how it was computed.

    ``integral`` is ``∫_{c_i}^{s*_i} u(ε_i(s)) ds``; ``critical_cost`` the upper end
    used (``c̄_i`` when the seller is never excluded on the support);
    ``quad_error`` the quadrature's error estimate plus the critical-cost bracket's
    bound; ``monotonicity_violation`` the worst upward step of ``ε_i`` over all
    evaluated reports (0 for a monotone sweep); ``n_fast`` re-solves taken by the
    certified shortcut, ``fast_mismatch`` its largest ``|Δε_i|`` against full
    re-solves at check points, ``fell_back`` whether that forced a full redo,
    ``verified`` whether those checks ran (``False`` only for sellers outside the
    verification sample of :func:`myerson_payments`; their shortcut evaluations are
    still each certified); ``certificate`` what the payment rests on
    (:class:`mechanisms.payments._seller_certificate.SellerCertificate`).
    """

    index: int
    report: float
    epsilon: float
    payment: float
    integral: float
    critical_cost: float
    quad_error: float
    converged: bool
    n_solves: int
    monotonicity_violation: float
    seconds: float
    n_fast: int = 0
    fast_mismatch: float = 0.0
    fell_back: bool = False
    verified: bool = True
    certificate: SellerCertificate | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its constructor's arguments: a process pool sends each chunk's
        results back this way, and the dataclass default (its ``__getstate__`` reads
        ``fields()`` for every object) took 11 µs a seller with its certificate."""
        return (SellerPayment, _SELLER_PAYMENT_FIELDS(self))


_SELLER_PAYMENT_FIELDS = operator.attrgetter(
    *(f.name for f in dataclasses.fields(SellerPayment))
)
"""The fields of :class:`SellerPayment` in order, as a tuple
(:meth:`SellerPayment.__reduce__`)."""


@dataclass(frozen=True)
class PaymentJob:
    """What every per-seller computation shares (picklable; sent once per worker).

    ``unverified``: sellers whose shortcut evaluations are not checked against cold
    full re-solves (default none: every seller is checked). ``nodes``: the base's
    stale certified nodes for the shortcut's range certificate
    (:func:`mechanisms.payments._resolve._local_resolve.stale_nodes`; ``None``: the coarse
    grid's only, as where strict mode's lean re-solver applies). ``rtol``: relative
    tolerance of each seller's payment integral ``I`` (1e-5: a payment of 1,000 is
    right to a hundredth of a unit before rounding up to the ledger unit). It is split between the two error sources so that their sum
    stays within it: the critical-cost bracket stops at ``u(ε(lo))·(hi − lo) ≤
    (rtol/4)·I`` (the triangle added for it is then off by at most ``(rtol/8)·I``) and
    the adaptive quadrature at an estimated error ``≤ (rtol/2)·I``. (With both at the
    full ``rtol`` the payment identity was measured met only to 4.1e-5 relative.) What
    ``rtol`` bounds is the *estimated* error: Simpson's error estimate is an estimate,
    and each ``ε_i(s)`` is itself a solve to its KKT tolerance (``10⁻⁶``) or a
    shortcut accepted within ``FAST_TOL`` of a full solve; the per-seller
    ``certificate.quad_error`` reports the estimate.
    ``checkpoint``: called before every re-solve of every seller's sweep; a caller
    that must stop (a time budget, a worker shutting down) raises from it, and the
    exception ends the payments (picklable: a module-level function or a
    ``functools.partial`` of one when sellers run in other processes).
    ``hessian``: the base's ``∇²F`` for the shortcut's chord steps
    (:func:`mechanisms.payments._resolve._local_resolve.base_hessian`; ``None``: the
    exact Hessian at every Newton iteration).
    ``curvature_split``: value quadrature panels through the parts of
    ``ε_i = η·a_i + 2·ln(1 + a_i/(4λ))`` where that is the better estimate (linear
    ``u`` with the curvature term: :mod:`mechanisms.payments._quadrature`); ``False``
    integrates ``ε_i`` alone.
    """

    prob: Problem
    base: Allocation
    prior: CostPrior  # the regular (ironed if needed) prior Ψ̄ comes from
    reports: FloatArray
    rtol: float = 1e-5
    max_evals: int = 600
    solver: Solver = solve_allocation
    fast: bool = True
    warm_full: bool = False
    rule: str = "simpson"
    n_check: int = 1
    unverified: frozenset[int] = frozenset()
    checkpoint: Callable[[], None] | None = None
    nodes: dict[float, Node] | None = None
    curvature_split: bool = True
    hessian: FloatArray | None = None


def seller_payment(job: PaymentJob, i: int) -> SellerPayment:
    """Myerson payment of seller ``i`` for the frozen rule in ``job`` (spec §5).

    With ``job.fast`` re-solves use the certified shortcut
    (:mod:`mechanisms.payments._resolve._local_resolve`), checked (unless ``i`` is in ``job.unverified``)
    against full re-solves at both ends of the critical-cost bracket and at a
    quadrature node; on a mismatch above ``FAST_TOL·max(ε_i, mean winner ε)`` that
    stage is redone with full re-solves only.
    """
    if job.prob.cfg.gamma == 0.0:
        return _report_independent_payment(job, i)
    t0 = time.perf_counter()
    c = float(job.reports[i])
    curve = SellerCurve(
        job.prob,
        job.base,
        job.prior,
        i,
        c,
        solver=job.solver,
        fast=job.fast,
        warm_full=job.warm_full,
        checkpoint=job.checkpoint,
        nodes=job.nodes,
        hessian=job.hessian,
        reports=job.reports,
    )
    tol = FAST_TOL * max(curve.epsilon(c), _mean_winner_epsilon(job.base))
    verify = i not in job.unverified
    split = _curvature_split(job)
    crit = find_critical_cost(
        curve, rtol=BRACKET_SHARE * job.rtol, secant_on_weight=split
    )
    mismatch = curve.verify_fast(points=[crit.lo, crit.hi]) if verify else 0.0
    if mismatch > tol:
        curve.drop_fast()
        crit = find_critical_cost(
            curve, rtol=BRACKET_SHARE * job.rtol, secant_on_weight=split
        )
    integral, err, ok = 0.0, 0.0, True
    fell_back = not curve.fast
    if crit.lo > c:
        integral, err, ok = _integral(job, curve, crit, split)
        check = curve.verify_fast(job.n_check) if verify else 0.0
        mismatch = max(mismatch, check)
        if check > tol:
            curve.drop_fast()
            fell_back = True
            integral, err, ok = _integral(job, curve, crit, split)
    if crit.excluded_on_support is False and not np.isfinite(crit.hi):
        integral, ok = float("inf"), False  # pragma: no cover - γ = 0, unbounded prior
    violation = curve.monotonicity_violation()
    cert = seller_certificate(
        curve, verify=verify, mismatch=mismatch, violation=violation, quad_error=err
    )
    return SellerPayment(
        index=i,
        report=c,
        epsilon=curve.epsilon(c),
        payment=c * curve.u(c) + integral,
        integral=integral,
        critical_cost=crit.hi,
        quad_error=err,
        converged=ok,
        n_solves=curve.n_solves,
        monotonicity_violation=violation,
        seconds=time.perf_counter() - t0,
        n_fast=curve.n_fast,
        fast_mismatch=mismatch,
        fell_back=fell_back,
        verified=verify,
        certificate=cert,
    )


def _report_independent_payment(job: PaymentJob, i: int) -> SellerPayment:
    """Seller ``i``'s payment where the rule does not read the reports (``γ = 0``).

    ``Ψ`` enters the allocation objective (4.1) only through ``γ·Σ Ψ_i u(η a_i)``, so at
    ``γ = 0`` every report gives the base's allocation: ``ε_i(s) = ε_i(c_i)`` on the
    whole support ``[p, q]`` (``q`` finite: :func:`payment_job` refuses ``γ = 0`` with an
    unbounded prior). The winner's critical cost is ``q`` and its payment
    ``c_i·u(ε_i) + (q − c_i)·u(ε_i) = q·u(ε_i)`` exactly, with no re-solve; a loser's
    is 0."""
    t0 = time.perf_counter()
    c = float(job.reports[i])
    eps = float(job.base.epsilon_total[i])
    cfg = job.prob.cfg
    u = float(utility(np.array([eps]), cfg)[0])
    top = float(job.prior.high)
    won = eps > 0.0
    integral = (top - c) * u if won else 0.0
    status, kkt, gap = allocation_check(job.base)
    cert = SellerCertificate(
        method="report_independent",
        allocation_status=status,
        rule_certified=status == "optimal",
        n_evaluations=0,
        n_shortcut=0,
        n_full=0,
        n_uncertified=0,
        max_kkt_residual=kkt,
        max_range_gap=gap,
        shortcut_checked=False,
        shortcut_mismatch=0.0,
        monotonicity_violation=0.0,
        quad_error=0.0,
    )
    return SellerPayment(
        index=i,
        report=c,
        epsilon=eps,
        payment=c * u + integral,
        integral=integral,
        critical_cost=top if won else c,
        quad_error=0.0,
        converged=True,
        n_solves=0,
        monotonicity_violation=0.0,
        seconds=time.perf_counter() - t0,
        verified=False,
        certificate=cert,
    )


def seller_certificate(
    curve: SellerCurve,
    *,
    verify: bool,
    mismatch: float,
    violation: float,
    quad_error: float,
) -> SellerCertificate:
    """Summarise what the seller's sweep rests on (see :class:`SellerCertificate`)."""
    base = allocation_check(curve.base)
    evals = {s: v for s, v in curve.checks.items() if s != float(curve.report)}
    statuses = [v[0] for v in evals.values()]
    gaps = [v[2] for v in [base, *evals.values()] if v[2] is not None]
    n_short = sum(1 for s in evals if s in curve.fast_keys)
    return SellerCertificate(
        method="shortcut_certified" if n_short else "full_solve",
        allocation_status=base[0],
        rule_certified=base[0] == "optimal" and all(st == "optimal" for st in statuses),
        n_evaluations=len(evals),
        n_shortcut=n_short,
        n_full=len(evals) - n_short,
        n_uncertified=sum(1 for st in statuses if st != "optimal"),
        max_kkt_residual=max(v[1] for v in [base, *evals.values()]),
        max_range_gap=max(gaps) if gaps else None,
        shortcut_checked=verify and n_short > 0,
        shortcut_mismatch=float(mismatch),
        monotonicity_violation=float(violation),
        quad_error=float(quad_error),
    )


SPLIT_MIN_RATIO = 0.1
""":func:`_integral` reads ``ε_i`` through its parts only where ``a_i ≥`` this times
``4λ`` at the seller's report."""


def _curvature_split(job: PaymentJob) -> bool:
    """Whether the sweep reads ``ε_i`` through its parts ``(η·a_i, a_i)``
    (``job.curvature_split`` with linear ``u``, the curvature term and Simpson's
    panels)."""
    cfg = job.prob.cfg
    return (
        job.curvature_split
        and job.rule == "simpson"
        and cfg.u == "linear"
        and cfg.curvature_overhead
    )


def _with_brackets(
    points: list[float], brackets: list[tuple[float, float]], lo: float, hi: float
) -> list[float]:
    """``points`` and both ends of every bracket, sorted, inside ``(lo, hi)``."""
    ends = {x for pair in brackets for x in pair}
    return sorted((set(points) | ends) - {lo, hi})


def _mean_winner_epsilon(base: Allocation) -> float:
    def mean() -> float:
        eps = np.asarray(base.epsilon_total, dtype=float)
        won = eps[eps > 0.0]
        return float(won.mean()) if won.size else 1e-300

    return base_memo(base, "mean_winner_epsilon", None, mean)


def _capped_kinks(curve: SellerCurve, hi: float, atol: float) -> list[float]:
    """Kinks on ``[c, hi]`` located before the quadrature's first pass, for a seller
    at its cap at its own report ``c`` whose curve does not locate kinks itself (the
    weights' path): both ends of each bracket of
    :func:`mechanisms.payments._kinks.breakpoints` (to ``atol``) between the reports
    evaluated so far (the report, the critical cost's and the cap exit's), else
    none.

    Such a seller's ``ε_i`` sits on a plateau and then falls, often steeply, as it
    leaves its cap, with other sellers changing status along the fall. A first pass
    without those kinks spends its panels bisecting into the fall (Wisconsin,
    ``γ = 5.8·10⁴``, ``λ = 4.3·10⁵``: 9 of a seller's 18 re-solves), where the
    kink search brackets it from the status margins in a few. A free seller's
    curve is smooth between far fewer changes, and the first pass's reports make
    its kink guesses better: there the search runs after the pass, as before
    (run first, it took 6 % more re-solves at ``m = 10⁴``)."""
    c = curve.report
    if curve.own_status(c) != 2:
        return []
    return breakpoints(curve, c, hi, atol=atol)


def _integral(
    job: PaymentJob, curve: SellerCurve, crit: CriticalCost, split: bool
) -> tuple[float, float, bool]:
    """``∫_{c}^{s*} u(ε(s)) ds``: adaptive quadrature on ``[c, lo]`` split where the
    seller leaves its cap (both ends of :func:`mechanisms.payments._kinks.cap_exit`'s
    bracket; where the resolver locates kinks itself that exit is one of the status
    changes bracketed before the first pass),
    re-run split at the kinks (changes of the active set) located between the
    evaluated reports until no new one is found (for a seller at its cap at its
    report, also before the first pass: :func:`_capped_kinks`); plus the bracket
    ``[lo, hi]`` as a triangle (``ε`` falls to 0 inside it; its area is also added
    to the error bound).

    The kinks are looked for after every pass, not only after one that missed its
    tolerance: across a kink inside a panel the Simpson–Richardson estimate assumes a
    smoothness that is not there and can report convergence while the integral is off
    (measured: a strict-mode seller whose ``ε`` fell 40 % over 4 % of the sweep, between
    two kinks, was paid 8.5e-5 below the payment identity at ``rtol = 1e-5``).
    ``split``: :func:`_curvature_split` of the job (panels may read ``ε_i`` through
    its parts where the seller's logarithm bends)."""
    c = curve.report
    exit_bracket = None
    if not curve.locates_kinks:
        # a jump at the exit left in its bracket moves the integral by at most
        # atol/2, a sixteenth of the quadrature's share of the tolerance
        atol = 0.125 * QUAD_SHARE * job.rtol * integral_lower_bound(curve, crit.lo)
        exit_bracket = cap_exit(curve, c, crit.lo, atol=atol)
    # both ends of the exit's bracket: the kink passes below find that bracket
    # between the evaluated reports, and a pass split at one end only would be
    # re-run split at the other (every node of the piece beside it moved)
    kinks = (
        [] if exit_bracket is None else _with_brackets([], [exit_bracket], c, crit.lo)
    )
    # Where the resolver locates kinks itself, the changes between the reports
    # evaluated so far are bracketed before the first pass (a kink inside a panel
    # makes the adaptive rule split it many times), and a later pass does not search
    # again inside a bracket whose ends it already splits at.
    known: list[tuple[float, float]] = []
    jump_atol = 0.125 * job.rtol * abs(crit.lo - c) * curve.u(c)
    if curve.locates_kinks:
        known = kink_brackets(curve, c, crit.lo, atol=jump_atol)
        kinks = _with_brackets(kinks, known, c, crit.lo)
    else:
        kinks = sorted(set(kinks) | set(_capped_kinks(curve, crit.lo, jump_atol)))
    cfg = job.prob.cfg
    if split:
        # only where the logarithm bends on the sweep: a_i/(4λ) well below 1 at the
        # report (where a_i is largest) leaves it linear, and the split's panels
        # cost ~20 µs each for nothing (1.5 % of a sweep at λ = 8.3 on Wisconsin)
        own = curve.release_terms(c)
        split = own is not None and own[1] >= SPLIT_MIN_RATIO * 4.0 * cfg.lam
    for _ in range(MAX_KINK_PASSES):
        quad = integrate(
            curve.u,
            c,
            crit.lo,
            breakpoints=kinks,
            rtol=QUAD_SHARE * job.rtol,
            max_evals=job.max_evals,
            rule=job.rule,
            monotone=True,
            curvature_split=curve.release_terms if split else None,
            curvature_scale=4.0 * cfg.lam if split else 0.0,
            tangent=curve.tangent,
            known=curve.evaluated_inside,
        )
        jump_atol = 0.125 * job.rtol * abs(quad.value)
        if curve.locates_kinks:
            new = kink_brackets(curve, c, crit.lo, atol=jump_atol, known=known)
            known += new
            found = _with_brackets([], new, c, crit.lo)
        else:
            found = breakpoints(curve, c, crit.lo, atol=jump_atol)
        found += jumps(curve, c, crit.lo, atol=jump_atol)
        if set(found) <= set(kinks):
            break
        kinks = sorted(set(kinks) | set(found))
    tail = 0.5 * (crit.hi - crit.lo) * curve.u(crit.lo)
    slight = sum(curve.slight_kinks.values())  # slope jumps left unlocated
    return quad.value + tail, quad.error + tail + slight, quad.converged
