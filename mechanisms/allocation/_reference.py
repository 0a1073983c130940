"""The paper's projected-gradient algorithm, kept as a slow reference solver.

Paper §4.2 ("An Iterative Algorithm To Optimize The Mechanism Design Objective"), run on
the well-posed objective of spec ``mechanism.md`` §4.1 (no realised noise term):

    g(w, z, η) = Σ e^{z_i} ℓ_i(w) + (λ/2)‖w‖² + μ‖e^z‖₂ + σ/η + γ Σ_i Ψ_i u(η e^{z_i}),

for every ``ε_avg`` of a grid over ``(0, L]`` (``η = m·ε_avg``): initialise
``w ~ N(0, I)`` and ``z_i = log(1/m)``, then repeat

    w ← w − α ∇_w g,   z ← z − α ∇_z g,   z ← Proj_S(z),

and keep the ``(w, z, ε_avg)`` with the smallest ``g``. The gradients are
``∇_w g = Xᵀ(a ∘ ℓ'(Xw)) + λw`` and ``∂g/∂z_i = a_i (ℓ_i + μ a_i/‖a‖ + γηΨ_i u'(η a_i))``.

**Projection** (the paper only says "``S = {z : Σ e^{z_i} = 1}``"; the spec adds the caps
``a_i ≤ h_i = min(k/m, ε_i^max/η)``): the Euclidean projection in ``z``-space onto

    S = {z : Σ_i e^{z_i} = 1,  z_i ≤ log h_i},

computed exactly by :func:`project_log_simplex` (a Lambert-W formula and a 1-D root in
the multiplier). We tried the cheaper log-sum-exp normalisation ``z + θ`` (clipped at
``log h``) first: it is the Kullback–Leibler projection of ``a = e^z``, not the
Euclidean one in ``z``, so ``−α∇_z g`` followed by it is not a descent direction
(the tangent space of ``S`` has normal ``e^z``, not ``1``) and backtracking stalled
at ``α → 0`` far from the optimum. A step that lands so far below ``S`` that no
principal-branch KKT point exists gives ``NaN`` and is rejected (``α`` halved; with a
fixed step the run stops there). Sellers with ``h_i = 0`` are held at
``a_i = 0`` (``z_i = −∞``). Every other ``a_i`` stays positive, so the method only
approaches sellers the exact optimum excludes (``a_i = 0``, at a rate ``~1/t``): one
reason it is inexact.

**Step size** ``α``: a fixed float (the paper's literal scheme; ``g`` may then increase),
or ``None`` for backtracking (halve ``α`` until ``g`` decreases sufficiently, double it
after each accepted step). Stop at a grid point when the gradient mapping
``‖x − x⁺‖/α`` falls below ``tol·(1 + |g|)`` or after ``max_iter`` iterations.

Slow (first-order in a problem whose ``z``-curvature is ``~1/m`` of its
``w``-curvature) and inexact by design: it is the baseline for benchmarks and tests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import lambertw

from learners.privacy import curvature_slack
from mechanisms._inputs import check_problem
from mechanisms.allocation._problem import Problem, objective, utility_derivative
from mechanisms.config import MechanismConfig
from mechanisms.priors import CostPrior, ensure_regular
from mechanisms.result import Allocation, EtaProfile, KKTResiduals, SolveStatus

FloatArray = NDArray[np.float64]

__all__ = ["project_log_simplex", "reference_allocate"]

# −1/e rounded up to where scipy's W₀ is finite (its branch point).
_BRANCH = float(np.nextafter(np.nextafter(-np.exp(-1.0), 0.0), 0.0))


@dataclass(frozen=True, eq=False)
class _PGDRun:
    eta: float
    w: FloatArray
    a: FloatArray
    value: float
    iterations: int
    converged: bool


def project_log_simplex(v: FloatArray, caps: FloatArray) -> FloatArray:
    """Euclidean projection of ``v`` onto ``S = {z : Σ e^{z_i} = 1, z_i ≤ log h_i}``.

    KKT of ``min ‖z − v‖²/2 + ν(Σ e^{z_i} − 1)`` with the caps: ``z_i + ν e^{z_i} = v_i``
    on the uncapped set, so ``z_i(ν) = min(v_i − W₀(ν e^{v_i}), log h_i)`` with ``W₀``
    the principal Lambert-W branch (for ``ν < 0`` it picks the root nearer ``v_i``).
    ``Σ e^{z_i(ν)}`` is decreasing in ``ν``; safeguarded Newton on ``ν`` from 0 (the
    PGD step starts on ``S``, so ``ν`` is small). ``S`` is not convex, so this is the
    nearest point locally (the step is small); its tangent space has normal ``e^z``,
    which makes ``−α(∇_z g − κe^z)`` a descent direction.

    Parameters
    ----------
    v : ndarray of shape (m,)
    caps : ndarray of shape (m,)
        ``h_i ≥ 0`` with ``Σ h_i ≥ 1``; ``z_i = −∞`` where ``h_i = 0``.

    Returns
    -------
    ndarray of shape (m,)
        ``NaN`` when ``v`` is so far below ``S`` that no such point exists (a step far
        too long; the caller rejects it).
    """
    out = np.full_like(v, -np.inf)
    act = caps > 0
    va, log_h = v[act], np.log(caps[act])
    top = float(va.max())
    ev = np.exp(va - top)  # ν e^{v_i} = ρ e^{v_i − max v} with ρ = ν e^{max v}
    lo, hi = _BRANCH, np.inf

    def z_of(rho: float) -> tuple[FloatArray, FloatArray]:
        z_free = va - np.real(lambertw(np.maximum(rho * ev, _BRANCH)))
        return z_free, np.minimum(z_free, log_h)

    if not float(np.exp(z_of(lo)[1]).sum()) >= 1.0:
        # Even at ρ = −1/e (the largest v_i at its branch point v_i + 1) the point is
        # below the simplex: the step went far off S and no principal-branch KKT point
        # exists.
        out[act] = np.nan
        return out
    rho = 0.0
    for _ in range(100):
        z_free, z = z_of(rho)
        ez = np.exp(z)
        f = float(ez.sum()) - 1.0
        if abs(f) <= 1e-13:
            break
        if f > 0:
            lo = rho
        else:
            hi = rho
        # d e^{z_i}/dρ = −e^{2 z_i − max v}/(1 + ρ e^{z_i − max v}) on the uncapped set.
        free = z_free < log_h
        ezs = ez[free] * np.exp(-top)
        slope = -float((ez[free] * ezs / (1.0 + rho * ezs)).sum())
        step = rho - f / slope if slope < 0 else np.nan
        if not (lo < step < hi):
            step = 0.5 * (lo + hi) if np.isfinite(hi) else max(2.0 * abs(rho), 1.0)
        if step == rho:
            break
        rho = float(step)
    out[act] = z
    return out


def _grad(
    prob: Problem, w: FloatArray, a: FloatArray, eta: float
) -> tuple[FloatArray, FloatArray]:
    """``(∇_w g, ∇_z g)`` of the module docstring (``a = e^z``)."""
    cfg, loss = prob.cfg, prob.loss
    zx = prob.X @ w
    gw = prob.X.T @ (a * loss.derivative(zx, prob.y)) + cfg.lam * w
    dga = (
        loss.value(zx, prob.y)
        + cfg.mu * a / float(np.linalg.norm(a))
        + cfg.gamma * eta * prob.psi * utility_derivative(eta * a, cfg)
    )
    return gw, a * dga


def _pgd_at_eta(
    prob: Problem,
    eta: float,
    w0: FloatArray,
    *,
    step: float | None,
    max_iter: int,
    tol: float,
) -> _PGDRun:
    """Projected gradient descent on ``(w, z)`` at fixed ``η`` (module docstring)."""
    caps = prob.caps(eta)
    w = np.array(w0, dtype=float)
    z = project_log_simplex(np.full(prob.m, -np.log(prob.m)), caps)
    a = np.exp(z)
    val = objective(prob, w, a, eta)
    alpha = 1.0 if step is None else float(step)
    converged = False
    it = 0
    fin = np.isfinite(z)
    for it in range(1, max_iter + 1):  # noqa: B007 - `it` is reported
        gw, gz = _grad(prob, w, a, eta)
        while True:
            w_new = w - alpha * gw
            z_new = project_log_simplex(z - alpha * gz, caps)
            a_new = np.exp(z_new)
            val_new = objective(prob, w_new, a_new, eta)
            moved = float(np.sum((w_new - w) ** 2) + np.sum((z_new[fin] - z[fin]) ** 2))
            ok = np.isfinite(val_new)
            if step is not None or (ok and val_new <= val - 1e-4 * moved / alpha):
                break
            alpha *= 0.5
            if alpha < 1e-14:
                ok = False
                break
        if not ok:  # no representable descent step (or a fixed step diverged)
            break
        w, z, a = w_new, z_new, a_new
        done = np.sqrt(moved) / alpha <= tol * (1.0 + abs(val_new))
        val = val_new
        if done:
            converged = True
            break
        if step is None:
            alpha = min(2.0 * alpha, 1e3)
    return _PGDRun(eta, w, a, val, it, converged)


def _feasible(prob: Problem, eta: float) -> bool:
    return float(prob.caps(eta).sum()) >= 1.0


def reference_allocate(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    eps_max: ArrayLike | None = None,
    *,
    step: float | None = None,
    max_iter: int = 2000,
    n_grid: int | None = None,
    eps_avg_grid: ArrayLike | None = None,
    tol: float = 1e-7,
    random_state: int | np.random.Generator | None = None,
) -> Allocation:
    """The paper's algorithm (§4.2) on ``G`` of spec §4.1: grid over ``ε_avg`` × PGD.

    Parameters
    ----------
    X, y, costs, prior, cfg, eps_max
        As for :func:`mechanisms.allocate` (same validation; ``cfg.mode`` must be
        ``"default"``).
    step : float, optional
        Fixed step ``α`` (paper-literal); ``None``: backtracking (module docstring).
    max_iter : int
        PGD iterations per grid point.
    n_grid : int, optional
        Size of the ``ε_avg`` grid ``geomspace(L·cfg.eps_floor_ratio, L, n_grid)``
        (default ``cfg.n_grid``); grid points where the caps admit no weights are skipped.
    eps_avg_grid : array-like, optional
        Explicit ``ε_avg`` values instead (e.g. to compare at a given ``η``).
    tol : float
        Stopping tolerance on the gradient mapping, relative to ``1 + |g|``.
    random_state : int or Generator, optional
        Seeds the paper's ``w ~ N(0, I)`` initialisation (OS entropy otherwise).

    Returns
    -------
    Allocation
        The best grid point; ``status`` is ``OPTIMAL_INACCURATE`` unless every PGD run
        met ``tol`` (then ``OPTIMAL``); ``kkt`` is not computed (NaN). ``profile`` holds
        the grid and ``g`` there.
    """
    if cfg.mode != "default":
        raise ValueError(
            f"cfg.mode: the reference solver implements the default objective only, "
            f"got {cfg.mode!r}"
        )
    if not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    if step is not None and not step > 0:
        raise ValueError(f"step must be > 0, got {step!r}")
    t0 = time.perf_counter()
    X, y, c, e = check_problem(X, y, costs, prior, cfg, eps_max)
    psi = np.asarray(ensure_regular(prior).virtual_cost(c), dtype=float)
    prob = Problem(X, y, psi, e, cfg)
    if eps_avg_grid is None:
        n = cfg.n_grid if n_grid is None else n_grid
        L = cfg.eps_avg_max
        grid = np.geomspace(L * cfg.eps_floor_ratio, L, n)
    else:
        grid = np.asarray(eps_avg_grid, dtype=float).ravel()
        if grid.size == 0 or not np.all((grid > 0) & np.isfinite(grid)):
            raise ValueError("eps_avg_grid must hold finite values > 0")
    rng = np.random.default_rng(random_state)
    runs = [
        _pgd_at_eta(
            prob,
            prob.m * float(ea),
            rng.standard_normal(X.shape[1]),
            step=step,
            max_iter=max_iter,
            tol=tol,
        )
        for ea in grid
        if _feasible(prob, prob.m * float(ea))
    ]
    if not runs:
        raise ValueError(
            "eps_max: no grid value of eps_avg admits weights under the caps"
        )
    return _to_allocation(prob, runs, time.perf_counter() - t0)


def _to_allocation(prob: Problem, runs: list[_PGDRun], seconds: float) -> Allocation:
    cfg = prob.cfg
    best = min(runs, key=lambda r: r.value)
    eps = best.a * best.eta
    eps_total = (
        eps + curvature_slack(best.a, cfg.lam) if cfg.curvature_overhead else eps
    )
    ok = all(r.converged for r in runs)
    etas = np.array([r.eta for r in runs])
    return Allocation(
        weights=best.a.copy(),
        eta=best.eta,
        epsilon=eps,
        epsilon_total=eps_total,
        w=best.w.copy(),
        objective=best.value,
        virtual_costs=prob.psi,
        status=SolveStatus.OPTIMAL if ok else SolveStatus.OPTIMAL_INACCURATE,
        message="reference PGD: " + ("converged" if ok else "max_iter reached"),
        kkt=KKTResiduals(np.nan, np.nan, np.nan),
        iterations=sum(r.iterations for r in runs),
        n_eta_evaluations=len(runs),
        timings={"total": seconds},
        config=cfg,
        profile=EtaProfile(
            grid=etas,
            grid_values=np.array([r.value for r in runs]),
            starts=tuple((r.w, r.a) for r in runs),
            refined_eta=np.empty(0),
            refined_values=np.empty(0),
        ),
        mode_objective=best.value,
    )
