"""Building blocks of the payments: quadrature, the certified shortcut re-solve, the
critical-cost estimate and the monotonicity check."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad as scipy_quad

from mechanisms import allocate
from mechanisms.allocation._eta_search import solve_allocation
from mechanisms.payments import _quadrature as qs
from mechanisms.payments._critical_cost import (
    SellerCurve,
    find_critical_cost,
    first_order_estimate,
    invert_virtual_cost,
)
from mechanisms.payments._kinks import cap_exit
from mechanisms.payments._payments import payment_job
from mechanisms.payments._quadrature import integrate
from mechanisms.payments._resolve._local_resolve import local_resolve
from mechanisms.payments._seller_payment import seller_payment
from mechanisms.priors import (
    ExponentialPrior,
    GaussianMixturePrior,
    UniformPrior,
    ensure_regular,
)
from tests.conftest import SEED
from tests.mechanisms.test_payments_instances import broad_instance, small_instance


def test_gauss_kronrod_exactness() -> None:
    calls: list[float] = []

    def f(x: float) -> float:
        calls.append(x)
        return x**13

    # G7 and K15 are both exact to degree 13: one panel, zero error estimate.
    r = integrate(f, 0.0, 1.0, rtol=1e-13)
    assert r.value == pytest.approx(1 / 14, rel=1e-14)
    assert r.n_evals == len(calls) == 15
    # K15 alone is exact to degree 22: the first panel's value already is.
    r = integrate(lambda x: x**22, 0.0, 1.0, rtol=1e-13, max_evals=15)
    assert r.value == pytest.approx(1 / 23, rel=1e-13)


def test_adaptive_quadrature_resolves_a_kink_and_honours_breakpoints() -> None:
    f = lambda x: max(0.0, 1.0 - x) * math.exp(x)  # noqa: E731
    exact = math.e - 2.0  # ∫_0^1 (1 − x) e^x dx
    r = integrate(f, 0.0, 1.7, rtol=1e-10)
    assert r.converged
    assert r.value == pytest.approx(exact, rel=1e-9)
    with_bp = integrate(f, 0.0, 1.7, breakpoints=[1.0], rtol=1e-10)
    assert with_bp.value == pytest.approx(exact, rel=1e-12)
    assert with_bp.n_evals == 30 < r.n_evals
    back = integrate(f, 1.7, 0.0, breakpoints=[1.0])
    assert back.value == pytest.approx(-exact, rel=1e-12)


def test_quadrature_reports_an_exhausted_budget() -> None:
    step = lambda x: 1.0 if x > 1 / 3 else 0.0  # noqa: E731
    r = integrate(step, 0.0, 1.0, rtol=1e-14, max_evals=100)
    assert not r.converged
    assert r.n_evals <= 100
    assert abs(r.value - 2 / 3) <= r.error + 1e-15
    with pytest.raises(ValueError, match="finite"):
        integrate(step, 0.0, math.inf)


def test_simpson_richardson_exactness_and_nested_nodes() -> None:
    calls: list[float] = []

    def f(x: float) -> float:
        calls.append(x)
        return x**3 - 2.0 * x + 1.0

    # Simpson is exact to degree 3, so S₁ = S₂ on a cubic: one panel of 5 nodes,
    # ends included, each evaluated once, zero error estimate.
    r = integrate(f, 0.0, 2.0, rtol=1e-14, rule="simpson")
    assert r.value == pytest.approx(4.0 - 4.0 + 2.0, rel=1e-14)
    assert r.error == pytest.approx(0.0, abs=1e-15)
    assert r.n_evals == len(calls) == 5
    assert sorted(calls) == [0.0, 0.5, 1.0, 1.5, 2.0]
    # The Richardson (Boole) value is exact to degree 5 from those 5 nodes alone,
    # although the estimate (the error of S₂) is not zero.
    r = integrate(lambda x: x**5, 0.0, 1.0, rtol=1e-14, rule="simpson", max_evals=5)
    assert r.value == pytest.approx(1 / 6, rel=1e-14)
    assert r.error > 0
    assert not r.converged
    # A child panel reuses three of its parent's five nodes: 5 + 2·2 = 9 per split.
    r = integrate(lambda x: x**6, 0.0, 1.0, rtol=1e-14, rule="simpson", max_evals=9)
    assert r.n_evals == 9
    assert r.n_intervals == 2
    r = integrate(lambda x: x**6, 0.0, 1.0, rtol=1e-10, rule="simpson")
    assert r.converged
    assert r.value == pytest.approx(1 / 7, rel=1e-10)


def test_a_flat_monotone_piece_is_taken_from_three_nodes() -> None:
    """A monotone piece whose midpoint lies (nearly) on the chord is taken from its
    ends and midpoint: Simpson's value, ``|T₂ − T₁|/3`` as its error. On a line
    that is exact; on a nearly flat, slightly curved payment-like curve it is
    within the estimate; where the curvature makes the estimate exceed
    ``FLAT_SHARE·rtol`` the five-node panels run as before."""
    calls: list[float] = []

    def line(x: float) -> float:
        calls.append(x)
        return 2.0 - 0.5 * x

    r = integrate(line, 0.0, 2.0, rtol=1e-8, rule="simpson", monotone=True)
    assert r.value == 3.0
    assert r.n_evals == len(calls) == 3
    assert sorted(calls) == [0.0, 1.0, 2.0]

    def flat(x: float) -> float:  # falls by 1e-4 relative, with curvature
        return 1.0 - 1e-4 * x - 1e-6 * x * x

    exact = 2.0 - 1e-4 * 2.0 - 1e-6 * 8.0 / 3.0
    r = integrate(flat, 0.0, 2.0, rtol=1e-5, rule="simpson", monotone=True)
    assert r.n_evals == 3
    assert r.converged
    assert abs(r.value - exact) <= r.error <= qs.FLAT_SHARE * 1e-5 * exact
    # the same curve asked for far less error: its estimate is over the share
    tight = integrate(flat, 0.0, 2.0, rtol=1e-9, rule="simpson", monotone=True)
    assert tight.n_evals > 3
    assert tight.value == pytest.approx(exact, rel=1e-12)
    # without monotone=True nothing changes: five nodes
    plain = integrate(flat, 0.0, 2.0, rtol=1e-5, rule="simpson")
    assert plain.n_evals == 5


ReleaseCurve = tuple[Callable[[float], float], Callable[[float], tuple[float, float]]]


def _release_curve(kappa: float, alpha: float, s_star: float) -> ReleaseCurve:
    """``(ε, s ↦ (η·a, a))`` with ``ε(s) = η(s)a(s) + 2·ln(1 + a(s)/κ)``,
    ``a = α(s* − s)`` and a smooth ``η``: the shape of a payment curve near the
    critical cost at a small ``λ``."""

    def parts(s: float) -> tuple[float, float]:
        a = alpha * (s_star - s)
        return (3.0 + 0.5 * s) * a, a

    def f(s: float) -> float:
        p, a = parts(s)
        return p + 2.0 * math.log1p(a / kappa)

    return f, parts


def _release_integral(kappa: float, alpha: float, s_star: float, b: float) -> float:
    """``∫₀ᵇ ε`` of :func:`_release_curve` in closed form."""

    def big_g(phi: float) -> float:  # ∫ ln(1 + φ/κ) dφ
        return (kappa + phi) * math.log1p(phi / kappa) - phi

    log_part = 2.0 * (big_g(alpha * s_star) - big_g(alpha * (s_star - b))) / alpha
    # ∫₀ᵇ (3 + s/2)·α(s* − s) ds
    poly = alpha * (
        3.0 * (s_star * b - b * b / 2.0) + 0.5 * (s_star * b * b / 2.0 - b**3 / 3.0)
    )
    return log_part + poly


def _monotone_simpson(
    f: Callable[[float], float],
    b: float,
    rtol: float,
    parts: Callable[[float], tuple[float, float] | None] | None = None,
    kappa: float = 0.0,
) -> qs.QuadratureResult:
    """``∫₀ᵇ f`` by the payments' rule (Simpson panels, monotone), split by ``parts``
    where given."""
    return integrate(
        f, 0.0, b, rtol=rtol, rule="simpson", monotone=True,
        curvature_split=parts, curvature_scale=kappa,
    )  # fmt: skip


def test_curvature_split_integrates_the_release_curve_with_few_nodes() -> None:
    """Near a critical cost at a small ``λ`` the release's ``ln(1 + a/κ)`` turns over a
    stretch ``κ/α`` of reports 10⁻⁵ of the sweep wide: plain panels bisect down to it,
    panels valued through ``(η·a, a)`` do not. Both meet the tolerance against the
    closed form; the split needs a fraction of the evaluations."""
    kappa, alpha, s_star = 2.6e-5, 1.0, 1.0
    b = s_star - 1e-9
    exact = _release_integral(kappa, alpha, s_star, b)
    f, parts = _release_curve(kappa, alpha, s_star)
    plain = _monotone_simpson(f, b, 1e-6)
    split = _monotone_simpson(f, b, 1e-6, parts, kappa)
    assert plain.converged
    assert split.converged
    assert abs(plain.value - exact) <= 1e-6 * exact
    assert abs(split.value - exact) <= max(split.error, 1e-12 * exact)
    assert split.error <= 1e-6 * exact
    assert 3 * split.n_evals <= plain.n_evals
    # far from the singularity the logarithm is smooth: nothing to gain, nothing lost
    big = _monotone_simpson(f, 0.5, 1e-6)
    big_split = _monotone_simpson(f, 0.5, 1e-6, parts, kappa)
    exact_half = _release_integral(kappa, alpha, s_star, 0.5)
    assert big_split.n_evals <= big.n_evals
    assert abs(big_split.value - exact_half) <= 1e-6 * exact_half


def test_curvature_split_estimates_its_error_on_a_curved_weight() -> None:
    """A weight that no polynomial interpolant reproduces (``a = (s* − s)e^{−s}``,
    ``η`` varying): the panels must be refined as the tolerance tightens, and the
    estimate must cover the error against an accurate reference
    (``scipy.integrate.quad``), with fewer evaluations than the plain panels."""
    kappa, s_star, b = 2.6e-5, 1.0, 1.0 - 1e-9

    def parts(s: float) -> tuple[float, float]:
        a = (s_star - s) * math.exp(-s)
        return (3.0 - 0.5 * s) * a, a

    def f(s: float) -> float:
        p, a = parts(s)
        return p + 2.0 * math.log1p(a / kappa)

    ref = scipy_quad(
        f, 0.0, b, points=[0.9, 0.99, 0.999, 0.9999], epsrel=1e-13, limit=500
    )[0]
    plain = _monotone_simpson(f, b, 1e-7)
    evals = []
    for rtol in (1e-5, 1e-7, 1e-9):
        r = _monotone_simpson(f, b, rtol, parts, kappa)
        assert r.converged
        assert abs(r.value - ref) <= r.error <= rtol * ref
        evals.append(r.n_evals)
        if rtol == 1e-7:
            assert r.n_evals < plain.n_evals
    assert evals[0] < evals[1] < evals[2]  # refined, not exact on one panel


@pytest.mark.parametrize("bend", [0.0, 0.05, -0.3, 2.0])
def test_curvature_split_estimate_covers_a_smooth_weight(bend: float) -> None:
    """Weights falling to 0 at ``s*`` that bend one way, the other, or both (``bend``
    scales a quartic term): the estimate (leave-one-out cubics where the parts look
    smooth) covers the error against an accurate reference at each tolerance."""
    kappa, s_star, b = 2.6e-5, 1.0, 1.0 - 1e-9

    def parts(s: float) -> tuple[float, float]:
        a = (s_star - s) * (1.0 + bend * (s - 0.4) ** 2 * s)
        return (3.0 + s) * a, a

    def f(s: float) -> float:
        p, a = parts(s)
        return p + 2.0 * math.log1p(a / kappa)

    ref = scipy_quad(f, 0.0, b, points=[0.99, 0.999, 0.9999], epsrel=1e-13, limit=500)[
        0
    ]
    for rtol in (1e-5, 1e-7):
        r = _monotone_simpson(f, b, rtol, parts, kappa)
        assert r.converged
        assert abs(r.value - ref) <= max(r.error, 1e-12 * ref)
        assert r.error <= rtol * ref


def test_curvature_split_estimate_across_a_hidden_kink() -> None:
    """One panel across a slope jump of the weight that is not a breakpoint (the
    sweeps split at the active-set changes they locate; a jump they miss stays
    inside): the estimate falls back to ``|I₅ − I₃|`` where the parts' fourth
    differences show the jump, and is never under a tenth of it, so over kinks at
    49 places and three sizes it reads the error to within a factor 8 and covers it
    for most (five samples cannot tell a jump near a third of the panel from a
    cubic; ``|I₅ − I₃|`` itself reads a jump at 0.28 of the panel 7.5 times too
    small)."""
    kappa = 2.6e-5
    t = np.linspace(0.0, 1.0, 5)
    ratios = []
    for where in np.linspace(0.02, 0.98, 49):
        for jump in (0.02, 0.3, 1.0):

            def weight(s: float, where: float = where, jump: float = jump) -> float:
                return (1.0 - s) * (1.0 + 0.05 * s) + jump * max(where - s, 0.0)

            xs = list(t * (1.0 - 1e-9))
            a = [weight(x) for x in xs]
            p = [3.0 * v for v in a]
            value, est = qs._curvature_panel(xs, p, a, kappa)
            ref = scipy_quad(
                lambda s, w=weight: 3.0 * w(s) + 2.0 * math.log1p(w(s) / kappa),
                0.0, xs[-1], points=[where], epsrel=1e-13, limit=500,
            )[0]  # fmt: skip
            ratios.append(abs(value - ref) / est)
    assert max(ratios) <= 8.0, max(ratios)
    assert np.mean(np.array(ratios) <= 1.0) >= 0.75


def test_curvature_integral_is_exact_on_a_linear_weight() -> None:
    """The graded Gauss rule of ``_curvature_integral`` on a linear ``a`` falling to 0
    at a panel's end: within 1e-11 of the closed form, at either end."""
    kappa = 1e-6

    def closed(a0: float, a1: float) -> float:
        def big_g(phi: float) -> float:
            return (kappa + phi) * math.log1p(phi / kappa) - phi

        return 2.0 * (big_g(a1) - big_g(a0)) / (a1 - a0)

    t = [0.0, 0.25, 0.5, 0.75, 1.0]
    for a0, a1 in ((1.0, 0.0), (0.0, 2.0), (0.3, 0.7)):
        a = [a0 + (a1 - a0) * x for x in t]
        got = qs._curvature_integral(a, kappa)
        assert got == pytest.approx(closed(a0, a1), rel=1e-11)


