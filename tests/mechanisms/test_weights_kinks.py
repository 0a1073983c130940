"""Kinks of a seller's curve located from the weights of full and shortcut re-solves
(spec ``mechanism.md`` §5), where no lean resolver applies (the default rule with
``λ`` above ``λ_conv``: the grid search and its certified shortcut).

The a-step's weights are ``a_k = clip(A − S·r_k, 0, h_k)``; a seller ``k`` changes
status where ``A − S·r_k`` crosses 0 or its cap, and that margin is extrapolated to
the change (:meth:`SellerCurve.kink_guess`). Checked against the change found by
bisecting the signatures, and through the payments against a bisection-only search
at a tight tolerance.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mechanisms.payments import _seller_payment
from mechanisms.payments._payments import PaymentJob, seller_payment
from mechanisms.payments._resolve import _seller_curve
from mechanisms.payments._resolve._seller_curve import SellerCurve
from tests.mechanisms.test_range_kinks import Setting, job_curve, market_job

SETTINGS: list[Setting] = [(0, 0.3, 4.0, False), (7, 2.0, 8.0, True)]


def _job(setting: Setting, m: int = 120) -> tuple[PaymentJob, np.ndarray]:
    """The market of ``test_range_kinks`` on the grid search's path (``λ = 100``,
    above ``λ_conv``: 27 and 75 here)."""
    job, costs = market_job(setting, m, lam=100.0)
    curve = SellerCurve(job.prob, job.base, job.prior, 0, float(costs[0]))
    assert curve.resolver is None  # the weights path, not a lean resolver
    return job, costs


@pytest.mark.parametrize("setting", SETTINGS)
def test_kink_guess_from_the_weights_finds_where_the_status_changes(
    setting: Setting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For brackets holding one status change (one seller, one step), located by
    bisecting the signatures to 1e-6 of the bracket, the estimate lies inside the
    bracket, within 20 % of it of the change, and within 1 % for half (a secant,
    refined on a parabola where seller ``i`` keeps its status, of a margin that is
    smooth on either side, through reports 1/24 of the sweep
    apart, where ``w`` and ``η`` move too; the midpoint is off by up to 50 %, a
    margin with a wrong ``S`` or ``r_k`` by far more)."""
    job, costs = _job(setting)
    errors, _ = _guess_errors(job, costs, monkeypatch)
    assert len(errors) >= 5
    assert errors.max() <= 0.2, errors
    assert np.median(errors) <= 0.01, errors


def test_payments_with_kinks_from_the_weights_agree_with_bisection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Payments whose kinks are located from the weights agree within the payment
    tolerance with payments at a 1000 times tighter tolerance, every seller
    converged, with fewer re-solves than the bisection-only search at the same
    tolerance."""
    job, _ = _job(SETTINGS[1])
    winners = [int(i) for i in np.flatnonzero(job.base.epsilon > 0)[::7][:8]]
    located = [seller_payment(job, i) for i in winners]
    tight = PaymentJob(**{**job.__dict__, "rtol": 1e-8})
    monkeypatch.setattr(SellerCurve, "_weights_kink_guess", lambda self, x0, x1: None)
    bisected = [seller_payment(job, i) for i in winners]
    reference = [seller_payment(tight, i) for i in winners]
    for got, ref in zip(located, reference, strict=True):
        assert got.converged
        assert got.payment == pytest.approx(ref.payment, rel=job.rtol)
    assert sum(p.n_solves for p in located) < sum(p.n_solves for p in bisected)


def _guess_errors(
    job: PaymentJob, costs: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> tuple[np.ndarray, np.ndarray]:
    """The kink guesses' distances to the change (bisected to 1e-6 of each bracket
    holding one status change of one step), relative to the bracket: refined on the
    quadratic, and the secants' alone (the refinement replaced by the identity); each
    refined guess must lie inside its bracket."""
    refined, secant = [], []
    for i in np.flatnonzero(job.base.epsilon > 0)[:12]:
        i = int(i)
        report = float(costs[i])
        curve = job_curve(job, i, report)
        for x in np.linspace(report, min(report + 0.4, 1.0), 25)[1:]:
            curve.epsilon(float(x))
        for x0, x1 in itertools.pairwise(sorted(curve.cache)):
            c0 = np.frombuffer(curve.signature(x0), dtype=np.uint8).astype(int)
            c1 = np.frombuffer(curve.signature(x1), dtype=np.uint8).astype(int)
            if np.abs(c0 - c1).sum() != 1:
                continue  # not exactly one status change of one step
            z = curve.kink_guess(x0, x1)
            with monkeypatch.context() as patch:
                patch.setattr(_seller_curve, "_quadratic_root", lambda *args: args[-1])
                z_secant = curve.kink_guess(x0, x1)
            assert z is not None
            assert z_secant is not None
            assert x0 < z < x1
            a, b = x0, x1
            while b - a > 1e-6 * (x1 - x0):
                mid = 0.5 * (a + b)
                if curve.signature(mid) == curve.signature(x0):
                    a = mid
                else:
                    b = mid
            refined.append(abs(z - a) / (x1 - x0))
            secant.append(abs(z_secant - a) / (x1 - x0))
    return np.array(refined), np.array(secant)


def test_the_quadratic_through_the_far_end_refines_the_secants_guess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the bracket's far end as a third point, the guesses of the second
    setting land closer to the change than the secants' alone: the worst error
    falls from 7.1 % of the bracket to 2.5 %, the median from 0.76 % to 0.64 %."""
    job, costs = _job(SETTINGS[1])
    refined, secant = _guess_errors(job, costs, monkeypatch)
    assert refined.size >= 20
    assert refined.max() <= 0.5 * secant.max()
    assert np.median(refined) <= np.median(secant)


