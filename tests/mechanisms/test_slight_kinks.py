"""Slope jumps of a seller's curve that the payment sweep may leave unlocated.

Where another seller joins or leaves the free set, seller ``i``'s ``ε_i`` keeps its
value and changes slope. With thousands of free sellers that change is about ``10⁻⁸``
of the slope, and locating it cost two re-solves. The estimate of the jump
(:func:`mechanisms.payments._resolve._report_slope.kink_slope_change`) is checked
against one-sided Richardson differences of re-solves on either side of located
changes, and the payments that leave such changes unlocated against brute-force
integrals of the same curves.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np
import pytest
from scipy.integrate import simpson

from market.datasets import make_synthetic
from mechanisms import MechanismConfig, UniformPrior, allocate
from mechanisms.payments import _kinks
from mechanisms.payments._critical_cost import find_critical_cost
from mechanisms.payments._payments import PaymentJob, payment_job
from mechanisms.payments._resolve._seller_curve import SellerCurve
from mechanisms.payments._seller_payment import seller_payment

PRIOR = UniformPrior(1e-4, 5e-4)
# draw 17 of `benchmarks/random_configs.py` at seed 1: η pinned at the bottom of its
# range, a large ridge, 6,214 winners of 10⁴, and sellers joining the free set along
# the winners' sweeps
CFG = MechanismConfig(
    gamma=0.04796170607762395,
    lam=496951.2125266324,
    mu=210.6075890029202,
    sigma=0.005100566203315544,
    k=236.2318909377042,
    eps_avg_max=195528.58254960447,
)


@functools.lru_cache(maxsize=1)
def _job() -> PaymentJob:
    data = make_synthetic(10_000, 20, label_noise=0.05, random_state=2)
    base = allocate(data.X, data.y, data.costs, PRIOR, CFG)
    job = payment_job(data.X, data.y, data.costs, PRIOR, CFG, base=base)
    # no cross-checks against full solves: the sweeps compared are the shortcut's
    return dataclasses.replace(job, unverified=frozenset(range(job.prob.m)))


def _curve(job: PaymentJob, i: int) -> SellerCurve:
    return SellerCurve(
        job.prob, job.base, job.prior, i, float(job.reports[i]),
        nodes=job.nodes, hessian=job.hessian,
    )  # fmt: skip


def _one_sided_slope(curve: SellerCurve, x: float, step: float) -> float:
    """``2·D(h) − D(2h)`` of differences ``D(h) = (ε(x+h) − ε(x))/h`` (``step``'s
    sign picks the side)."""
    e0 = curve.epsilon(x)
    d1 = (curve.epsilon(x + step) - e0) / step
    d2 = (curve.epsilon(x + 2 * step) - e0) / (2 * step)
    return 2.0 * d1 - d2


def test_the_estimated_slope_jump_is_the_measured_one_within_its_margin() -> None:
    job = _job()
    winners = np.flatnonzero(job.base.epsilon_total > 0)
    checked = 0
    for i in (int(i) for i in winners[:8]):
        curve = _curve(job, i)
        c = float(job.reports[i])
        crit = find_critical_cost(curve, rtol=1e-8)
        grid = [float(x) for x in np.linspace(c, crit.lo, 21)]
        for x0, x1 in itertools.pairwise(grid):
            if curve.signature(x0) == curve.signature(x1):
                continue
            lo, hi = x0, x1  # the change, to floating resolution
            for _ in range(45):
                mid = 0.5 * (lo + hi)
                if curve.signature(mid) == curve.signature(x0):
                    lo = mid
                else:
                    hi = mid
            step = 0.2 * (x1 - x0)
            left = _one_sided_slope(curve, lo, -step)
            right = _one_sided_slope(curve, hi, step)
            jump = abs(right - left)
            assert jump > 1e-9 * abs(left)  # a kink, small against the slope
            estimate = curve.kink_slope_bound(x0, x1)
            assert estimate is not None
            # the larger of the two ends' estimates: above the jump, not far above
            assert jump <= estimate <= 1.5 * jump
            checked += 1
    assert checked >= 3


def test_no_estimate_for_a_change_of_the_sellers_own_status() -> None:
    job = _job()
    i = int(np.flatnonzero(job.base.epsilon_total > 0)[0])
    curve = _curve(job, i)
    crit = find_critical_cost(curve, rtol=1e-8)
    # seller i is out at the bracket's top: its own status changes there
    assert curve.own_status(crit.hi) != 1
    assert curve.kink_slope_bound(float(job.reports[i]), crit.hi) is None


def test_payments_that_leave_slight_kinks_match_brute_force_integrals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = _job()
    winners = np.flatnonzero(job.base.epsilon_total > 0)
    sellers = [int(i) for i in winners[:: winners.size // 10][:10]]
    left = [seller_payment(job, i) for i in sellers]
    monkeypatch.setattr(_kinks, "_slight", lambda *args: False)
    located = [seller_payment(job, i) for i in sellers]
    monkeypatch.undo()
    for i, p, q in zip(sellers, left, located, strict=True):
        curve = _curve(job, i)
        c = float(job.reports[i])
        crit = find_critical_cost(curve, rtol=1e-10)
        xs = np.linspace(c, crit.lo, 129)
        eps = np.array([curve.epsilon(float(x)) for x in xs])
        tail = 0.5 * (crit.hi - crit.lo) * eps[-1]
        reference = c * eps[0] + simpson(eps, x=xs) + tail
        assert p.payment == pytest.approx(reference, rel=1e-6)
        assert q.payment == pytest.approx(reference, rel=1e-6)
    # the changes left unlocated saved re-solves
    assert sum(p.n_solves for p in left) < 0.8 * sum(q.n_solves for q in located)
