"""The exact ``η`` polish of the search's best point, compiled (spec ``mechanism.md`` §4.2).

:func:`mechanisms.allocation._eta_search._polish` finishes the search with block
sweeps: the closed-form ``η``-step ``T(η) = clip(√(σ/(γΨᵀa)), η_lo, min(η_hi,
min_i ε_i^max/a_i))`` at the current ``(w, a)``, tried first as the secant step on
``g(η) = log T(η) − log η`` (in ``log η``, kept only if ``G`` does not rise beyond its
rounding), then as the plain step; each step a fixed-``η`` solve of the reduced
Newton method from the current point. It stops where ``|T(η) − η| ≤ rtol·η``.

:func:`polish_kernel` runs that loop in one call for the logistic loss with
``μ > 0`` and linear ``u`` (no noise term): each fixed-``η`` solve is the compiled
a-step at the current point's losses (:func:`._reduced_newton._point_from_r`) and
then the compiled Newton iterations (:func:`._reduced_newton._newton_kernel`), the
same operations as ``solve_at_eta`` takes there, so the same iterates to the bit.
It hands back (:data:`POLISH_HANDBACK`) where either kernel declines; the caller then
runs the Python loop from the start.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._kkt_kernel import a_block_conditions, eta_cap_top
from mechanisms.allocation._logistic_kernel import logistic_pass as _logistic_pass
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._reduced_newton import (
    NEWTON_CONVERGED,
    NEWTON_FLAT,
    NEWTON_MAX_ITER,
    _newton_kernel,
    _point_from_r,
)
from mechanisms.allocation._weights_kernel import _caps_all_kcap, _jit

FloatArray = NDArray[np.float64]

POLISH_DONE = 0
POLISH_HANDBACK = 1
POLISH_MAX_STEPS = 200  # as the Python loop


def compiled_steps_apply(prob: Problem) -> bool:
    """Whether ``prob``'s fixed-``η`` steps have compiled forms that take the Python
    ones' operations: the default mode's logistic loss with ``μ > 0`` and linear
    ``u``, no noise term, on contiguous arrays (the compiled a-step, Newton
    iterations, renewals and this polish)."""
    cfg = prob.cfg
    return (
        cfg.mode == "default"
        and cfg.u == "linear"
        and cfg.loss == "logistic"
        and cfg.mu > 0.0
        and prob.noise is None
        and prob.X.flags.c_contiguous
        and prob.psi.flags.c_contiguous
        and prob.eps_max.flags.c_contiguous
    )


@_jit
def psi_dot(psi: FloatArray, a: FloatArray) -> float:
    """``Ψᵀa`` as the ``η``-step forms it (NumPy's ``psi @ a``: the same BLAS
    product)."""
    return float(np.dot(psi, a))


@_jit
def caps_at(kcap: float, eps_max: FloatArray, eta: float) -> FloatArray:
    """The caps ``h_i = min(k/m, ε_i^max/η)``; every one ``k/m`` without a division
    per seller where the least ``ε^max`` already gives ``k/m``
    (:func:`._weights_kernel._caps_all_kcap`, exact: the rounded quotient is
    monotone in ``ε``)."""
    m = eps_max.size
    caps = np.empty(m)
    if _caps_all_kcap(kcap, eps_max, eta):
        caps[:] = kcap
        return caps
    for i in range(m):
        caps[i] = min(kcap, eps_max[i] / eta)
    return caps


@_jit
def _solved(code: int) -> bool:
    """Whether a fixed-``η`` solve ended where ``solve_at_eta`` returns its point
    (not an a-step decline, ``-1``, or a hand-off of the Newton kernel)."""
    return code in (NEWTON_CONVERGED, NEWTON_MAX_ITER, NEWTON_FLAT)


@_jit
def _solve_at(
    X: FloatArray,
    y: FloatArray,
    psi: FloatArray,
    eps_max: FloatArray,
    kcap: float,
    gamma: float,
    mu: float,
    lam: float,
    sigma: float,
    gtol: float,
    max_iter: int,
    eta: float,
    w: FloatArray,
    z: FloatArray,
    losses: FloatArray,
    dl: FloatArray,
    d2: FloatArray,
    A: float,
    s: float,
    H0: FloatArray,
) -> tuple[
    int, int, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray,
    FloatArray, FloatArray, float, float, float, FloatArray,
]:  # fmt: skip
    """``solve_at_eta`` at ``eta`` from ``w`` with its losses known: the caps
    ``min(k/m, ε^max/η)``, ``r = ℓ + γηΨ``, the a-step warm from ``(A, s)``, then the
    Newton iterations (chord steps on ``H0`` first where it is ``d × d``). ``code``
    is the Newton kernel's, or ``-1`` where the a-step declines."""
    m = losses.size
    q = gamma * eta
    const = sigma / eta
    caps = caps_at(kcap, eps_max, eta)
    r = np.empty(m)
    for i in range(m):
        r[i] = losses[i] + q * psi[i]
    ok, a, A1, s1, value = _point_from_r(r, caps, mu, A, s, w, lam, const)
    if not ok:
        return -1, 0, w, z, losses, dl, d2, r, a, A, s, 0.0, w
    out = _newton_kernel(
        X, y, psi, q, caps, mu, lam, const, gtol, max_iter, w, z, losses, dl, d2, r,
        a, A1, s1, value, H0,
    )  # fmt: skip
    return (
        out[0], out[1], out[3], out[4], out[5], out[6], out[7], out[8], out[9],
        out[10], out[11], out[12], out[13],
    )  # fmt: skip


