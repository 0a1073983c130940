"""The critical cost read from an evaluation where the seller is out (spec
``mechanism.md`` §5).

Where ``ε_i = 0`` at a report, nothing in the allocation depends on ``Ψ_i``, and the
a-step's margin ``A − S·r_i`` of seller ``i`` is linear in ``Ψ_i`` down to where it
reaches 0 (:meth:`SellerCurve.exit_psi`). Unless another point becomes the optimum
first, that is the critical cost itself; otherwise the seller re-enters above it.
Checked against the critical cost found by bisecting the curve, on the three kinds of
re-solve (the default rule's lean re-solver, the grid search's certified shortcut,
strict mode's compiled re-solver), and through the payments.
"""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import MechanismConfig, UniformPrior
from mechanisms.payments import _critical_cost
from mechanisms.payments._critical_cost import invert_virtual_cost
from mechanisms.payments._payments import PaymentJob, payment_job, seller_payment
from mechanisms.payments._resolve._seller_curve import SellerCurve
from tests.mechanisms.test_range_kinks import job_curve, market_job


def _strict_job(m: int = 200) -> tuple[PaymentJob, np.ndarray]:
    """A strict-mode market (its compiled re-solver) with ``μ > 0``."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(m, 3))
    X /= 1.2 * np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ np.ones(3) + 0.3 * rng.normal(size=m) >= 0, 1.0, -1.0)
    costs = rng.uniform(0.0, 1.0, m)
    cfg = MechanismConfig(
        gamma=1.0, lam=0.1, mu=0.5, sigma=1.0, k=6.0, eps_avg_max=5, mode="strict"
    )
    return payment_job(X, y, costs, UniformPrior(0.0, 1.0), cfg), costs


def _jobs() -> dict[str, tuple[PaymentJob, np.ndarray]]:
    return {
        "lean": market_job((7, 1.0, 8.0, True), 300, lam=1e-2),
        "weights": market_job((7, 2.0, 8.0, True), 120, lam=100.0),
        "strict": _strict_job(),
    }


@pytest.mark.parametrize("kind", ["lean", "weights", "strict"])
def test_exit_psi_is_the_critical_cost_or_below_it(kind: str) -> None:
    """At a report above the critical cost ``s*`` (located by bisecting the curve to
    1e-10 of the sweep), the exit read there lies at or below ``s*`` always (to 1e-8
    of the sweep: the re-solves' tolerance) and within 1e-6 of the sweep of it for
    most winners: a margin with a wrong ``S``, ``r_i`` or sign would put it anywhere
    in the bracket."""
    job, costs = _jobs()[kind]
    kinds = {"lean": "resolver", "weights": None, "strict": "resolver"}
    errors: list[float] = []
    for i in np.flatnonzero(job.base.epsilon > 0)[:10]:
        i = int(i)
        report = float(costs[i])
        curve = job_curve(job, i, report)
        assert (curve.resolver is None) == (kinds[kind] is None)
        top = float(job.prior.high)
        if curve.epsilon(top) > 0.0:
            continue  # never excluded on the support
        lo, hi = report, top
        while hi - lo > 1e-10 * (top - report):
            mid = 0.5 * (lo + hi)
            if curve.epsilon(mid) > 0.0:
                lo = mid
            else:
                hi = mid
        for x in (hi, 0.5 * (hi + top), top):  # excluded reports, near and far
            assert curve.epsilon(x) == 0.0
            psi = curve.exit_psi(x)
            assert psi is not None
            z = invert_virtual_cost(job.prior, psi, low=report)
            assert z is not None
            assert z <= hi + 1e-8 * (top - report)  # to the solves' tolerance
            errors.append((hi - z) / (top - report))
    assert len(errors) >= 12
    assert np.median(errors) <= 1e-6, errors


def test_exit_psi_only_where_the_seller_is_out() -> None:
    """No exit is read at a report where the seller still has weight, nor at one
    not evaluated."""
    job, costs = _jobs()["weights"]
    i = int(np.flatnonzero(job.base.epsilon > 0)[0])
    curve = SellerCurve(job.prob, job.base, job.prior, i, float(costs[i]))
    assert curve.epsilon(float(costs[i])) > 0.0
    assert curve.exit_psi(float(costs[i])) is None
    assert curve.exit_psi(0.5 * (float(costs[i]) + 1.0)) is None


@pytest.mark.parametrize("kind", ["lean", "weights", "strict"])
def test_payments_with_the_exit_pair_agree_with_a_tight_search(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Payments whose critical cost is bracketed by a pair around the exit agree
    within the payment tolerance with payments at a 1000 times tighter tolerance,
    every seller converged, and their critical-cost searches take fewer re-solves
    in all than without the pair (no more in the strict market, whose brackets
    are closed by the search between the other reports before)."""
    job, _ = _jobs()[kind]
    winners = [int(i) for i in np.flatnonzero(job.base.epsilon > 0)[::5][:8]]
    tight = PaymentJob(**{**job.__dict__, "rtol": 1e-8})
    reference = [seller_payment(tight, i) for i in winners]

    def crit_solves() -> int:
        counted = 0
        find = _critical_cost.find_critical_cost

        def counting(curve: SellerCurve, **kw: object) -> object:
            nonlocal counted
            before = len(curve.cache)
            out = find(curve, **kw)  # type: ignore[arg-type]
            counted += len(curve.cache) - before
            return out

        with monkeypatch.context() as mp:
            mp.setattr(
                "mechanisms.payments._seller_payment.find_critical_cost", counting
            )
            done = [seller_payment(job, i) for i in winners]
        for got, ref in zip(done, reference, strict=True):
            assert got.converged
            assert got.payment == pytest.approx(ref.payment, rel=job.rtol)
        return counted

    with_pair = crit_solves()
    monkeypatch.setattr(
        _critical_cost, "_exit_pair", lambda curve, lo, hi, rtol: (lo, hi)
    )
    without = crit_solves()
    if kind == "strict":  # its brackets close between the other reports first
        assert with_pair <= without
    else:
        assert with_pair < without


def test_no_exit_is_read_from_a_full_solve_under_a_lean_resolver() -> None:
    """Where a curve with a lean re-solver (strict mode's) evaluated a report by the
    full search, its signature is the resolver's form, not per-seller statuses: no
    exit is read there (it raised an IndexError in a 24-seller order)."""
    job, costs = _strict_job()
    i = int(np.flatnonzero(job.base.epsilon > 0)[0])
    curve = SellerCurve(job.prob, job.base, job.prior, i, float(costs[i]), fast=False)
    assert curve.resolver is not None
    assert curve.epsilon(1.0) == 0.0  # out at the top of the support
    assert 1.0 in curve.points  # by the full search
    # the resolver's form: counts (capped, free, own status), here one capped and
    # one free seller, as in the order where it failed
    sig = curve.signature(1.0)
    assert len(sig) == 24
    curve.signatures[1.0] = np.array([1, 1, 0], dtype=np.int64).tobytes()
    assert curve.exit_psi(1.0) is None
