"""Issue 9, second pass: the default rule is a certified global optimum over a declared
range (``w`` over public candidate models, ``η`` over ``[η_lo, η_hi]``, ``a`` on the
capped simplex), hence monotone in each report.

Independent checks: the a-step kernel against the NumPy solver; the range optimum
against a fine ``η`` grid with a generic convex solver (cvxpy) for every model of the
range and a bounded refinement; monotonicity by brute-force sweeps (400 reports per
seller); IC regret and IR by brute force (slow).
"""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor

import cvxpy as cp
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from mechanisms import (
    MechanismConfig,
    UniformPrior,
    allocate,
    audit_monotonicity,
    myerson_payments,
)
from mechanisms.allocation._block_solver import solve_at_eta
from mechanisms.allocation._eta_search import eta_bounds, solve_allocation
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range._candidate_range import (
    _lower_start,
    a_step,
    candidate_models,
    scenario_virtual_costs,
)
from mechanisms.allocation._weights_step import solve_weights
from tests.mechanisms.conftest import g_value
from tests.mechanisms.test_certified_allocation import (
    PRIOR,
    issue_instance,
    random_instance,
)


def default_instance(seed: int, m_range=(4, 6)):
    """A random instance of ``test_certified_allocation`` under the default rule."""
    X, y, c, cfg = random_instance(seed, m_range=m_range)
    return X, y, c, cfg.with_(certify="auto")


def _problem(X, y, c, cfg, prior=PRIOR) -> Problem:
    psi = np.asarray(prior.virtual_cost(c), dtype=float)
    scen = scenario_virtual_costs(prior, c.size)
    return Problem(X, y, psi, np.full(c.size, np.inf), cfg, scenario_psi=scen)


# ---------------------------------------------------------------- building blocks


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_scenario_lower_level_starts_from_the_lower_g(seed: int) -> None:
    """``_lower_start`` returns, of two solved models, the ``w`` where ``G`` after the
    exact a-step is lowest at the scenario's ``(Ψ, η)``, with that a-step's weights:
    checked against ``G`` written out independently and the a-step solved by NumPy."""
    X, y, c, cfg = default_instance(seed, m_range=(12, 16))
    prob = _problem(X, y, c, cfg)
    lo, hi = eta_bounds(prob)
    eta_hi, eta_lo = float(hi), float(np.sqrt(lo * hi))
    d = X.shape[1]
    free = dataclasses.replace(prob, psi=np.zeros(prob.m))
    a0 = np.full(prob.m, 1.0 / prob.m)
    sp = dataclasses.replace(prob, psi=np.asarray(prob.scenario_psi[0], dtype=float))
    starts = (
        solve_at_eta(free, eta_hi, w0=np.zeros(d), a0=a0, max_iter=60),
        solve_at_eta(sp, eta_hi, w0=np.zeros(d), a0=a0, max_iter=60),
    )
    w, a, _ = _lower_start(sp, eta_lo, starts)
    caps = sp.caps(eta_lo)
    values = []
    for s in starts:
        r = sp.loss.value(X @ s.w, y) + cfg.gamma * eta_lo * sp.psi
        a_s, _ = solve_weights(r, caps, cfg.mu)
        values.append(g_value(X, y, sp.psi, cfg, s.w, a_s, eta_lo))
    k = int(np.argmin(values))
    np.testing.assert_array_equal(w, starts[k].w)
    assert g_value(X, y, sp.psi, cfg, w, a, eta_lo) == pytest.approx(
        values[k], rel=1e-9
    )