@_jit
def solve_and_polish_kernel(
    X: FloatArray,
    y: FloatArray,
    psi: FloatArray,
    eps_max: FloatArray,
    kcap: float,
    gamma: float,
    mu: float,
    lam: float,
    sigma: float,
    gtol: float,
    max_iter: int,
    lo: float,
    hi: float,
    eta_rtol: float,
    rounding: float,
    eta: float,
    w: FloatArray,
    A0: float,
    s0: float,
    H0: FloatArray,
    z0: FloatArray,
    l0: FloatArray,
    dl0: FloatArray,
    d20: FloatArray,
    a_zero: float,
    eps_cap_rtol: float,
) -> tuple[
    int, int, float, FloatArray, FloatArray, FloatArray, FloatArray, float, float,
    float, FloatArray, int, bool, float, float,
]:  # fmt: skip
    """The fixed-``η`` solve from ``w`` (the a-step warm from ``(A0, s0)``; its
    margins ``Xw`` and loss pass computed here, as ``solve_at_eta`` computes them for
    a new ``w``, unless given as ``z0, l0, dl0, d20``: ``Xw, ℓ, ℓ', ℓ''`` at ``w``,
    used where they have ``m`` entries; chord steps on the frozen Hessian ``H0``
    where that is ``d × d``), then :func:`polish_kernel` from its solution: the same
    tuple, with ``steps = 0`` meaning the solve's own point (its gradient and
    iterations), and two more entries: the a-block residual and the profile slope
    ``dP/dη`` at the returned point (:func:`._kkt_kernel.a_block_conditions` with
    the thresholds ``a_zero`` and ``eps_cap_rtol``; 0 where it hands back), which
    the caller's KKT check and ``η`` root would otherwise compute in a second call."""
    m = y.size
    q = gamma * eta
    const = sigma / eta
    caps = caps_at(kcap, eps_max, eta)
    if z0.size == m:  # the losses do not depend on Ψ: r as the loss pass forms it
        z, val, d1, d2 = z0, l0, dl0, d20
        r = np.empty(m)
        for i in range(m):
            r[i] = val[i] + q * psi[i]
    else:
        z = np.dot(X, w)
        val, d1, d2, r = _logistic_pass(z, y, q, psi)
    ok, a, A, s, value = _point_from_r(r, caps, mu, A0, s0, w, lam, const)
    if not ok:
        return (
            POLISH_HANDBACK, 0, eta, w, a, val, d1, A0, s0, 0.0, w, 0, False, 0.0, 0.0
        )  # fmt: skip
    out = _newton_kernel(
        X, y, psi, q, caps, mu, lam, const, gtol, max_iter, w, z, val, d1, d2, r, a,
        A, s, value, H0,
    )  # fmt: skip
    code = out[0]
    if not _solved(code):
        return (
            POLISH_HANDBACK, 0, eta, w, a, val, d1, A0, s0, 0.0, w, 0, False, 0.0, 0.0
        )  # fmt: skip
    p = polish_kernel(
        X, y, psi, eps_max, kcap, gamma, mu, lam, sigma, gtol, max_iter, lo, hi,
        eta_rtol, rounding, eta, out[3], out[4], out[5], out[6], out[7], out[9],
        out[10], out[11], out[12], out[13], out[1], code == NEWTON_CONVERGED, H0,
    )  # fmt: skip
    r_a, dG = 0.0, 0.0
    if p[0] == POLISH_DONE:  # at (η, a) with the losses kept: ∂G/∂η = −σ/η² + …
        e = p[2]
        r_a, dG = a_block_conditions(
            p[5], p[4], psi, eps_max, e, kcap, gamma, mu, -sigma / (e * e), a_zero,
            eps_cap_rtol,
        )  # fmt: skip
    return (*p, r_a, dG)


