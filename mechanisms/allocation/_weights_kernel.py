"""The a-step (problem (A) of :mod:`mechanisms.allocation._weights_step`) compiled with
numba, for the candidate-range search, which evaluates it thousands of times per
allocation on small vectors (where the NumPy version's per-call overhead dominates).

Same mathematics as ``_weights_step.solve_weights`` for ``μ > 0``: ``a_i =
clip(A − s r_i, 0, h_i)`` with ``Σ a_i = 1`` and ``‖a‖₂ = μ s``. From a warm ``(A, s)``
the closed-form active-set step is iterated to a fixed point; cold (or when that fails)
``s`` is bisected in ``log s`` on the non-increasing ``‖P(−s r)‖/(μ s)`` (``P``: the
capped-simplex projection, itself by bisection plus the exact finish on its active
set) before the active-set step finishes. The result is checked (``Σ a = 1`` and
``‖a‖ = μ s`` to 1e-9); ``ok = False`` sends the caller to the NumPy solver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
F = TypeVar("F", bound=Callable[..., Any])

try:  # numba compiles the kernels; without it they run as plain Python (same results)
    from numba import njit as _njit

    def _jit(fn: F) -> F:
        return cast(F, _njit(cache=True, nogil=True)(fn))

except ImportError:  # pragma: no cover - numba is a declared dependency

    def _jit(fn: F) -> F:
        return fn


@_jit
def _theta(s: float, r: FloatArray, h: FloatArray) -> float:
    """``θ`` with ``Σ clip(θ − s r_i, 0, h_i) = 1`` (bisection, exact finish)."""
    m = r.size
    lo = np.inf
    hi = -np.inf
    for i in range(m):
        v = s * r[i]
        lo = min(lo, v)
        hi = max(hi, v + h[i])
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        tot = 0.0
        for i in range(m):
            tot += min(max(mid - s * r[i], 0.0), h[i])
        if tot < 1.0:
            lo = mid
        else:
            hi = mid
    theta = 0.5 * (lo + hi)
    # Exact finish on the active set implied by θ.
    n_mid = 0
    acc = 1.0
    for i in range(m):
        v = theta - s * r[i]
        if v >= h[i]:
            acc -= h[i]
        elif v > 0.0:
            n_mid += 1
            acc += s * r[i]
    if n_mid > 0:
        cand = acc / n_mid
        ok = True
        for i in range(m):
            v0 = theta - s * r[i]
            v1 = cand - s * r[i]
            if (v0 >= h[i]) != (v1 >= h[i]) or ((v0 > 0.0) != (v1 > 0.0)):
                ok = False
                break
        if ok:
            theta = cand
    return theta


@_jit
def _recentre(A: float, s: float, r: FloatArray, h: FloatArray) -> tuple[bool, float]:
    """``θ`` with ``Σ clip(θ − s r_i, 0, h_i) = 1`` by bracketed Newton from a warm
    ``A`` (the left side is piecewise linear and non-decreasing, its slope the number
    of free weights): one or two O(m) passes from a nearby solve, where the bisection
    of :func:`_theta` takes ~60. ``(False, ·)`` when it stalls (then bisect)."""
    lo = -np.inf
    hi = np.inf
    for _ in range(30):
        tot = 0.0
        n_mid = 0
        for i in range(r.size):
            v = A - s * r[i]
            if v >= h[i]:
                tot += h[i]
            elif v > 0.0:
                tot += v
                n_mid += 1
        f = tot - 1.0
        if abs(f) <= 1e-14:
            return True, A
        if f > 0.0:
            hi = min(hi, A)
        else:
            lo = max(lo, A)
        step = A - f / n_mid if n_mid > 0 else np.nan
        if not (lo < step < hi):
            if not (np.isfinite(lo) and np.isfinite(hi)):
                return False, A
            step = 0.5 * (lo + hi)
        A = step
    return False, A


@_jit
def _ratio(s: float, r: FloatArray, h: FloatArray, mu: float) -> tuple[float, float]:
    theta = _theta(s, r, h)
    sq = 0.0
    for i in range(r.size):
        v = min(max(theta - s * r[i], 0.0), h[i])
        sq += v * v
    return np.sqrt(sq) / (mu * s) - 1.0, theta


@_jit
def _active_set(
    r: FloatArray, h: FloatArray, mu: float, A: float, s: float
) -> tuple[bool, float, float]:
    m = r.size
    prev_u = -1
    prev_m = -1
    prev_key = 0.0
    for _ in range(60):
        H1 = 0.0
        H2 = 0.0
        S1 = 0.0
        S2 = 0.0
        n_mid = 0
        n_up = 0
        key = 0.0
        for i in range(m):
            v = A - s * r[i]
            if v >= h[i]:
                H1 += h[i]
                H2 += h[i] * h[i]
                n_up += 1
                key += (i + 1) * 1.0
            elif v > 0.0:
                S1 += r[i]
                S2 += r[i] * r[i]
                n_mid += 1
                key += (i + 1) * 1e-7
        if n_mid == 0:
            return False, A, s
        V = S2 - S1 * S1 / n_mid
        c1 = 1.0 - H1
        denom = mu * mu - V
        if denom <= 0.0:
            return False, A, s
        s = np.sqrt((H2 + c1 * c1 / n_mid) / denom)
        A = (c1 + s * S1) / n_mid
        if n_up == prev_u and n_mid == prev_m and key == prev_key:
            break
        prev_u, prev_m, prev_key = n_up, n_mid, key
    tot = 0.0
    sq = 0.0
    for i in range(m):
        v = min(max(A - s * r[i], 0.0), h[i])
        tot += v
        sq += v * v
    if abs(tot - 1.0) > 1e-9 or abs(np.sqrt(sq) - mu * s) > 1e-9 * max(1.0, mu * s):
        return False, A, s
    return True, A, s


@_jit
def _bisect(r: FloatArray, h: FloatArray, mu: float, rel: float) -> tuple[float, float]:
    lo = 1.0 / mu
    hi = lo
    for _ in range(200):
        if _ratio(lo, r, h, mu)[0] >= 0.0:
            break
        lo *= 1e-2
    for _ in range(200):
        if _ratio(hi, r, h, mu)[0] <= 0.0:
            break
        hi *= 1e2
    for _ in range(300):
        mid = np.sqrt(lo * hi)
        if _ratio(mid, r, h, mu)[0] > 0.0:
            lo = mid
        else:
            hi = mid
        if hi / lo - 1.0 < rel:
            break
    s = np.sqrt(lo * hi)
    return _ratio(s, r, h, mu)[1], s


@_jit
def weights_kernel(
    r: FloatArray, h: FloatArray, mu: float, A0: float, s0: float
) -> tuple[bool, float, float]:
    """``(ok, A, s)`` of problem (A) for ``μ > 0`` and ``Σ h > 1``; warm when
    ``s0 > 0``."""
    if s0 > 0.0:
        found, A = _recentre(A0, s0, r, h)
        if not found:
            A = _theta(s0, r, h)
        ok, A, s = _active_set(r, h, mu, A, s0)
        if ok:
            return ok, A, s
    for rel in (1e-1, 1e-4, 1e-14):
        A, s = _bisect(r, h, mu, rel)
        ok, A2, s2 = _active_set(r, h, mu, A, s)
        if ok:
            return ok, A2, s2
    return False, 0.0, 0.0


@_jit
def range_value_kernel(
    ell: FloatArray,
    psi: FloatArray,
    q_scale: float,
    eta: float,
    kcap: float,
    eps_max: FloatArray,
    mu: float,
    const: float,
    A0: float,
    s0: float,
) -> tuple[bool, float, float, float, float]:
    """``(ok, value, A, s, Ψᵀa)``: ``const + min_{a∈C(η)} ⟨ℓ + q_scale·Ψ, a⟩ + μ‖a‖``
    with ``C(η)`` the capped simplex with ``h_i = min(kcap, ε_i^max/η)`` (``Σ h > 1``)
    and ``a`` its minimiser."""
    m = ell.size
    r = np.empty(m)
    h = np.empty(m)
    for i in range(m):
        r[i] = ell[i] + q_scale * psi[i]
        h[i] = min(kcap, eps_max[i] / eta)
    ok, A, s = weights_kernel(r, h, mu, A0, s0)
    if not ok:
        return False, 0.0, 0.0, 0.0, 0.0
    lin = 0.0
    sq = 0.0
    pa = 0.0
    for i in range(m):
        v = min(max(A - s * r[i], 0.0), h[i])
        lin += v * r[i]
        sq += v * v
        pa += v * psi[i]
    return True, const + lin + mu * np.sqrt(sq), A, s, pa
