"""Choose ``γ`` for a buyer's budget (spec ``mechanism.md`` §4.3, §5, §6).

The most accurate ``γ`` whose total **Myerson** payment, in ledger units by the caller's
money rule, fits the budget ``B``. The units are the amounts as paid
(:mod:`mechanisms.money`: each payment rounded **up**, never below ``c_i u(ε_i)``, one
unit at least for ``ε_i > 0``); the allocation at a ``γ`` is not budget-constrained in
real numbers, so only a ``γ`` whose rounded-up total fits ``⌊B/unit⌋`` is affordable,
and ``Σ paid ≤ B`` holds exactly in whole units. Accuracy is the validation error of the release
fitted on a **public** proxy of the sellers' records
(:func:`mechanisms.tuning.public_validation_error`): no private record reaches a
release, so the choice spends no privacy and a ``strict`` order stays
``ε_i^total``-DP end to end (spec §4.4).

Cost. A Myerson payment computation re-solves the allocation many times per seller;
an allocation is one solve. The search therefore evaluates every ``γ`` of a log grid
(and bisections of it) by its allocation only, and brackets the total payment by the
payment identity of spec §5,

    t_i = c_i·u(ε_i) + ∫_{c_i}^{c̄} u(ε_i(s)) ds,

with ``s ↦ ε_i(s)`` non-increasing, ``0 ≤ ε_i(s) ≤ ε_i(c_i)``, hence

    c_i·u(ε_i)  ≤  t_i  ≤  c̄·u(ε_i)                                   (bounds)

(``ε_i = ε_i^total``; ``c̄`` the top of the prior's support). The money rule is
monotone per seller, so ``Σ_i rule(c_i u(ε_i)) > B`` proves a ``γ`` unaffordable and
``Σ_i rule(c̄ u(ε_i)) ≤ B`` proves it affordable. Where they do not decide, the total
is estimated as ``ρ·Σ_i c_i u(ε_i)``, ``ρ`` measured on exact payments of a sample of
one candidate's winners, then on each full computation (:func:`_settle`). Exact
payments are computed only for the candidates the search would choose, best
validation error first, among those proven or estimated affordable; the final choice's
payments are the ones paid. With the default ``max_exact = 2`` the whole search costs
at most two payment computations, the sample's (a tenth of the winners), and one
allocation plus ``n_draws`` proxy releases per grid point; usually one computation
suffices. Affordability of the returned ``γ`` is always decided on its exact payments
(the bounds and estimates only steer).

When the chosen ``γ`` leaves part of the budget unspent, :attr:`GammaChoice.note` says
why (:func:`_unspent_reason`): the sellers' ``ε`` caps bind, the market's ``ε``
average cap binds, the market has too few sellers for the budget, the search range
ends, spending more did not lower the validation error, or the next ``γ`` down costs
more than the budget.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms.allocation._eta_search import allocate
from mechanisms.allocation._problem import utility
from mechanisms.config import MechanismConfig
from mechanisms.money import beyond_ledger, to_minor, to_minor_units, total_units
from mechanisms.payments._executors import default_workers
from mechanisms.payments._payments import PaymentResult, myerson_payments
from mechanisms.priors import CostPrior, ensure_regular
from mechanisms.result import Allocation
from mechanisms.tuning._validation_error import Release, public_validation_error

FloatArray = NDArray[np.float64]
_T = TypeVar("_T")
MinorUnits = Callable[[FloatArray], ArrayLike]
"""The money rule: per-seller payments → whole ledger units (monotone per seller)."""
Decided = Literal["yes", "no", "maybe"]
UNSPENT_SHARE = 0.1
"""A chosen ``γ`` leaving more than this share of the budget unspent gets a note."""


@dataclass(frozen=True, eq=False)
class GammaPoint:
    """One evaluated ``γ``.

    ``total``/``total_paid``: the exact Myerson total (raw, and after the money rule in
    currency units) — ``nan`` where payments were not computed (``payments is None``);
    ``expected_total`` the diagnostic ``Σ Ψ_i u(ε_i)``; ``validation_error`` of the
    public-proxy release (``nan`` when not scored: proven unaffordable);
    ``affordable`` exact when payments were computed, else what the bounds proved;
    ``bound_low``/``bound_high`` the money rule applied to the per-seller bounds
    ``c_i u(ε_i)`` and ``c̄ u(ε_i)``, summed, in currency units; ``decided`` what the
    bounds say (``"yes"``, ``"no"`` or ``"maybe"``); ``estimate`` the total the search
    estimated where it computed no payments (``ρ·Σ_i c_i u(ε_i)``, see ``_settle``);
    ``low_total`` the unrounded ``Σ_i c_i u(ε_i)``.
    """

    gamma: float
    total: float
    total_paid: float
    expected_total: float
    validation_error: float
    affordable: bool
    payments: PaymentResult | None = field(repr=False)
    allocation: Allocation | None = field(default=None, repr=False)
    bound_low: float = math.nan
    bound_high: float = math.nan
    decided: Decided = "maybe"
    estimate: float = math.nan
    low_total: float = math.nan


@dataclass(frozen=True, eq=False)
class GammaChoice:
    """Result of :func:`choose_gamma`.

    ``status`` is ``"ok"`` or ``"nothing_affordable"`` (then ``gamma``, ``allocation``
    and ``payments`` are ``None`` and ``total_payment`` is the cheapest total known: an
    exact one, or the proven lower bound). ``payments`` are rounded up to ``unit``
    (``payment_result`` holds the exact ones, for a caller with its own money rule);
    ``path`` lists ``(γ, Myerson total or nan, validation error, expected payment)`` in
    increasing ``γ``; ``non_monotone`` the neighbouring pairs ``(γ₁, γ₂, total₁,
    total₂)`` with exact totals, ``γ₁ < γ₂`` but ``total₁ < total₂``. ``reason`` is a
    code and ``note`` a sentence when the budget is not (nearly) spent or nothing fits
    (:func:`_unspent_reason`); ``n_exact`` counts full payment computations.
    """

    status: Literal["ok", "nothing_affordable"]
    gamma: float | None
    allocation: Allocation | None
    payments: FloatArray | None
    validation_error: float | None
    total_payment: float
    path: list[tuple[float, float, float, float]]
    points: list[GammaPoint] = field(repr=False)
    non_monotone: list[tuple[float, float, float, float]]
    budget: float
    unit: float | str
    payment_result: PaymentResult | None = field(default=None, repr=False)
    reason: str | None = None
    note: str | None = None
    n_exact: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds: ``"points"`` (allocations, bounds, scores), ``"calibrate"`` (the
    sample's payments), ``"exact"`` (full payment computations)."""