def test_curvature_split_is_ignored_where_its_parts_do_not_match() -> None:
    """Parts that do not reproduce ``f`` (a node valued by another formula) are not
    used: the integral is the plain one, node for node; a bad scale is refused."""
    kappa, alpha, s_star = 2.6e-5, 1.0, 1.0
    f, parts = _release_curve(kappa, alpha, s_star)

    def off(s: float) -> tuple[float, float]:
        p, a = parts(s)
        return p * (1.0 + 1e-6), a

    def unknown(s: float) -> None:
        return None

    plain = _monotone_simpson(f, 0.9, 1e-6)
    for split in (off, unknown):
        r = _monotone_simpson(f, 0.9, 1e-6, split, kappa)
        assert (r.value, r.error, r.n_evals) == (
            plain.value,
            plain.error,
            plain.n_evals,
        )
    with pytest.raises(ValueError, match="curvature_scale"):
        integrate(f, 0.0, 0.9, curvature_split=parts, curvature_scale=0.0)
    with pytest.raises(ValueError, match="curvature_split"):
        integrate(f, 0.0, 0.9, curvature_split=parts, curvature_scale=kappa)


def test_three_node_estimate_rejects_a_bent_panel() -> None:
    """``_flat_panel`` declines a panel whose second difference is above the share,
    and its estimate is the trapezoid's Richardson error ``(h/12)|f₀ − 2f₁ + f₂|``."""
    assert qs._flat_panel(2.0, 2.0, 1.5, 1.0, 1e-5) == (3.0, 0.0)
    v = qs._flat_panel(1.0, 1.0, 0.6, 0.1, 1e-5)  # bent: |Δ²| = 0.1
    assert v is None
    got = qs._flat_panel(1.0, 1.0, 0.5 + 1e-9, 0.0, 1e-5)
    assert got is not None
    assert got[1] == pytest.approx(1.0 / 12.0 * 2e-9, rel=1e-6)
    assert got[0] == pytest.approx(1.0 / 6.0 * (1.0 + 2.0 + 4e-9), rel=1e-15)


