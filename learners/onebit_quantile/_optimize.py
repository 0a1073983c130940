"""Box-constrained maximization of a quasi-likelihood with restarts (spec §2.4 PROPOSAL).

1. Work in rescaled coordinates ``g = β ∘ s`` (public column scales ``s``), where the
   box ``|g_j| ≤ box`` is the compact parameter set the theory asks for.
2. Start from the curator's initial value (least squares of unbiased pseudo-data),
   from ``θ ≡ m``, and from perturbations of the first (``ℓ_n`` need not be concave).
3. L-BFGS-B on ``−ℓ_n`` with the analytic gradient; keep the best end point.
4. Polish an interior optimum with Fisher scoring (step halving, stays in the box).
5. ``on_boundary``: some coordinate ends on the box — too little information for the
   asymptotics (small ``n·ε²``); the caller then reports no standard errors.

The restarts' perturbations come from a fixed seed: they are part of the (public,
post-processing) optimizer, not of any randomizer, so a fit is a deterministic
function of the reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

FloatArray = NDArray[np.float64]
Objective = Callable[[FloatArray], tuple[float, FloatArray]]
Newton = Callable[[FloatArray], tuple[float, FloatArray, FloatArray]]
BOUNDARY_RTOL = 1e-6
RESTART_SEED = 20240611


@dataclass(frozen=True, slots=True)
class OptimizeResult:
    """Outcome of :func:`maximize_in_box` (``beta`` in the caller's coordinates)."""

    beta: FloatArray
    value: float
    grad_norm: float
    on_boundary: bool
    converged: bool
    n_evaluations: int
    n_starts: int


def _lbfgsb(
    fun: Objective, g0: FloatArray, *, box: float, gtol: float, counter: list[int]
) -> tuple[FloatArray, float, bool]:
    def wrapped(g: FloatArray) -> tuple[float, FloatArray]:
        counter[0] += 1
        return fun(g)

    res = minimize(
        wrapped,
        g0,
        jac=True,
        method="L-BFGS-B",
        bounds=[(-box, box)] * g0.size,
        options={"gtol": gtol, "ftol": 1e3 * np.finfo(float).eps, "maxiter": 500},
    )
    return np.asarray(res.x, dtype=float), float(res.fun), bool(res.success)


def _projected_grad_norm(g: FloatArray, grad: FloatArray, box: float) -> float:
    """Infinity norm of the projected gradient (what L-BFGS-B's ``gtol`` measures)."""
    lower = (g <= -box * (1 - BOUNDARY_RTOL)) & (grad > 0)
    upper = (g >= box * (1 - BOUNDARY_RTOL)) & (grad < 0)
    free = np.where(lower | upper, 0.0, grad)
    return float(np.max(np.abs(free))) if free.size else 0.0


def _fisher_scoring(
    newton: Newton,
    g: FloatArray,
    *,
    box: float,
    gtol: float,
    counter: list[int],
    max_iter: int = 25,
) -> tuple[FloatArray, float, FloatArray, bool]:
    """Fisher scoring ``g ← g + I⁻¹ score`` with Armijo step halving, staying strictly
    inside the box; returns ``(g, value, gradient, converged)``."""
    value, grad, info = newton(g)
    counter[0] += 1
    for _ in range(max_iter):
        if _projected_grad_norm(g, grad, box) <= gtol:
            return g, value, grad, True
        try:
            step = -np.linalg.solve(info, grad)
        except np.linalg.LinAlgError:
            break
        slope = float(grad @ step)
        if not slope < 0:
            break
        for _half in range(30):
            trial = g + step
            if np.all(np.abs(trial) < box * (1 - BOUNDARY_RTOL)):
                t_value, t_grad, t_info = newton(trial)
                counter[0] += 1
                if t_value <= value + 1e-4 * float(grad @ step):
                    g, value, grad, info = trial, t_value, t_grad, t_info
                    break
            step = step / 2.0
        else:
            break
    return g, value, grad, _projected_grad_norm(g, grad, box) <= gtol


def maximize_in_box(
    objective: Objective,
    *,
    starts: list[FloatArray],
    scales: FloatArray,
    box: float,
    n_restarts: int,
    newton: Newton | None = None,
    newton_first: bool = False,
    gtol: float = 1e-8,
) -> OptimizeResult:
    """Minimize ``objective(β) = (−ℓ_n, −∇ℓ_n)`` over ``|β_j s_j| ≤ box`` (module docstring).

    Parameters
    ----------
    objective : callable
        ``β ↦ (value, gradient)`` in the caller's coordinates.
    starts : list of ndarray
        Initial values (clipped into the box); ``n_restarts`` perturbations of the
        first are added.
    scales : ndarray of shape (d,)
        Public column scales ``s_j > 0``.
    box : float
        Half-width of the box in rescaled coordinates.
    n_restarts : int
        Number of perturbed extra starts.
    newton : callable, optional
        ``β ↦ (value, gradient, I(β))``, used for Fisher scoring.
    newton_first : bool
        With one start and no restarts (a start already near the optimum, e.g. from a
        sub-sample), try Fisher scoring first and skip L-BFGS-B if it converges inside
        the box.
    gtol : float
        Projected-gradient tolerance on the average ``−ℓ_n``.
    """

    def fun(g: FloatArray) -> tuple[float, FloatArray]:
        value, grad = objective(g / scales)
        return value, grad / scales

    newton_g: Newton | None = None
    if newton is not None:
        nt = newton

        def newton_g(g: FloatArray) -> tuple[float, FloatArray, FloatArray]:
            value, grad, info = nt(g / scales)
            return value, grad / scales, info / np.outer(scales, scales)

    inside = box * (1 - 1e-3)
    points = [np.clip(b * scales, -inside, inside) for b in starts]
    rng = np.random.default_rng(RESTART_SEED)
    for _ in range(n_restarts):
        jitter = rng.uniform(-0.25, 0.25, points[0].size) * box
        points.append(np.clip(points[0] + jitter, -inside, inside))
    counter = [0]
    if newton_first and newton_g is not None and len(points) == 1:
        g, value, grad, ok = _fisher_scoring(
            newton_g, points[0], box=box, gtol=gtol, counter=counter
        )
        if ok:
            return _result(g, value, grad, scales, box, True, counter, 1)
    best: tuple[FloatArray, float, bool] | None = None
    for g0 in points:
        g, value, ok = _lbfgsb(fun, g0, box=box, gtol=gtol, counter=counter)
        if best is None or value < best[1]:
            best = (g, value, ok)
    assert best is not None
    g, value, ok = best
    on_boundary = bool(np.any(np.abs(g) >= box * (1 - BOUNDARY_RTOL)))
    if newton_g is not None and not on_boundary:
        g2, value2, grad, ok2 = _fisher_scoring(
            newton_g, g, box=box, gtol=gtol, counter=counter
        )
        if value2 <= value:
            g, value, ok = g2, value2, ok or ok2
    _, grad = fun(g)
    return _result(g, value, grad, scales, box, ok, counter, len(points))


def _result(
    g: FloatArray,
    value: float,
    grad: FloatArray,
    scales: FloatArray,
    box: float,
    ok: bool,
    counter: list[int],
    n_starts: int,
) -> OptimizeResult:
    pg = _projected_grad_norm(g, grad, box)
    return OptimizeResult(
        beta=g / scales,
        value=value,
        grad_norm=pg,
        on_boundary=bool(np.any(np.abs(g) >= box * (1 - BOUNDARY_RTOL))),
        converged=bool(ok),
        n_evaluations=counter[0],
        n_starts=n_starts,
    )
