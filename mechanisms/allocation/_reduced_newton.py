"""Newton's method on the reduced objective ``F(w) = min_a G(w, a, η)`` (fixed ``η``).

With linear ``u`` and ``μ > 0`` the a-block minimiser ``a*(w)`` is unique and, on a fixed
active set, an explicit function of ``r = ℓ(w) + γηΨ`` (see
:mod:`mechanisms.weights_step`). So ``F`` is differentiable (Danskin) with

    ∇F(w) = Σ_i a*_i ℓ'_i x_i + λw (+ c),

and, on the free set ``M`` (``0 < a_i < h_i``), differentiating ``a_M = A − s r_M`` with
``Σ_M a = 1 − Σ_U h`` and ``‖a‖² = μ²s²`` held gives

    ∂a_M/∂r_M = −sI + 1 p₁ᵀ − r_M p₂ᵀ,
    p₁ = (s/D)(S₁a − (Q + μ²s)1),  p₂ = (s/D)(|M|a − c₁1),
    D = S₁c₁ − |M|(Q + μ²s),  S₁ = Σ_M r,  Q = Σ_M a r,  c₁ = Σ_M a,

hence ``∇²F = Σ a_i ℓ''_i x_i x_iᵀ + λI + Gᵀ(∂a/∂r)G`` with ``G`` the rows ``ℓ'_i x_i``
on ``M``. The last term is negative semi-definite (``a*`` is the gradient of a concave
function of ``r``); ``∇²F`` is positive definite when ``λ > λ_conv`` (paper Thm 4.1,
convexity in ``(w, log a)``). When it is not, the step falls back to the w-block Hessian
alone (a DC-algorithm step). Armijo backtracking on ``F`` keeps every step a descent
step. ``w`` has only ``d`` entries, so this needs a handful of O(m d²) passes where the
plain block alternation needs hundreds of sweeps when the weights are selective.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._problem import Problem
from mechanisms.allocation._weights_step import (
    WeightsStepState,
    solve_weights,
    state_from_weights,
)

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class _Point:
    w: FloatArray
    z: FloatArray
    losses: FloatArray
    r: FloatArray
    a: FloatArray
    state: WeightsStepState | None
    value: float


def _evaluate(
    prob: Problem,
    eta: float,
    w: FloatArray,
    state: WeightsStepState | None,
    a0: FloatArray | None = None,
) -> _Point:
    """``F`` at ``w``; the a-step warm-starts from ``state``, else from ``a0``."""
    cfg, loss = prob.cfg, prob.loss
    z = prob.X @ w
    losses = loss.value(z, prob.y)
    r = losses + cfg.gamma * eta * prob.psi
    caps = prob.caps(eta)
    if state is None and a0 is not None:
        state = state_from_weights(a0, r, caps, cfg.mu)
    a, new_state = solve_weights(r, caps, cfg.mu, warm=state)
    value = (
        float(a @ r)
        + 0.5 * cfg.lam * float(w @ w)
        + cfg.mu * float(np.linalg.norm(a))
        + cfg.sigma / eta
    )
    c = prob.linear_term(eta)
    if c is not None:
        value += float(c @ w)
    return _Point(w, z, losses, r, a, new_state, value)


def _gradient(prob: Problem, eta: float, p: _Point) -> FloatArray:
    g = prob.X.T @ (p.a * prob.loss.derivative(p.z, prob.y)) + prob.cfg.lam * p.w
    c = prob.linear_term(eta)
    return g if c is None else g + c


# Rows per block of the weighted Gram product (a block fits in L2 for d ≤ 32).
GRAM_BLOCK = 8192


def weighted_gram(X: FloatArray, weights: FloatArray) -> FloatArray:
    """``Xᵀ diag(weights) X`` (weights of any sign) without a masked copy of ``X``.

    Rows are taken in contiguous blocks; each block is scaled into one reused buffer
    and multiplied into the ``d × d`` accumulator, so the extra memory is
    ``GRAM_BLOCK·d`` floats and every row is read from main memory once.
    """
    m, d = X.shape
    H = np.zeros((d, d))
    buf = np.empty((min(m, GRAM_BLOCK), d))
    for lo in range(0, m, GRAM_BLOCK):
        hi = min(lo + GRAM_BLOCK, m)
        Xb = X[lo:hi]
        out = buf[: hi - lo]
        np.multiply(Xb, weights[lo:hi, None], out=out)
        H += Xb.T @ out
    return H


def _w_block_weights(prob: Problem, p: _Point) -> FloatArray:
    """``a_i ℓ''_i`` (0 where ``a_i = 0``): ``H_w = Xᵀ diag(·) X + λI``."""
    h = p.a * prob.loss.curvature(p.z, prob.y)
    return np.where(p.a > 0, h, 0.0)


def _w_hessian(prob: Problem, p: _Point) -> FloatArray:
    """The w-block Hessian ``H_w = Σ a_i ℓ''_i x_i x_iᵀ + λI``."""
    d = prob.X.shape[1]
    Hw = weighted_gram(prob.X, _w_block_weights(prob, p))
    Hw.flat[:: d + 1] += prob.cfg.lam
    return Hw


def _hessian(prob: Problem, eta: float, p: _Point) -> tuple[FloatArray, bool]:
    """``(∇²F, reduced)``: the full ``∇²F = H_w + sym(J)``, with ``reduced = False``
    when ``J`` vanishes (no free set) and the matrix is ``H_w`` itself.

    ``−s GᵀG`` of ``J`` is folded into the one weighted Gram product (weights
    ``a_i ℓ''_i − s ℓ'_i²`` on the free set ``M``); the rank-two part needs only
    ``Xᵀ`` times four vectors, one GEMM.
    """
    cfg, loss = prob.cfg, prob.loss
    d = prob.X.shape[1]
    wts = _w_block_weights(prob, p)
    free, n = None, 0
    if p.state is not None:
        s = p.state.s
        v = p.state.A - s * p.r
        free = (v > 0.0) & (v < prob.caps(eta))
        n = int(free.sum())
    if p.state is None or free is None or n == 0:
        H = weighted_gram(prob.X, wts)
        H.flat[:: d + 1] += cfg.lam
        return H, False
    aM, rM = p.a[free], p.r[free]
    S1, c1, Q = float(rM.sum()), float(aM.sum()), float(aM @ rM)
    D = S1 * c1 - n * (Q + cfg.mu**2 * s)
    if D == 0.0:
        H = weighted_gram(prob.X, wts)
        H.flat[:: d + 1] += cfg.lam
        return H, False
    p1 = (s / D) * (S1 * aM - (Q + cfg.mu**2 * s))
    p2 = (s / D) * (n * aM - c1)
    dl = loss.derivative(p.z[free], prob.y[free])
    wts[free] -= s * dl * dl
    H = weighted_gram(prob.X, wts)
    H.flat[:: d + 1] += cfg.lam
    # Columns: ℓ'_i, ℓ'_i r_i, ℓ'_i p1_i, ℓ'_i p2_i on M → g1, gr, Gᵀp1, Gᵀp2.
    V = np.zeros((prob.m, 4))
    V[free] = np.column_stack([dl, dl * rM, dl * p1, dl * p2])
    g1, gr, gp1, gp2 = (prob.X.T @ V).T
    K = np.outer(g1, gp1) - np.outer(gr, gp2)
    return H + 0.5 * (K + K.T), True


def _direction(
    prob: Problem, p: _Point, Hf: FloatArray, reduced: bool, g: FloatArray
) -> FloatArray:
    """Newton direction on ``∇²F``; the w-block Hessian alone (a DC step) when
    ``∇²F`` is not positive definite."""
    try:
        L = np.linalg.cholesky(Hf)
        return -np.linalg.solve(L.T, np.linalg.solve(L, g))
    except np.linalg.LinAlgError:
        if not reduced:
            return -np.linalg.solve(Hf, g)
        return -np.linalg.solve(_w_hessian(prob, p), g)


def _rounding_accept(
    prob: Problem, eta: float, p: _Point, q: _Point, slope: float, gnorm: float
) -> bool:
    """Accept a full Newton step whose predicted decrease is below ``F``'s rounding.

    Near the minimiser ``|∇Fᵀd|`` can fall under ``ε_mach·|F|``; Armijo then rejects
    every step on rounding noise and halving ``t`` only makes no-progress steps (this
    ran 500 iterations, ~30 evaluations each, at ``‖∇F‖ ≈ 1e-8 > gtol``). Accept the
    step instead when ``F`` did not rise beyond rounding and ``‖∇F‖`` shrank.
    """
    scale = 1.0 + abs(p.value)
    if -slope > 1e-12 * scale or q.value > p.value + 1e-13 * scale:
        return False
    return float(np.linalg.norm(_gradient(prob, eta, q))) < gnorm


def newton_reduced(
    prob: Problem,
    eta: float,
    *,
    w0: FloatArray,
    state: WeightsStepState | None,
    gtol: float,
    max_iter: int,
    a0: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, WeightsStepState | None, int, bool, float]:
    """Minimise ``F``; return ``(w, a*(w), state, iterations, converged, F(w))``.

    ``state`` (or, without one, the nearby weights ``a0``) warm-starts the a-step.

    Converged means ``‖∇F(w)‖ ≤ gtol·(1 + ‖w‖)``, i.e. both block KKT conditions hold
    (``a = a*(w)`` exactly, and ``∇_w G(w, a) = ∇F(w)``).
    """
    p = _evaluate(prob, eta, np.asarray(w0, dtype=float), state, a0)
    for it in range(max_iter + 1):
        g = _gradient(prob, eta, p)
        if float(np.linalg.norm(g)) <= gtol * (1.0 + float(np.linalg.norm(p.w))):
            return p.w, p.a, p.state, it, True, p.value
        if it == max_iter:
            break
        Hf, reduced = _hessian(prob, eta, p)
        step = _direction(prob, p, Hf, reduced, g)
        slope = float(g @ step)
        if slope >= 0.0:  # pragma: no cover - both Hessians are positive definite
            step, slope = -g, -float(g @ g)
        t = 1.0
        gnorm = float(np.linalg.norm(g))
        while True:
            q = _evaluate(prob, eta, p.w + t * step, p.state)
            if q.value <= p.value + 1e-4 * t * slope:
                break
            if t == 1.0 and _rounding_accept(prob, eta, p, q, slope, gnorm):
                break
            t *= 0.5
            if t < 1e-10:
                # No representable descent: F is flat here to machine precision.
                return p.w, p.a, p.state, it, False, p.value
        p = q
    return p.w, p.a, p.state, max_iter, False, p.value
