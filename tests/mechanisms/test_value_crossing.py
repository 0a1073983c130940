"""Jumps of a seller's curve located where two optima's objectives cross (spec
``mechanism.md`` §5).

On a default-rule market with ``μ = 0`` (the a-step fills caps in order and returns
the weights, not multipliers) and a large ``γ``, every winner's ``ε_i(s)`` is a
staircase: flat while the seller sits at its cap, falling by jumps where the optimum
switches ``η`` basin or drops the seller. A fixed optimum's objective is affine in
``Ψ_i`` with slope ``γη·a_i``, so a jump lies where the lines of the optima on either
side cross (:meth:`SellerCurve.value_crossing`). Checked against jumps bisected with
full solves, and through the payments, against full solves with bisection only, on
that market and on one whose re-solves are the shortcut's (winners leave their caps
by jumps there).
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from market.datasets import load_wisconsin, train_val_test_split
from mechanisms import MechanismConfig, UniformPrior
from mechanisms.payments._payments import PaymentJob, payment_job, seller_payment
from mechanisms.payments._resolve._range_resolve import RangeResolver, range_resolver
from mechanisms.payments._resolve._seller_curve import SellerCurve

CFG = MechanismConfig(
    gamma=2.5e4, lam=3.4e3, mu=0.0, sigma=24.0, k=3.29, eps_avg_max=1.1e-3
)
# λ far above λ_conv: the η search over the full range, re-solved by the shortcut
# of mechanisms.payments._resolve._local_resolve; winners leave their caps by jumps
# (seed 4's draw 14 in benchmarks/random_configs.py)
SHORTCUT_CFG = MechanismConfig(
    gamma=57925.44506640779, lam=433304.0815406585, mu=0.01759958241485359,
    sigma=1774.8315482373255, k=2.363111855708756, eps_avg_max=2974.021870496289,
)  # fmt: skip


def _wisconsin_job(cfg: MechanismConfig) -> PaymentJob:
    X, y = load_wisconsin()
    split = train_val_test_split(X, y, random_state=0)
    X, y = split.X_train, split.y_train
    costs = np.random.default_rng(0).uniform(1e-4, 5e-4, size=y.size)
    return payment_job(X, y, costs, UniformPrior(1e-4, 5e-4), cfg)


@pytest.fixture(scope="module")
def job() -> PaymentJob:
    out = _wisconsin_job(CFG)
    assert isinstance(range_resolver(out.prob, out.base), RangeResolver)
    return out


@pytest.fixture(scope="module")
def shortcut_job() -> PaymentJob:
    out = _wisconsin_job(SHORTCUT_CFG)
    assert range_resolver(out.prob, out.base) is None
    return out


def _curve(job: PaymentJob, i: int, *, fast: bool = True) -> SellerCurve:
    return SellerCurve(
        job.prob, job.base, job.prior, i, float(job.reports[i]), fast=fast,
        nodes=job.nodes, hessian=job.hessian, reports=job.reports,
    )  # fmt: skip


def _winners(job: PaymentJob, n: int) -> list[int]:
    won = np.flatnonzero(job.base.epsilon > 0)
    return [int(i) for i in won[np.linspace(0, won.size - 1, n).round().astype(int)]]


def test_signature_of_a_re_solve_that_returned_weights_is_the_full_solves(
    job: PaymentJob,
) -> None:
    """Where the a-step returns the weights (no multipliers ``A, s``), a lean
    re-solve's signature is the bound status of those weights: the full solve's at
    the same report, and the base's at a report just above the seller's own (read
    from NaN multipliers, every seller looked free, and the kink search bisected
    towards the report)."""
    for i in _winners(job, 3):
        lean, full = _curve(job, i), _curve(job, i, fast=False)
        c = float(job.reports[i])
        xs = [c * (1 + 1e-9), *np.linspace(c, c * 1.2, 6)[1:]]
        n_lean = 0
        for x in xs:
            lean.epsilon(x)
            n_lean += x in lean.lean
            assert lean.signature(x) == full.signature(x)
        assert n_lean == len(xs)  # every one a lean re-solve
        assert lean.signature(xs[0]) == lean.signature(c)


def test_value_crossing_is_where_epsilon_jumps(job: PaymentJob) -> None:
    """For neighbouring reports on two plateaus with one jump between them, the
    crossing lies within its own rounding bound, or 1e-12 relative if that is
    larger, of the jump bisected with full solves to 1e-14; a wrong slope
    ``γη·a_i`` or value puts it off by a share of the bracket."""
    errors = []
    for i in _winners(job, 4):
        curve = _curve(job, i)
        c = float(job.reports[i])
        top = 1.01 * seller_payment(job, i).critical_cost
        for x in np.linspace(c, top, 40)[1:]:
            curve.epsilon(float(x))
        for x0, x1 in itertools.pairwise(sorted(curve.cache)):
            e0, e1 = curve.cache[x0], curve.cache[x1]
            if not e0 > e1:
                continue
            got = curve.value_crossing(x0, x1)
            assert got is not None
            z, err = got
            full = _curve(job, i, fast=False)
            a, b = x0, x1
            while b - a > 1e-14 * b:
                mid = 0.5 * (a + b)
                if full.epsilon(mid) == e0:
                    a = mid
                else:
                    b = mid
            if full.epsilon(b) != e1:
                continue  # more than one jump inside
            assert abs(z - a) <= max(err, 1e-12 * a), (i, x0, x1, z, a, err)
            errors.append(abs(z - a) / (x1 - x0))
    assert len(errors) >= 4


@pytest.mark.parametrize(("market", "least"), [("job", 12), ("shortcut_job", 4)])
@pytest.mark.parametrize("verify", [True, False])
def test_payments_on_staircases_agree_with_full_solves(
    market: str, least: int, verify: bool, request: pytest.FixtureRequest
) -> None:
    """Payments with the crossings agree with full solves and bisection alone
    (``fast = False``) to the two tolerances together, and a seller whose curve is
    a staircase takes at most ten re-solves: all twelve winners of the first
    market (6 each; 48 when each jump was bisected), five of the second's, those
    that leave their caps by a jump (9 each; 22–24 before)."""
    job: PaymentJob = request.getfixturevalue(market)
    fast_job = (
        job
        if verify
        else dataclasses.replace(job, unverified=frozenset(range(job.prob.m)))
    )
    slow_job = dataclasses.replace(job, fast=False)
    solves = []
    for i in _winners(job, 12):
        got, ref = seller_payment(fast_job, i), seller_payment(slow_job, i)
        assert got.converged
        assert ref.converged
        assert got.payment == pytest.approx(ref.payment, rel=2 * job.rtol)
        # each critical cost is the top of a bracket where ε_i = 0 by full solves
        full = _curve(job, i, fast=False)
        assert full.epsilon(got.critical_cost) == 0.0
        assert full.epsilon(ref.critical_cost) == 0.0
        solves.append(got.n_solves)
    assert sum(n <= 10 for n in solves) >= least, solves
