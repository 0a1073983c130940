"""The allocation: choose ``(a, η)``, and so every seller's ``ε_i = a_i η`` (spec §4).

``allocate`` validates the inputs, turns reported costs into virtual costs ``Ψ_i``
(spec §2), and minimises ``G(w, a, η)`` of spec §4.1 (paper eq. (10), made well-posed):
block-exact solves at fixed ``η`` (:mod:`mechanisms.allocation._block_solver`) inside a global
search over ``η`` — a coarse log grid over ``ε_avg = η/m ∈ [L·floor, L]``, warm-started
point to point, then a bounded 1-D refinement (Brent, in ``log η``) around the best
grid point (the paper's "line search", spec §4.2; the profile is not convex in ``η``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq, minimize_scalar

from learners._noise import sample_gamma_direction_noise
from mechanisms._inputs import check_problem
from mechanisms.allocation._blas import single_blas_thread
from mechanisms.allocation._block_solver import (
    BlockSolution,
    fit_strict_w,
    solve_at_eta,
)
from mechanisms.allocation._eta_polish import (
    POLISH_DONE,
    POLISH_MAX_STEPS,
    compiled_steps_apply,
    polish_kernel,
    psi_dot,
    solve_and_polish_kernel,
)
from mechanisms.allocation._kkt_kernel import a_block_conditions, eta_cap_limit
from mechanisms.allocation._logistic_kernel import logistic_pass, logistic_value_slope
from mechanisms.allocation._problem import Problem, utility_derivative
from mechanisms.allocation._range._candidate_range import (
    CandidateModels,
    candidate_models,
    scenario_virtual_costs,
    solve_in_range,
)
from mechanisms.allocation._range._certify import (
    RANGE_RTOL,
    AllocationCertificate,
    certify_range,
    effective_problem,
    node_of,
)
from mechanisms.allocation._reduced_newton import _known_losses, kernel_hessian
from mechanisms.allocation._weights_kernel import kernel_array
from mechanisms.allocation._weights_step import WeightsStepState, project_capped_simplex
from mechanisms.config import MechanismConfig
from mechanisms.priors import CostPrior, ensure_regular
from mechanisms.result import Allocation, EtaProfile, KKTResiduals, SolveStatus

FloatArray = NDArray[np.float64]
KKT_TOL = 1e-6
A_ZERO = 1e-7
"""A weight at most this is read as at its lower bound by the KKT check (the block
solves leave weights of ~1e-8 where the optimum sits at a kink of η, e.g. where an
ε cap starts to bind; their ε is below ``A_ZERO·η``)."""
EPS_CAP_RTOL = 1e-7
"""A weight within this (relative) of its ``ε^max/η`` cap counts as held by the cap in
the KKT check (see :func:`_block_conditions`)."""
GRID_TOL = 1e-6  # block-solve tolerance at coarse-grid points (they only rank cells)


def allocate(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    eps_max: ArrayLike | None = None,
    *,
    random_state: int | np.random.Generator | None = None,
) -> Allocation:
    """Solve the allocation of spec §4.1 for reported ``costs``.

    Parameters
    ----------
    X : array-like of shape (m, d)
        Records, already scaled with public bounds so that ``‖x_i‖₂ ≤ 1``.
    y : array-like of shape (m,)
        Labels (``±1`` for the logistic loss) or targets.
    costs : array-like of shape (m,)
        Reported privacy costs ``c_i``, inside ``prior``'s support.
    prior : CostPrior
        Public cost prior; gives ``Ψ_i = prior.virtual_cost(c_i)``.
    cfg : MechanismConfig
    eps_max : array-like of shape (m,), optional
        Per-seller caps ``ε_i^max`` on ``a_i η`` (``inf`` for none).
    random_state : int or Generator, optional
        Only for ``cfg.mode == "paper"``: the realised noise of the literal objective.

    Returns
    -------
    Allocation

    Raises
    ------
    ValueError
        For malformed inputs (naming the parameter and the offending index).
    """
    X, y, c, e = check_problem(X, y, costs, prior, cfg, eps_max)
    # An irregular prior is ironed first (spec §2): payments are IC only for Ψ̄.
    psi = np.asarray(ensure_regular(prior).virtual_cost(c), dtype=float)
    noise = None
    if cfg.mode == "paper":
        rng = np.random.default_rng(random_state)
        noise = sample_gamma_direction_noise(X.shape[1], rng=rng)
    scen = scenario_virtual_costs(prior, X.shape[0])
    return solve_allocation(Problem(X, y, psi, e, cfg, noise, scenario_psi=scen))


def eta_bounds(prob: Problem) -> tuple[float, float] | None:
    """Feasible ``η`` range ``[m·L·floor, η_hi]``; ``None`` if no ``η`` is feasible.

    ``η`` is feasible iff ``Σ_i min(k/m, ε_i^max/η) ≥ 1`` (caps admit a simplex point),
    a non-increasing function of ``η``; ``η_hi`` is the smaller of ``m·L`` and its root.

    A function of ``ε^max``, ``m``, ``k``, ``L`` and the floor ratio only, never of the
    virtual costs: remembered for the problems derived from one another (a payment
    job's re-solves share the records memo and, where no stand-in is derived, the
    ``ε^max`` array itself), so each re-solve does not repeat the bisection.
    """
    cfg = prob.cfg
    key = (cfg.k, cfg.eps_avg_max, cfg.eps_floor_ratio)
    hit = prob.records_memo.get("eta_bounds")
    if hit is not None and hit[0] is prob.X:
        eps_max, hit_key, bounds = hit[1]
        if eps_max is prob.eps_max and hit_key == key:
            return cast("tuple[float, float] | None", bounds)
    bounds = _eta_bounds(prob)
    prob.records_memo["eta_bounds"] = (prob.X, (prob.eps_max, key, bounds))
    return bounds


def _eta_bounds(prob: Problem) -> tuple[float, float] | None:
    """:func:`eta_bounds` computed."""
    cfg, m = prob.cfg, prob.m
    top = m * cfg.eps_avg_max
    cap_sum = lambda eta: float(prob.caps(eta).sum())  # noqa: E731
    if cap_sum(top) >= 1.0:
        hi = top
    else:
        n_pos = int((prob.eps_max > 0).sum())
        if n_pos * cfg.k / m < 1.0:
            return None
        lo, hi = 0.0, top
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if not lo < mid < hi:
                break  # converged in floating point: further steps change nothing
            if cap_sum(mid) >= 1.0:
                lo = mid
            else:
                hi = mid
        hi = lo
        if hi <= 0.0:  # pragma: no cover - n_pos check above prevents it
            return None
    lo = min(top * cfg.eps_floor_ratio, hi * cfg.eps_floor_ratio)
    return lo, hi


def forced_at_infinite_cost(prob: Problem) -> NDArray[np.intp]:
    """Sellers whose report has ``Ψ_i = ∞`` (the top of a support where the density
    vanishes), when they alone make the problem infeasible.

    The problem caps such a seller at ``ε_i = 0`` (its exact optimum). When the other
    sellers' caps cannot hold all the weight (``n_pos·k/m < 1`` without them, but not
    with them), the caps ``a_i ≤ k/m`` force weight on them and every allocation costs
    ``∞``. Empty otherwise.
    """
    assert prob.given_psi is not None
    assert prob.given_eps_max is not None
    top = np.flatnonzero(np.isinf(prob.given_psi) & (prob.given_eps_max > 0))
    k_over_m = prob.cfg.k / prob.m
    if not top.size or int((prob.eps_max > 0).sum()) * k_over_m >= 1.0:
        return np.empty(0, dtype=np.intp)
    if int((prob.given_eps_max > 0).sum()) * k_over_m < 1.0:
        return np.empty(0, dtype=np.intp)  # infeasible whatever the reports
    return top


@single_blas_thread
def solve_allocation(
    prob: Problem, *, warm_start: Allocation | None = None, fit_w: bool = True
) -> Allocation:
    """Global search over ``η`` (grid + bounded refinement) of block-exact solves.

    ``warm_start``: an allocation of the same problem with (slightly) different virtual
    costs — each grid point then starts from the stored solution there (payments).
    ``fit_w=False`` (strict mode only; payment re-solves): skip the final w-step.
    The strict search value (spec §4.4) does not contain ``w``, so ``(a, η)`` and every
    ``ε_i`` are the same; the returned ``w`` is the search's start, not a model, and
    the KKT residuals leave out the w-block (see :func:`_result`).
    """
    t0 = time.perf_counter()
    reused = _reused_lambda_conv(prob, warm_start)
    if reused is not None:
        lam_conv = reused[0]
    else:
        prob, lam_conv = effective_problem(prob)
    bounds = eta_bounds(prob)
    if bounds is None:
        return _infeasible(prob, t0)
    if uses_candidate_range(prob, lam_conv):
        return _solve_candidate_range(prob, bounds, warm_start, lam_conv, t0)
    grid = np.geomspace(bounds[0], bounds[1], prob.cfg.n_grid)
    sols = _grid_search(prob, grid, warm_start)
    t_grid = time.perf_counter() - t0
    best, refined = _refine(prob, grid, sols)
    if any(best is s for s in sols):
        # A coarse-grid point (e.g. at an end of the range, where no refinement runs)
        # was solved to GRID_TOL only: finish it at the configured tolerance.
        best = solve_at_eta(prob, best.eta, w0=best.w, a0=best.a, state=best.state)
    best = _polish(prob, best, float(grid[0]), float(grid[-1]))
    t_search = time.perf_counter() - t0
    best, cert = certify(prob, best, grid, sols, lam_conv)
    t_total = time.perf_counter() - t0
    profile = EtaProfile(
        grid=grid,
        grid_values=np.array([s.search_value for s in sols]),
        starts=tuple((s.w, s.a) for s in sols),
        refined_eta=np.array([s.eta for s in refined]),
        refined_values=np.array([s.search_value for s in refined]),
    )
    n_iter = sum(s.iterations for s in sols) + sum(s.iterations for s in refined)
    timings = {
        "grid": t_grid,
        "refine": t_search - t_grid,
        "certify": t_total - t_search,
        "total": t_total,
    }
    return _result(
        prob, best, profile, n_iter, len(sols) + len(refined), timings, cert,
        fit_w=fit_w,
    )  # fmt: skip


def _reused_lambda_conv(
    prob: Problem, warm_start: Allocation | None
) -> tuple[float | None] | None:
    """``(λ_conv,)`` of a candidate-range ``warm_start`` whose models were computed
    from the same records, caps, scenarios and configuration (``λ_conv`` is a function
    of those only, and ``certify="auto"`` does not change ``λ``); else ``None``.
    Saves a payment re-solve the spectral norm of ``X`` (an O(m·d²) product)."""
    cert = None if warm_start is None else warm_start.certificate
    cand = getattr(cert, "models", None)
    if cert is None or cert.rule != "candidate_models" or prob.cfg.certify != "auto":
        return None
    if not (isinstance(cand, CandidateModels) and cand.matches(prob)):
        return None
    return (cert.lam_conv,)


def uses_candidate_range(prob: Problem, lam_conv: float | None) -> bool:
    """Whether ``cfg.certify == "auto"`` takes the candidate-model range
    (:mod:`mechanisms.allocation._range._candidate_range`): default mode, linear ``u``, and no
    convexity certificate for the whole range (``λ ≤ λ_conv`` or none exists)."""
    cfg = prob.cfg
    if cfg.certify != "auto" or cfg.mode != "default" or cfg.u != "linear":
        return False
    return lam_conv is None or cfg.lam <= lam_conv


def _solve_candidate_range(
    prob: Problem,
    bounds: tuple[float, float],
    warm_start: Allocation | None,
    lam_conv: float | None,
    t0: float,
) -> Allocation:
    """The certified optimum over the candidate-model range (reusing the models of
    ``warm_start`` when they were computed from the same records and settings)."""
    lo, hi = bounds
    models = None
    cert0 = None if warm_start is None else warm_start.certificate
    cand = getattr(cert0, "models", None)
    if isinstance(cand, CandidateModels) and cand.matches(prob):
        models = cand
    t_models = 0.0
    if models is None:
        models = candidate_models(prob, lo, hi)
        t_models = time.perf_counter() - t0
    seed = getattr(cert0, "range_seed", None) if models is cand else None
    sol, _, new_seed = solve_in_range(prob, models, lo, hi, seed=seed)
    t_total = time.perf_counter() - t0
    pt = sol.best
    j = pt.j
    w = models.W[j]
    best = BlockSolution(pt.eta, w, sol.weights, pt.value, pt.value, 1, True, pt.state)
    gap = max(pt.value - sol.lower_bound, 0.0)
    cert = AllocationCertificate(
        prob.cfg.lam,
        lam_conv,
        True,
        True,
        sol.lower_bound,
        gap,
        sol.closed,
        sol.n_evals,
        rule="candidate_models",
        n_models=models.n,
        models=models,
        range_seed=new_seed,
    )
    timings = {"models": t_models, "range": t_total - t_models, "total": t_total}
    # No EtaProfile: the payments' grid shortcut does not apply to this rule (its
    # re-solves reuse the models and the closed search through ``warm_start``).
    return _result(prob, best, None, sol.n_evals, sol.n_evals, timings, cert)


def certify(
    prob: Problem,
    best: BlockSolution,
    grid: FloatArray,
    sols: list[BlockSolution],
    lam_conv: float | None,
) -> tuple[BlockSolution, AllocationCertificate]:
    """Run the range certificate of :mod:`mechanisms.allocation._range._certify` when the fixed-``η``
    problems are provably convex; a better point found by the branch-and-bound is
    polished and kept (the lower bound stays valid)."""
    lam = prob.cfg.lam
    convex = lam_conv is not None and (prob.cfg.mode == "strict" or lam > lam_conv)
    if not convex or lam_conv is None:
        return best, AllocationCertificate(
            lam, lam_conv, False, False, -np.inf, np.inf, False, 0
        )
    lo, hi = float(grid[0]), float(grid[-1])
    nodes = {
        float(e): node_of(prob, s, lam_conv) for e, s in zip(grid, sols, strict=True)
    }
    found, lower, n = certify_range(prob, best, lo, hi, nodes=nodes, lam_conv=lam_conv)
    if found is not best:
        found = _polish(prob, found, lo, hi)
        if found.search_value < best.search_value:
            best = found
    gap = max(best.search_value - lower, 0.0)
    closed = gap <= RANGE_RTOL * (1.0 + abs(best.search_value))
    node_bounds = tuple(nodes[float(e)].bound for e in grid)
    return best, AllocationCertificate(
        lam, lam_conv, True, True, lower, gap, closed, n, node_bounds
    )


def _start(prob: Problem, eta: float) -> tuple[FloatArray, FloatArray]:
    a0, _ = project_capped_simplex(np.full(prob.m, 1.0 / prob.m), prob.caps(eta))
    return np.zeros(prob.X.shape[1]), a0


def _grid_search(
    prob: Problem, grid: FloatArray, warm_start: Allocation | None
) -> list[BlockSolution]:
    """Solve at each grid ``η``, from the top down, warm-starting from the neighbour."""
    stored = None
    profile = None if warm_start is None else warm_start.profile
    if profile is not None and np.array_equal(profile.grid, grid):
        stored = profile.starts
    sols: list[BlockSolution | None] = [None] * grid.size
    w0, a0 = _start(prob, float(grid[-1]))
    state = None
    for j in range(grid.size - 1, -1, -1):
        if stored is not None:
            w0, a0 = stored[j]
        sol = solve_at_eta(
            prob, float(grid[j]), w0=w0, a0=a0, state=state, tol=GRID_TOL
        )
        sols[j] = sol
        w0, a0, state = sol.w, sol.a, sol.state
    return [s for s in sols if s is not None]


def _refine(
    prob: Problem, grid: FloatArray, sols: list[BlockSolution]
) -> tuple[BlockSolution, list[BlockSolution]]:
    """Bounded Brent search in ``log η`` between the best grid point's neighbours."""
    j = int(np.argmin([s.search_value for s in sols]))
    lo, hi = float(grid[max(j - 1, 0)]), float(grid[min(j + 1, grid.size - 1)])
    best = sols[j]
    refined: list[BlockSolution] = []

    def f(log_eta: float) -> float:
        nonlocal best
        start = min([best, *refined[-1:]], key=lambda s: abs(np.log(s.eta) - log_eta))
        sol = solve_at_eta(
            prob, float(np.exp(log_eta)), w0=start.w, a0=start.a, state=start.state
        )
        refined.append(sol)
        if sol.search_value < best.search_value:
            best = sol
        return sol.search_value

    if 0 < j < grid.size - 1:  # at an end of the range the polish walks to the bound
        minimize_scalar(
            f,
            bounds=(np.log(lo), np.log(hi)),
            method="bounded",
            options={"xatol": 1e-4, "maxiter": 60},
        )
    return best, refined