@dataclass(frozen=True)
class _Limits:
    """What caps the spend: the settings (``k``, ``L``), the prior's top cost, the
    sellers' ``ε`` caps."""

    cfg: MechanismConfig
    top_cost: float
    eps_max: FloatArray | None


@dataclass(frozen=True)
class _Money:
    """The caller's money rule and the budget in ledger units."""

    rule: MinorUnits
    unit: float | str
    cap: int

    def minor(
        self,
        amounts: FloatArray,
        *,
        epsilon: ArrayLike | None = None,
        floor: ArrayLike | None = None,
    ) -> int:
        """``Σ_i n_i`` of the amounts as paid (:mod:`mechanisms.money`: rounded up,
        never below the rule's units of ``floor`` (``c_i u(ε_i)``), at least one unit
        where ``ε_i > 0``), summed exactly. An amount beyond what the ledger counts
        is counted by :func:`mechanisms.money.total_units` (no rule can pay it; the
        total then exceeds every budget the ledger holds)."""
        a = np.maximum(np.asarray(amounts, dtype=float), 0.0)
        k = None if floor is None else np.maximum(np.asarray(floor, dtype=float), 0.0)
        if beyond_ledger(a, self.unit) or (
            k is not None and beyond_ledger(k, self.unit)
        ):
            return total_units(a, self.unit, privacy_costs=k, epsilon=epsilon)
        n = [int(v) for v in np.asarray(self.rule(a)).ravel()]
        if k is not None:
            n = [
                max(x, int(v))
                for x, v in zip(n, np.asarray(self.rule(k)).ravel(), strict=True)
            ]
        if epsilon is not None:
            e = np.asarray(epsilon, dtype=float).ravel()
            n = [max(x, 1) if v > 0 else x for x, v in zip(n, e, strict=True)]
        return sum(n)


