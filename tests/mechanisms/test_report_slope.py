"""The slope of a seller's curve at its report, and the tangent panel that uses it.

The slope is checked against a Richardson difference of the curve's own re-solves, on
an instance where the model's response to ``Ψ_i`` (the ``∇²F`` solve) is a visible
part of it, so that dropping or mis-signing that part fails the test.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mechanisms import MechanismConfig, UniformPrior, allocate
from mechanisms.payments._payments import payment_job
from mechanisms.payments._quadrature import TANGENT_SHARE, _tangent_panel, integrate
from mechanisms.payments._resolve._local_resolve import local_resolve
from mechanisms.payments._resolve._report_slope import report_slope
from mechanisms.payments._resolve._seller_curve import SellerCurve
from mechanisms.payments._seller_payment import seller_payment
from mechanisms.priors import ExponentialPrior
from tests.mechanisms.conftest import synthetic_logistic

PRIOR = UniformPrior(1e-4, 5e-4)
# η pinned at the top of its range (a small average-ε cap), every weight free, and a
# small μ and m so that the model's response moves the slope by ~1e-3 of itself
TOP = MechanismConfig(gamma=1e3, lam=20.0, mu=1.0, sigma=1e4, k=4, eps_avg_max=1e-4)
# a flat sweep: a large μ makes the weights nearly uniform, so ε_i falls by a small
# fraction of itself over the whole support (more than the trapezoid's bound allows)
# and the curve is a line to rounding
FLAT = MechanismConfig(
    gamma=170.0, lam=5.1, mu=100.0, sigma=7.6e4, k=4.16, eps_avg_max=1.9e-5
)


def _market(cfg: MechanismConfig, m: int = 60, d: int = 5, seed: int = 7):
    rng = np.random.default_rng(seed)
    X, y = synthetic_logistic(rng, m, d)
    costs = rng.uniform(1e-4, 5e-4, size=m)
    base = allocate(X, y, costs, PRIOR, cfg)
    return X, y, costs, base


def _curve(job, i: int) -> SellerCurve:
    return SellerCurve(
        job.prob, job.base, job.prior, i, float(job.reports[i]),
        nodes=job.nodes, hessian=job.hessian,
    )  # fmt: skip


def _richardson(curve: SellerCurve, c: float, step: float) -> float:
    """``2·D(h) − D(2h)`` of forward differences ``D(h) = (ε(c+h) − ε(c))/h``: the
    one-sided derivative with the first-order error ``h·ε''/2`` cancelled."""
    e0 = curve.epsilon(c)
    d1 = (curve.epsilon(c + step) - e0) / step
    d2 = (curve.epsilon(c + 2 * step) - e0) / (2 * step)
    return 2.0 * d1 - d2


def test_slope_at_the_report_equals_a_richardson_difference_of_re_solves() -> None:
    X, y, costs, base = _market(TOP)
    assert base.certified
    assert base.eta == base.profile.grid[-1]
    job = payment_job(X, y, costs, PRIOR, TOP, None, base=base)
    assert job.hessian is not None
    checked = 0
    for i in (0, 7, 30, 57):
        c = float(costs[i])
        slope = report_slope(job.prob, base, job.hessian, PRIOR, i, c)
        assert slope is not None
        fd = _richardson(_curve(job, i), c, 1e-2 * c)
        assert slope == pytest.approx(fd, rel=1e-6, abs=0.0)
        # the model's response matters here: with it removed (a Hessian so large
        # that dw/dΨ_i vanishes) the slope misses the difference by far more
        stiff = report_slope(job.prob, base, 1e12 * job.hessian, PRIOR, i, c)
        assert stiff is not None
        assert abs(stiff - fd) > 1e-4 * abs(fd)
        checked += 1
    assert checked == 4


def test_no_slope_where_eta_is_inside_its_range_or_the_prior_bends_it() -> None:
    inside = TOP.with_(eps_avg_max=10.0, sigma=1.0, gamma=1.0)
    X, y, costs, base = _market(inside)
    grid = base.profile.grid
    assert grid[0] < base.eta < grid[-1]
    job = payment_job(X, y, costs, PRIOR, inside, None, base=base)
    assert report_slope(job.prob, base, job.hessian, PRIOR, 3, float(costs[3])) is None
    # nor without a frozen Hessian
    X, y, costs, base = _market(TOP)
    job = payment_job(X, y, costs, PRIOR, TOP, None, base=base)
    assert report_slope(job.prob, base, None, PRIOR, 3, float(costs[3])) is None


def test_slope_follows_the_prior_through_its_virtual_cost() -> None:
    """Ψ' enters as a factor: under a prior with a non-constant Ψ' the slope still
    matches the re-solves' difference (to 1e-5: the difference's own error, from the
    curvature of ``Ψ``, is ~1e-6 here; dropping the model's response costs 1e-4)."""
    prior = ExponentialPrior(rate=2e3)
    X, y, costs, _ = _market(TOP)
    base = allocate(X, y, costs, prior, TOP)
    job = payment_job(X, y, costs, prior, TOP, None, base=base)
    i = 11
    c = float(costs[i])
    slope = report_slope(job.prob, base, job.hessian, prior, i, c)
    assert slope is not None
    fd = _richardson(_curve(job, i), c, 1e-2 * c)
    assert slope == pytest.approx(fd, rel=1e-5, abs=0.0)