def eta_step(prob: Problem, sol: BlockSolution, lo: float, hi: float) -> float:
    """Exact η-block minimiser for linear ``u`` (spec §4.2, "η-step").

    ``G`` restricted to ``η`` is ``σ'/η + γη Σ Ψ_i a_i`` with ``σ' = σ`` (plus the
    paper mode's ``2bᵀw``), so ``η* = sqrt(σ'/(γ Σ Ψ_i a_i))``, clipped to ``[lo, hi]``
    and to the per-seller caps ``η ≤ ε_i^max / a_i``.
    """
    cfg = prob.cfg
    hi = min(hi, eta_cap_limit(prob.eps_max, np.asarray(sol.a, dtype=np.float64)))
    num = cfg.sigma
    c = prob.linear_term(1.0)
    if c is not None:
        num += float(c @ sol.w)
    slope = cfg.gamma * psi_dot(prob.psi, np.asarray(sol.a, dtype=np.float64))
    if num <= 0.0:
        return lo
    if slope <= 0.0:
        return hi
    return min(max(math.sqrt(num / slope), lo), hi)


def _polish(
    prob: Problem,
    best: BlockSolution,
    lo: float,
    hi: float,
    *,
    eta_rtol: float = 1e-13,
    hessian0: FloatArray | None = None,
) -> BlockSolution:
    """Finish with exact (w, a, η) block sweeps from the search's best point.

    Removes the refinement's ``xatol`` from ``η`` (linear ``u`` only): the plain step
    ``η ← T(η)`` (the closed-form η-block minimiser at the current ``(w, a)``) never
    increases ``G``, and its fixed point is a KKT point of all three blocks, which
    keeps ``s ↦ ε_i(s)`` smooth for the payment sweeps. The fixed-point iteration is
    only linearly convergent, so each step first tries the secant step on
    ``g(η) = T(η) − η`` (in ``log η``) and keeps it only if ``G`` does not increase.
    Stops when ``|T(η) − η| ≤ eta_rtol·η``. For the logistic loss with ``μ > 0`` (no
    noise term) the loop runs compiled (:mod:`._eta_polish`, the same steps to the
    bit; this loop from the start where it hands back). ``hessian0``: a frozen
    Hessian for chord steps in each step's solve
    (:func:`._reduced_newton.newton_reduced`; a payment re-solve's base Hessian).
    """
    if prob.cfg.u != "linear":
        return best
    compiled = _compiled_polish(prob, best, lo, hi, eta_rtol, hessian0)
    if compiled is not None:
        return _profile_root(prob, compiled, lo, hi)
    sol = best
    prev: tuple[float, float] | None = (
        None  # (log η, log T(η) − log η) of the last step
    )
    for _ in range(POLISH_MAX_STEPS):
        target = eta_step(prob, sol, lo, hi)
        if abs(target - sol.eta) <= eta_rtol * sol.eta:
            break
        # math's log and exp, as the compiled loop takes them (NumPy's scalar ones
        # round differently in a few cases in 10⁴)
        x, gx = math.log(sol.eta), math.log(target) - math.log(sol.eta)
        # G's own rounding: where G is flat in η (small σ and γ) the steps change it
        # by less than this, and comparing rounded values stopped the iteration far
        # from the root (ε 1e-5 off where the exact root is a few steps away).
        noise = POLISH_ROUNDING * (1.0 + abs(sol.search_value))
        new = None
        if prev is not None and gx != prev[1]:
            x_sec = x - gx * (x - prev[0]) / (gx - prev[1])
            # a far secant step is clipped to hi: past e^700 (above any η range;
            # np.exp overflows, with a warning, near 709.8) take hi directly
            eta_sec = hi if x_sec > 700.0 else min(max(math.exp(x_sec), lo), hi)
            cand = solve_at_eta(
                prob, eta_sec, w0=sol.w, a0=sol.a, state=sol.state, hessian0=hessian0
            )
            if cand.search_value <= sol.search_value + noise:
                new = cand
        if new is None:
            new = solve_at_eta(
                prob, target, w0=sol.w, a0=sol.a, state=sol.state, hessian0=hessian0
            )
            if new.search_value > sol.search_value + noise:
                break
        prev = (x, gx)
        sol = new
    return _profile_root(prob, sol, lo, hi)