def payment_bounds(
    alloc: Allocation, costs: ArrayLike, prior: CostPrior
) -> tuple[FloatArray, FloatArray]:
    """Per-seller bounds ``c_i u(ε_i) ≤ t_i ≤ c̄ u(ε_i)`` on the Myerson payments of
    ``alloc`` (module docstring; ``ε_i = ε_i^total``, ``c̄`` the regular prior's top of
    support, possibly ``inf``). Valid for an allocation rule monotone in the report
    (spec §5, the condition of incentive compatibility)."""
    u = utility(np.asarray(alloc.epsilon_total, dtype=float), alloc.config)
    top = float(ensure_regular(prior).high)
    low = np.asarray(costs, dtype=float) * u
    with np.errstate(invalid="ignore"):
        high = np.where(u > 0, top * u, 0.0)
    return low, high


def choose_gamma(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    *,
    budget: float,
    X_val: ArrayLike,
    y_val: ArrayLike,
    eps_max: ArrayLike | None = None,
    gamma_range: tuple[float, float] = (1e-3, 1e3),
    n_gamma: int = 13,
    n_refine: int = 3,
    n_draws: int = 15,
    unit: float | str = 0.01,
    minor_units: MinorUnits | None = None,
    exact: Literal["needed", "all"] = "needed",
    max_exact: int = 2,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
    checkpoint: Callable[[], None] | None = None,
    random_state: int | np.random.Generator | None = None,
    release: Release | None = None,
    n_rows: int | None = None,
) -> GammaChoice:
    """The most accurate affordable ``γ`` on ``gamma_range`` (spec §4.3).

    Parameters
    ----------
    X, y, costs, prior, cfg, eps_max
        As for :func:`mechanisms.allocate`. ``X, y`` reach the allocation only (in
        ``strict`` mode not even that); never a release.
    budget : float
        ``B ≥ 0``; a ``γ`` is affordable iff ``Σ_i rule(t_i) ≤ ⌊B/unit⌋``.
    X_val, y_val : array-like
        The public validation set: the proxy records releases are fitted on and the
        rows they are scored on (:func:`public_validation_error`).
    gamma_range : (float, float)
        ``0 < lo < hi``; ``n_gamma`` log-spaced points, then ``n_refine`` bisections in
        ``log γ`` of every bracket where what is known about affordability changes.
    n_draws : int
        Proxy releases per validation error (common random numbers across ``γ``).
    unit, minor_units
        The ledger unit and the money rule turning each payment into whole units
        (default: :func:`mechanisms.money.to_minor_units`, rounding up; the IR and
        one-unit floors of :func:`mechanisms.money.payment_units` are added); the budget
        is ``mechanisms.money.to_minor(budget, unit)`` units.
    exact : {"needed", "all"}
        ``"needed"`` (default): exact payments only where the bounds do not decide and
        for the choice, at most ``max_exact`` computations. ``"all"``: exact payments
        at every point (the search's old cost, for audits and comparisons).
    max_exact : int
        Payment computations allowed with ``exact="needed"`` (``≥ 1``).
    executor, progress, checkpoint
        Where sellers' payments run; ``progress(done, planned)`` counts grid points
        and payment computations; ``checkpoint()`` runs before every payment re-solve.
    random_state : int, Generator or None
        Seed of the proxy rows and release noise (OS entropy if ``None``).
    release : callable, optional
        ``release(X, y, allocation, rng) -> model with predict``, called on public
        proxy rows only (default: objective perturbation for the logistic loss).
    n_rows : int, optional
        Proxy rows per release (default one per seller).
    """
    _check_args(budget, gamma_range, n_gamma, n_refine)
    if exact not in ("needed", "all"):
        raise ValueError(f"exact must be 'needed' or 'all', got {exact!r}")
    if not isinstance(max_exact, int) or max_exact < 1:
        raise ValueError(f"max_exact must be an integer >= 1, got {max_exact!r}")
    rule: MinorUnits = (
        minor_units if minor_units is not None else (lambda p: to_minor_units(p, unit))
    )
    money = _Money(rule, unit, to_minor(float(budget), unit))
    seed = int(np.random.default_rng(random_state).integers(2**63 - 1))
    c = np.asarray(costs, dtype=float)
    planned = [n_gamma + (max_exact + 1 if exact == "needed" else 0)]
    done = [0]

    def tick(extra: int = 0) -> None:
        done[0] += 1
        planned[0] += extra
        if progress is not None:
            progress(done[0], max(planned[0], done[0]))

    def cheap(g: float) -> GammaPoint:
        alloc = allocate(X, y, c, prior, cfg.with_(gamma=float(g)), eps_max)
        alloc.raise_for_status()
        low, high = payment_bounds(alloc, c, prior)
        eps = alloc.epsilon_total
        lo_minor = money.minor(low, epsilon=eps)
        hi_minor = money.minor(high, epsilon=eps) if np.all(np.isfinite(high)) else None
        decided: Decided = (
            "no"
            if lo_minor > money.cap
            else "yes"
            if hi_minor is not None and hi_minor <= money.cap
            else "maybe"
        )
        expected = float(
            alloc.virtual_costs @ utility(alloc.epsilon_total, alloc.config)
        )
        err = math.nan
        if decided != "no":
            err = public_validation_error(
                alloc,
                X_val,
                y_val,
                n_draws=n_draws,
                random_state=seed,
                release=release,
                n_rows=n_rows,
            )
        return GammaPoint(
            gamma=float(g),
            total=math.nan,
            total_paid=math.nan,
            expected_total=expected,
            validation_error=err,
            affordable=decided == "yes",
            payments=None,
            allocation=alloc,
            bound_low=lo_minor * float(unit),
            bound_high=math.inf if hi_minor is None else hi_minor * float(unit),
            decided=decided,
            low_total=float(low.sum()),
        )

    pool = ProcessPoolExecutor(default_workers()) if executor is None else executor

    def pay(p: GammaPoint) -> GammaPoint:
        assert p.allocation is not None
        res = myerson_payments(
            X,
            y,
            c,
            prior,
            p.allocation.config,
            eps_max,
            executor=pool,
            base=p.allocation,
            checkpoint=checkpoint,
        )
        n_paid = money.minor(res.payments, epsilon=res.epsilon, floor=res.privacy_costs)
        if math.isnan(p.validation_error):
            p = replace(
                p,
                validation_error=public_validation_error(
                    p.allocation,
                    X_val,
                    y_val,
                    n_draws=n_draws,
                    random_state=seed,
                    release=release,
                    n_rows=n_rows,
                ),
            )
        return replace(
            p,
            total=res.total,
            total_paid=n_paid * float(unit),
            affordable=n_paid <= money.cap,
            payments=res,
        )

    cal_rng = np.random.default_rng(seed)

    def calibrate(p: GammaPoint) -> float:
        """``ρ = Σ_S t_i / Σ_S c_i u(ε_i)`` over a sample ``S`` of the winners
        (:data:`CALIBRATION_SHARE` of them, at least :data:`CALIBRATION_MIN`): exact
        payments of those sellers only."""
        assert p.allocation is not None
        winners = np.flatnonzero(np.asarray(p.allocation.epsilon_total) > 0)
        if winners.size == 0:
            return 1.0
        k = min(
            winners.size,
            max(CALIBRATION_MIN, math.ceil(CALIBRATION_SHARE * winners.size)),
        )
        sample = np.sort(cal_rng.choice(winners, size=k, replace=False))
        res = myerson_payments(
            X,
            y,
            c,
            prior,
            p.allocation.config,
            eps_max,
            sellers=sample,
            executor=pool,
            base=p.allocation,
            checkpoint=checkpoint,
        )
        low, _ = payment_bounds(p.allocation, c, prior)
        den = float(low[sample].sum())
        return float(res.payments[sample].sum()) / den if den > 0 else 1.0

    def evaluate(g: float) -> GammaPoint:
        p = cheap(g)
        return pay(p) if exact == "all" else p

    timings = {"points": 0.0, "calibrate": 0.0, "exact": 0.0}

    def timed(key: str, fn: Callable[[GammaPoint], _T]) -> Callable[[GammaPoint], _T]:
        def run(p: GammaPoint) -> _T:
            t0 = time.perf_counter()
            try:
                return fn(p)
            finally:
                timings[key] += time.perf_counter() - t0

        return run

    def evaluate_timed(g: float) -> GammaPoint:
        t0 = time.perf_counter()
        try:
            return evaluate(g)
        finally:
            timings["points"] += time.perf_counter() - t0

    try:
        points = _search(evaluate_timed, gamma_range, n_gamma, n_refine, tick, budget)
        n_exact = len(points) if exact == "all" else 0
        if exact == "needed":
            points, n_exact = _settle(
                points,
                timed("exact", pay),
                timed("calibrate", calibrate),
                max_exact,
                tick,
                budget,
            )
    finally:
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)
    caps = None if eps_max is None else np.asarray(eps_max, dtype=float)
    limits = _Limits(cfg, float(ensure_regular(prior).high), caps)
    choice = _choose(points, budget, unit, limits=limits, n_exact=n_exact)
    return replace(choice, timings=timings)


