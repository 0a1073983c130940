"""Block-coordinate solve of the allocation objective at a fixed ``η`` (spec §4.2).

``G(w, a, η) = Σ a_i ℓ_i(w) + (λ/2)‖w‖² + μ‖a‖₂ + σ/η + γ Σ_i Ψ_i u(η a_i)``
(paper eq. (10) without the realised noise term, spec §4.1).

For linear ``u`` and ``μ > 0``, :func:`mechanisms.allocation._reduced_newton.newton_reduced`
minimises ``F(w) = min_a G`` directly (Newton with the exact a-sensitivity). Otherwise
(power ``u``, ``μ = 0``) we alternate the two exact block minimisers: the **w-step** (weighted
ridge regression, damped Newton, :func:`learners._newton.minimize_ridge_risk`) and the
**a-step** (:func:`mechanisms.allocation._weights_step.solve_weights`, closed form on the capped
simplex for linear ``u``; a convex programme for ``u(ε) = ε^p``). Because
``φ(a) = min_w Σ a_i ℓ_i(w) + (λ/2)‖w‖²`` is concave in ``a`` (a minimum of linear
functions) with gradient ``ℓ(w*(a))``, the alternation is the DC algorithm on
``φ(a) + μ‖a‖ + γηΣΨ_i a_i``: every sweep decreases ``G`` and its limit points are KKT
points of ``G`` at this ``η``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import NamedTuple

import cvxpy as cp
import numpy as np
from numpy.typing import NDArray

from learners._newton import minimize_ridge_risk
from mechanisms.allocation._problem import Problem, objective, search_value
from mechanisms.allocation._reduced_newton import newton_reduced
from mechanisms.allocation._weights_step import (
    WeightsStepState,
    solve_weights_compiled,
    state_from_weights,
)
from mechanisms.result import SolverError

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class BlockSolution:
    """``(w, a)`` at one ``η`` with ``G`` there (``search_value``: what the η search
    compares — ``G`` itself, the strict surrogate, or ``G`` plus the paper's noise term)."""

    eta: float
    w: FloatArray
    a: FloatArray
    value: float
    search_value: float
    iterations: int
    converged: bool
    state: WeightsStepState | None
    losses: FloatArray | None = None  # ℓ(Xw) per record, where the solver had it
    gradient: FloatArray | None = None  # ∇_w G at (w, a), where the solver had it


def weights_step(
    prob: Problem,
    losses: FloatArray,
    eta: float,
    state: WeightsStepState | None,
) -> tuple[FloatArray, WeightsStepState | None]:
    """Exact a-block minimiser for the given per-record losses ``ℓ_i``."""
    cfg = prob.cfg
    caps = prob.caps(eta)
    if cfg.p == 1.0:  # linear u, or the power utility at p = 1: the same a-step
        r = losses + cfg.gamma * eta * prob.psi
        return solve_weights_compiled(r, caps, cfg.mu, state)
    return _weights_step_power(prob, losses, eta, caps), None


class _PowerStep(NamedTuple):
    """The power utility's a-step as a parametrised conic programme (one per size,
    exponent and thread): built and canonicalised once, then re-solved with new
    parameter values (cvxpy's DPP path skips the canonicalisation, which was nine
    tenths of a 24 ms step on two sellers)."""

    problem: cp.Problem
    a: cp.Variable
    losses: cp.Parameter
    weight: cp.Parameter  # γ·η^p·Ψ (non-negative)
    mu: cp.Parameter
    caps: cp.Parameter


_POWER_STEPS = threading.local()
_POWER_STEPS_KEPT = 8  # sizes and exponents kept per thread


def _power_step(m: int, p: float) -> _PowerStep:
    """The thread's :class:`_PowerStep` for ``m`` sellers and exponent ``p``."""
    cache: dict[tuple[int, float], _PowerStep] | None = getattr(
        _POWER_STEPS, "cache", None
    )
    if cache is None:
        cache = _POWER_STEPS.cache = {}
    step = cache.get((m, p))
    if step is None:
        a = cp.Variable(m, nonneg=True)
        losses = cp.Parameter(m)
        weight = cp.Parameter(m, nonneg=True)
        mu = cp.Parameter(nonneg=True)
        caps = cp.Parameter(m, nonneg=True)
        obj = losses @ a + mu * cp.norm(a, 2) + weight @ cp.power(a, p)
        cons = [cp.sum(a) == 1, a <= caps]
        problem = cp.Problem(cp.Minimize(obj), cons)
        step = _PowerStep(problem, a, losses, weight, mu, caps)
        if len(cache) >= _POWER_STEPS_KEPT:
            cache.pop(next(iter(cache)))
        cache[(m, p)] = step
    return step


def _weights_step_power(
    prob: Problem, losses: FloatArray, eta: float, caps: FloatArray
) -> FloatArray:
    """Convex a-step for ``u(ε) = ε^p`` (separable convex; solved with CLARABEL):
    ``min ℓᵀa + μ‖a‖ + γη^p Σ Ψ_i a_i^p`` over ``Σa = 1``, ``0 ≤ a ≤ h``."""
    cfg = prob.cfg
    step = _power_step(prob.m, float(cfg.p))
    step.losses.value = np.asarray(losses, dtype=float)
    step.weight.value = cfg.gamma * eta**cfg.p * np.asarray(prob.psi, dtype=float)
    step.mu.value = float(cfg.mu)
    step.caps.value = np.asarray(caps, dtype=float)
    a = step.a
    try:
        step.problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError as exc:
        raise SolverError(
            f"the power-utility a-step's conic solver failed (u_power = {cfg.p:g}, "
            f"eta = {eta:.3g}): {exc}"
        ) from exc
    if a.value is None:
        raise SolverError("the power-utility a-step returned no point")
    val = np.clip(np.asarray(a.value, dtype=float), 0.0, caps)
    return val / val.sum()


def solve_at_eta(
    prob: Problem,
    eta: float,
    *,
    w0: FloatArray,
    a0: FloatArray,
    state: WeightsStepState | None = None,
    tol: float | None = None,
    max_iter: int | None = None,
    extrapolate: bool = False,
    hessian0: FloatArray | None = None,
) -> BlockSolution:
    """Minimise ``G`` over ``(w, a)`` at fixed ``η``.

    Linear ``u`` with ``μ > 0``, or any ``μ`` in the default mode: trust-region
    Newton on the reduced objective ``F(w) = min_a G``
    (:func:`._reduced_newton.newton_reduced`, which stops at
    ``‖∇F‖ ≤ tol·(1 + ‖w‖)``). Otherwise (the power utility, or ``μ = 0`` in the
    paper's noise mode) exact w- and a-steps alternate (DC sweeps with Anderson
    extrapolation) until ``G`` stops decreasing: until a sweep lowers the search value
    by at most ``tol·(1 + |G|)`` and moves no weight by more than ``100·tol·max(a)``
    (``tol`` defaults to ``cfg.tol``; the coarse grid uses a looser one, the final
    point the configured one), or after ``max_iter`` iterations (default
    ``cfg.max_iter``). ``extrapolate``: the trust-region path extends its very
    successful Newton steps (``newton_reduced(extrapolate=True)``); ``hessian0``: a
    frozen Hessian for chord steps (``newton_reduced(hessian0=…)``).
    """
    tol = prob.cfg.tol if tol is None else tol
    max_iter = prob.cfg.max_iter if max_iter is None else int(max_iter)
    cfg, loss = prob.cfg, prob.loss
    c = prob.linear_term(eta)
    if cfg.mode == "strict":
        # The strict search value does not depend on w (spec §4.4): w is fitted only
        # for the returned allocation (:func:`fit_strict_w`), not at every η.
        const = np.full(prob.m, prob.strict_loss_value)
        if state is None and cfg.u == "linear":
            # warm multipliers from the given weights (a neighbouring η's): a cold
            # a-step bisects its scale from scratch (~70 ms at m = 10⁵, once per
            # cell bound of the range certificate)
            r = const + cfg.gamma * eta * prob.psi
            state = state_from_weights(np.asarray(a0), r, prob.caps(eta), cfg.mu)
        a, state = weights_step(prob, const, eta, state)
        w = np.array(w0, dtype=float)
        val = search_value(prob, w, a, eta)
        return BlockSolution(eta, w, a, np.nan, val, 1, True, state)
    if cfg.u == "linear" and (cfg.mu > 0.0 or cfg.mode == "default"):
        sol = newton_reduced(
            prob, eta, w0=w0, state=state, gtol=tol, max_iter=max_iter, a0=a0,
            extrapolate=extrapolate, hessian0=hessian0,
        )  # fmt: skip
        w, value = sol.w, sol.value
        # F(w) is the search value; G drops the paper mode's noise term.
        g_value = value if c is None else value - float(c @ w)
        return BlockSolution(
            eta, w, sol.a, g_value, value, sol.iterations, sol.converged, sol.state,
            sol.losses, sol.gradient,
        )  # fmt: skip
    w, a = np.array(w0, dtype=float), a0
    best_val, prev = np.inf, np.inf
    hist_f: list[FloatArray] = []
    hist_g: list[FloatArray] = []
    converged = False
    it = 0
    x = w  # the point the map T is applied to (Anderson-extrapolated)
    for it in range(1, max_iter + 1):  # noqa: B007 - `it` is reported
        # One DCA sweep T(x): a-step at x, then the exact w-step for those weights.
        losses = loss.value(prob.X @ x, prob.y)
        a_new, state = weights_step(prob, losses, eta, state)
        g = minimize_ridge_risk(loss, prob.X, prob.y, a_new, cfg.lam, c=c, w0=x).w
        val = search_value(prob, g, a_new, eta)
        if val > best_val + 1e-12 * (1.0 + abs(best_val)) and hist_f:
            # The extrapolation overshot: restart from the last safe iterate.
            hist_f.clear()
            hist_g.clear()
            x = w
            continue
        change = float(np.abs(a_new - a).max())
        step = float(np.linalg.norm(g - x))
        w, a = g, a_new
        best_val = min(best_val, val)
        if (
            prev - val <= tol * (1.0 + abs(val))
            and change <= 100 * tol * float(a.max())
            and step <= 100 * tol * (1.0 + float(np.linalg.norm(w)))
        ):
            converged = True
            break
        prev = val
        x = _anderson(x, g, hist_f, hist_g)
    w = minimize_ridge_risk(loss, prob.X, prob.y, a, cfg.lam, c=c, w0=w).w
    return _solution(prob, eta, w, a, it, converged, state)


def fit_strict_w(prob: Problem, sol: BlockSolution) -> BlockSolution:
    """Strict mode: the w-step for the returned ``a`` (the w-block minimiser, not
    used by the search) and ``G`` there."""
    cfg = prob.cfg
    w = minimize_ridge_risk(prob.loss, prob.X, prob.y, sol.a, cfg.lam, w0=sol.w).w
    return _solution(prob, sol.eta, w, sol.a, sol.iterations, sol.converged, sol.state)


def _solution(
    prob: Problem,
    eta: float,
    w: FloatArray,
    a: FloatArray,
    iterations: int,
    converged: bool,
    state: WeightsStepState | None,
) -> BlockSolution:
    """Package ``(w, a)`` at ``η`` with ``G`` and the mode's search value there."""
    return BlockSolution(
        eta,
        w,
        a,
        objective(prob, w, a, eta),
        search_value(prob, w, a, eta),
        iterations,
        converged,
        state,
    )


def _anderson(
    x: FloatArray,
    g: FloatArray,
    hist_f: list[FloatArray],
    hist_g: list[FloatArray],
    memory: int = 5,
) -> FloatArray:
    """Anderson extrapolation of the fixed-point map ``w ↦ T(w)`` (``g = T(x)``).

    ``w`` has only ``d`` entries, so mixing the last few residuals ``f = T(x) − x`` is
    cheap; it turns the DC algorithm's linear rate into a much faster one. The caller
    keeps the monotone-descent safeguard.
    """
    f = g - x
    hist_f.append(f)
    hist_g.append(g)
    if len(hist_f) > memory + 1:
        hist_f.pop(0)
        hist_g.pop(0)
    if len(hist_f) < 2:
        return g
    dF = np.diff(np.array(hist_f), axis=0).T
    dG = np.diff(np.array(hist_g), axis=0).T
    coef, *_ = np.linalg.lstsq(dF, f, rcond=None)
    return np.asarray(g - dG @ coef, dtype=float)