def _compiled_polish(
    prob: Problem,
    best: BlockSolution,
    lo: float,
    hi: float,
    eta_rtol: float,
    hessian0: FloatArray | None = None,
) -> BlockSolution | None:
    """:func:`_polish`'s loop in one compiled call (:mod:`._eta_polish`, where
    :func:`._eta_polish.compiled_steps_apply`), the same steps to the bit; ``None``
    where it does not apply or hands back."""
    if best.state is None or not compiled_steps_apply(prob):
        return None
    cfg = prob.cfg
    w = kernel_array(best.w)
    known = _known_losses(prob, w)
    if known is None:  # the first solve's evaluation from the start's margins
        z = prob.X @ w
        losses, dl, d2, _ = logistic_pass(z, prob.y, 0.0, prob.psi)
    else:
        z, losses, dl, d2 = known
    out = polish_kernel(
        prob.X, prob.y, prob.psi, prob.eps_max, cfg.k / prob.m, cfg.gamma, cfg.mu,
        cfg.lam, cfg.sigma, cfg.tol, cfg.max_iter, lo, hi, eta_rtol, POLISH_ROUNDING,
        float(best.eta), w, z, losses, dl, d2,
        kernel_array(best.a), best.state.A, best.state.s,
        best.search_value, np.empty(0), 0, False, kernel_hessian(hessian0),
    )  # fmt: skip
    if out[0] == POLISH_DONE and out[1] == 0:
        return best  # no step taken
    return _kernel_solution(out)


