"""The compiled strict-mode re-solve is the full search (spec §4.4, §5).

:mod:`mechanisms.payments._resolve._strict_resolve` answers a payment sweep's
re-solves in mode ``strict`` in one numba call. The payments are Myerson payments of
the rule only if each re-solve returns what :func:`solve_allocation` returns for the
changed report, so every shortcut result here is compared with a cold full search, on
random strict configurations over the accepted ranges, and whole payments with the
shortcut against payments with it disabled.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from market.datasets import make_synthetic
from mechanisms import MechanismConfig, UniformPrior
from mechanisms.allocation._block_solver import solve_at_eta
from mechanisms.allocation._eta_search import profile_slope, solve_allocation
from mechanisms.allocation._problem import Problem
from mechanisms.payments._payments import payment_job
from mechanisms.payments._resolve._local_resolve import stale_nodes
from mechanisms.payments._resolve._strict_resolve import strict_resolver
from mechanisms.payments._seller_payment import FAST_TOL, seller_payment

PRIOR = UniformPrior(1e-4, 5e-4)


def instance(seed: int, m: int, cfg: MechanismConfig) -> tuple[Problem, np.ndarray]:
    """Records with ``‖x_i‖ ≤ 1``, labels ``±1``, costs from the prior."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 4))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    costs = PRIOR.sample(m, rng=rng)
    psi = np.asarray(PRIOR.virtual_cost(costs), dtype=float)
    return Problem(X, y, psi, np.full(m, np.inf), cfg), costs


def random_strict(rng: np.random.Generator) -> MechanismConfig:
    """Log-uniform over the accepted ranges (as ``benchmarks/random_configs.py``),
    with ``μ, γ > 0`` (where the compiled re-solve applies)."""

    def logu(lo: float = -6.0, hi: float = 6.0) -> float:
        return float(10.0 ** rng.uniform(lo, hi))

    return MechanismConfig(
        gamma=logu(),
        lam=logu(),
        mu=logu(),
        sigma=0.0 if rng.random() < 0.15 else logu(),
        k=logu(0.0, 6.0),
        eps_avg_max=logu(),
        mode="strict",
    )


def slope_at(prob: Problem, eta: float) -> float:
    """``P'(η)`` of the strict profile (a fixed-``η`` solve and the envelope theorem)."""
    start = np.full(prob.m, 1.0 / prob.m)
    sol = solve_at_eta(prob, eta, w0=np.zeros(prob.X.shape[1]), a0=start)
    return profile_slope(prob, sol)


def winner_scale(eps: np.ndarray) -> float:
    won = eps[eps > 0]
    return float(won.mean()) if won.size else 1e-300