def _state(p: GammaPoint) -> Decided:
    """Affordability as known: exact payments, else the bounds (possibly ``"maybe"``)."""
    if p.payments is not None:
        return "yes" if p.affordable else "no"
    return p.decided


def _likely(p: GammaPoint, budget: float, rho: float) -> bool:
    """Affordable as known, or, where the bounds do not decide, by the estimate
    ``ρ·Σ Ψ_i u(ε_i)`` (the payment identity in expectation over costs, scaled by the
    ratio ``ρ`` of exact to expected totals measured so far; ``ρ = 1`` before any)."""
    state = _state(p)
    if state != "maybe":
        return state == "yes"
    return rho * p.expected_total <= budget


def _search(
    evaluate: Callable[[float], GammaPoint],
    gamma_range: tuple[float, float],
    n_gamma: int,
    n_refine: int,
    tick: Callable[[int], None],
    budget: float,
) -> list[GammaPoint]:
    """The grid, then ``n_refine`` rounds of log-midpoints between neighbours on
    opposite sides of the budget (as known, else as estimated: :func:`_likely`)."""
    grid = np.geomspace(gamma_range[0], gamma_range[1], n_gamma)
    points: list[GammaPoint] = []
    for g in grid:
        points.append(evaluate(float(g)))
        tick(0)
    for _ in range(n_refine):
        pts = sorted(points, key=lambda p: p.gamma)
        mids = [
            float(np.sqrt(a.gamma * b.gamma))
            for a, b in itertools.pairwise(pts)
            if _likely(a, budget, 1.0) != _likely(b, budget, 1.0)
        ]
        for k, g in enumerate(mids):
            points.append(evaluate(g))
            tick(len(mids) if k == 0 else 0)
    return sorted(points, key=lambda p: p.gamma)