def test_a_step_kernel_matches_the_numpy_solver() -> None:
    rng = np.random.default_rng(7)
    n = 0
    for _ in range(400):
        m = int(rng.integers(2, 50))
        r = rng.uniform(0.0, rng.uniform(0.01, 5.0), m)
        caps = np.full(m, min(1.0, rng.uniform(1.05, 4.0) / m))
        if rng.random() < 0.3:
            caps = np.minimum(caps, rng.uniform(0.0, 2.0 / m, m))
        if caps.sum() <= 1.0 + 1e-9:
            continue
        mu = float(10 ** rng.uniform(-2, 2))
        ref, _ = solve_weights(r, caps, mu)
        cold, state = a_step(r, caps, mu, None)
        np.testing.assert_allclose(cold, ref, atol=1e-12)
        r2 = r + rng.normal(scale=0.02, size=m)
        warm, _ = a_step(r2, caps, mu, state)
        np.testing.assert_allclose(warm, solve_weights(r2, caps, mu)[0], atol=1e-12)
        n += 1
    assert n > 200


def test_candidate_models_do_not_depend_on_the_reports() -> None:
    X, y, c, cfg = issue_instance()
    prob = _problem(X, y, c, cfg)
    lo, hi = eta_bounds(prob)
    c2 = np.random.default_rng(1).uniform(0.1, 1.0, c.size)
    prob2 = dataclasses.replace(prob, psi=PRIOR.virtual_cost(c2))
    m1, m2 = candidate_models(prob, lo, hi), candidate_models(prob2, lo, hi)
    assert m1.n >= 5
    np.testing.assert_array_equal(m1.W, m2.W)
    # ... but they depend on the records: a different label vector moves them.
    y3 = y.copy()
    y3[:3] *= -1
    m3 = candidate_models(dataclasses.replace(prob, y=y3), lo, hi)
    assert not np.allclose(m3.W[0], m1.W[0])


def test_default_rule_is_certified_on_the_issue_instance() -> None:
    X, y, c, cfg = issue_instance()
    assert cfg.certify == "auto"
    alloc = allocate(X, y, c, PRIOR, cfg)
    assert alloc.certified, alloc.message
    cert = alloc.certificate
    assert cert.rule == "candidate_models"
    assert cert.closed
    assert cert.gap <= 1e-9 * (1 + abs(alloc.objective))
    assert cert.lower_bound <= alloc.objective
    d = json.loads(json.dumps(alloc.to_dict()))
    assert d["certificate"]["rule"] == "candidate_models"
    assert "models" not in d["certificate"]
    # G at the returned (w, a, η), recomputed independently.
    psi = PRIOR.virtual_cost(c)
    ours = g_value(X, y, psi, cfg, alloc.w, alloc.weights, alloc.eta)
    assert ours == pytest.approx(alloc.objective, rel=1e-12)
    # The issue's reports: seller 3's ε no longer comes back after dropping.
    eps = []
    for s in [0.3, c[3], 0.449, 0.4505, 0.452, 0.455, 0.9]:
        cc = c.copy()
        cc[3] = s
        eps.append(allocate(X, y, cc, PRIOR, cfg).epsilon[3])
    assert np.all(np.diff(eps) <= 1e-9)
    assert eps[0] > 0.0


def test_reuse_of_models_and_search_equals_a_cold_solve() -> None:
    """Re-solves reuse the base's models and closed search (audit, payments); the
    answer is the cold one."""
    X, y, c, cfg = issue_instance()
    prob = _problem(X, y, c, cfg)
    prev = solve_allocation(prob)
    for s in np.linspace(0.1, 1.0, 9):
        psi = prob.psi.copy()
        psi[3] = PRIOR.virtual_cost(np.array([s]))[0]
        p = dataclasses.replace(prob, psi=psi)
        warm = solve_allocation(p, warm_start=prev)
        cold = solve_allocation(p)
        assert warm.certified
        assert cold.certified
        np.testing.assert_allclose(warm.epsilon, cold.epsilon, atol=1e-8)
        assert warm.objective == pytest.approx(cold.objective, rel=1e-10)
        prev = warm


# ---------------------------------------------------------------- independent check