def _kernel_solution(out: tuple[Any, ...]) -> BlockSolution | None:
    """The :class:`BlockSolution` of a polish kernel's result; ``None`` where it
    handed back."""
    code, _, eta, w, a, losses, _, A, s, value, g, it, converged = out
    if code != POLISH_DONE:
        return None
    state = WeightsStepState(A, s)
    return BlockSolution(eta, w, a, value, value, it, converged, state, losses, g)


def solve_and_polish(
    prob: Problem,
    eta: float,
    *,
    w0: FloatArray,
    a0: FloatArray,
    state: WeightsStepState | None,
    lo: float,
    hi: float,
    eta_rtol: float = 1e-13,
    hessian0: FloatArray | None = None,
    losses0: tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None = None,
) -> BlockSolution:
    """``_polish(prob, solve_at_eta(prob, eta, w0=w0, a0=a0, state=state,
    hessian0=hessian0), lo, hi)``: in one compiled call where the polish runs
    compiled and ``state`` is given (:func:`._eta_polish.solve_and_polish_kernel`,
    the same solve and steps to the bit), else as written. ``hessian0``: a frozen
    Hessian for chord steps in the first solve and in each polish step's
    (:func:`._reduced_newton.newton_reduced`). ``losses0``: ``(Xw₀, ℓ, ℓ', ℓ'')`` at
    ``w0`` where the caller has them (a payment re-solve from the base's ``w``): the
    compiled call skips that product and loss pass, whose values these are."""
    if state is not None and compiled_steps_apply(prob):
        cfg = prob.cfg
        out = solve_and_polish_kernel(
            prob.X, prob.y, prob.psi, prob.eps_max, cfg.k / prob.m, cfg.gamma, cfg.mu,
            cfg.lam, cfg.sigma, cfg.tol, cfg.max_iter, lo, hi, eta_rtol,
            POLISH_ROUNDING, float(eta), kernel_array(w0),
            state.A, state.s, kernel_hessian(hessian0),
            *(_NO_LOSSES if losses0 is None else losses0), A_ZERO, EPS_CAP_RTOL,
        )  # fmt: skip
        sol = _kernel_solution(out[:13])
        if sol is not None:
            # the kernel's a-block pass at sol, as _block_conditions reads it
            assert sol.losses is not None
            _LAST_CONDITIONS[0] = (prob, sol, sol.losses, out[13], out[14])
            return _profile_root(prob, sol, lo, hi)
    first = solve_at_eta(
        prob, eta, w0=w0, a0=a0, state=state, hessian0=hessian0
    )
    return _polish(prob, first, lo, hi, eta_rtol=eta_rtol, hessian0=hessian0)