def _rank(p: GammaPoint) -> tuple[float, float, float]:
    """Best first: lowest validation error, then the smaller expected payment, then
    the smaller ``γ``."""
    return (p.validation_error, p.expected_total, p.gamma)


SAMPLE_MARGIN = 0.95
EXACT_MARGIN = 0.98
"""An undecided candidate gets a full payment computation only if estimated within
this share of the budget: ``ρ`` measured on a sample, then on a full computation."""
CALIBRATION_SHARE = 0.1
CALIBRATION_MIN = 16
"""The calibration sample: this share of the winners, at least this many."""


def _settle(
    points: list[GammaPoint],
    pay: Callable[[GammaPoint], GammaPoint],
    calibrate: Callable[[GammaPoint], float],
    max_exact: int,
    tick: Callable[[int], None],
    budget: float,
) -> tuple[list[GammaPoint], int]:
    """Exact payments for at most ``max_exact`` candidates; the best affordable wins.

    Where the bounds do not decide, a candidate's total is estimated as
    ``ρ·Σ_i c_i u(ε_i)`` (between the bounds, ``ρ ∈ [1, c̄/min c]``). ``ρ`` is first
    measured on a sample of one candidate's winners (:data:`CALIBRATION_SHARE`, a
    fraction of one payment computation; the undecided candidate whose expected
    payment ``Σ Ψ_i u(ε_i)`` is nearest the budget), then on each full computation.
    Each round computes the best-ranked candidate (not proven unaffordable, better than
    the current choice) that is proven affordable or estimated within
    :data:`SAMPLE_MARGIN` (then :data:`EXACT_MARGIN`) of the budget; with more than one
    computation to spare, also one estimated within the budget divided by that margin.
    Before any choice, if none qualifies, the one estimated cheapest is tried.
    """
    by_gamma = {p.gamma: p for p in points}
    ranked = sorted(
        (p for p in points if p.decided != "no" and math.isfinite(p.validation_error)),
        key=_rank,
    )
    rho = 1.0
    maybe = [p for p in ranked if p.decided == "maybe"]
    if maybe:
        # the undecided candidate whose expected payment Σ Ψ_i u(ε_i) is nearest the
        # budget (the payment identity in expectation over costs)
        probe = min(
            maybe,
            key=lambda p: abs(
                math.log(max(p.expected_total, 1e-300) / max(budget, 1e-300))
            ),
        )
        rho = calibrate(probe)
        tick(0)
    margin = SAMPLE_MARGIN

    def estimate(p: GammaPoint) -> float:
        return rho * p.low_total

    n_exact = 0
    chosen: GammaPoint | None = None
    tried: set[float] = set()
    while n_exact < max_exact:
        cands = [
            p
            for p in ranked
            if p.gamma not in tried and (chosen is None or _rank(p) < _rank(chosen))
        ]
        if not cands:
            break
        room = budget * margin
        pick = next(
            (
                p
                for p in cands
                if _state(p) == "yes" or (_state(p) == "maybe" and estimate(p) <= room)
            ),
            None,
        )
        if pick is None and chosen is not None and n_exact < max_exact - 1:
            # computations to spare: a better candidate near the budget may fit
            pick = next((p for p in cands if estimate(p) * margin <= budget), None)
        if pick is None:
            if chosen is not None:
                break
            pick = min(cands, key=estimate)
        q = pay(pick)
        n_exact += 1
        tick(0)
        tried.add(q.gamma)
        by_gamma[q.gamma] = q
        if q.low_total > 0 and q.total > 0:
            rho, margin = q.total / q.low_total, EXACT_MARGIN
        if q.affordable and (chosen is None or _rank(q) < _rank(chosen)):
            chosen = q
    out = [
        p if p.payments is not None else replace(p, estimate=estimate(p))
        for p in by_gamma.values()
    ]
    return sorted(out, key=lambda p: p.gamma), n_exact