def test_quadratic_root_is_the_zero_of_the_parabola_through_three_points() -> None:
    """On margins that are exact parabolas, the refined zero is the parabola's zero
    nearest the guess (the other lies outside the points' span), where the secant
    through the first two points misses it by more than 1 %; margins without a
    real zero leave the guess unchanged."""
    roots = np.array([0.55, 0.62, 0.71])
    curv = np.array([0.3, -0.4, 0.5])

    def g(x: float) -> np.ndarray:
        return (x - roots) * (1.0 + curv * (x - roots))

    a, b, c = 0.2, 0.4, 0.9
    ga, gb, gc = g(a), g(b), g(c)
    secant = a - ga * (b - a) / (gb - ga)
    assert np.abs(secant - roots).min() > 0.01
    got = _seller_curve._quadratic_root(a, b, c, ga, gb, gc, secant)
    np.testing.assert_allclose(got, roots, atol=1e-12)
    # x² − 2x + 2 > 0 everywhere: no zero to refine to
    ga, gb, gc = (np.full(3, x * x - 2.0 * x + 2.0) for x in (a, b, c))
    kept = _seller_curve._quadratic_root(a, b, c, ga, gb, gc, secant)
    np.testing.assert_array_equal(kept, secant)


def test_a_capped_sellers_kinks_are_located_before_the_first_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A winner at its cap at its own report falls off a plateau as it leaves the
    cap; its kinks located before the quadrature's first pass save the panels that
    pass would spend bisecting into the fall (on all 18 capped winners here, 740 →
    473 re-solves; six are paid here), and the payments agree with those of the
    search after the pass within the payment tolerance (which
    ``test_payments_with_kinks_from_the_weights_agree_with_bisection`` checks
    against a 1000 times tighter tolerance)."""
    job, costs = _job(SETTINGS[1])
    capped = [
        int(i)
        for i in np.flatnonzero(job.base.epsilon > 0)
        if job_curve(job, int(i), float(costs[i])).own_status(float(costs[i])) == 2
    ]
    assert len(capped) >= 10
    capped = capped[:6]
    early = [seller_payment(job, i) for i in capped]
    monkeypatch.setattr(_seller_payment, "_capped_kinks", lambda *args: [])
    late = [seller_payment(job, i) for i in capped]
    for got, ref in zip(early, late, strict=True):
        assert got.converged
        assert got.payment == pytest.approx(ref.payment, rel=job.rtol)
    assert sum(p.n_solves for p in early) < 0.8 * sum(p.n_solves for p in late)