def test_tangent_panel_is_exact_for_a_parabola_and_declines_a_wrong_slope() -> None:
    h, f0, d0, kappa = 0.3, 2.0, -0.5, 1e-7
    f1 = f0 + d0 * h + kappa * h * h
    exact = f0 * h + d0 * h * h / 2 + kappa * h**3 / 3
    value, est = _tangent_panel(h, f0, f1, d0, 1e-5)  # type: ignore[misc]
    assert value == pytest.approx(exact, rel=1e-14)
    # the estimate is the trapezoid's error for that parabola
    assert est == pytest.approx(abs(0.5 * h * (f0 + f1) - exact), rel=1e-6)
    # a slope that disagrees with the chord is not taken
    assert _tangent_panel(h, f0, f1, d0 + 1e-3, 1e-5) is None
    assert TANGENT_SHARE * 1e-5 * abs(exact) < abs(1e-3 * h * h / 6)


def test_quadrature_takes_the_tangent_instead_of_the_midpoint() -> None:
    calls: list[float] = []

    def f(x: float) -> float:
        calls.append(x)
        return 1.0 - 1e-4 * x

    plain = integrate(f, 0.0, 1.0, rule="simpson", monotone=True, rtol=5e-6)
    n_plain = len(set(calls))
    calls.clear()
    with_slope = integrate(
        f, 0.0, 1.0, rule="simpson", monotone=True, rtol=5e-6,
        tangent=lambda lo, hi: -1e-4 if lo == 0.0 else None,
    )  # fmt: skip
    assert with_slope.value == pytest.approx(1.0 - 0.5e-4, rel=1e-14)
    assert plain.value == pytest.approx(with_slope.value, rel=1e-14)
    assert set(calls) == {0.0, 1.0}
    assert n_plain == 3
    calls.clear()
    # a wrong slope costs the midpoint again, and the value stays right
    wrong = integrate(
        f, 0.0, 1.0, rule="simpson", monotone=True, rtol=5e-6,
        tangent=lambda lo, hi: -2e-4,
    )  # fmt: skip
    assert 0.5 in calls
    assert wrong.value == pytest.approx(plain.value, rel=1e-14)


def test_payments_with_the_slope_equal_those_with_the_midpoint(monkeypatch) -> None:
    X, y, costs, base = _market(FLAT, m=200, d=5, seed=3)
    job = payment_job(X, y, costs, PRIOR, FLAT, None, base=base)
    job = dataclasses.replace(job, unverified=frozenset(range(200)))
    sellers = range(0, 200, 13)
    fast = [seller_payment(job, i) for i in sellers]
    monkeypatch.setattr(SellerCurve, "tangent", lambda self, lo, hi: None)
    mid = [seller_payment(job, i) for i in sellers]
    # one re-solve a seller (the support's top), where most needed the midpoint too
    assert all(p.n_solves == 1 for p in fast)
    assert sum(p.n_solves == 2 for p in mid) >= len(mid) // 2
    for p, q in zip(fast, mid, strict=True):
        assert p.payment == pytest.approx(q.payment, rel=1e-9)
        assert p.quad_error <= 1e-5 * p.integral


def test_the_first_re_solve_starts_at_the_first_order_prediction() -> None:
    """The base's model moved by ``(dw/dΨ_i)·ΔΨ_i`` is a start nearer the re-solve's
    answer than the base's own: the same allocation in fewer Newton iterations."""
    X, y, costs, base = _market(FLAT, m=200, seed=3)
    job = payment_job(X, y, costs, PRIOR, FLAT, None, base=base)
    psi_top = float(PRIOR.virtual_cost(PRIOR.high))
    fewer = 0
    sellers = range(0, 200, 25)
    for i in sellers:
        curve = _curve(job, i)
        start = curve._predicted_point(psi_top)
        assert start is not None
        assert not np.array_equal(start[0], base.w)
        prob = job.prob.with_seller_psi(i, psi_top)
        kw = {"nodes": job.nodes, "fit_w": False, "hessian": job.hessian}
        from_base = local_resolve(
            prob, base, start=(base.w, base.weights, base.eta), **kw
        )
        from_pred = local_resolve(prob, base, start=start, **kw)
        assert from_base is not None
        assert from_pred is not None
        assert from_pred.epsilon_total[i] == pytest.approx(
            from_base.epsilon_total[i], rel=1e-9
        )
        assert from_pred.iterations <= from_base.iterations
        fewer += from_pred.iterations < from_base.iterations
        # once another report is evaluated, the curve's own points are nearer
        curve.epsilon(PRIOR.high)
        assert curve._predicted_point(psi_top) is None
    assert fewer >= len(sellers) // 2