def test_simpson_resolves_a_kink_and_reports_an_exhausted_budget() -> None:
    f = lambda x: max(0.0, 1.0 - x) * math.exp(x)  # noqa: E731
    exact = math.e - 2.0
    r = integrate(f, 0.0, 1.7, rtol=1e-9, rule="simpson")
    assert r.converged
    assert r.value == pytest.approx(exact, rel=1e-8)
    with_bp = integrate(f, 0.0, 1.7, breakpoints=[1.0], rtol=1e-9, rule="simpson")
    assert with_bp.value == pytest.approx(exact, rel=1e-9)
    assert with_bp.n_evals < r.n_evals
    step = lambda x: 1.0 if x > 1 / 3 else 0.0  # noqa: E731
    r = integrate(step, 0.0, 1.0, rtol=1e-14, max_evals=60, rule="simpson")
    assert not r.converged
    assert r.n_evals <= 60
    assert abs(r.value - 2 / 3) <= 10 * r.error + 1e-15
    with pytest.raises(ValueError, match="rule"):
        integrate(step, 0.0, 1.0, rule="trapezoid")


def test_invert_virtual_cost() -> None:
    assert invert_virtual_cost(UniformPrior(0.0, 1.0), 1.2, low=0.1) == pytest.approx(
        0.6, abs=1e-12
    )
    assert invert_virtual_cost(UniformPrior(0.0, 1.0), 2.5, low=0.1) is None
    e = ExponentialPrior(2.0)  # Ψ(c) = c + (e^{2c} − 1)/2
    s = invert_virtual_cost(e, 50.0, low=0.0)
    assert s is not None
    assert float(e.virtual_cost(np.array([s]))[0]) == pytest.approx(50.0, rel=1e-9)


def test_invert_virtual_cost_is_the_first_point_reaching_the_target() -> None:
    """On an ironed bimodal prior (flat stretches of ``Ψ̄``, where the smallest
    ``s`` matters) and a smooth one: ``Ψ̄(s) ≥ target`` and a point ``10⁻¹²``
    relative below ``s`` is still under it, for targets across the range."""
    ironed = ensure_regular(
        GaussianMixturePrior((0.5, 0.5), (0.2, 0.8), (0.05, 0.05), 0.0, 1.0)
    )
    for prior in (ironed, ExponentialPrior(2.0)):
        top = 1.0 if np.isfinite(prior.high) else 3.0
        values = prior.virtual_cost(np.linspace(0.01, top, 40))
        for target in np.linspace(values[0], values[-1], 25)[1:]:
            s = invert_virtual_cost(prior, float(target), low=0.01)
            assert s is not None
            assert prior.virtual_cost(s) >= target
            assert prior.virtual_cost(s - 1e-12 * max(1.0, s)) < target