def _independent_range_optimum(prob: Problem, n_eta: int) -> float:
    """min over the declared range by brute force: every model, a fine η grid with a
    cvxpy a-step, then a bounded refinement around each model's best grid point."""
    cfg, m = prob.cfg, prob.m
    lo, hi = eta_bounds(prob)
    models = candidate_models(prob, lo, hi)
    a_var = cp.Variable(m, nonneg=True)
    r_par = cp.Parameter(m)
    h_par = cp.Parameter(m, nonneg=True)
    a_prob = cp.Problem(
        cp.Minimize(r_par @ a_var + cfg.mu * cp.norm(a_var, 2)),
        [cp.sum(a_var) == 1, a_var <= h_par],
    )

    def value(w: np.ndarray, eta: float) -> float:
        ell = np.logaddexp(0.0, -prob.y * (prob.X @ w))
        r_par.value = ell + cfg.gamma * eta * prob.psi
        h = np.minimum(cfg.k / m, prob.eps_max / eta)  # ε_i^max may bind
        h_par.value = h
        a_prob.solve(solver=cp.CLARABEL)
        # Made exactly feasible (at CLARABEL's 1e-8 tolerance a renormalised solution
        # exceeds a cap by ~3e-9, and its G undercuts the range optimum by ~5e-9):
        # shift by θ with Σ clip(a + θ, 0, h) = 1, θ by bisection.
        a = np.asarray(a_var.value, dtype=float)
        lo_t, hi_t = -1.0, 1.0
        for _ in range(200):
            t = 0.5 * (lo_t + hi_t)
            if np.clip(a + t, 0.0, h).sum() < 1.0:
                lo_t = t
            else:
                hi_t = t
        a = np.clip(a + hi_t, 0.0, h)
        return g_value(prob.X, prob.y, prob.psi, cfg, w, a, eta)

    best = np.inf
    grid = np.geomspace(lo, hi, n_eta)
    for w in models.W:
        vals = [value(w, e) for e in grid]
        k = int(np.argmin(vals))
        a, b = grid[max(k - 1, 0)], grid[min(k + 1, n_eta - 1)]
        res = minimize_scalar(
            lambda t, w=w: value(w, float(np.exp(t))),
            bounds=(np.log(a), np.log(b)),
            method="bounded",
            options={"xatol": 1e-9},
        )
        best = min(best, float(res.fun), *vals)
    return best


def _check_range_optimum(seed: int, n_eta: int) -> None:
    X, y, c, cfg = default_instance(seed, m_range=(5, 12))
    alloc = allocate(X, y, c, PRIOR, cfg)
    assert alloc.certified, alloc.message
    found = _independent_range_optimum(_problem(X, y, c, cfg), n_eta)
    ours = g_value(X, y, PRIOR.virtual_cost(c), cfg, alloc.w, alloc.weights, alloc.eta)
    assert ours == pytest.approx(alloc.objective, rel=1e-12)
    assert ours <= found + 1e-9 * (1.0 + abs(found))  # never worse
    assert abs(ours - found) <= 1e-6 * abs(found)
    assert alloc.certificate.lower_bound <= found + 1e-9 * (1.0 + abs(found))


@pytest.mark.parametrize("seed", range(3))
def test_range_optimum_matches_an_independent_search(seed: int) -> None:
    _check_range_optimum(seed, n_eta=40)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_range_optimum_matches_an_independent_search_20(seed: int) -> None:
    _check_range_optimum(seed, n_eta=80)


# ------------------------------------------- near the lifetime cap (issue 14, item 1)


def near_cap_instance(seed: int):
    """A random default-rule instance whose sellers are near their lifetime caps:
    ``ε_i^max ~ U[0.2, 0.6]``, so the caps ``min(k/m, ε_i^max/η)`` move with ``η`` on
    most of the range (the third order of issue 14's market)."""
    X, y, c, cfg = default_instance(seed, m_range=(5, 12))
    eps_max = np.random.default_rng(seed).uniform(0.2, 0.6, c.size)
    return X, y, c, cfg, eps_max


