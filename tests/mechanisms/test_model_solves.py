"""Candidate-model solves on fewer rows (:mod:`mechanisms.allocation._range._model_solves`):
the screened solve of a scenario model ends at a KKT point of the problem on all rows,
and the candidate models computed with it stay functions of the public data only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from market.datasets import make_synthetic
from mechanisms import MechanismConfig, UniformPrior
from mechanisms.allocation._block_solver import BlockSolution, solve_at_eta
from mechanisms.allocation._eta_search import eta_bounds
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range import _candidate_range as cr
from mechanisms.allocation._range import _model_solves as ms
from mechanisms.allocation._reduced_newton import newton_reduced
from mechanisms.allocation._weights_kernel import range_value_kernel
from mechanisms.allocation._weights_step import project_capped_simplex, solve_weights

PRIOR = UniformPrior(1e-4, 5e-4)
CFG = MechanismConfig(gamma=1e-2, lam=1e-3, mu=0.5, sigma=0.02, k=100, eps_avg_max=1e4)


def _bounds(prob: Problem) -> tuple[float, float]:
    bounds = eta_bounds(prob)
    assert bounds is not None
    return bounds


def _problem(m: int = 3000, seed: int = 3, cfg: MechanismConfig = CFG) -> Problem:
    data = make_synthetic(m, 5, label_noise=0.05, random_state=seed)
    psi = np.asarray(PRIOR.virtual_cost(data.costs), dtype=float)
    scen = cr.scenario_virtual_costs(PRIOR, m)
    return Problem(data.X, data.y, psi, np.full(m, np.inf), cfg, scenario_psi=scen)


@pytest.fixture
def small_screen(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Screening on for a few thousand records; records the sizes of the sets ``C``."""
    monkeypatch.setattr(ms, "SCREEN_MIN_M", 0)
    monkeypatch.setattr(ms, "SCREEN_MIN_ROWS", 64)
    sizes: list[int] = []
    restrict = ms.restrict

    def spy(prob: Problem, rows: np.ndarray, scale: float = 1.0) -> ms.RowSubset:
        sizes.append(int(rows.size))
        return restrict(prob, rows, scale)

    monkeypatch.setattr(ms, "restrict", spy)
    return sizes


def _free_model(prob: Problem, eta: float) -> BlockSolution:
    free = dataclasses.replace(prob, psi=np.zeros(prob.m))
    a0 = project_capped_simplex(np.full(prob.m, 1.0 / prob.m), prob.caps(eta))[0]
    return solve_at_eta(free, eta, w0=np.zeros(prob.X.shape[1]), a0=a0, max_iter=60)


def _models_at_two_reports() -> tuple[
    cr.CandidateModels, cr.CandidateModels, cr.CandidateModels
]:
    """Candidate models of one market at its reports, at other reports, and at its
    reports again (equal when the models depend on the public data only)."""
    prob = _problem()
    lo, hi = _bounds(prob)
    c2 = np.random.default_rng(1).uniform(1e-4, 5e-4, prob.m)
    prob2 = dataclasses.replace(prob, psi=np.asarray(PRIOR.virtual_cost(c2)))
    m1 = cr.candidate_models(prob, lo, hi)
    m2 = cr.candidate_models(prob2, lo, hi)
    return m1, m2, cr.candidate_models(prob, lo, hi)


@pytest.mark.parametrize("level", [0, 1])
def test_screened_solve_ends_at_a_kkt_point_on_all_rows(
    small_screen: list[int], level: int
) -> None:
    prob = _problem()
    lo, hi = _bounds(prob)
    eta = float(np.geomspace(lo, hi, cr.N_LEVELS + 1)[1:][::-1][level])
    free = _free_model(prob, eta)
    assert prob.scenario_psi is not None
    assert free.losses is not None
    sp = dataclasses.replace(prob, psi=np.array(prob.scenario_psi[0]))
    sol = ms.solve_screened(
        sp,
        eta,
        w0=free.w,
        a0=free.a,
        losses0=free.losses,
        state=free.state,
        max_iter=200,
    )
    assert small_screen
    assert max(small_screen) < prob.m  # solved on fewer rows
    assert sol.converged  # ‖∇F‖ ≤ tol·(1 + ‖w‖), tested on all rows
    # the weights are the exact a-step on all rows at the returned model
    losses = sp.loss.value(sp.X @ sol.w, sp.y)
    assert sol.losses is not None
    np.testing.assert_allclose(sol.losses, losses, rtol=1e-12, atol=1e-14)
    r = losses + sp.cfg.gamma * eta * sp.psi
    a, _ = solve_weights(r, sp.caps(eta), sp.cfg.mu)
    np.testing.assert_allclose(sol.a, a, atol=1e-10)
    value = float(a @ r) + 0.5 * sp.cfg.lam * float(sol.w @ sol.w)
    value += sp.cfg.mu * float(np.linalg.norm(a)) + sp.cfg.sigma / eta
    assert sol.value == pytest.approx(value, rel=1e-10)
    # no worse than the solve on all rows from the same start (beyond the local
    # minima's spread)
    full = solve_at_eta(sp, eta, w0=free.w, a0=free.a, state=free.state, max_iter=200)
    assert sol.value <= full.value + 1e-3 * abs(full.value)


def test_screened_candidate_models_do_not_depend_on_the_reports(
    small_screen: list[int],
) -> None:
    m1, m2, m3 = _models_at_two_reports()
    assert small_screen
    np.testing.assert_array_equal(m1.W, m2.W)
    np.testing.assert_array_equal(m1.W, m3.W)
    np.testing.assert_array_equal(m1.losses, m2.losses)