def _choose(
    points: list[GammaPoint],
    budget: float,
    unit: float | str,
    *,
    limits: _Limits | None = None,
    n_exact: int = 0,
) -> GammaChoice:
    """The best point whose exact payments fit, and why budget is left unspent."""
    path = [(p.gamma, p.total, p.validation_error, p.expected_total) for p in points]
    exact = [p for p in points if p.payments is not None]
    non_mono = [
        (a.gamma, b.gamma, a.total, b.total)
        for a, b in itertools.pairwise(exact)
        if b.total > a.total
    ]
    ok = [p for p in exact if p.affordable]
    best = min(ok, key=_rank, default=None)
    common = {
        "path": path,
        "points": points,
        "non_monotone": non_mono,
        "budget": budget,
        "unit": unit,
        "n_exact": n_exact,
    }
    if best is None:
        known = [p.total_paid for p in exact] + [
            p.bound_low for p in points if p.payments is None
        ]
        cheapest = min((v for v in known if math.isfinite(v)), default=math.nan)
        reason, note = _nothing_reason(points, cheapest)
        return GammaChoice(
            status="nothing_affordable",
            gamma=None,
            allocation=None,
            payments=None,
            validation_error=None,
            total_payment=cheapest,
            reason=reason,
            note=note,
            **common,  # type: ignore[arg-type]
        )
    assert best.payments is not None
    why: tuple[str | None, str | None] = (None, None)
    if limits is not None:
        why = _unspent_reason(points, best, budget, limits)
    return GammaChoice(
        status="ok",
        gamma=best.gamma,
        allocation=best.payments.allocation,
        payments=best.payments.paid(unit),
        validation_error=best.validation_error,
        total_payment=best.total_paid,
        payment_result=best.payments,
        reason=why[0],
        note=why[1],
        **common,  # type: ignore[arg-type]
    )


def _nothing_reason(points: list[GammaPoint], cheapest: float) -> tuple[str, str]:
    top = max(points, key=lambda p: p.gamma)
    if any(p.decided == "maybe" and p.payments is None for p in points):
        return (
            "exact_limit",
            "no γ whose payments were computed fits the budget; others on the range "
            "might (their payment bounds straddle it): raise the budget a little or "
            "give γ",
        )
    return (
        "budget_too_small",
        f"even the largest γ on the search range ({top.gamma:g}) costs at least "
        f"{cheapest:.2f}, more than the budget",
    )


