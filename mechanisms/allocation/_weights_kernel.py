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

import math
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
        ok, A, s = _active_set(r, h, mu, _theta(s0, r, h), s0)
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


@_jit
def _value_at(r: FloatArray, h: FloatArray, mu: float, A: float, s: float) -> float:
    """``⟨r, a⟩ + μ‖a‖`` at ``a = clip(A − s r, 0, h)``."""
    lin = 0.0
    sq = 0.0
    for i in range(r.size):
        v = min(max(A - s * r[i], 0.0), h[i])
        lin += v * r[i]
        sq += v * v
    return lin + mu * math.sqrt(sq)


@_jit
def cap_cell_bound_kernel(
    ell: FloatArray,
    psi: FloatArray,
    gamma: float,
    e1: float,
    e2: float,
    kcap: float,
    eps_max: FloatArray,
    mu: float,
    sigma: float,
    base: float,
    eta_nu: float,
    A_nu: float,
    s_nu: float,
) -> tuple[bool, float]:
    """``(ok, bound)``: the larger of the two lower bounds of ``p_j`` on ``[e1, e2]``
    where ``ε^max`` caps move (``_candidate_range._Search.cell_bound``; ``μ > 0``):

    * plain: ``base + σ/e2 + min_{a∈C(e1)} ⟨ℓ + γ min(e1Ψ, e2Ψ), a⟩ + μ‖a‖``;
    * dual: the chord bound of ``L_ν`` (``_Search.dual_cell_bound``) with ``ν`` from
      the multipliers ``(A_nu, s_nu)`` of the exact a-step at ``eta_nu`` (also the
      warm start of the three a-steps).

    ``ok = False`` (an a-step failed its check, or ``Σ h ≤ 1``) sends the caller to
    the NumPy path.
    """
    m = ell.size
    r = np.empty(m)
    h = np.empty(m)
    tot = 0.0
    for i in range(m):
        r[i] = ell[i] + gamma * min(e1 * psi[i], e2 * psi[i])
        h[i] = min(kcap, eps_max[i] / e1)
        tot += h[i]
    if tot <= 1.0 + 1e-12 or kcap * m <= 1.0 + 1e-12 or not s_nu > 0.0:
        return False, 0.0
    ok, A, s = weights_kernel(r, h, mu, A_nu, s_nu)
    if not ok:
        return False, 0.0
    plain = base + sigma / e2 + _value_at(r, h, mu, A, s)
    # ν_i = β_i/η at eta_nu for the sellers held at ε_i^max/η (below k/m).
    psi_nu = np.empty(m)
    shift = 0.0
    for i in range(m):
        nu = 0.0
        hi_ = eps_max[i] / eta_nu
        if hi_ < kcap:
            ri = ell[i] + gamma * eta_nu * psi[i]
            nu = max(A_nu - s_nu * ri - hi_, 0.0) / (s_nu * eta_nu)
        psi_nu[i] = gamma * psi[i] + nu
        if nu > 0.0:
            shift -= nu * eps_max[i]
    g = np.empty(2)
    hk = np.full(m, kcap)
    ends = (e1, e2)
    for k in range(2):
        for i in range(m):
            r[i] = ell[i] + ends[k] * psi_nu[i]
        ok, A, s = weights_kernel(r, hk, mu, A_nu, s_nu)
        if not ok:
            return False, 0.0
        g[k] = shift + _value_at(r, hk, mu, A, s)
    slope = (g[1] - g[0]) / (e2 - e1)
    if sigma > 0.0 and slope > 0.0:
        eta = min(max(math.sqrt(sigma / slope), e1), e2)
    elif sigma > 0.0 or slope < 0.0:
        eta = e2
    else:
        eta = e1
    dual = base + sigma / eta + g[0] + slope * (eta - e1)
    return True, max(plain, dual)