def test_subsampled_candidate_models_do_not_depend_on_the_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ms, "SUBSAMPLE_MIN_M", 0)
    monkeypatch.setattr(ms, "SUBSAMPLE_MIN_ROWS", 200)
    calls: list[int] = []
    solve = ms.solve_subsampled

    def spy(prob: Problem, eta: float, **kw: object) -> BlockSolution:
        calls.append(prob.m)
        return solve(prob, eta, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(cr, "solve_subsampled", spy)
    m1, m2, m3 = _models_at_two_reports()
    assert calls
    np.testing.assert_array_equal(m1.W, m2.W)
    np.testing.assert_array_equal(m1.W, m3.W)


def test_subsample_problem_approximates_f(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subsets' problems approximate ``F`` (caps ``h·m/n``, ``μ√(n/m)``): at the
    model of all rows, ``F_S(w) ≈ F(w)`` within 2.3 % on 1000 and 2500 of 20 000
    rows (without the ``μ`` scaling ``F_S`` is off by 47 % and 28 %, without the cap
    scaling by a factor ~4)."""
    monkeypatch.setattr(ms, "SUBSAMPLE_MIN_ROWS", 1000)
    prob = _problem(m=20_000, cfg=CFG.with_(gamma=0.0, k=4.0, mu=1.0))
    eta = _bounds(prob)[1]
    free = _free_model(prob, eta)
    for rows in ms.subsample_rows(prob.m):
        assert rows.size < prob.m
        assert np.all(np.diff(rows) > 0)
        sub = ms.restrict(prob, rows, prob.m / rows.size)
        a0 = np.full(rows.size, 1.0 / rows.size)
        at_w = solve_at_eta(sub, eta, w0=free.w, a0=a0, max_iter=0)
        assert at_w.value == pytest.approx(free.value, rel=0.05)  # 0.2 %, 2.3 %


def test_extrapolated_newton_steps_reach_a_kkt_point_in_fewer_iterations() -> None:
    """``newton_reduced(extrapolate=True)`` (the final solve of
    :func:`ms.solve_subsampled`): with a small ``μ`` the plain trust-region solve
    crawls (50 iterations here), the extended Newton steps reach a KKT point in
    about half of them, of about the same value."""
    m = 3000
    prob = _problem(m=m, cfg=CFG.with_(gamma=0.0, k=4.0, mu=1e-3, lam=1e-2))
    eta = _bounds(prob)[1]
    a0 = project_capped_simplex(np.full(m, 1.0 / m), prob.caps(eta))[0]
    kw = {"w0": np.zeros(prob.X.shape[1]), "state": None, "gtol": 1e-9, "a0": a0}
    plain = newton_reduced(prob, eta, max_iter=200, **kw)  # type: ignore[arg-type]
    ext = newton_reduced(prob, eta, max_iter=200, extrapolate=True, **kw)  # type: ignore[arg-type]
    assert plain.converged
    assert ext.converged
    assert ext.iterations < 0.75 * plain.iterations
    assert ext.value == pytest.approx(plain.value, rel=1e-4)


def test_warm_subsampled_scenario_solve_reaches_the_kkt_point_of_all_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scenario's model from the cost-free one with the weights spread over many
    records (``k = 4``, no screening): the solve on a subset then two iterations on
    all rows end at the KKT point the solve on all rows reaches (same ``F`` to
    1e-13 here, ``w`` to 1e-5; the subsets' scaling is tested above)."""
    monkeypatch.setattr(ms, "SUBSAMPLE_MIN_ROWS", 2000)
    prob = _problem(m=20_000, cfg=CFG.with_(k=4.0, mu=1.0))
    eta = _bounds(prob)[1]
    free = _free_model(prob, eta)
    assert prob.scenario_psi is not None
    sp = dataclasses.replace(prob, psi=np.array(prob.scenario_psi[0]))
    full = solve_at_eta(sp, eta, w0=free.w, a0=free.a, state=free.state, max_iter=60)
    warm = ms.solve_warm_subsampled(
        sp, eta, w0=free.w, a0=free.a, state=free.state, max_iter=60
    )
    assert full.converged
    assert warm.value == pytest.approx(full.value, rel=1e-9)
    tol = 1e-4 * (1.0 + float(np.linalg.norm(full.w)))
    assert float(np.abs(warm.w - full.w).max()) <= tol


@pytest.mark.parametrize("mu", [1e-5, 0.5])
def test_range_search_cold_guess_gives_the_cold_a_step(mu: float) -> None:
    """The range search's first a-step on many records starts from the a-step on a
    strided subsample (``_Search._cold_guess``): only a start, the same minimiser
    (value, multipliers) as from a cold start."""
    m = 60_000
    prob = _problem(m=m, cfg=CFG.with_(k=4.0, mu=mu))
    lo, hi = _bounds(prob)
    w = np.asarray(
        np.random.default_rng(0).normal(size=prob.X.shape[1]), dtype=np.float64
    )
    models = cr._collect(prob, [w], [prob.loss.value(prob.X @ w, prob.y)])
    search = cr._Search(prob, models, lo, hi)
    eta = float(np.sqrt(lo * hi))
    assert search._cold_guess(0, eta)[1] > 0.0
    got = search.evaluate(0, eta, None)
    kcap = prob.cfg.k / m
    ok, value, A, s, _ = range_value_kernel(
        models.losses[0], prob.psi, prob.cfg.gamma * eta, eta, kcap, prob.eps_max,
        mu, float(models.base[0]) + prob.cfg.sigma / eta, 0.0, 0.0,
    )  # fmt: skip
    assert ok
    assert got.value == pytest.approx(value, rel=1e-12)
    assert got.state is not None
    np.testing.assert_allclose([got.state.A, got.state.s], [A, s], rtol=1e-9)