_NO_LOSSES = (np.empty(0), np.empty(0), np.empty(0), np.empty(0))
""":func:`solve_and_polish`'s "no losses given" to the compiled call."""

POLISH_ROUNDING = 8.0 * np.finfo(float).eps
""":func:`_polish` takes a step that raises ``G`` by at most this relative amount (its
rounding): the η-step never raises ``G`` in exact arithmetic."""

PROFILE_RTOL = 1e-10
""":func:`_profile_root` runs when ``|dP/dη|·η > PROFILE_RTOL·(1 + |G|)`` (the KKT
check's η residual; ``KKT_TOL`` is ``1e-6``)."""


def _profile_root(
    prob: Problem, sol: BlockSolution, lo: float, hi: float
) -> BlockSolution:
    """Where the η-step stalls against an ``ε^max`` cap, find ``dP/dη = 0`` on the
    profile itself.

    The cap ``a_i η ≤ ε_i^max`` couples the blocks: the closed-form η-step keeps
    ``a`` fixed, so it cannot raise ``η`` past ``ε_i^max/a_i`` even where ``P`` still
    falls (the seller's weight would have to give way), and the block sweeps stop at a
    point that is not a KKT point (η residual ``~5e-6`` measured). Here each point is
    a block solve at fixed ``η`` (which re-balances ``a`` under the caps), and
    :func:`profile_slope` gives ``P'`` by the envelope theorem: the root is bracketed
    by growing steps in the descent direction, then found by Brent's method in
    ``log η``. Returned only if ``G`` did not rise (beyond rounding).
    """
    scale = 1.0 + abs(sol.search_value)
    f0 = profile_slope(prob, sol)
    if not np.isfinite(f0) or abs(f0) * sol.eta <= PROFILE_RTOL * scale:
        return sol
    up = f0 < 0.0
    if (up and sol.eta >= hi * (1 - 1e-12)) or (not up and sol.eta <= lo * (1 + 1e-12)):
        return sol
    x0 = float(np.log(sol.eta))
    p0, fp0 = sol, f0
    p1: BlockSolution | None = None
    fp1 = 0.0
    step = 1e-7
    for _ in range(40):
        eta = float(np.clip(np.exp(x0 + (step if up else -step)), lo, hi))
        cand = solve_at_eta(prob, eta, w0=p0.w, a0=p0.a, state=p0.state)
        fc = profile_slope(prob, cand)
        if not np.isfinite(fc):
            return sol
        if (fc > 0.0) == up or fc == 0.0:
            p1, fp1 = cand, fc
            break
        p0, fp0 = cand, fc
        if eta in (lo, hi):
            break
        step *= 4.0
    if p1 is None:  # P falls to the end of the range: the last point is the best
        return p0 if p0.search_value <= sol.search_value + 1e-12 * scale else sol
    # the point of smallest |P'| so far, with that |P'|; the last point (warm start)
    found = [(p1, abs(fp1)) if abs(fp1) < abs(fp0) else (p0, abs(fp0))]
    warm = [p1]

    def slope(x: float) -> float:
        w = warm[0]
        cand = solve_at_eta(prob, float(np.exp(x)), w0=w.w, a0=w.a, state=w.state)
        fc = profile_slope(prob, cand)
        if not np.isfinite(fc):
            raise FloatingPointError("profile slope")
        warm[0] = cand
        if abs(fc) < found[0][1]:
            found[0] = (cand, abs(fc))
        return fc

    with contextlib.suppress(FloatingPointError, ValueError, RuntimeError):
        brentq(
            slope, float(np.log(p0.eta)), float(np.log(p1.eta)), xtol=1e-13, maxiter=60
        )
    best = found[0][0]
    return best if best.search_value <= sol.search_value + 1e-12 * scale else sol