@pytest.mark.parametrize("seed", range(6))
def test_compiled_strict_resolve_equals_the_full_search(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    cfg = random_strict(rng)
    prob, _ = instance(seed, int(rng.integers(20, 90)), cfg)
    base = solve_allocation(prob)
    res = strict_resolver(prob, base)
    assert res is not None
    n_taken, diffs = 0, []
    for _ in range(12):
        i = int(rng.integers(prob.m))
        psi_i = float(prob.psi[i] * rng.choice([0.5, 1.0, 1.01, 1.3, 2.0, 4.0]))
        lean = res.solve(i, psi_i)
        full = solve_allocation(prob.with_seller_psi(i, psi_i))
        if lean is None:
            continue
        n_taken += 1
        eps_full = float(full.epsilon_total[i])
        scale = max(eps_full, winner_scale(full.epsilon_total))
        diffs.append(abs(lean.epsilon_total - eps_full) / scale)
        assert lean.epsilon_total == pytest.approx(eps_full, abs=FAST_TOL * scale)
        if diffs[-1] > 1e-9:
            # On a flat profile the full search's polish stops where G stops falling
            # in floating point (its η residual ≤ KKT_TOL, not 0); the compiled one
            # finds the root of P' itself: it must be the better KKT point.
            slopes = [abs(slope_at(prob.with_seller_psi(i, psi_i), e) * e)
                      for e in (lean.eta, full.eta)]  # fmt: skip
            assert slopes[0] <= slopes[1]
        assert lean.eta == pytest.approx(full.eta, rel=1e-4)
        assert str(full.status) == lean.status == "optimal"
        # the whole allocation, re-derived from (η, A, s)
        a_full = np.asarray(full.weights)
        assert np.abs(res.weights(lean) - a_full).max() <= 1e-5 * a_full.max()
    assert n_taken >= 10


@pytest.mark.parametrize("seed", range(4))
def test_compiled_strict_resolve_with_a_binding_lifetime_cap_is_the_full_search(
    seed: int,
) -> None:
    """Every seller with the same ``ε^max = E`` that binds on the upper part of the
    ``η`` range (a market's lifetime cap, the default): the caps ``min(k/m, E/η)``
    move with ``η``, the profile's slope gains the cap multipliers and the cells
    where the caps move are bounded over the larger feasible set. Each re-solve must
    still be the full search's answer."""
    rng = np.random.default_rng(200 + seed)
    cfg = MechanismConfig(
        gamma=float(10 ** rng.uniform(-1, 1)), lam=1e-2,
        mu=float(10 ** rng.uniform(-1.5, 0.5)), sigma=float(10 ** rng.uniform(-1, 1)),
        k=4.0, eps_avg_max=5.0, mode="strict",
    )  # fmt: skip
    m = int(rng.integers(40, 120))
    prob0, _ = instance(seed, m, cfg)
    # the cap starts to bind below the optimum without it, so the optima sit where
    # the caps move
    eta0 = solve_allocation(prob0).eta
    e_cap = float((cfg.k / m) * eta0 * rng.uniform(0.3, 0.8))
    prob = Problem(prob0.X, prob0.y, prob0.psi, np.full(m, e_cap), cfg)
    base = solve_allocation(prob)
    res = strict_resolver(prob, base)
    assert res is not None
    assert res.e_max == e_cap
    n_taken, n_moving = 0, 0
    for _ in range(12):
        i = int(rng.integers(prob.m))
        psi_i = float(prob.psi[i] * rng.choice([0.5, 1.0, 1.3, 2.0, 4.0]) + 0.1)
        lean = res.solve(i, psi_i)
        full = solve_allocation(prob.with_seller_psi(i, psi_i))
        if lean is None:
            continue
        n_taken += 1
        n_moving += int(lean.h_i < cfg.k / m)
        eps_full = float(full.epsilon_total[i])
        scale = max(eps_full, winner_scale(full.epsilon_total))
        assert lean.epsilon_total == pytest.approx(eps_full, abs=FAST_TOL * scale)
        assert lean.eta == pytest.approx(full.eta, rel=1e-4)
        a_full = np.asarray(full.weights)
        assert np.abs(res.weights(lean) - a_full).max() <= 1e-5 * a_full.max()
    assert n_taken >= 8
    assert n_moving >= 4


def test_compiled_strict_resolve_declines_where_it_does_not_apply() -> None:
    cfg = MechanismConfig(gamma=1.0, lam=1e-2, mu=1.0, sigma=10.0, k=4.0, mode="strict")
    prob, _ = instance(3, 40, cfg)
    base = solve_allocation(prob)
    assert strict_resolver(prob, base) is not None
    # ε^max caps that bind on the η range and differ between sellers: the caps then
    # differ and the sorted classes do not hold (equal ones apply: below)
    unequal = np.linspace(1e-3, 2e-3, prob.m)
    capped = Problem(prob.X, prob.y, prob.psi, unequal, cfg)
    assert strict_resolver(capped, solve_allocation(capped)) is None
    same = Problem(prob.X, prob.y, prob.psi, np.full(prob.m, 1e-3), cfg)
    assert strict_resolver(same, solve_allocation(same)) is not None
    for changed in (cfg.with_(mu=0.0), cfg.with_(mode="default")):
        other = dataclasses.replace(prob, cfg=changed)
        assert strict_resolver(other, solve_allocation(other)) is None
    res = strict_resolver(prob, base)
    assert res is not None
    assert res.solve(0, float("inf")) is None


@pytest.mark.parametrize(
    "cfg",
    [
        MechanismConfig(gamma=1.0, lam=1e-2, mu=1.0, sigma=10.0, k=4.0, mode="strict"),
        MechanismConfig(
            gamma=0.11,
            lam=5e-3,
            mu=2.1,
            sigma=110.0,
            k=8.4e4,
            eps_avg_max=280.0,
            mode="strict",
        ),
    ],
)
def test_strict_payments_equal_those_without_the_shortcut(cfg: MechanismConfig) -> None:
    prob, costs = instance(7, 30, cfg)
    job = payment_job(prob.X, prob.y, costs, PRIOR, cfg)
    slow = dataclasses.replace(job, fast=False)
    winners = [i for i in range(prob.m) if job.base.epsilon_total[i] > 0][:8]
    assert winners
    used = 0
    for i in winners:
        fast_pay = seller_payment(job, i)
        full_pay = seller_payment(slow, i)
        assert not fast_pay.fell_back
        assert fast_pay.certificate is not None
        # every shortcut point of a verified sweep at the bracket's ends or the checked
        # quadrature node is redone by a full solve: a sweep of two re-solves (a
        # nearly straight curve) keeps none
        if fast_pay.n_fast:
            used += 1
            assert fast_pay.certificate.method == "shortcut_certified"
        assert fast_pay.certificate.rule_certified
        assert fast_pay.fast_mismatch <= 1e-9 * max(fast_pay.epsilon, 1e-300)
        assert fast_pay.payment == pytest.approx(full_pay.payment, rel=2e-5)
        assert fast_pay.monotonicity_violation <= 1e-9 * fast_pay.epsilon
    assert used >= len(winners) - 2


def test_a_capped_sellers_kinks_are_its_own_first() -> None:
    """A seller at its cap keeps ``ε_i`` level while other sellers change status
    (``μ`` small, a cap far below ``k/m``): the kink search reads the seller's own
    status first where it changes between two re-solves, so its probes land where
    the seller leaves its cap, and the others' changes on the level piece are left
    alone. Payments agree with full solves and bisection alone; a median of 14
    re-solves a winner, where reading the others' first took 21."""
    cfg = MechanismConfig(
        gamma=5e3, lam=1.5, mu=4.4e-6, sigma=0.08, k=1.87, eps_avg_max=3.8e-6,
        mode="strict",
    )  # fmt: skip
    data = make_synthetic(2000, 5, label_noise=0.05, random_state=2)
    job = payment_job(data.X, data.y, data.costs, PRIOR, cfg)
    assert strict_resolver(job.prob, job.base) is not None
    slow = dataclasses.replace(job, fast=False)
    won = np.flatnonzero(job.base.epsilon > 0)
    solves = []
    for i in won[np.linspace(0, won.size - 1, 8).round().astype(int)]:
        fast_pay, full_pay = seller_payment(job, int(i)), seller_payment(slow, int(i))
        assert fast_pay.converged
        assert fast_pay.payment == pytest.approx(full_pay.payment, rel=2e-5)
        solves.append(fast_pay.n_solves)
    assert np.median(solves) <= 16, solves


def test_a_strict_job_leaves_the_stale_nodes_to_the_lean_resolver() -> None:
    """Where the lean strict re-solver applies, the job computes no stale nodes (a
    dozen solves before any seller runs): payments are those of a job that has them,
    to the bit. A default-mode job keeps them."""
    cfg = MechanismConfig(gamma=1.0, lam=1e-2, mu=1.0, sigma=10.0, k=4.0, mode="strict")
    prob, costs = instance(7, 30, cfg)
    job = payment_job(prob.X, prob.y, costs, PRIOR, cfg)
    assert job.nodes is None
    with_nodes = dataclasses.replace(job, nodes=stale_nodes(job.prob, job.base))
    assert with_nodes.nodes
    winners = [i for i in range(prob.m) if job.base.epsilon_total[i] > 0][:6]
    assert winners
    for i in winners:
        assert seller_payment(job, i).payment == seller_payment(with_nodes, i).payment
    default = payment_job(prob.X, prob.y, costs, PRIOR, cfg.with_(mode="default"))
    assert default.nodes is not None  # computed (empty under the candidate-model rule)


def test_the_full_search_polishes_a_flat_profile_to_its_root() -> None:
    """Small ``σ`` and ``γ``: ``G`` changes by less than its rounding over the last
    steps of the η polish. The polish then stopped where the rounded ``G`` stopped
    falling, ``1e-5`` short of the root in ``η`` (and ``ε``), so the verified payment
    sweeps saw the compiled re-solve (which finds the root of ``P'``) "mismatch" the
    full search and redid every seller with full solves. Both must find the root."""
    cfg = MechanismConfig(
        gamma=6.7e-6, lam=2.8e3, mu=400.0, sigma=0.08, k=8.9e5, eps_avg_max=2.1e4,
        mode="strict",
    )  # fmt: skip
    prob, _ = instance(7, 300, cfg)
    base = solve_allocation(prob)
    res = strict_resolver(prob, base)
    assert res is not None
    rng = np.random.default_rng(8)
    worst = 0.0
    for _ in range(12):
        i = int(rng.integers(prob.m))
        psi_i = float(prob.psi[i] * rng.uniform(1.0, 3.0))
        lean = res.solve(i, psi_i)
        assert lean is not None
        full = solve_allocation(prob.with_seller_psi(i, psi_i))
        worst = max(worst, abs(full.eta - lean.eta) / lean.eta)
    assert worst <= 1e-10


@pytest.mark.parametrize("seed", range(6))
def test_raised_reports_start_from_the_base_grid_values(seed: int) -> None:
    """A raised ``Ψ_i`` does not lower ``P`` anywhere, so the re-solve starts from the
    base's grid values as lower bounds and evaluates only what the search needs: the
    answer is still the full search's, in fewer evaluations than the all-fresh grid."""
    rng = np.random.default_rng(300 + seed)
    cfg = random_strict(rng)
    prob, _ = instance(seed, int(rng.integers(20, 90)), cfg)
    res = strict_resolver(prob, solve_allocation(prob))
    assert res is not None
    n_stale, n_fresh, n_taken = 0, 0, 0
    for _ in range(10):
        i = int(rng.integers(prob.m))
        psi_i = float(prob.psi[i] * rng.choice([1.0, 1.01, 1.3, 2.0, 4.0, 30.0]))
        stale, fresh = res.kernel(i, psi_i, True), res.kernel(i, psi_i, False)
        if stale[0] != 1.0 or fresh[0] != 1.0:
            continue
        n_stale += int(stale[9])
        n_fresh += int(fresh[9])
        lean = res.solve(i, psi_i)
        if lean is None:
            continue
        n_taken += 1
        full = solve_allocation(prob.with_seller_psi(i, psi_i))
        eps_full = float(full.epsilon_total[i])
        scale = max(eps_full, winner_scale(full.epsilon_total))
        assert lean.epsilon_total == pytest.approx(eps_full, abs=FAST_TOL * scale)
        assert lean.eta == pytest.approx(full.eta, rel=1e-4)
        assert str(full.status) == lean.status == "optimal"
    assert n_taken >= 8
    assert n_stale < n_fresh


def test_a_stale_grid_point_far_from_the_base_optimum_becomes_the_optimum() -> None:
    """Two basins: the profile is ``σ/η`` plus a concave minimum over ``a``. Spread
    over the 29 dear sellers (``Ψ ≈ 1``) it has a local minimum near
    ``η = √(σ/γ)``; on the one cheap seller (``a_0 = 1``, ``‖a‖ = 1``) it falls to
    ``η_hi`` while ``Ψ_0 ≈ 0`` (the base optimum) and has a second local minimum where
    ``γηΨ_0`` catches up once ``Ψ_0`` is raised. From ``Ψ_0 = 10⁻²`` on, the global
    minimum is in the first basin, a dozen grid points below the base optimum: the
    re-solve starts there with only the base's (stale) values, and a local descent
    from the base optimum stops in the second basin. The branch-and-bound must refresh
    the stale cells and find it: the full search's answer."""
    m = 30
    cfg = MechanismConfig(
        gamma=1.0, lam=1e-2, mu=1.0, sigma=0.2, k=30.0, eps_avg_max=100.0 / 30,
        mode="strict",
    )  # fmt: skip
    prob0, _ = instance(11, m, cfg)
    psi = np.concatenate([[1e-6], np.linspace(1.0, 1.2, m - 1)])
    prob = Problem(prob0.X, prob0.y, psi, np.full(m, np.inf), cfg)
    base = solve_allocation(prob)
    res = strict_resolver(prob, base)
    assert res is not None
    assert base.eta == pytest.approx(res.grid[-1])
    j_base = int(np.argmin(res.grid_V))  # freshly evaluated first, with its neighbours
    for psi_0 in (1e-3, 1e-2, 8e-2, 1.0):
        out = res.kernel(0, psi_0, True)
        assert out[0] == 1.0
        assert out[9] < res.kernel(0, psi_0, False)[9]
        j_new = int(np.argmin(np.abs(np.log(res.grid / out[1]))))
        assert abs(j_new - j_base) >= 5
        lean = res.solve(0, psi_0)
        assert lean is not None
        full = solve_allocation(prob.with_seller_psi(0, psi_0))
        assert lean.eta == pytest.approx(full.eta, rel=1e-6)
        scale = max(float(full.epsilon_total[0]), winner_scale(full.epsilon_total))
        assert lean.epsilon_total == pytest.approx(
            float(full.epsilon_total[0]), abs=FAST_TOL * scale
        )
        a_full = np.asarray(full.weights)
        assert np.abs(res.weights(lean) - a_full).max() <= 1e-5 * a_full.max()
    assert lean.eta < 0.01 * base.eta  # the last ones: the first basin
