"""Incentive self-audits (spec mechanism.md §6; reliability T-MD-1, 3, 4, 5) and their
planted-bug twins, which must fail the same checks."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from mechanisms.allocation._eta_search import solve_allocation
from mechanisms.allocation._problem import Problem
from mechanisms.audit._incentives import audit_incentives
from mechanisms.payments._executors import SerialExecutor
from mechanisms.payments._payments import PaymentJob, SellerPayment, seller_payment
from mechanisms.result import Allocation
from tests.conftest import SEED
from tests.mechanisms.test_payments_instances import (
    Instance,
    small_instance,
    toy_instance,
)

SERIAL = SerialExecutor()
IC_RTOL = 1e-3  # regret tolerance relative to the largest payment (the issue)


@pytest.fixture(scope="module")
def instance() -> Instance:
    return small_instance(np.random.default_rng(SEED), m=5)


def toy() -> Instance:
    ins = toy_instance()
    return dataclasses.replace(ins, cfg=ins.cfg.with_(mu=1.0, sigma=0.1))


def _audit(ins: Instance, **kw):
    kw.setdefault("executor", SERIAL)
    return audit_incentives(ins.X, ins.y, ins.costs, ins.prior, ins.cfg, **kw)


def _rule_from(fn):
    """A payment rule ``t_i = fn(job, i, ε_i)`` on the allocation of ``job``."""

    def rule(job: PaymentJob, i: int) -> SellerPayment:
        eps = float(job.base.epsilon_total[i])
        t = fn(job, i, eps)
        c = float(job.reports[i])
        return SellerPayment(i, c, eps, t, t - c * eps, np.nan, 0.0, True, 0, 0.0, 0.0)

    return rule


first_price = _rule_from(lambda job, i, eps: float(job.reports[i]) * eps)
paper_rule = _rule_from(lambda job, i, eps: float(job.prob.psi[i]) * eps)


def test_production_rule_passes_the_audit(instance: Instance) -> None:
    rep = _audit(
        instance,
        budget=1e6,
        n_sellers=2,
        misreports=(0.5, 0.9, 1.1, 2.0),
        random_state=SEED,
    )
    assert rep.n_deviations >= 2 * 4
    assert rep.max_payment > 0
    assert rep.ic_regret_max <= IC_RTOL * rep.max_payment, rep.worst_deviation
    assert rep.ir_violations == []
    assert rep.ir_min_utility >= 0
    assert rep.budget_ok is True
    assert rep.monotonicity_max_violation <= 1e-6 * float(rep.payments.epsilon.max())
    # The sampled set includes the winner nearest its cut-off, and its misreports
    # straddle the critical cost.
    s_star = rep.payments.critical_costs
    near = [i for i in rep.misreports if rep.payments.epsilon[i] > 0]
    assert near
    i = near[0]
    assert any(r > s_star[i] for r in rep.misreports[i])
    assert any(instance.costs[i] < r < s_star[i] for r in rep.misreports[i])
    json.dumps(rep.to_dict())


def test_budget_check_uses_rounded_total(instance: Instance) -> None:
    ins = toy()
    rep = _audit(ins, budget=0.0, sellers=[], misreports=())
    assert rep.budget_total > 0
    assert rep.budget_ok is False


def test_first_price_twin_fails() -> None:
    rep = _audit(toy(), payment_rule=first_price, sellers=[0, 1])
    # IR holds with equality, so only the IC audit can catch it: over-reporting pays.
    assert rep.ir_min_utility == pytest.approx(0.0, abs=1e-12)
    assert rep.ic_regret_max > IC_RTOL * rep.max_payment
    assert rep.worst_deviation is not None
    assert (
        rep.worst_deviation["misreport"]
        > toy().costs[int(rep.worst_deviation["seller"])]
    )


def test_paper_psi_times_epsilon_twin_fails() -> None:
    rep = _audit(toy(), payment_rule=paper_rule, sellers=[0, 1])
    assert rep.ic_regret_max > IC_RTOL * rep.max_payment
    assert rep.worst_deviation is not None
    i = int(rep.worst_deviation["seller"])
    assert rep.worst_deviation["misreport"] > toy().costs[i]  # a gain by over-reporting


def _bumped_solver(seller: int, psi_lo: float, psi_hi: float):
    """A non-monotone allocation: ε_seller × 1.5 while its Ψ is in (psi_lo, psi_hi)."""

    def solver(prob: Problem, *, warm_start: Allocation | None = None) -> Allocation:
        alloc = solve_allocation(prob, warm_start=warm_start)
        if psi_lo < prob.psi[seller] < psi_hi:
            eps = np.array(alloc.epsilon_total)
            eps[seller] *= 1.5
            alloc = dataclasses.replace(alloc, epsilon_total=eps)
        return alloc

    return solver


def test_non_monotone_allocation_twin_fails() -> None:
    ins = toy()
    c0 = float(ins.costs[0])
    # Ψ = 2s on U[0, 1]: bump for reports s in (1.2 c0, 1.3 c0); factor 1.25 hits it.
    solver = _bumped_solver(0, 2 * 1.2 * c0, 2 * 1.3 * c0)
    loose = lambda job, i: seller_payment(dataclasses.replace(job, rtol=1e-4), i)  # noqa: E731
    rep = _audit(
        ins, solver=solver, payment_rule=loose, sellers=[0], misreports=(1.25,)
    )
    assert rep.monotonicity_max_violation > 0.1
    assert rep.ic_regret_max > IC_RTOL * rep.max_payment
    assert rep.worst_deviation is not None
    assert rep.worst_deviation["misreport"] == pytest.approx(1.25 * c0)


def test_sellers_argument_is_validated(instance: Instance) -> None:
    with pytest.raises(ValueError, match="sellers"):
        _audit(toy(), sellers=[5])


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_production_rule_passes_the_audit_on_many_instances(seed: int) -> None:
    ins = small_instance(np.random.default_rng(seed), m=10, d=3)
    rep = _audit(ins, budget=1e6, n_sellers=3, random_state=seed)
    assert rep.ic_regret_max <= IC_RTOL * rep.max_payment, rep.worst_deviation
    assert rep.ir_violations == []
    assert rep.monotonicity_max_violation <= 1e-6 * float(rep.payments.epsilon.max())