def kkt_residuals(
    prob: Problem,
    sol: BlockSolution,
    eta_lo: float,
    eta_hi: float,
    *,
    model_losses: FloatArray | None = None,
) -> KKTResiduals:
    """Block KKT residuals at ``(w, a, η)`` (see :class:`KKTResiduals`).

    ``model_losses``: ``ℓ(X w, y)`` of a candidate model (the candidate-model rule,
    where ``w`` ranges over a finite set: no stationarity in ``w``, residual 0)."""
    gw, r_a, dG = _block_conditions(prob, sol, model_losses)
    r_eta = eta_residual(dG, sol.eta, eta_lo, eta_hi, sol.search_value)
    return KKTResiduals(w=gw, a=r_a, eta=r_eta)


def eta_residual(dG: float, eta: float, lo: float, hi: float, value: float) -> float:
    """The relative η residual ``|dP/dη|·η/(1 + |G|)``; 0 at an end of ``[lo, hi]``
    where ``P`` still falls outward (the bound is then the multiplier)."""
    if (eta >= hi * (1 - 1e-9) and dG < 0) or (eta <= lo * (1 + 1e-9) and dG > 0):
        return 0.0
    return abs(dG) * eta / (1.0 + abs(value))


def profile_slope(prob: Problem, sol: BlockSolution) -> float:
    """``dP/dη`` of the profile ``P(η) = min_{(w,a)} G`` at a block solution (the
    envelope theorem: ``∂G/∂η`` plus the multipliers of the ``ε^max`` caps that hold
    sellers, ``Σ ν_i a_i/η``; :func:`kkt_residuals`)."""
    return _block_conditions(prob, sol, None, with_gradient=False)[2]


