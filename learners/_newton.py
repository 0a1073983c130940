"""Damped Newton solver for weighted, ridge-regularised empirical risk.

Minimises ``F(w) = Σ_i a_i ℓ(x_i·w, y_i) + (λ/2)‖w‖² + cᵀw`` (``c`` optional), which
is the w-block of the allocation (spec ``mechanism.md`` §4.2, "w-step") and the
objective-perturbation argmin of the release (spec §3, step 2, with ``c = 2b/η``).
``F`` is ``λ``-strongly convex, so Newton with Armijo backtracking converges globally
and quadratically near the minimiser; the release needs a tight argmin (its privacy
proof assumes the exact minimiser), so we stop on the gradient norm, not on progress.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from learners.losses import Loss

FloatArray = NDArray[np.float64]

# Relative size below which a predicted decrease of F is lost in its rounding error.
_F_RESOLUTION = 1e-13


@dataclass(frozen=True, slots=True)
class NewtonResult:
    """Outcome of :func:`minimize_ridge_risk`."""

    w: FloatArray
    value: float
    grad_norm: float
    n_iter: int
    converged: bool


def ridge_risk_value(
    loss: Loss,
    w: FloatArray,
    X: FloatArray,
    y: FloatArray,
    a: FloatArray,
    lam: float,
    c: FloatArray | None = None,
) -> float:
    """``F(w)`` of the module docstring."""
    val = float(a @ loss.value(X @ w, y)) + 0.5 * lam * float(w @ w)
    if c is not None:
        val += float(c @ w)
    return val


def minimize_ridge_risk(
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    a: FloatArray,
    lam: float,
    *,
    c: FloatArray | None = None,
    w0: FloatArray | None = None,
    gtol: float = 1e-10,
    max_iter: int = 500,
) -> NewtonResult:
    """Minimise ``Σ a_i ℓ(x_i·w, y_i) + (λ/2)‖w‖² + cᵀw`` by damped Newton.

    Rows with ``a_i = 0`` are dropped first (they do not enter ``F``).

    Parameters
    ----------
    gtol : float
        Stop when ``‖∇F(w)‖₂ ≤ gtol``.
    """
    keep = a > 0
    if not np.all(keep):
        X, y, a = X[keep], y[keep], a[keep]
    d = X.shape[1]
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=float, copy=True)
    z = X @ w
    f = float(a @ loss.value(z, y)) + 0.5 * lam * float(w @ w)
    if c is not None:
        f += float(c @ w)
    gnorm = np.inf
    for it in range(max_iter + 1):
        g = X.T @ (a * loss.derivative(z, y)) + lam * w
        if c is not None:
            g += c
        gnorm = float(np.linalg.norm(g))
        if gnorm <= gtol or it == max_iter:
            return NewtonResult(w, f, gnorm, it, gnorm <= gtol)
        h = a * loss.curvature(z, y)
        H = (X.T * h) @ X
        H.flat[:: d + 1] += lam
        try:
            step = -np.linalg.solve(H, g)
        except (
            np.linalg.LinAlgError
        ):  # pragma: no cover - H is λ-PD in exact arithmetic
            step = -g / lam
        slope = float(g @ step)
        Xs = X @ step
        if -slope <= _F_RESOLUTION * max(1.0, abs(f)):
            # The predicted decrease is below the rounding error of F, so Armijo
            # cannot certify descent; near the minimiser (where this happens) the
            # full Newton step is accepted if it shrinks the gradient norm instead.
            w_new, z_new = w + step, z + Xs
            g_new = X.T @ (a * loss.derivative(z_new, y)) + lam * w_new
            if c is not None:
                g_new += c
            if float(np.linalg.norm(g_new)) >= gnorm:
                return NewtonResult(w, f, gnorm, it, gnorm <= gtol)
            f_new = float(a @ loss.value(z_new, y)) + 0.5 * lam * float(w_new @ w_new)
            if c is not None:
                f_new += float(c @ w_new)
            w, z, f = w_new, z_new, f_new
            continue
        t = 1.0
        while True:
            w_new = w + t * step
            z_new = z + t * Xs
            f_new = float(a @ loss.value(z_new, y)) + 0.5 * lam * float(w_new @ w_new)
            if c is not None:
                f_new += float(c @ w_new)
            if f_new <= f + 1e-4 * t * slope or t < 1e-12:
                break
            t *= 0.5
        if t < 1e-12 and f_new > f:
            # No descent possible in floating point: we are at the minimiser to
            # machine precision (the gradient norm reported says how close).
            return NewtonResult(w, f, gnorm, it, gnorm <= gtol)
        w, z, f = w_new, z_new, f_new
    raise AssertionError("unreachable")  # pragma: no cover