@_jit
def polish_kernel(
    X: FloatArray,
    y: FloatArray,
    psi: FloatArray,
    eps_max: FloatArray,
    kcap: float,
    gamma: float,
    mu: float,
    lam: float,
    sigma: float,
    gtol: float,
    max_iter: int,
    lo: float,
    hi: float,
    eta_rtol: float,
    rounding: float,
    eta: float,
    w: FloatArray,
    z: FloatArray,
    losses: FloatArray,
    dl: FloatArray,
    d2: FloatArray,
    a: FloatArray,
    A: float,
    s: float,
    value: float,
    g: FloatArray,
    it: int,
    converged: bool,
    H0: FloatArray,
) -> tuple[
    int, int, float, FloatArray, FloatArray, FloatArray, FloatArray, float, float,
    float, FloatArray, int, bool,
]:  # fmt: skip
    """``(code, steps, η, w, a, ℓ, ℓ', A, s, F, ∇F, iterations, converged)`` at the
    end of the polish from the point ``(η, w, a)`` with multipliers ``(A, s)``, value
    ``F``, margins/losses ``z, ℓ, ℓ', ℓ''``, and the gradient, iterations and
    convergence of the solve that gave it: the loop of ``_polish`` (module
    docstring), ``steps`` the accepted ones (0: the start is returned as given);
    each step's solve takes chord steps on ``H0`` first where it is ``d × d``.
    """
    steps = 0
    have_prev = False
    px = 0.0
    pg = 0.0
    for _ in range(POLISH_MAX_STEPS):
        # the η-step at the current (w, a): _eta_search.eta_step without a noise term
        top = eta_cap_top(eps_max, a, hi)
        slope = gamma * psi_dot(psi, a)
        if sigma <= 0.0:
            target = lo
        elif slope <= 0.0:
            target = top
        else:
            target = min(max(math.sqrt(sigma / slope), lo), top)
        if abs(target - eta) <= eta_rtol * eta:
            break
        x = math.log(eta)
        gx = math.log(target) - math.log(eta)
        noise = rounding * (1.0 + abs(value))
        new_eta = target
        secant = False
        if have_prev and gx != pg:
            x_sec = x - gx * (x - px) / (gx - pg)
            if math.isnan(x_sec):  # the loop's clip would order a NaN differently
                return (
                    POLISH_HANDBACK, steps, eta, w, a, losses, dl, A, s, value, g, it,
                    converged,
                )  # fmt: skip
            eta_sec = hi if x_sec > 700.0 else min(max(math.exp(x_sec), lo), hi)
            c = _solve_at(
                X, y, psi, eps_max, kcap, gamma, mu, lam, sigma, gtol, max_iter,
                eta_sec, w, z, losses, dl, d2, A, s, H0,
            )  # fmt: skip
            if not _solved(c[0]):
                return (
                    POLISH_HANDBACK, steps, eta, w, a, losses, dl, A, s, value, g, it,
                    converged,
                )  # fmt: skip
            secant = c[11] <= value + noise
            if secant:
                new_eta = eta_sec
        if not secant:
            c = _solve_at(
                X, y, psi, eps_max, kcap, gamma, mu, lam, sigma, gtol, max_iter,
                target, w, z, losses, dl, d2, A, s, H0,
            )  # fmt: skip
            if not _solved(c[0]):
                return (
                    POLISH_HANDBACK, steps, eta, w, a, losses, dl, A, s, value, g, it,
                    converged,
                )  # fmt: skip
            if c[11] > value + noise:
                break
        eta = new_eta
        it, w, z, losses, dl, d2 = c[1], c[2], c[3], c[4], c[5], c[6]
        a, A, s, value, g = c[8], c[9], c[10], c[11], c[12]
        converged = c[0] == NEWTON_CONVERGED
        px, pg = x, gx
        have_prev = True
        steps += 1
    return POLISH_DONE, steps, eta, w, a, losses, dl, A, s, value, g, it, converged