def _block_conditions(
    prob: Problem,
    sol: BlockSolution,
    model_losses: FloatArray | None,
    *,
    with_gradient: bool = True,
) -> tuple[float, float, float]:
    """``(‖∇_w G‖, relative a-residual, dP/dη)`` at ``sol`` (:func:`kkt_residuals`;
    at a kink of ``P``, the element of ``[P'(η−), P'(η+)]`` nearest 0). Without
    ``with_gradient`` the first entry is 0 and the losses the solver kept with
    ``sol`` are used (no pass over ``X``); with it, the solver's gradient and losses
    where it kept both."""
    cfg = prob.cfg
    w, a, eta = sol.w, sol.a, sol.eta
    c = prob.linear_term(eta)
    if model_losses is not None:
        gw = np.zeros(1)
        losses = model_losses
    elif not with_gradient and (sol.losses is not None or cfg.mode == "strict"):
        gw = np.zeros(1)
        if cfg.mode == "strict":
            losses = np.full(prob.m, prob.strict_loss_value)
        else:
            assert sol.losses is not None
            losses = sol.losses
    elif sol.losses is not None and sol.gradient is not None and cfg.mode != "strict":
        # the Newton solver's ∇F(w) = ∇_w G(w, a*(w)) and ℓ(Xw): no pass over X
        gw, losses = sol.gradient, sol.losses
    else:
        z = prob.X @ w
        if cfg.loss == "logistic":
            value, deriv = logistic_value_slope(z, prob.y)
        else:
            loss = prob.loss
            value, deriv = loss.value(z, prob.y), loss.derivative(z, prob.y)
        gw = prob.X.T @ (a * deriv) + cfg.lam * w
        if c is not None:
            gw = gw + c
        if cfg.mode == "strict":
            losses = np.full(prob.m, prob.strict_loss_value)
        else:
            losses = value
    # ∂G/∂η without the privacy term: −σ/η² (and the paper's noise term)
    dG0 = -cfg.sigma / (eta * eta)  # as the compiled polish forms it
    if c is not None:
        dG0 -= float(c @ w) / eta
    last = _LAST_CONDITIONS[0]
    if last is not None and last[0] is prob and last[1] is sol and last[2] is losses:
        # the same point again: the compiled re-solve's own pass, or the polish's
        # slope and then the KKT check
        r_a, dG = last[3], last[4]
    else:
        upsi = (
            prob.psi if cfg.u == "linear" else prob.psi * utility_derivative(eta * a, cfg)
        )
        r_a, dG = a_block_conditions(
            np.ascontiguousarray(losses, dtype=np.float64),
            np.ascontiguousarray(a, dtype=np.float64),
            np.ascontiguousarray(upsi, dtype=np.float64),
            np.ascontiguousarray(prob.eps_max, dtype=np.float64), eta,
            cfg.k / prob.m, cfg.gamma, cfg.mu, dG0, A_ZERO, EPS_CAP_RTOL,
        )  # fmt: skip
        _LAST_CONDITIONS[0] = (prob, sol, losses, r_a, dG)
    # ‖∇_w G‖ as np.linalg.norm computes it for a 1-D array: sqrt(x·x)
    return math.sqrt(float(gw.dot(gw))), float(r_a), float(dG)


_LAST_CONDITIONS: list[tuple[Problem, BlockSolution, FloatArray, float, float] | None]
_LAST_CONDITIONS = [None]
""":func:`_block_conditions`' last a-block pass, by identity of the (immutable) problem,
solution and losses: the η polish asks for the slope at its final point and the KKT
check then asks again at the same point (one O(m) pass saved per payment re-solve).
One entry, replaced whole, so threads at worst recompute."""