@pytest.fixture(scope="module")
def job():
    ins = small_instance(np.random.default_rng(SEED), m=5)
    return payment_job(ins.X, ins.y, ins.costs, ins.prior, ins.cfg)


def test_shortcut_declines_on_an_uncertified_base() -> None:
    # Issue 9: with λ ≤ λ_conv the unrestricted search's base is only a KKT point
    # (status "local"); the shortcut's cell argument cannot show it equals the full
    # search, so it declines.
    ins = small_instance(np.random.default_rng(SEED), m=5)
    cfg = ins.cfg.with_(certify="report")
    job = payment_job(ins.X, ins.y, ins.costs, ins.prior, cfg)
    assert str(job.base.status) == "local"
    i = int(np.argmax(job.base.epsilon_total))
    for s in np.linspace(float(job.reports[i]), 1.0, 5):
        psi = job.prob.psi.copy()
        psi[i] = 2 * s  # U[0, 1]
        assert local_resolve(dataclasses.replace(job.prob, psi=psi), job.base) is None


def test_certified_shortcut_equals_the_full_search() -> None:
    ins = small_instance(np.random.default_rng(SEED), m=5)
    cfg = ins.cfg.with_(certify="raise_lambda")
    job = payment_job(ins.X, ins.y, ins.costs, ins.prior, cfg)
    assert job.base.certified
    i = int(np.argmax(job.base.epsilon_total))
    c = float(job.reports[i])
    n_certified = 0
    for s in np.linspace(c, 1.0, 10):
        psi = job.prob.psi.copy()
        psi[i] = 2 * s  # U[0, 1]
        prob = dataclasses.replace(job.prob, psi=psi)
        full = solve_allocation(prob)  # cold: what allocate returns
        fast = local_resolve(prob, job.base)
        if fast is None:
            continue
        n_certified += 1
        assert fast.certified
        assert full.certified
        # Both are the global optimum over the range: the same point, not just as good.
        np.testing.assert_allclose(
            fast.epsilon_total, full.epsilon_total, rtol=1e-6, atol=1e-8
        )
        assert fast.objective == pytest.approx(full.objective, rel=1e-8)
    assert n_certified >= 2  # the others decline (cell changed): full search
    lowered = job.prob.psi.copy()
    lowered[i] *= 0.5
    assert local_resolve(dataclasses.replace(job.prob, psi=lowered), job.base) is None


def test_first_order_estimate_is_near_the_true_cut_off(job) -> None:
    i = int(np.argmax(job.base.epsilon_total))
    curve = SellerCurve(job.prob, job.base, job.prior, i, float(job.reports[i]))
    est = first_order_estimate(curve)
    assert est is not None
    assert est > job.reports[i]
    # Scan the true curve with full solves: the estimate lies within 50% of s*.
    s = np.linspace(job.reports[i], 1.0, 25)
    eps = [curve.epsilon(v) for v in s]
    first_zero = next(v for v, e in zip(s, eps, strict=True) if e == 0.0)
    assert abs(est - first_zero) <= 0.5 * (first_zero - job.reports[i])


def test_monotonicity_violation_of_a_recorded_sweep(job) -> None:
    curve = SellerCurve(job.prob, job.base, job.prior, 0, float(job.reports[0]))
    curve.cache.clear()
    curve.cache.update({0.1: 3.0, 0.2: 2.0, 0.3: 2.5, 0.4: 1.0, 0.5: 2.2})
    assert curve.monotonicity_violation() == pytest.approx(1.2)  # 1.0 → 2.2
    curve.cache.clear()
    curve.cache.update({0.1: 3.0, 0.2: 3.0, 0.3: 0.0})
    assert curve.monotonicity_violation() == 0.0


def test_cap_exit_is_where_a_capped_winner_leaves_its_cap() -> None:
    ins = small_instance(np.random.default_rng(0), m=12)
    job = payment_job(ins.X, ins.y, ins.costs, ins.prior, ins.cfg)
    caps = job.prob.caps(job.base.eta)
    i = int(np.flatnonzero(job.base.weights >= caps * (1 - 1e-9))[0])
    curve = SellerCurve(job.prob, job.base, job.prior, i, float(job.reports[i]))
    crit = find_critical_cost(curve, rtol=1e-5)
    c = curve.report
    bracket = cap_exit(curve, c, crit.lo)
    assert bracket is not None
    z0, z1 = bracket
    width = crit.lo - c
    assert c < z0 < z1 < crit.lo
    assert z1 - z0 <= 1e-3 * width
    # both ends were evaluated: capped at z0, free at z1
    assert curve.own_status(z0) == 2
    assert curve.own_status(z1) == 1
    z = 0.5 * (z0 + z1)
    # Independent check with cold solves: capped just below z, below the cap above.

    cap = ins.cfg.k / len(ins.costs)  # k/m: no ε_max caps in this instance

    def weight(s: float) -> float:
        costs = ins.costs.copy()
        costs[i] = s
        return float(allocate(ins.X, ins.y, costs, ins.prior, ins.cfg).weights[i])

    assert weight(z - 2e-3 * width) == pytest.approx(cap, rel=1e-9)
    assert 0.0 < weight(z + 2e-3 * width) < cap * (1 - 1e-6)
    assert cap_exit(curve, crit.lo, crit.lo) is None  # not capped there


def _strict_linear_programme_job(m: int = 30, mu: float = 0.0):
    """Strict mode with ``μ = 0``: the a-step fills the smallest virtual costs up to
    their caps, so a winner's ``ε_i`` jumps (cap → the partly filled seller → 0)
    where its report passes another seller's (with a small ``μ > 0``: ramps there,
    narrower than the gaps between the reports)."""
    ins = broad_instance(np.random.default_rng(3), m=m)
    cfg = dataclasses.replace(ins.cfg, mu=mu, mode="strict")
    return ins, cfg, payment_job(ins.X, ins.y, ins.costs, ins.prior, cfg)


