"""Choose ``γ`` for a buyer's budget (spec ``mechanism.md`` §4.3, §6).

The most accurate ``γ`` (validation error of the released model,
:func:`mechanisms.tuning.released_validation_error`) whose total **Myerson** payment,
as paid (each seller's payment rounded **up** to the ledger unit by
:func:`mechanisms.money.payment_units`), fits the budget ``B``: the allocation at a
``γ`` is not budget-constrained in real numbers, so the search keeps only the ``γ``
whose rounded-up total ``Σ_i n_i`` is at most ``⌊B/unit⌋`` — ``Σ paid ≤ B`` holds
exactly in whole units, with no slack for rounding. Payments are typically
decreasing in ``γ`` but this is not assumed: every candidate's total is computed, the
search path is checked for non-monotonicity (reported), and affordability is decided
point by point. The search: a log grid over ``gamma_range``, then bisection in
``log γ`` between neighbouring grid points on opposite sides of the budget.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms.config import MechanismConfig
from mechanisms.money import to_minor
from mechanisms.payments._executors import default_workers
from mechanisms.payments._payments import (
    PaymentResult,
    myerson_payments,
)
from mechanisms.priors import CostPrior
from mechanisms.result import Allocation
from mechanisms.tuning._validation_error import Release, released_validation_error

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class GammaPoint:
    """One evaluated ``γ``: Myerson total (raw and as paid, rounded up), the expected-payment
    diagnostic ``Σ Ψ_i u(ε_i)``, validation error, and affordability."""

    gamma: float
    total: float
    total_paid: float
    expected_total: float
    validation_error: float
    affordable: bool
    payments: PaymentResult = field(repr=False)


@dataclass(frozen=True, eq=False)
class GammaChoice:
    """Result of :func:`choose_gamma`.

    ``status`` is ``"ok"`` or ``"nothing_affordable"`` (then ``gamma``, ``allocation``
    and ``payments`` are ``None`` and ``total_payment`` is the cheapest rounded total
    seen). ``payments`` are the amounts paid (rounded up to ``unit``); ``path`` lists
    ``(γ, Myerson total, validation error, expected payment)`` in increasing ``γ``;
    ``non_monotone`` the neighbouring pairs ``(γ₁, γ₂, total₁, total₂)`` with
    ``γ₁ < γ₂`` but ``total₁ < total₂``.
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
    n_gamma: int = 7,
    n_refine: int = 3,
    n_draws: int = 15,
    unit: float | str = 0.01,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
    random_state: int | np.random.Generator | None = None,
    release: Release | None = None,
) -> GammaChoice:
    """The most accurate affordable ``γ`` on ``gamma_range`` (spec §4.3).

    Parameters
    ----------
    budget : float
        ``B ≥ 0``; a point is affordable iff ``Σ_i n_i ≤ ⌊B/unit⌋``, ``n_i`` the
        units paid (``t_i`` rounded up, :func:`mechanisms.money.payment_units`).
    X_val, y_val : array-like
        Public validation data.
    gamma_range : (float, float)
        ``0 < lo < hi``; ``n_gamma`` log-spaced points, then ``n_refine`` bisections in
        ``log γ`` of every bracket where affordability changes.
    n_draws : int
        Noise draws per validation error (common random numbers across ``γ``).
    unit : float or str
        The ledger unit payments are rounded **up** to.
    executor, progress
        Where sellers' payments run; ``progress(done, total)`` counts ``γ`` points.
    release : callable, optional
        ``release(X, y, allocation, rng) -> model with predict``: the private release
        scored on the validation set (default: objective perturbation for the logistic
        loss, :func:`mechanisms.tuning.released_validation_error`).
    """
    _check_args(budget, gamma_range, n_gamma, n_refine)
    seed = int(np.random.default_rng(random_state).integers(2**63 - 1))
    pool = ProcessPoolExecutor(default_workers()) if executor is None else executor

    def evaluate(g: float) -> GammaPoint:
        c = cfg.with_(gamma=float(g))
        pay = myerson_payments(X, y, costs, prior, c, eps_max, executor=pool)
        err = released_validation_error(
            X,
            y,
            pay.allocation,
            X_val,
            y_val,
            n_draws=n_draws,
            random_state=seed,
            release=release,
        )
        # Affordability on the amounts paid: rounded up (mechanisms.money).
        n_paid = int(pay.units(unit).sum())
        paid = float(pay.paid(unit).sum())
        cap = to_minor(float(budget), unit)
        return GammaPoint(
            float(g),
            pay.total,
            paid,
            float(pay.expected_payments.sum()),
            err,
            n_paid <= cap,
            pay,
        )

    try:
        points = _search(evaluate, gamma_range, n_gamma, n_refine, progress)
    finally:
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)
    return _choose(points, budget, unit)


def _search(
    evaluate: Callable[[float], GammaPoint],
    gamma_range: tuple[float, float],
    n_gamma: int,
    n_refine: int,
    progress: Callable[[int, int], None] | None,
) -> list[GammaPoint]:
    grid = np.geomspace(gamma_range[0], gamma_range[1], n_gamma)
    planned = n_gamma
    points: list[GammaPoint] = []
    for g in grid:
        points.append(evaluate(float(g)))
        if progress is not None:
            progress(len(points), planned)
    for _ in range(n_refine):
        pts = sorted(points, key=lambda p: p.gamma)
        mids = [
            float(np.sqrt(a.gamma * b.gamma))
            for a, b in itertools.pairwise(pts)
            if a.affordable != b.affordable
        ]
        planned += len(mids)
        for g in mids:
            points.append(evaluate(g))
            if progress is not None:
                progress(len(points), planned)
    return sorted(points, key=lambda p: p.gamma)


def _choose(points: list[GammaPoint], budget: float, unit: float | str) -> GammaChoice:
    path = [(p.gamma, p.total, p.validation_error, p.expected_total) for p in points]
    non_mono = [
        (a.gamma, b.gamma, a.total, b.total)
        for a, b in itertools.pairwise(points)
        if b.total > a.total
    ]
    ok = [p for p in points if p.affordable]
    best = min(
        ok, key=lambda p: (p.validation_error, p.total_paid, p.gamma), default=None
    )
    if best is None:
        return GammaChoice(
            status="nothing_affordable",
            gamma=None,
            allocation=None,
            payments=None,
            validation_error=None,
            total_payment=min(p.total_paid for p in points),
            path=path,
            points=points,
            non_monotone=non_mono,
            budget=budget,
            unit=unit,
        )
    return GammaChoice(
        status="ok",
        gamma=best.gamma,
        allocation=best.payments.allocation,
        payments=best.payments.paid(unit),
        validation_error=best.validation_error,
        total_payment=best.total_paid,
        path=path,
        points=points,
        non_monotone=non_mono,
        budget=budget,
        unit=unit,
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