def _result(
    prob: Problem,
    best: BlockSolution,
    profile: EtaProfile | None,
    n_iter: int,
    n_evals: int,
    timings: dict[str, float],
    cert: AllocationCertificate | None = None,
    *,
    fit_w: bool = True,
) -> Allocation:
    """Package the search's best point as an :class:`Allocation` (status from the
    block KKT residuals and the certificate).

    Strict mode fits ``w`` for the returned ``a`` here (:func:`fit_strict_w`); with
    ``fit_w=False`` it does not, and the KKT residuals are those of the search's own
    blocks ``(a, η)`` (w-residual 0, as for a candidate model): the strict search
    value (spec §4.4) does not contain ``w``, so ``(a, η)`` is the same either way."""
    cfg = prob.cfg
    if cfg.mode == "strict" and fit_w:
        best = fit_strict_w(prob, best)
    range_rule = cert is not None and cert.rule == "candidate_models"
    kkt = result_kkt(prob, best, profile, cert, fit_w=fit_w)
    eps = best.a * best.eta
    eps_total = epsilon_total(best.a, eps, cfg)
    ok = best.converged and kkt.max() <= KKT_TOL
    if not ok:
        status = SolveStatus.OPTIMAL_INACCURATE
        msg = f"block solve converged={best.converged}, kkt={kkt}"
    elif cert is not None and cert.certified and range_rule:
        status = SolveStatus.OPTIMAL
        msg = (
            f"certified global optimum over the declared range: w in {cert.n_models} "
            "public candidate models, eta in [eta_lo, eta_hi], a on the capped simplex"
        )
    elif cert is not None and cert.certified:
        status, msg = SolveStatus.OPTIMAL, "certified global optimum over the range"
    elif cert is not None and cert.convex:
        status = SolveStatus.UNCERTIFIED
        msg = f"range branch-and-bound did not close (gap {cert.gap:.3g})"
    else:
        status = SolveStatus.LOCAL
        lc = None if cert is None else cert.lam_conv
        msg = "KKT point; no global certificate " + (
            "exists for this loss/utility/mode"
            if lc is None
            else f"(lam = {cfg.lam:.4g} <= lam_conv = {lc:.4g})"
        )
    return Allocation(
        weights=best.a.copy(),
        eta=float(best.eta),
        epsilon=eps,
        epsilon_total=eps_total,
        w=best.w.copy(),
        objective=best.value,
        virtual_costs=prob.psi,
        status=status,
        message=msg,
        kkt=kkt,
        iterations=n_iter,
        n_eta_evaluations=n_evals,
        timings=timings,
        config=cfg,
        profile=profile,
        mode_objective=best.search_value,
        certificate=cert,
    )


def epsilon_total(a: FloatArray, eps: FloatArray, cfg: MechanismConfig) -> FloatArray:
    """``ε^total = ε + Δ`` for the weights ``a`` and ``ε = η·a``, with the curvature
    slack ``Δ_i = 2 ln(1 + a_i/(4λ))`` (spec §3 Correction) where
    ``cfg.curvature_overhead``, else ``ε`` itself. The slack is
    ``learners.privacy.curvature_slack`` without its input checks (a solver's weights
    are finite and ≥ 0; ``λ > 0`` is validated with the configuration), which cost a
    scan of ``m`` per re-solve; it is formed in one buffer."""
    if not cfg.curvature_overhead:
        return eps
    out = a / (4.0 * cfg.lam)
    np.log1p(out, out=out)
    out *= 2.0
    out += eps
    return out


def result_kkt(
    prob: Problem,
    best: BlockSolution,
    profile: EtaProfile | None,
    cert: AllocationCertificate | None,
    *,
    fit_w: bool = True,
) -> KKTResiduals:
    """The block KKT residuals :func:`_result` reports for ``best`` (``w`` already
    fitted where strict mode fits it): over the profile's ``η`` grid when there is
    one, else :func:`eta_bounds`; no stationarity in ``w`` under the candidate-model
    rule (``w`` ranges over a finite set) nor for strict mode's unfitted ``w``."""
    lo_hi = (
        eta_bounds(prob)
        if profile is None
        else (float(profile.grid[0]), float(profile.grid[-1]))
    )
    assert lo_hi is not None
    if cert is not None and cert.rule == "candidate_models":
        kkt = kkt_residuals(prob, best, *lo_hi, model_losses=_model_losses(cert, best))
        return dataclasses.replace(kkt, w=0.0)
    if prob.cfg.mode == "strict" and not fit_w:
        const = np.full(prob.m, prob.strict_loss_value)
        kkt = kkt_residuals(prob, best, *lo_hi, model_losses=const)
        return dataclasses.replace(kkt, w=0.0)
    return kkt_residuals(prob, best, *lo_hi)


def _model_losses(cert: AllocationCertificate, best: BlockSolution) -> FloatArray:
    """``ℓ(X w, y)`` of the candidate model ``best.w`` (stored with the models)."""
    models = cert.models
    for j in range(models.n):
        if models.W[j] is best.w or np.array_equal(models.W[j], best.w):
            return np.asarray(models.losses[j], dtype=float)
    raise AssertionError("best.w is not a candidate model")  # pragma: no cover


def _infeasible(prob: Problem, t0: float) -> Allocation:
    z = np.zeros(prob.m)
    message = (
        "eps_max: fewer than m/k sellers have a positive cap, so no weights on the "
        "capped simplex exist"
    )
    top = forced_at_infinite_cost(prob)
    if top.size:
        message += (
            f" (seller {int(top[0])} reports where the prior's virtual cost is "
            "infinite, which caps it at 0; the caps a_i <= k/m force weight on it)"
        )
    return Allocation(
        weights=z,
        eta=0.0,
        epsilon=z.copy(),
        epsilon_total=z.copy(),
        w=np.zeros(prob.X.shape[1]),
        objective=float("inf"),
        virtual_costs=prob.psi,
        status=SolveStatus.INFEASIBLE,
        message=message,
        kkt=KKTResiduals(np.nan, np.nan, np.nan),
        iterations=0,
        n_eta_evaluations=0,
        timings={"total": time.perf_counter() - t0},
        config=prob.cfg,
    )