def test_strict_linear_programme_critical_cost_is_bracketed_at_another_report() -> None:
    ins, cfg, job = _strict_linear_programme_job()
    winners = np.flatnonzero(job.base.epsilon_total > 0)
    assert winners.size >= 4
    for i in winners[:4]:
        i = int(i)
        curve = SellerCurve(
            job.prob, job.base, job.prior, i, float(job.reports[i]),
            reports=job.reports,
        )  # fmt: skip
        crit = find_critical_cost(curve, rtol=2.5e-6)
        others = np.delete(ins.costs, i)
        # a jump to 0 where the report passes another seller's, bracketed tightly
        assert np.any((others >= crit.lo) & (others <= crit.hi))
        assert crit.hi - crit.lo <= 1e-5 * (crit.hi - curve.report)
        # bisecting a jump to that width takes about 17 re-solves
        assert curve.n_solves <= 10
        # independent cold solves at both ends
        costs = ins.costs.copy()
        costs[i] = crit.lo
        assert allocate(ins.X, ins.y, costs, ins.prior, cfg).epsilon_total[i] > 0.0
        costs[i] = crit.hi
        assert allocate(ins.X, ins.y, costs, ins.prior, cfg).epsilon_total[i] == 0.0


@pytest.mark.parametrize(("mu", "share"), [(0.0, 0.5), (1e-5, 0.9)])
def test_strict_linear_programme_payments_agree_with_bisection_in_fewer_solves(
    monkeypatch: pytest.MonkeyPatch, mu: float, share: float
) -> None:
    """The crossing search only places re-solves: the payments equal those of the
    bisection it replaces (no crossings), within the payments' tolerance, and of a
    dense trapezoid of cold solves split at the other reports. At ``μ = 0`` it
    takes under half the re-solves; at ``μ = 10⁻⁵`` (ramps of about 10⁻⁸ in the
    report, gaps of 10⁻⁵) under 90 % (measured: 221 against 294)."""
    ins, cfg, job = _strict_linear_programme_job(mu=mu)
    winners = [int(i) for i in np.flatnonzero(job.base.epsilon_total > 0)]
    curve = SellerCurve(
        job.prob, job.base, job.prior, winners[0], float(job.reports[winners[0]]),
        reports=job.reports,
    )  # fmt: skip
    assert curve.crossings(float(ins.prior.low), float(ins.prior.high)).size
    fast = [seller_payment(job, i) for i in winners]
    monkeypatch.setattr(SellerCurve, "crossings", lambda self, lo, hi: np.empty(0))
    plain = [seller_payment(job, i) for i in winners]
    for a, b in zip(fast, plain, strict=True):
        assert a.payment == pytest.approx(b.payment, rel=0, abs=2e-5 * b.integral)
    assert sum(a.n_solves for a in fast) < share * sum(b.n_solves for b in plain)
    if mu > 0.0:
        return  # ramps 10⁻⁸ wide: a trapezoid between the reports would miss them
    # brute force for the best-paid winner: cold solves, 30 per piece between the
    # other reports (nudged off the ties), up to where ε_i vanishes
    k = int(np.argmax([a.payment for a in fast]))
    i, c = winners[k], float(job.reports[winners[k]])

    def eps(s: float) -> float:
        costs = ins.costs.copy()
        costs[i] = s
        return float(allocate(ins.X, ins.y, costs, ins.prior, cfg).epsilon_total[i])

    marks = sorted(float(v) for v in np.delete(ins.costs, i) if v > c)
    ends = [c, *marks, float(ins.prior.high)]
    total = c * eps(c)
    for a, b in itertools.pairwise(ends):
        nudge = 1e-9 * (b - a)
        s = np.linspace(a + nudge, b - nudge, 30)
        e = np.array([eps(v) for v in s])
        total += float(np.sum(0.5 * (e[1:] + e[:-1]) * np.diff(s)))
        if e[-1] == 0.0:
            break
    assert fast[k].payment == pytest.approx(total, rel=1e-4)


def test_payment_split_at_the_cap_exit_matches_a_plain_tight_quadrature() -> None:
    ins = small_instance(np.random.default_rng(0), m=12)
    job = payment_job(ins.X, ins.y, ins.costs, ins.prior, ins.cfg)
    caps = job.prob.caps(job.base.eta)
    i = int(np.flatnonzero(job.base.weights >= caps * (1 - 1e-9))[0])
    split = seller_payment(job, i)
    # Gauss–Kronrod (7, 15) without the kink, to a tight tolerance: an independent
    # rule and partition of the same integral.
    curve = SellerCurve(job.prob, job.base, job.prior, i, float(job.reports[i]))
    crit = find_critical_cost(curve, rtol=1e-9)
    plain = integrate(curve.u, curve.report, crit.lo, rtol=1e-9, max_evals=3000)
    tail = 0.5 * (crit.hi - crit.lo) * curve.u(crit.lo)
    reference = curve.report * curve.u(curve.report) + plain.value + tail
    assert split.payment == pytest.approx(reference, rel=2e-5)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.1, 3.0),  # slope scale
    st.floats(0.05, 0.95),  # kink position as a fraction of [a, b]
    st.floats(-2.0, 2.0),  # curvature
)
def test_simpson_agrees_with_scipy_quad_across_a_kink(
    k: float, frac: float, q: float
) -> None:
    """A payment-like integrand: smooth, decreasing, one kink, a zero tail.

    Asked for 1e-8, the adaptive estimate can still be fooled where a kink's
    contributions to ``S₂ − S₁`` cancel: over 20,000 random cases of this family
    Simpson–Richardson was off by more than 1e-6 (relative) 11 times, at worst
    2.9e-6; Gauss–Kronrod (3, 7) 2,058 times, at worst 5.6e-4, and (7, 15) 167 times,
    at worst 5.0e-5, with 3–5× the evaluations. The payments ask for 1e-5, so the
    check is against that.
    """
    a, b = 0.2, 1.0
    kink = a + frac * (b - a)

    def f(x: float) -> float:
        base = math.exp(-k * x) + q * 0.1 * x * x
        return max(0.0, base - (x - kink) * 2.0 if x > kink else base)

    ref, _ = scipy_quad(f, a, b, points=[kink], epsabs=1e-13, epsrel=1e-12, limit=200)
    r = integrate(f, a, b, rtol=1e-8, max_evals=3000, rule="simpson")
    assert r.converged
    assert r.value == pytest.approx(ref, rel=1e-5, abs=1e-10)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.1, 3.0),  # slope scale
    st.floats(0.05, 0.95),  # ramp position as a fraction of [a, b]
    st.floats(-7.0, -2.0),  # log10 of the ramp's width relative to [a, b]
    st.floats(0.1, 0.9),  # share of the level lost in the ramp
)
def test_monotone_quadrature_meets_its_bound_across_a_steep_ramp(
    k: float, frac: float, log_width: float, drop: float
) -> None:
    """A non-increasing payment-like integrand: a slow decline with a steep ramp
    (a seller leaving its cap over a tiny stretch of reports). With the ramp's ends
    as breakpoints (the payments pass the kinks they locate) both rules are within
    1e-5 relative of an exact antiderivative (the payments ask for 1e-5). Without
    them no adaptive rule can promise that (a ramp between the nodes of a panel can
    leave its error estimate small: about one draw in a thousand here misses by
    ~1e-4, both rules alike), so there ``monotone=True`` must be no less accurate
    than the plain rule and take no more evaluations (up to the few a coarse piece
    may add)."""
    a, b = 0.2, 1.0
    c = a + frac * (b - a)
    w = 10.0**log_width * (b - a)

    def f(x: float) -> float:
        ramp = min(max((x - c) / w, 0.0), 1.0)
        return math.exp(-k * x) * (1.0 - drop * ramp)

    def antiderivative(x: float) -> float:
        # ∫ e^{-kx}(1 − drop·ramp(x)) dx, piecewise exact
        def exp_int(lo: float, hi: float) -> float:
            return (math.exp(-k * lo) - math.exp(-k * hi)) / k

        def lin_exp_int(lo: float, hi: float) -> float:  # ∫ (x − c)/w e^{-kx}
            def g(t: float) -> float:
                return -math.exp(-k * t) * ((t - c) / w / k + 1.0 / (w * k * k))

            return g(hi) - g(lo)

        total = exp_int(a, x)
        if x > c:
            top = min(x, c + w)
            total -= drop * lin_exp_int(c, top)
            if x > c + w:
                total -= drop * exp_int(c + w, x)
        return total

    exact = antiderivative(b)
    for mono_flag in (False, True):
        known = integrate(
            f, a, b, breakpoints=[c, c + w], rtol=1e-6, max_evals=3000,
            rule="simpson", monotone=mono_flag,
        )  # fmt: skip
        assert known.converged
        assert known.value == pytest.approx(exact, rel=1e-5)
    plain = integrate(f, a, b, rtol=1e-6, max_evals=3000, rule="simpson")
    mono = integrate(f, a, b, rtol=1e-6, max_evals=3000, rule="simpson", monotone=True)
    assert mono.converged
    err_plain = abs(plain.value - exact) / exact
    err_mono = abs(mono.value - exact) / exact
    assert err_mono <= max(err_plain, 1e-5) * (1.0 + 1e-6) + 1e-12
    assert mono.n_evals <= plain.n_evals + 8