@pytest.mark.parametrize("seed", range(12))
def test_near_cap_instances_certify_quickly(seed: int) -> None:
    """Before the dual cell bound, 7 of these 12 ran to ``MAX_EVALS`` (20,000) a-steps
    and stayed ``uncertified`` (gaps 1e-9 to 2e-6), and so did every payment
    re-solve; now each closes within 1,200 a-steps, or 150 per candidate model where
    the range holds more than 8 (measured 165–881 with at most 9 models)."""
    X, y, c, cfg, eps_max = near_cap_instance(seed)
    alloc = allocate(X, y, c, PRIOR, cfg, eps_max)
    # Seeds 5 and 11 end at a kink of p_j (a seller leaving its cap) where the η KKT
    # residual, a two-sided derivative, reads "optimal_inaccurate" — as before the
    # change; the certificate (what blew up) closes on all.
    assert alloc.status in ("optimal", "optimal_inaccurate"), alloc.message
    cert = alloc.certificate
    assert cert.closed
    assert cert.gap <= 1e-9 * (1 + abs(alloc.objective))
    assert cert.n_bound_solves <= max(1_200, 150 * cert.n_models)
    assert np.all(alloc.epsilon <= eps_max * (1 + 1e-9))


@pytest.mark.parametrize("seed", [0, 4, 9])
def test_near_cap_range_optimum_matches_an_independent_search(seed: int) -> None:
    """The certificate with moving caps against the independent search (cvxpy a-step
    with the caps ``min(k/m, ε_i^max/η)``): never worse, lower bound below it."""
    X, y, c, cfg, eps_max = near_cap_instance(seed)
    alloc = allocate(X, y, c, PRIOR, cfg, eps_max)
    assert alloc.certified, alloc.message
    prob = dataclasses.replace(_problem(X, y, c, cfg), eps_max=eps_max)
    found = _independent_range_optimum(prob, n_eta=40)
    ours = g_value(X, y, PRIOR.virtual_cost(c), cfg, alloc.w, alloc.weights, alloc.eta)
    assert ours == pytest.approx(alloc.objective, rel=1e-12)
    assert ours <= found + 1e-9 * (1.0 + abs(found))
    assert abs(ours - found) <= 1e-6 * abs(found)
    assert alloc.certificate.lower_bound <= found + 1e-9 * (1.0 + abs(found))


@pytest.mark.parametrize("seed", range(3))
def test_dual_cell_bound_is_below_the_cell_minimum(seed: int) -> None:
    """Weak duality on any ``ν ≥ 0``: the cell bound never exceeds ``min p_j`` on the
    cell (a dense grid of exact a-steps), for the multipliers the search uses, random
    ones and zero; and with the search's multipliers it is tight on narrow cells."""
    from mechanisms.allocation._range._candidate_range import _Search

    X, y, c, cfg, eps_max = near_cap_instance(seed)
    prob = dataclasses.replace(_problem(X, y, c, cfg), eps_max=eps_max)
    lo, hi = eta_bounds(prob)
    models = candidate_models(prob, lo, hi)
    search = _Search(prob, models, lo, hi)
    rng = np.random.default_rng(seed)
    for j in range(models.n):
        for e1 in np.geomspace(max(lo, float(eps_max.min()) / search.kcap), hi, 6)[:-1]:
            for width in (0.3, 1e-3):
                e2 = min(e1 * (1 + width), hi)
                p1, p2 = search.evaluate(j, e1, None), search.evaluate(j, e2, None)
                cell_min = min(
                    search.evaluate(j, float(e), None).value
                    for e in np.linspace(e1, e2, 41)
                )
                tol = 1e-12 * (1 + abs(cell_min))
                for nu in (
                    search.cap_multipliers(p1),
                    search.cap_multipliers(p2),
                    rng.exponential(1.0, prob.m),
                    np.zeros(prob.m),
                ):
                    assert search.dual_cell_bound(p1, p2, nu) <= cell_min + tol
                assert search.cell_bound(p1, p2) <= cell_min + tol
                if width < 0.01:  # second order: tight on a narrow cell
                    low = p1 if p1.value <= p2.value else p2
                    nu = search.cap_multipliers(low)
                    bound = search.dual_cell_bound(p1, p2, nu)
                    assert cell_min - bound <= 1e-5 * (1 + abs(cell_min))


