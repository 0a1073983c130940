"""The a- and η-block KKT conditions of a block solution in one compiled pass.

:func:`mechanisms.allocation._eta_search.kkt_residuals` (and the profile slope the
``η`` polish follows) check, at ``(w, a, η)``, the a-block's optimality

    g_i = ℓ_i(w) + γηΨ_i u'(ηa_i) + μ a_i/‖a‖,
    g_i = τ (free), g_i ≥ τ (at 0), g_i ≤ τ (at the cap),

with ``τ`` the multiplier of ``Σ a = 1`` (the median of the free ``g_i``), and the
profile slope ``dP/dη = −σ/η² + γΨᵀ(a·u') + Σ_{i held by ε_i^max} ν_i a_i``,
``ν_i = (τ − g_i)/η`` (the envelope theorem with the caps' multipliers). In NumPy that
is some twenty array passes (``2.5 ms`` at ``m = 10⁴``, half of a payment
re-solve's time); :func:`a_block_conditions` makes it one pass and a median
(:func:`median`: counted ranks where the free ``g_i`` are a few ulps apart, as at an
optimum), for any utility (the caller passes ``Ψ_i u'(ηa_i)``, ``Ψ_i`` itself for
the linear one).

The classes: a weight is at 0 below ``A_ZERO``; at its cap within ``1e-9`` of it,
or within ``EPS_CAP_RTOL`` where ``ε_i^max/η < k/m`` (the searches locate a kink
where an ε cap starts to bind to ~1e-8 in ``η``: a weight that close under its ε cap
is read as held by it; if it is in fact free its multiplier ``τ − g_i`` is ~0 and
adds nothing to ``dP/dη``); pinned where the cap is 0 (no condition); free
otherwise. With no free weight any ``τ`` in ``[max g(at cap), min g(at zero)]`` is
a multiplier of ``Σa = 1``: the one that best meets the ``η`` condition is taken
(``dP/dη`` increases with ``τ`` through the held sellers' ``ν_i``). At the kink
where ``ε_i^max/η`` meets ``k/m`` both caps bind and the multiplier may sit on
either, so ``ε_i``'s share of ``dP/dη`` is anything in ``[0, ν_i a_i/η]``: the
point of ``[dP/dη, dP/dη + share]`` nearest 0 is returned.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._weights_kernel import _jit, _max_of, _min_of

FloatArray = NDArray[np.float64]


@_jit
def a_block_conditions(
    losses: FloatArray,
    a: FloatArray,
    upsi: FloatArray,
    eps_max: FloatArray,
    eta: float,
    kcap: float,
    gamma: float,
    mu: float,
    dG0: float,
    a_zero: float,
    eps_cap_rtol: float,
) -> tuple[float, float]:
    """``(relative a-residual, dP/dη)`` at ``(a, η)`` (module docstring) with
    ``upsi = Ψ·u'(ηa)``, the caps ``h_i = min(k/m, ε_i^max/η)`` formed here from
    ``eps_max`` and ``kcap = k/m`` (the same numbers as
    :meth:`mechanisms.allocation._problem.Problem.caps`, without its two arrays),
    and the classes' thresholds ``a_zero`` and ``eps_cap_rtol``. ``dG0`` is
    ``∂G/∂η`` without the term ``γ(Ψu')ᵀa`` (``−σ/η²``, and the noise term where
    there is one)."""
    m = a.size
    sq = 0.0
    for i in range(m):
        sq += a[i] * a[i]
    norm_a = math.sqrt(sq)
    q = gamma * eta
    g = np.empty(m)
    cls = np.empty(m, dtype=np.int8)  # 0 free, 1 at zero, 2 at cap, 3 pinned
    free_g = np.empty(m)
    n_free = 0
    pa = 0.0
    lo_t = -np.inf  # max g at a cap
    hi_t = np.inf  # min g at zero
    held_a = 0.0
    held_ga = 0.0
    # the extremes of g per class, and whether any capped weight is held by its
    # ε cap (or at the kink): without such weights the residual is read from the
    # extremes (|g_i − τ| is largest at the free extremes, τ − g_i at the smallest
    # g at zero, g_i − τ at the largest at a cap) and the second pass is skipped
    free_hi = -np.inf
    free_lo = np.inf
    zero_lo = np.inf
    n_special = 0
    # every ε cap far above k/m (no kink either): each h_i is k/m, no division
    plain = _eps_caps_slack(eps_max, eta, kcap)
    for i in range(m):
        gi = losses[i] + q * upsi[i]
        if norm_a > 0.0:
            gi += mu * a[i] / norm_a
        g[i] = gi
        pa += a[i] * upsi[i]
        if plain:  # (∞: neither below k/m nor at the kink, as the quotient is)
            eps_cap_i = np.inf
            c = kcap
        else:
            eps_cap_i = eps_max[i] / eta
            c = min(kcap, eps_cap_i)
        if c <= 0.0:
            cls[i] = 3
            continue
        at_zero = a[i] <= a_zero
        at_cap = a[i] >= c * (1.0 - 1e-9)
        if (
            not at_cap
            and not at_zero
            and a[i] >= c * (1.0 - eps_cap_rtol)
            and eps_cap_i < kcap
        ):
            at_cap = True
        if (
            at_cap
        ):  # a weight at its cap and at zero is in both (its residual: the cap's)
            cls[i] = 2
            lo_t = max(lo_t, gi)
            if at_zero:
                hi_t = min(hi_t, gi)
            if eps_cap_i < kcap or _kink(eps_cap_i, kcap):
                n_special += 1
        elif at_zero:
            cls[i] = 1
            hi_t = min(hi_t, gi)
            zero_lo = min(zero_lo, gi)
        else:
            cls[i] = 0
            free_g[n_free] = gi
            n_free += 1
            free_hi = max(free_hi, gi)
            free_lo = min(free_lo, gi)
    dG = dG0 + gamma * pa
    tau = 0.0
    if n_free > 0:
        tau = median(free_g, n_free, free_lo, free_hi)
    else:
        tau = lo_t if math.isfinite(lo_t) else hi_t
        for i in range(m):
            eps_cap_i = eps_max[i] / eta
            if cls[i] == 2 and eps_cap_i < kcap and not _kink(eps_cap_i, kcap):
                held_a += a[i]
                held_ga += g[i] * a[i]
        if held_a > 0.0 and math.isfinite(lo_t):
            tau0 = (held_ga - dG * eta) / held_a
            tau = min(max(tau0, lo_t), hi_t)
    viol = 0.0
    held = 0.0
    share = 0.0
    any_kink = False
    if n_special == 0:  # the same maxima as the per-seller pass, from the extremes
        if free_lo <= free_hi:  # some free g_i that is not NaN
            viol = max(viol, abs(free_hi - tau))
            viol = max(viol, abs(free_lo - tau))
        viol = max(viol, max(tau - zero_lo, 0.0)) if zero_lo < np.inf else viol
        viol = max(viol, max(lo_t - tau, 0.0)) if lo_t > -np.inf else viol
    else:
        for i in range(m):
            c = cls[i]
            gi = g[i]
            if c == 0:
                v = abs(gi - tau)
            elif c == 1:
                v = max(tau - gi, 0.0)
            elif c == 2:
                v = max(gi - tau, 0.0)
                eps_cap_i = eps_max[i] / eta
                if eps_cap_i < kcap or _kink(eps_cap_i, kcap):
                    if _kink(eps_cap_i, kcap):
                        any_kink = True
                        share += max(tau - gi, 0.0) * a[i]
                    else:
                        held += (tau - gi) * a[i]
            else:
                v = 0.0
            viol = max(viol, v)
    r_a = viol / (1.0 + abs(tau)) if m > 0 else 0.0
    dG += held / eta
    if any_kink:
        share /= eta
        dG = min(max(0.0, dG), dG + share)
    return r_a, dG


FEW_ULPS = 8
""":func:`median` counts ranks where the values span at most this many ulps."""


@_jit
def median(x: FloatArray, n: int, lo: float, hi: float) -> float:
    """``np.median(x[:n])`` (compiled: ``(x₍ₕ₋₁₎ + x₍ₕ₎)/2`` for even ``n = 2h``,
    ``x₍ₕ₎`` for odd ``n = 2h + 1``, order statistics from 0) given ``lo`` and
    ``hi``, the least and largest of ``x[:n]``.

    Where those are finite and at most ``FEW_ULPS`` floats apart, every value is one
    of the floats ``lo, nextafter(lo), …, hi``, and an order statistic is the least
    of them with enough values at or below it: a few counting passes (about 1 µs
    each per 10⁴ values) instead of the selection's copy and partitions (about
    40 µs). The values of an optimum's free multipliers ``g_i`` differ by a few
    ulps, so this is where the a-block check runs. Otherwise, or where ``x[:n]``
    holds a NaN (not between ``lo`` and ``hi``), the selection itself."""
    if not (n > 0 and math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        return float(np.median(x[:n]))
    grid = np.empty(FEW_ULPS + 1)
    k = 0
    v = lo
    while True:
        grid[k] = v
        k += 1
        if v >= hi:
            break
        if k > FEW_ULPS:
            return float(np.median(x[:n]))
        v = np.nextafter(v, np.inf)
    ranks = np.empty(k, dtype=np.int64)  # ranks[j]: how many x ≤ grid[j]
    for j in range(k):
        g = grid[j]
        cnt = 0
        for i in range(n):
            cnt += x[i] <= g
        ranks[j] = cnt
    if ranks[k - 1] != n:  # a NaN (not ≤ hi): the selection orders it
        return float(np.median(x[:n]))
    half = n >> 1
    b = _order_statistic(grid, ranks, half)
    if n & 1:
        return b
    return (_order_statistic(grid, ranks, half - 1) + b) / 2


@_jit
def _order_statistic(grid: FloatArray, ranks: NDArray[np.int64], j: int) -> float:
    """The ``j``-th least value (from 0): the least ``grid[t]`` with more than ``j``
    values at or below it (``ranks[t]``; the last rank counts every value)."""
    t = 0
    while ranks[t] <= j:
        t += 1
    return float(grid[t])


@_jit
def _eps_caps_slack(eps_max: FloatArray, eta: float, kcap: float) -> bool:
    """Whether every ``ε_i^max/η`` is at least ``(1 + 4·10⁻⁹)·k/m`` (``k/m > 0``):
    then each cap is ``k/m``, none is held by ``ε_i^max`` and none is at the kink
    (:func:`_kink`), read from the least ``ε^max`` (the rounded quotient is
    monotone in it)."""
    if not (kcap > 0.0 and 0.0 < eta < np.inf):
        return False
    lo = _min_of(eps_max)
    return lo / eta >= kcap * (1.0 + 4e-9)  # (False for a NaN)


@_jit
def _kink(eps_cap_i: float, kcap: float) -> bool:
    """Both caps bind: ``|ε_i^max/η − k/m| ≤ 1e-9·k/m``."""
    return abs(eps_cap_i - kcap) <= 1e-9 * kcap


@_jit
def eta_cap_limit(eps_max: FloatArray, a: FloatArray) -> float:
    """``min_{a_i > 0} ε_i^max / a_i`` (``∞`` when no weight is positive): the largest
    ``η`` the caps ``η a_i ≤ ε_i^max`` allow at fixed ``a``, in one pass (the
    minimum of the same quotients as the masked NumPy form, so the same number)."""
    out = math.inf
    for i in range(a.size):
        if a[i] > 0.0:
            v = eps_max[i] / a[i]
            if v < out:
                out = v
    return out


@_jit
def eta_cap_top(eps_max: FloatArray, a: FloatArray, hi: float) -> float:
    """``min(hi, eta_cap_limit(eps_max, a))`` (``hi ≥ 0``), first from two
    extremes: every ``ε_i^max/a_i`` with ``a_i > 0`` is at least ``min ε^max / max
    a`` (exactly, and so after rounding, which is monotone), so where that is at
    least ``hi`` (as where no ``ε^max`` is finite) the answer is ``hi`` without a
    division per seller; otherwise the quotients themselves."""
    a_max = _max_of(a)
    if not a_max > 0.0:  # no positive weight (or a NaN): as eta_cap_limit reads it
        return min(hi, eta_cap_limit(eps_max, a))
    lo = _min_of(eps_max)
    if lo / a_max >= hi:  # (False for a NaN)
        return hi
    return min(hi, eta_cap_limit(eps_max, a))


@_jit
def caps_fixed_above(eps_max: FloatArray, bound: float) -> bool:
    """Whether every ``ε_i^max`` is at least ``bound`` or exactly 0 (one pass, no
    temporaries): then no cap ``min(k/m, ε_i^max/η)`` moves for ``η ≤ bound·m/k``."""
    for i in range(eps_max.size):
        e = eps_max[i]
        if not (e >= bound or e == 0.0):
            return False
    return True