@settings(max_examples=300, deadline=None)
@given(
    st.floats(-3.0, 0.5),  # log10 of the decay rate (nearly linear to curved)
    st.floats(-0.5, 0.5),  # curvature
    st.one_of(st.just(0.0), st.floats(0.0, 1.5)),  # slope jump at the kink
    st.floats(0.05, 0.95),  # kink position as a fraction of [a, b]
    st.lists(st.floats(0.0, 1.0), min_size=0, max_size=8),  # known points
)
def test_monotone_quadrature_with_known_points_meets_its_tolerance(
    log_k: float, q: float, jump: float, frac: float, where: list[float]
) -> None:
    """Pieces taken from points known before the quadrature runs (a payment's
    critical-cost search) against an exact antiderivative: smooth, non-increasing
    integrands, or with a kink inside (not passed as a breakpoint, where the
    payments locate it between passes; the five- and four-point integrals then
    disagree and the piece is refined). Asked for 1e-8, within 1e-5 as without
    known points (:func:`test_simpson_agrees_with_scipy_quad_across_a_kink`)."""
    a, b = 0.2, 1.0
    c = a + frac * (b - a)
    k = 10.0**log_k

    def f(x: float) -> float:  # e^{-kx} + q·0.05·x² − jump·(x − c)⁺
        return math.exp(-k * x) + 0.05 * q * x * x - jump * max(x - c, 0.0)

    def big_f(x: float) -> float:
        kinked = jump * max(x - c, 0.0) ** 2 / 2
        return -math.exp(-k * x) / k + 0.05 * q * x**3 / 3 - kinked

    exact = big_f(b) - big_f(a)
    if np.any(np.diff([f(x) for x in np.linspace(a, b, 200)]) > 1e-15):
        return  # the integrand must be non-increasing, as the payments' are
    calls: list[float] = []

    def counted(x: float) -> float:
        calls.append(x)
        return f(x)

    pts = [a + t * (b - a) for t in where]
    r = integrate(
        counted, a, b, rtol=1e-8, max_evals=3000, rule="simpson", monotone=True,
        known=lambda lo, hi: [x for x in pts if lo < x < hi],
    )  # fmt: skip
    assert r.converged
    assert r.value == pytest.approx(exact, rel=1e-5)


def _with_known(
    f: Callable[[float], float], b: float, pts: list[float], **kwargs: Any
) -> tuple[qs.QuadratureResult, list[float]]:
    """``∫₀ᵇ f`` by the payments' rule (Simpson panels, monotone) with ``pts`` known
    inside, and every point where ``f`` was evaluated."""
    calls: list[float] = []

    def counted(x: float) -> float:
        calls.append(x)
        return f(x)

    r = integrate(
        counted, 0.0, b, rule="simpson", monotone=True,
        known=lambda lo, hi: [x for x in pts if lo < x < hi], **kwargs,
    )  # fmt: skip
    return r, calls


def test_known_points_spare_the_midpoints_of_a_smooth_piece() -> None:
    """Three points already known inside a piece of a smooth curve: it is taken from
    them and its ends, with no new evaluation (the ends are evaluated by any rule)."""

    def f(x: float) -> float:
        return 2.0 - x + 0.01 * x * x

    pts = [0.3, 0.55, 0.8]
    r, calls = _with_known(f, 1.0, pts, rtol=1e-6)
    exact = 2.0 - 0.5 + 0.01 / 3
    assert r.value == pytest.approx(exact, rel=1e-12)  # the quartic is exact here
    assert sorted(set(calls) - set(pts)) == [0.0, 1.0]
    plain = integrate(f, 0.0, 1.0, rtol=1e-6, rule="simpson", monotone=True)
    assert plain.n_evals >= 3