# ---------------------------------------------------------------- monotonicity audit


def _audit(X, y, c, cfg, n_points, prior=PRIOR, sellers=None):
    with ThreadPoolExecutor(1) as ex:
        return audit_monotonicity(
            X, y, c, prior, cfg, sellers=sellers, n_points=n_points, executor=ex
        )


def test_audit_issue_instance_400_points_every_seller() -> None:
    X, y, c, cfg = issue_instance()
    rep = _audit(X, y, c, cfg, 400)
    assert rep.base_status == "optimal"
    assert rep.certified
    assert rep.n_violations == 0
    # Not vacuous: seller 3 is excluded somewhere on the support.
    eps3 = np.array(rep.sweeps[3].epsilon)
    assert eps3[0] > 0.1
    assert eps3[-1] == 0.0


def _audit_random_default_instance(seed: int) -> None:
    X, y, c, cfg = default_instance(seed)
    rep = _audit(X, y, c, cfg, 400)
    assert rep.certified
    assert rep.n_violations == 0
    assert max(max(s.epsilon) for s in rep.sweeps) > 0.0


@pytest.mark.parametrize("seed", range(3))
def test_audit_random_instances_400_points(seed: int) -> None:
    _audit_random_default_instance(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3, 19))
def test_audit_random_instances_400_points_slow(seed: int) -> None:
    _audit_random_default_instance(seed)


@pytest.mark.slow
def test_audit_wisconsin_10_sellers_default_rule() -> None:
    from market.datasets import load_wisconsin

    X, y = load_wisconsin()
    rng = np.random.default_rng(0)
    idx = rng.permutation(X.shape[0])[:120]
    prior = UniformPrior(1e-4, 5e-4)
    c = prior.sample(idx.size, rng=rng)
    cfg = MechanismConfig(gamma=1.0, lam=1e-3, mu=100.0, sigma=1e3, k=4,
                          eps_avg_max=10.0)  # fmt: skip
    rep = _audit(X[idx], y[idx], c, cfg, 400, prior=prior, sellers=range(10))
    assert rep.base_status == "optimal"
    assert rep.certified
    assert rep.n_violations == 0


# ---------------------------------------------------------------- payments: IC, IR


def ic_regret(seed: int, n_mis: int = 40) -> tuple[float, float, float]:
    """``(max regret / payment, total paid, min IR utility)`` by brute force: full
    re-solves and full payments at every misreport."""
    X, y, c, cfg = default_instance(seed, m_range=(4, 7))
    ex = ThreadPoolExecutor(1)
    truthful = myerson_payments(X, y, c, PRIOR, cfg, executor=ex, rtol=1e-9)
    assert truthful.allocation.certified
    assert truthful.rule_certified
    util = truthful.payments - c * truthful.epsilon
    worst = 0.0
    for i in range(c.size):
        for s in np.linspace(0.1, 1.0, n_mis):
            cc = c.copy()
            cc[i] = s
            mis = myerson_payments(
                X, y, cc, PRIOR, cfg, sellers=[i], executor=ex, rtol=1e-9
            )
            u = mis.payments[i] - c[i] * mis.epsilon[i]
            scale = max(truthful.payments[i], 1e-12)
            worst = max(worst, (u - util[i]) / scale)
    return worst, float(truthful.total), float(util.min())


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_ic_regret_brute_force_default_rule(seed: int) -> None:
    regret, total, min_util = ic_regret(seed)
    assert total > 0
    assert min_util >= -1e-12  # IR for every seller
    assert regret <= 1e-6