def _unspent_reason(
    points: list[GammaPoint], best: GammaPoint, budget: float, limits: _Limits
) -> tuple[str | None, str | None]:
    """Why the chosen ``γ`` leaves more than :data:`UNSPENT_SHARE` of the budget
    unspent (``(None, None)`` when it does not).

    Smaller ``γ`` buys more ``ε``. If the nearest smaller ``γ`` on the search path
    that buys more ``ε`` was not chosen, it either fits the budget but was no more
    accurate (``"no_gain"``), or costs more than the budget or was not computed
    (``"grid"``: its exact cost, its lower bound or its estimate). Otherwise no ``γ`` on the range buys more
    ``ε`` than the chosen one; the allocation at it says what limits it: every seller used at its
    ``ε`` cap (``"seller_caps"``); the market's ``ε`` average cap ``η ≤ m·L``
    (``"eps_avg_cap"``, or ``"too_few_sellers"`` when even ``m·L·c̄``, the most the
    cap lets any allocation cost by the bounds of the module docstring, is below the
    budget); else the range's end (``"gamma_range"``).
    """
    if budget <= 0 or best.total_paid >= (1.0 - UNSPENT_SHARE) * budget:
        return None, None
    spent = (
        f"γ = {best.gamma:.3g} spends {best.total_paid:.2f} of the {budget:.2f} budget"
    )
    eta = best.allocation.eta if best.allocation is not None else math.inf
    more = [
        p
        for p in points
        if p.gamma < best.gamma
        and p.allocation is not None
        and p.allocation.eta > eta * (1.0 + 1e-6)
    ]
    if more:
        nxt = max(more, key=lambda p: p.gamma)
        state = _state(nxt)
        if state == "yes" and math.isfinite(nxt.validation_error):
            return (
                "no_gain",
                f"{spent}; spending more did not lower the validation error "
                f"(γ = {nxt.gamma:.3g} fits the budget with validation error "
                f"{nxt.validation_error:.3f} against {best.validation_error:.3f})",
            )
        cost = (
            f"costs {nxt.total_paid:.2f}, over the budget"
            if nxt.payments is not None
            else f"costs at least {nxt.bound_low:.2f}, over the budget"
            if state == "no"
            else f"is estimated to cost {nxt.estimate:.2f}; its payments were not "
            "computed (the search computes exact payments for a few candidates only)"
        )
        return (
            "grid",
            f"{spent}; the next smaller γ on the search grid ({nxt.gamma:.3g}) {cost}",
        )
    alloc = best.allocation
    assert alloc is not None
    cfg = limits.cfg
    m = int(np.asarray(alloc.weights).size)
    limit = cfg.eps_avg_max * m
    if alloc.eta >= limit * (1.0 - 1e-6):
        if limit * limits.top_cost < budget:
            return (
                "too_few_sellers",
                f"{spent}: the market has {m} sellers and an ε average cap of "
                f"{cfg.eps_avg_max:g}, so at most {limit:g} ε in total can be bought "
                f"(at most {limit * limits.top_cost:.2f} at the highest cost); more "
                "sellers would let the budget buy more",
            )
        return (
            "eps_avg_cap",
            f"{spent}: the market's ε average cap ({cfg.eps_avg_max:g} per seller, "
            f"{limit:g} in total over {m} sellers) binds",
        )
    eps = np.asarray(alloc.epsilon, dtype=float)
    used = eps > 0
    if limits.eps_max is not None and used.any():
        cap = limits.eps_max
        if bool(np.all(eps[used] >= cap[used] * (1.0 - 1e-6))):
            return (
                "seller_caps",
                f"{spent}: every seller used is at its ε cap (its offer's cap or "
                "its remaining lifetime budget)",
            )
    return (
        "gamma_range",
        f"{spent}: it is the smallest γ on the search range; a smaller one would buy "
        "more ε",
    )


def _check_args(
    budget: float, gamma_range: tuple[float, float], n_gamma: int, n_refine: int
) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise ValueError(f"budget must be a number, got {budget!r}")
    if not np.isfinite(budget) or budget < 0:
        raise ValueError(f"budget must be finite and >= 0, got {budget!r}")
    lo, hi = (float(v) for v in gamma_range)
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
        raise ValueError(f"gamma_range must satisfy 0 < lo < hi, got {gamma_range!r}")
    if not isinstance(n_gamma, int) or n_gamma < 2:
        raise ValueError(f"n_gamma must be an integer >= 2, got {n_gamma!r}")
    if not isinstance(n_refine, int) or n_refine < 0:
        raise ValueError(f"n_refine must be an integer >= 0, got {n_refine!r}")