def test_monotone_quadrature_localises_a_ramp_with_fewer_evaluations() -> None:
    """A ramp 1e-5 wide in a unit interval: the plain rule spends four evaluations
    per halving to find it, the monotone one about one (43 against 85 here)."""
    width = 1e-5

    def f(x: float) -> float:
        return 1.0 - 0.5 * min(max((x - 0.613) / width, 0.0), 1.0)

    plain = integrate(f, 0.0, 1.0, rtol=1e-7, max_evals=3000, rule="simpson")
    mono = integrate(
        f, 0.0, 1.0, rtol=1e-7, max_evals=3000, rule="simpson", monotone=True
    )
    # 1 up to the ramp, its mean 0.75 across it, 0.5 after it
    exact = 0.613 + 0.75 * width + 0.5 * (1.0 - 0.613 - width)
    assert mono.value == pytest.approx(exact, rel=1e-6)
    assert plain.value == pytest.approx(exact, rel=1e-6)
    assert mono.n_evals <= 0.6 * plain.n_evals, (mono.n_evals, plain.n_evals)


def test_simpson_bisection_reuses_every_node() -> None:
    """A bisected Simpson panel's halves take the parent's nodes as their ends and
    centres, to the bit: no two evaluated points are a rounding error apart (each
    such pair was a second re-solve of the same report in a payment sweep)."""
    xs: list[float] = []
    for a, b in ((0.0, 1.0), (1e-4, 5e-4), (0.1, 0.7)):

        def f(x: float, a: float = a, b: float = b) -> float:
            xs.append(x)
            t = (x - a) / (b - a)
            return float(np.tanh((t - 0.3141) * 400.0) + 0.01 * t)

        xs.clear()
        res = integrate(f, a, b, rtol=1e-10, rule="simpson", max_evals=5000)
        assert res.n_evals > 60  # many bisections
        pts = np.sort(np.array(xs))
        assert len(set(xs)) == len(xs)  # the memo: each node once
        gaps = np.diff(pts) / (b - a)
        assert gaps.min() > 1e-12  # and no node twice up to rounding


class _StepCurve:
    """A stand-in for :class:`SellerCurve`: ``ε`` flat at 1.5, then falling linearly
    to 0 at ``s_star`` over ``width`` (a market where many sellers leave together)."""

    def __init__(self, s_star: float, width: float) -> None:
        self.report = 0.2
        self.prior = UniformPrior(0.0, 1.0)
        self.s_star, self.width = s_star, width
        self.cache: dict[float, float] = {}

    def epsilon(self, s: float) -> float:
        s = float(s)
        if s not in self.cache:
            self.cache[s] = 1.5 * float(np.clip((self.s_star - s) / self.width, 0, 1))
        return self.cache[s]

    def u(self, s: float) -> float:
        return self.epsilon(s)

    def crossings(self, lo: float, hi: float) -> np.ndarray:
        return np.empty(0)  # no other reports where the fall must sit

    def exit_psi(self, s: float) -> float | None:
        return None  # no allocation behind the stand-in: no a-step margin to read

    def value_crossing(self, x0: float, x1: float) -> tuple[float, float] | None:
        return None  # ... nor objective values whose lines could cross


@pytest.mark.parametrize(
    ("estimate", "width", "most"),
    [
        (0.59995, 1e-4, 8),  # the estimate on the steep part, just below s*
        (0.5999, 1e-4, 8),  # (doubling past it, then bisecting back: 16-18)
        (0.45, 1e-4, 20),  # on the flat part, far below: doubling and bisection
        (0.5, 0.3, 9),  # a gentle, linear fall
    ],
)
def test_critical_cost_from_an_estimate_on_a_steep_fall(
    monkeypatch: pytest.MonkeyPatch, estimate: float, width: float, most: int
) -> None:
    """The bracket holds ``s*`` (``ε(lo) > 0 = ε(hi)``) and is tight enough for the
    integral; from an estimate on the steep part, a local slope lands next to ``s*``
    in a few re-solves (doubling the distance from the report past the estimate went
    to the top of the support and bisected back: 17 re-solves on a Wisconsin
    market)."""
    import mechanisms.payments._critical_cost as cc

    monkeypatch.setattr(cc, "first_order_estimate", lambda curve: estimate)
    curve = _StepCurve(0.6, width)
    crit = find_critical_cost(curve, rtol=2.5e-6)  # type: ignore[arg-type]
    assert curve.epsilon(crit.lo) > 0.0
    assert curve.epsilon(crit.hi) == 0.0
    assert crit.lo < 0.6 <= crit.hi
    integral = 1.5 * (0.6 - 0.2 - width / 2)
    assert curve.u(crit.lo) * (crit.hi - crit.lo) <= 2.5e-6 * integral
    assert len(curve.cache) <= most


class _PowerCurve(_StepCurve):
    """``ε = 1.5·((s* − s)/(s* − c))^p`` below ``s*``, 0 above: a fall that steepens
    toward ``s*`` (``p < 1``), is linear (``p = 1``) or flattens (``p > 1``)."""

    def __init__(self, s_star: float, p: float) -> None:
        super().__init__(s_star, 1.0)
        self.p = p

    def epsilon(self, s: float) -> float:
        s = float(s)
        if s not in self.cache:
            rel = max(self.s_star - s, 0.0) / (self.s_star - self.report)
            self.cache[s] = 1.5 * rel**self.p
        return self.cache[s]


@pytest.mark.parametrize(
    ("p", "estimate", "most"),
    [
        (1.0, 0.5, 5),  # the report, the estimate, its slope, a pair at the zero
        (1.0, 0.3, 5),
        (0.5, 0.5, 11),  # secants overshot every time: 15
        (0.3, 0.3, 11),  # 19
        (2.0, 0.5, 8),  # secants fell short every time, the overshoot never crossed: 62
        (2.0, 0.3, 8),  # 65
    ],
)
def test_critical_cost_of_a_fall_that_is_not_linear(
    monkeypatch: pytest.MonkeyPatch, p: float, estimate: float, most: int
) -> None:
    """The bracket holds ``s*`` and meets the integral's tolerance in a few re-solves
    whether the fall to ``s*`` is linear (a pair around the secant's zero closes
    it), steepens or flattens (the zero of the power law through three points)."""
    import mechanisms.payments._critical_cost as cc

    monkeypatch.setattr(cc, "first_order_estimate", lambda curve: estimate)
    curve = _PowerCurve(0.6, p)
    crit = find_critical_cost(curve, rtol=2.5e-6)  # type: ignore[arg-type]
    assert curve.epsilon(crit.lo) > 0.0
    assert curve.epsilon(crit.hi) == 0.0
    integral = 1.5 * (0.6 - 0.2) / (p + 1.0)
    assert curve.u(crit.lo) * (crit.hi - crit.lo) <= 2.5e-6 * integral
    assert len(curve.cache) <= most


@pytest.mark.parametrize("s_star", [0.6, 0.95, 0.2001])
def test_a_wrong_prediction_to_stay_still_brackets_the_critical_cost(
    monkeypatch: pytest.MonkeyPatch, s_star: float
) -> None:
    """Probing the support's top first where the first-order reading says the seller
    stays: where it leaves after all, the bracket ``[c, c̄]`` is refined to one that
    holds ``s*`` and meets the integral's tolerance."""
    import mechanisms.payments._critical_cost as cc

    monkeypatch.setattr(cc, "first_order_estimate", lambda curve: None)
    monkeypatch.setattr(cc, "predicted_to_stay", lambda curve: True)
    curve = _StepCurve(s_star, 0.05)
    crit = find_critical_cost(curve, rtol=2.5e-6)  # type: ignore[arg-type]
    assert list(curve.cache)[:2] == [0.2, 1.0]  # the report, then the top c̄
    assert curve.epsilon(crit.lo) > 0.0
    assert curve.epsilon(crit.hi) == 0.0
    assert crit.lo < s_star <= crit.hi
    assert crit.excluded_on_support


def test_winners_read_as_staying_are_settled_by_one_resolve() -> None:
    """On a bounded prior, a winner whose first-order reading keeps it in up to ``c̄``
    (:func:`predicted_to_stay`) is settled by the one re-solve at ``c̄`` where the
    reading holds, as a scan of its curve with full solves confirms (it does not
    leave below ``c̄``); the search doubling from ``c + |c|`` took more."""
    from mechanisms.payments._critical_cost import predicted_to_stay

    ins = broad_instance(np.random.default_rng(SEED), m=30)
    job = payment_job(ins.X, ins.y, ins.costs, ins.prior, ins.cfg)
    top = float(ins.prior.high)
    stayed = 0
    for i in np.flatnonzero(np.asarray(job.base.epsilon_total) > 0)[:4]:
        curve = SellerCurve(
            job.prob, job.base, job.prior, int(i), float(job.reports[i])
        )
        if not predicted_to_stay(curve):
            continue
        crit = find_critical_cost(curve)
        full = SellerCurve(
            job.prob, job.base, job.prior, int(i), float(job.reports[i]), fast=False
        )
        scan = np.linspace(float(job.reports[i]), top, 9)
        assert all(full.epsilon(v) > 0.0 for v in scan)  # the reading holds here
        assert crit == dataclasses.replace(crit, lo=top, hi=top)
        assert not crit.excluded_on_support
        assert len(curve.cache) == 2  # the report and c̄
        stayed += 1
    assert stayed == 4


@pytest.mark.parametrize(("mode", "n_sellers"), [("strict", 8), ("default", 3)])
def test_small_ridge_payments_read_the_release_terms(mode: str, n_sellers: int) -> None:
    """At a small ``λ`` each winner's ``ε_i`` ends in ``2·ln(1 + a_i/(4λ))`` near its
    critical cost. Read through ``(η·a_i, a_i)`` (panels and the critical cost's
    secants) the payments stay within the tolerance of a plain sweep asked for
    ``10⁻⁹``, with at most 70 % of the plain sweep's re-solves (about 55 % measured)."""
    rng = np.random.default_rng(SEED)
    ins = broad_instance(rng, m=30)
    cfg = ins.cfg.with_(lam=1e-5, mode=mode, gamma=100.0, sigma=100.0)
    job = payment_job(ins.X, ins.y, ins.costs, ins.prior, cfg)
    plain = dataclasses.replace(job, curvature_split=False)
    ref = dataclasses.replace(plain, rtol=1e-9, max_evals=5000)
    winners = np.flatnonzero(np.asarray(job.base.epsilon_total) > 0)[:n_sellers]
    assert winners.size == n_sellers
    n_split = n_plain = 0
    for i in winners:
        split, old, tight = (seller_payment(j, int(i)) for j in (job, plain, ref))
        assert split.converged
        assert tight.converged
        assert split.critical_cost < float(ins.prior.high)  # it drops out: a log end
        assert abs(split.payment - tight.payment) <= job.rtol * tight.payment
        assert abs(old.payment - tight.payment) <= job.rtol * tight.payment
        n_split += split.n_solves
        n_plain += old.n_solves
    assert 10 * n_split <= 7 * n_plain


def test_one_known_point_and_the_midpoint_need_one_quarter() -> None:
    """One point already known inside a piece whose trapezoid is not accurate enough:
    after its midpoint, the quartic through the ends, the known point, the midpoint
    and one quarter node (the one farther from the known point) is taken, so the
    piece costs two new inner evaluations where the five-node panel costs three."""

    def f(x: float) -> float:
        return 2.0 - x + 0.01 * x * x

    pts = [0.9]
    r, calls = _with_known(f, 1.0, pts, rtol=1e-6)
    exact = 2.0 - 0.5 + 0.01 / 3
    assert r.value == pytest.approx(exact, rel=1e-12)  # the quartic is exact here
    assert sorted(set(calls) - set(pts)) == [0.0, 0.25, 0.5, 1.0]
    plain = integrate(f, 0.0, 1.0, rtol=1e-6, rule="simpson", monotone=True)
    assert plain.n_evals == 5  # the ends, the midpoint and both quarters


def test_known_points_on_the_release_curve_read_through_its_parts() -> None:
    """Three reports known inside the last piece before a critical cost at a small
    ``λ`` (the critical-cost search's, at uneven places): the quartic through them
    and the ends misses the logarithm turning over next to ``s*``, the same nodes
    read through the parts ``(η·a, a)`` do not; the piece is then taken with no new
    evaluation inside it, within the tolerance of the closed form."""
    kappa, alpha, s_star = 2.6e-5, 1.0, 1.0
    b = s_star - 1e-9
    f, parts = _release_curve(kappa, alpha, s_star)
    exact = _release_integral(kappa, alpha, s_star, b)
    pts = [0.23, 0.52, 0.81]
    split, calls = _with_known(
        f, b, pts, rtol=1e-6, curvature_split=parts, curvature_scale=kappa
    )
    assert split.converged
    assert abs(split.value - exact) <= max(split.error, 1e-12 * exact)
    assert split.error <= 1e-6 * exact
    assert sorted(set(calls) - set(pts)) == [0.0, b]
    plain, _ = _with_known(f, b, pts, rtol=1e-6)
    assert plain.n_evals > 2 + len(pts)  # the plain quartic is refined
