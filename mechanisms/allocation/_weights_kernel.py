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

Equal caps (every ``h_i = k/m``: the large allocations) run the same iterations with
fewer operations — no cap array, the capped sums as folds of ``k/m``, and most passes
over only the records that can be non-zero (section "all caps equal" below) — and
return the same floating-point results, bit for bit.
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


def kernel_array(a: FloatArray) -> FloatArray:
    """``a`` as the compiled kernels take it: C-contiguous ``float64`` and writable (a
    copy where it is read-only, e.g. a result's weights). numba specialises a kernel on
    each array's writability, so a read-only argument would compile the kernel, and
    every kernel it calls, a second time in each process."""
    out = np.ascontiguousarray(a, dtype=np.float64)
    return out if out.flags.writeable else out.copy()


@_jit
def _theta_step(
    theta: float, f: float, n_mid: int, lo: float, hi: float, n_terms: int = 0
) -> tuple[bool, float, float, float]:
    """One step of :func:`_theta`'s bracketed Newton at ``θ`` with ``f = Σ a − 1`` and
    slope ``n_mid``: ``(stop, θ', lo', hi')``.

    With no free weight and ``|f|`` within the rounding of the ``n_terms`` capped
    weights summed, ``θ`` lies on the flat stretch where the caps alone sum to 1 (a
    vertex): every ``θ`` there is a root, and bisecting on would only walk to one
    end of it (dozens of O(m) passes)."""
    if abs(f) <= 1e-14:
        return True, theta, lo, hi
    if n_mid == 0 and abs(f) <= 4.0 * 2.220446049250313e-16 * n_terms:
        return True, theta, lo, hi
    if n_mid > 0 and abs(f / n_mid) <= 4e-16 * abs(theta):
        return True, theta, lo, hi  # the Newton step is below θ's rounding
    if f < 0.0:
        lo = theta
    else:
        hi = theta
    step = theta - f / n_mid if n_mid > 0 else 0.5 * (lo + hi)
    if not (lo < step < hi):
        step = 0.5 * (lo + hi)
        if step <= lo or step >= hi:
            return True, theta, lo, hi
    elif abs(step - theta) <= 4e-16 * abs(theta):
        return True, theta, lo, hi  # |f| is rounding (see _recentre)
    return False, step, lo, hi


@_jit
def _next_event(
    theta: float, f: float, s: float, r: FloatArray, h: FloatArray
) -> tuple[float, float]:
    """``(e, h_e)``: where, moving ``θ`` toward the root of ``F(θ) = Σ clip(θ − s r_i,
    0, h_i) − 1`` from a ``θ`` with no free weight and ``f = F(θ) ≠ 0``, the first
    record changes class, and that record's cap.

    * ``f < 0`` (``θ`` rises): a zero record (``θ ≤ s r_i``) starts to fill at
      ``e = min s r_i`` over them;
    * ``f > 0`` (``θ`` falls): a capped record (``θ − s r_i ≥ h_i``) leaves its cap
      at ``e = max (s r_i + h_i)`` over them.

    Ties keep the smallest cap. ``(±∞, 0)`` when there is no such record. ``F`` is
    constant between ``θ`` and ``e``, then rises (falls) with slope at least 1."""
    e = np.inf if f < 0.0 else -np.inf
    h_e = 0.0
    for i in range(r.size):
        p = s * r[i]
        if f < 0.0:
            if p >= theta and (p < e or (p == e and h[i] < h_e)):
                e = p
                h_e = h[i]
        elif theta - p >= h[i]:
            u = p + h[i]
            if u > e or (u == e and h[i] < h_e):
                e = u
                h_e = h[i]
    return e, h_e


@_jit
def _event_step(
    f: float, e: float, h_e: float, lo: float, hi: float, n_terms: int
) -> float:
    """The root on the next event's piece (:func:`_next_event`), or ``NaN``.

    Past ``e`` that one record's weight moves by ``|θ − e|`` while ``F`` has moved
    by as much from its constant value ``f``: ``F(e − f) = 0`` when ``|f| < h_e`` (the
    record ends strictly inside ``(0, h_e)``) and no other record changes class
    between ``e`` and ``e − f``. If one does, ``e − f`` is still a point past the
    event (the next pass has a free weight and Newton continues from it). ``NaN``
    when ``|f| ≥ h_e`` (the record would fill or empty before ``F`` reaches 0: one
    event per pass is no faster than halving), when ``|f|`` is ``h_e`` to within the
    rounding of the ``n_terms`` capped weights summed (``F`` reaches 0 as the record
    fills or empties: the root is the flat stretch of a vertex beyond it, which
    bisection finds, not a point just short of it with a weight a rounding error
    from its bound), or when ``e − f`` is outside the bracket ``(lo, hi)``; then the
    caller bisects as before."""
    if not abs(f) < h_e - 4.0 * 2.220446049250313e-16 * (n_terms + 1):
        return np.nan
    t = e - f
    if not lo < t < hi:
        return np.nan
    return t


@_jit
def _ends(f: float, f_lo: float, f_hi: float, side: int) -> tuple[float, float, int]:
    """The values of ``F`` at the bracket's ends after a pass at ``θ`` moved one of
    them to ``θ`` (``lo`` for ``f < 0``, else ``hi``: :func:`_theta_step`), and which
    end moved; an end that stays while the other moves twice in a row has its
    value halved (the Illinois rule: the next secant point then moves toward it,
    where plain regula falsi can keep landing on one side)."""
    if f < 0.0:
        if side < 0:
            f_hi *= 0.5
        return f, f_hi, -1
    if side > 0:
        f_lo *= 0.5
    return f_lo, f, 1


@_jit
def _secant_step(lo: float, hi: float, f_lo: float, f_hi: float) -> float:
    """Where the chord of ``F`` over the bracket ``(lo, hi)`` crosses 0 (``f_lo < 0 <
    f_hi`` the values at its ends, :func:`_ends`), or ``NaN`` when either is unknown
    or the point is not strictly inside.

    With no free weight ``F`` has no slope at ``θ``, but far from the root it is a
    staircase close to its chord (a large ``m`` whose ``s r_i`` lie far apart
    compared with the caps): the chord finds the root's neighbourhood in a few
    passes where halving needed one per factor 2."""
    if not (f_lo < 0.0 < f_hi and math.isfinite(f_hi - f_lo)):
        return np.nan
    t = lo + (hi - lo) * (-f_lo / (f_hi - f_lo))
    if not lo < t < hi:
        return np.nan
    return t


@_jit
def _theta(s: float, r: FloatArray, h: FloatArray) -> float:
    """``θ`` with ``Σ clip(θ − s r_i, 0, h_i) = 1`` (bracketed Newton, exact finish).

    The left side is piecewise linear and non-decreasing in ``θ`` (slope: the number of
    free weights), ``−1`` at ``min s r_i`` and ``Σ h − 1 ≥ 0`` at ``max s r_i + h_i``;
    a Newton step lands on the root of the current piece, so from that bracket a few
    O(m) passes find it (bisection only where a step leaves the bracket). Plain
    bisection took ~60 passes, and this runs whenever a warm start fails (the range
    search warm-starts from another model or another ``η``).

    Where no weight is free (slope 0) Newton has no step; bisection then only
    narrows the flat stretch around ``θ``, one halving per pass (~20 passes to
    locate a single partly filled record inside a bracket of width ``~h``). Instead
    one extra pass finds the next event (:func:`_next_event`) and, when ``|f| < h_e``,
    goes to ``e − f``, the root if no other record changes class first
    (:func:`_event_step`). Farther from the root (``|f| ≥ h_e``: a whole record or
    more to fill or empty) the step is the chord's zero over the bracket, with the
    Illinois rule against one-sided steps (:func:`_ends`, :func:`_secant_step`),
    and bisection only where that is not strictly inside.
    """
    m = r.size
    lo = np.inf
    hi = -np.inf
    h_max = 0.0
    h_min = np.inf
    h_sum = 0.0
    for i in range(m):
        v = s * r[i]
        lo = min(lo, v)
        hi = max(hi, v + h[i])
        h_max = max(h_max, h[i])
        h_min = min(h_min, h[i])
        h_sum += h[i]
    theta = 0.5 * (lo + hi)
    # F at the bracket's ends: −1 at lo (every weight zero), Σ h − 1 at hi (every
    # weight capped; m·h for equal caps, as _theta_eq takes it)
    f_lo = -1.0
    f_hi = (m * h_max if h_min == h_max else h_sum) - 1.0
    side = 0
    for _ in range(200):
        tot = 0.0
        n_mid = 0
        n_up = 0
        for i in range(m):
            v = theta - s * r[i]
            tot += min(max(v, 0.0), h[i])
            n_mid += (v > 0.0) & (v < h[i])
            n_up += v >= h[i]
        f = tot - 1.0
        stop, step, lo, hi = _theta_step(theta, f, n_mid, lo, hi, n_up)
        if stop:
            theta = step
            break
        f_lo, f_hi, side = _ends(f, f_lo, f_hi, side)
        if n_mid == 0:  # no slope: the next event's piece, else the chord
            t = np.nan
            if abs(f) < h_max:
                e, h_e = _next_event(theta, f, s, r, h)  # (h_e ≤ h_max: else no step)
                t = _event_step(f, e, h_e, lo, hi, n_up)
            if math.isnan(t):
                t = _secant_step(lo, hi, f_lo, f_hi)
            if not math.isnan(t):
                step = t
        theta = step
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
def _newton_step(
    A: float, f: float, n_mid: int, lo: float, hi: float, n_terms: int = 0
) -> tuple[int, float, float, float]:
    """One bracketed Newton step of :func:`_recentre` from ``A`` with ``f = Σ a − 1``
    and slope ``n_mid``: ``(status, A', lo', hi')`` with status 1 (converged at
    ``A'``), −1 (stalled: give up) or 0 (continue from ``A'``).

    A step that leaves ``(A, lo, hi)`` unchanged is a stall: the next pass would
    compute the same ``f`` and repeat it for all remaining passes (the outcome the
    30-pass limit reaches, ``(False, A)``), so it ends here. With no free weight and
    ``|f|`` within the rounding of the ``n_terms`` capped weights, ``A`` is on a
    vertex's flat stretch (:func:`_theta_step`): converged."""
    if abs(f) <= 1e-14:
        return 1, A, lo, hi
    if n_mid == 0 and abs(f) <= 4.0 * 2.220446049250313e-16 * n_terms:
        return 1, A, lo, hi
    if n_mid > 0 and abs(f / n_mid) <= 4e-16 * abs(A):
        # The Newton step is below A's rounding (|f| is the rounding of the m-term
        # sum, above 1e-14 for large m or large multipliers): converged, also where
        # the step falls just outside the bracket (the test after it does not see).
        return 1, A - f / n_mid, lo, hi
    lo2 = lo
    hi2 = hi
    if f > 0.0:
        hi2 = min(hi, A)
    else:
        lo2 = max(lo, A)
    step = A - f / n_mid if n_mid > 0 else np.nan
    if not (lo2 < step < hi2):
        if not (np.isfinite(lo2) and np.isfinite(hi2)):
            return -1, A, lo2, hi2
        step = 0.5 * (lo2 + hi2)
    elif abs(step - A) <= 4e-16 * abs(A):
        # The Newton step no longer moves A: |f| is the rounding of the m-term
        # sum (above 1e-14 for large m, where this ran all 30 passes).
        return 1, step, lo2, hi2
    if step == A and lo2 == lo and hi2 == hi:
        return -1, A, lo2, hi2
    return 0, step, lo2, hi2


@_jit
def _recentre(A: float, s: float, r: FloatArray, h: FloatArray) -> tuple[bool, float]:
    """``θ`` with ``Σ clip(θ − s r_i, 0, h_i) = 1`` by bracketed Newton from a warm
    ``A`` (the left side is piecewise linear and non-decreasing, its slope the number
    of free weights): one or two O(m) passes from a nearby solve. ``(False, ·)`` when
    it stalls (then :func:`_theta` from the full bracket)."""
    lo = -np.inf
    hi = np.inf
    for _ in range(30):
        tot = 0.0
        n_mid = 0
        n_up = 0
        for i in range(r.size):
            # Branch-free (the classes come in random order): same sums as branching.
            v = A - s * r[i]
            tot += min(max(v, 0.0), h[i])
            n_mid += (v > 0.0) & (v < h[i])
            n_up += v >= h[i]
        status, A, lo, hi = _newton_step(A, tot - 1.0, n_mid, lo, hi, n_up)
        if status != 0:
            return status > 0, A
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
def _kkt_holds(
    tot: float, sq: float, mu: float, A: float, s: float, n: int, h: float
) -> bool:
    """Whether ``Σ a = 1`` and ``‖a‖ = μ s`` hold at ``a = clip(A − s r, 0, h)``
    (``n`` free weights, ``h`` the largest cap) to ``1e-9`` plus the rounding of the
    weights themselves.

    Each free ``a_i = fl(A − fl(s r_i))`` is a difference of numbers of size up to
    ``|A| + h`` (``s r_i ∈ (A − h, A)``), so it carries an absolute error up to
    ``~2u(|A| + h)``. With a small ``μ`` the multipliers are large (``s ≈ ‖a‖/μ``,
    ``A ≈ sτ``; ``A ≈ 2·10⁷`` at ``μ = 2.5·10⁻⁵``) and the sum's rounding alone
    exceeds ``1e-9``: a fixed tolerance then refused the exact active set and sent
    every such a-step to the NumPy solver's bisections (minutes at ``m = 10⁵``),
    which end on the same ``(A, s)``.
    """
    slack = 1e-9 + 4.0 * 2.220446049250313e-16 * n * (3.0 * abs(A) + 2.0 * h)
    if not abs(tot - 1.0) <= slack:
        return False
    return abs(math.sqrt(sq) - mu * s) <= 1e-9 * max(1.0, mu * s) + slack


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
        t = A / s  # the threshold τ: free records have r_i ∈ (τ − h_i/s, τ)
        for i in range(m):
            v = A - s * r[i]
            if v >= h[i]:
                H1 += h[i]
                H2 += h[i] * h[i]
                n_up += 1
                key += (i + 1) * 1.0
            elif v > 0.0:
                S1 += r[i] - t
                S2 += (r[i] - t) * (r[i] - t)
                n_mid += 1
                key += (i + 1) * 1e-7
        if n_mid == 0:
            return _vertex(r, h, mu, A, s)
        V = S2 - S1 * S1 / n_mid
        c1 = 1.0 - H1
        denom = mu * mu - V
        if denom <= 0.0:
            return False, A, s
        s = np.sqrt((H2 + c1 * c1 / n_mid) / denom)
        A = (c1 + s * S1) / n_mid + s * t
        if n_up == prev_u and n_mid == prev_m and key == prev_key:
            break
        prev_u, prev_m, prev_key = n_up, n_mid, key
    tot = 0.0
    sq = 0.0
    n_free = 0
    h_max = 0.0
    for i in range(m):
        v = A - s * r[i]
        n_free += (v > 0.0) & (v < h[i])
        h_max = max(h_max, h[i])
        v = min(max(v, 0.0), h[i])
        tot += v
        sq += v * v
    if not _kkt_holds(tot, sq, mu, A, s, n_free, h_max):
        return False, A, s
    return True, A, s


@_jit
def _vertex(
    r: FloatArray, h: FloatArray, mu: float, A: float, s: float
) -> tuple[bool, float, float]:
    """The degenerate case with no weight strictly between 0 and its cap
    (``_weights_step._vertex``): with ``U = {A − s r_i ≥ h_i}`` at the current
    ``(A, s)`` and ``Σ_U h_i = 1``, the vertex ``a = h·1_U`` is optimal iff, with
    ``s' = ‖a‖/μ``, some ``τ`` has ``r_i + h_i/s' ≤ τ`` on ``U`` and ``τ ≤ r_i`` off
    ``U``; then ``(A', s') = (s'τ, s')`` with ``τ`` midway, which reproduces the
    vertex through ``clip(A' − s' r, 0, h)`` (checked: otherwise not ok).

    It is the rule's optimum whenever ``1/h`` is a whole number of sellers and
    ``η`` is large (the cheapest ``1/h`` at their caps, ``k = 4`` and ``m`` a
    multiple of 4): without it every such a-step left the compiled path."""
    m = r.size
    tot = 0.0
    sq = 0.0
    n_up = 0
    for i in range(m):
        if A - s * r[i] >= h[i]:
            tot += h[i]
            sq += h[i] * h[i]
            n_up += 1
    if n_up == 0 or not abs(tot - 1.0) <= 1e-12:
        return False, A, s
    s2 = math.sqrt(sq) / mu
    need = -np.inf
    room = np.inf
    for i in range(m):
        if A - s * r[i] >= h[i]:
            need = max(need, r[i] + h[i] / s2)
        else:
            room = min(room, r[i])
    if not need < room:
        return False, A, s
    tau = need if math.isinf(room) else 0.5 * (need + room)
    A2 = s2 * tau
    for i in range(m):  # the vertex, reproduced by the clip at (A2, s2)
        v = A2 - s2 * r[i]
        if (v >= h[i]) != (A - s * r[i] >= h[i]) or (0.0 < v < h[i]):
            return False, A, s
    return True, A2, s2


# ------------------------------------------------------------- all caps equal (h_i = c)
#
# The large allocations have every cap at k/m (no ε^max binds). There the passes need
# no cap array, and the class sums need no branch on the capped records (a random
# ~22 % at m = 10⁶, which made the three-way branch of :func:`_active_set`
# mispredict):
#
# * ``H1 = c + c + …`` and ``H2 = c² + c² + …`` (``n_up`` terms) are the same
#   left-to-right sums as over the capped records, so only their count is needed;
# * ``S1 = Σ r_i`` and ``S2 = Σ r_i²`` run over the free records in index order, as
#   there;
# * the fixed point is detected by the two class counts alone. With equal caps the
#   class of record i is a function of ``r_i`` only, and for ``s > 0`` (every pass
#   here: ``s₀ > 0`` and ``s = √(H2 + c₁²/n) > 0`` since ``H2 = 0`` forces ``c₁ = 1``;
#   a NaN ``s`` ends with ``n_free = 0``) correctly rounded ``s·r`` and ``A − s·r``
#   are monotone in ``r``: the capped set ``{A − s r_i ≥ c}`` and the non-zero set
#   ``{A − s r_i > 0}`` are down-sets in ``r`` (a NaN ``r_i`` is in neither), and two
#   down-sets of the same records with the same size are the same set. Equal counts
#   thus mean equal sets, which is when the general kernel's set fingerprint repeats.
#
# So every iterate, and the result, is the general kernels' bit for bit.


@_jit
def caps_exceed_one(h: FloatArray, c: float) -> bool:
    """``Σ h > 1 + 1e-12`` with the sum taken in index order, given ``c =
    _equal_cap(h)``. Where every cap is ``c > 0`` the answer usually follows from
    ``m·c`` alone: a sum of ``m`` terms in floating point is within ``γ_{m−1}·Σ|h|``
    of the exact one (``γ_k = ku/(1 − ku)``, ``u`` the unit roundoff; Higham,
    *Accuracy and Stability of Numerical Algorithms*, §4.2), and the margin below
    doubles that and covers the rounding of ``m·c``; only where ``m·c`` falls
    inside it is the sum formed (a pass of ``m`` dependent additions, about 13 µs at
    ``m = 10⁴``)."""
    m = h.size
    limit = 1.0 + 1e-12
    if c > 0.0 and m < 1e12:
        guess = float(m) * c
        margin = 2.0 * (m + 1) * 1.2e-16
        if guess * (1.0 - margin) > limit:
            return True
        if guess * (1.0 + margin) < limit:
            return False
    total = 0.0
    for i in range(m):
        total += h[i]
    return total > limit


@_jit
def _equal_cap(h: FloatArray) -> float:
    """``c`` when every ``h_i`` is the same positive ``c``, else ``NaN``."""
    c = h[0] if h.size > 0 else np.nan
    if not c > 0.0:
        return np.nan
    for b in range(0, h.size, 4096):  # blocks without an exit: the test vectorises
        differ = False
        for i in range(b, min(b + 4096, h.size)):
            differ |= h[i] != c
        if differ:
            return np.nan
    return c


# The support. Most weights are zero at large m (~70 % at m = 10⁶), and a zero record
# adds nothing to any sum of a pass (``+0.0`` or ``−0.0`` to a sum that started at
# +0.0). For ``s > 0`` the class of ``r_i`` is monotone (above): ``fl(A − fl(s R)) ≤ 0``
# makes every record with ``r_i ≥ R`` zero. So a pass whose ``(A, s)`` passes that
# exact test for the cutoff ``R`` runs over the *support*: the ``r_i < R`` (and NaN),
# copied in index order into one buffer by the last full pass (a copy that costs
# little there: those passes wait on their sum's add latency). A pass outside the
# cutoff runs over all records and copies the support for ``R = (A + 2c)/s``.

_MARGIN = 2.0  # the cutoff's margin below the zero threshold, in caps: v > −2c kept


@_jit
def _covers(A: float, s: float, R: float) -> bool:
    """Whether every record with ``r_i ≥ R`` is zero at ``(A, s)`` (caps ``c > 0``;
    ``R = ∞``: the support is every record; NaN: no support)."""
    return math.isinf(R) or (s > 0.0 and A - s * R <= 0.0)


@_jit
def _cutoff(A: float, s: float, c: float) -> float:
    """``R = (A + 2c)/s`` when it covers ``(A, s)``, else ``∞`` (all records)."""
    R = (A + _MARGIN * c) / s if s > 0.0 else np.inf
    if not (math.isfinite(R) and A - s * R <= 0.0):
        return np.inf
    return R


@_jit
def _clip_sums_eq(
    A: float, s: float, r: FloatArray, c: float, sup: FloatArray, n: int, R: float
) -> tuple[float, float, int, int, float]:
    """``(Σ a_i, Σ a_i², n_free, n, R)`` at ``(A, s)``, ``a_i = clip(A − s r_i, 0, c)``,
    over the support ``sup[:n]`` of cutoff ``R``, or over all ``r`` (rebuilding the
    support) when ``R`` does not cover ``(A, s)``."""
    build = not _covers(A, s, R)
    if build:
        R = _cutoff(A, s, c)
    src = r if build else sup
    cnt = r.size if build else n
    tot = 0.0
    sq = 0.0
    n_mid = 0
    k = 0
    for i in range(cnt):
        ri = src[i]
        v = A - s * ri
        a = min(max(v, 0.0), c)
        tot += a
        sq += a * a
        n_mid += (v > 0.0) & (v < c)
        if build:  # unconditional store, conditional advance
            sup[k] = ri
            k += not (ri >= R)
    return tot, sq, n_mid, k if build else n, R


@_jit
def _recentre_eq(
    A: float, s: float, r: FloatArray, c: float, sup: FloatArray, n: int, R: float
) -> tuple[bool, float, int, float]:
    """:func:`_recentre` with every ``h_i = c``, over the support ``(sup, n, R)``;
    ``(found, A, n, R)``."""
    lo = -np.inf
    hi = np.inf
    for _ in range(30):
        tot, _, n_mid, n, R = _clip_sums_eq(A, s, r, c, sup, n, R)
        n_up = int(tot / c + 0.5) if n_mid == 0 else 0  # every weight 0 or c
        status, A, lo, hi = _newton_step(A, tot - 1.0, n_mid, lo, hi, n_up)
        if status != 0:
            return status > 0, A, n, R
    return False, A, n, R


@_jit
def _free_sums_eq(
    A: float,
    s: float,
    t: float,
    r: FloatArray,
    c: float,
    sup: FloatArray,
    n: int,
    R: float,
) -> tuple[float, float, int, int, int, float]:
    """``(S1, S2, n_free, n_cap, n, R)`` at ``(A, s)`` with every ``h_i = c``: the
    index-order sums of ``r_i − t`` and ``(r_i − t)²`` over the free records (``0 < A − s r_i <
    c``) and the class counts (the capped ones branch-free; the rarer free class is
    the only branch), over the support as :func:`_clip_sums_eq`."""
    build = not _covers(A, s, R)
    if build:
        R = _cutoff(A, s, c)
    src = r if build else sup
    cnt = r.size if build else n
    S1 = 0.0
    S2 = 0.0
    n_mid = 0
    n_up = 0
    k = 0
    for i in range(cnt):
        ri = src[i]
        v = A - s * ri
        n_up += v >= c
        if (v > 0.0) & (v < c):
            S1 += ri - t
            S2 += (ri - t) * (ri - t)
            n_mid += 1
        if build:
            sup[k] = ri
            k += not (ri >= R)
    return S1, S2, n_mid, n_up, k if build else n, R


@_jit
def _fold(c: float, n: int, n0: int, acc: float, acc2: float) -> tuple[float, float]:
    """``(c + c + …, c² + c² + …)`` (``n`` terms, left to right) from the sums
    ``acc``, ``acc2`` of the first ``n0 ≤ n`` terms."""
    c2 = c * c
    for _ in range(n - n0):
        acc += c
        acc2 += c2
    return acc, acc2


@_jit
def _active_set_eq(
    r: FloatArray,
    c: float,
    mu: float,
    A: float,
    s: float,
    sup: FloatArray,
    n: int,
    R: float,
) -> tuple[bool, float, float, int, float, float, int]:
    """:func:`_active_set` with every ``h_i = c`` (same iterates, same results), over
    the support ``(sup, n, R)``; ``(ok, A, s, n, R, Σa, n_free)``, the last two the
    final check's sums of ``a = clip(A − s r, 0, c)`` (index order) and its free
    count where it ran, else ``(NaN, −1)``."""
    prev_u = -1
    prev_m = -1
    n_f = 0  # the folds H1, H2 of the capped sums, kept between iterations
    H1 = 0.0
    H2 = 0.0
    for _ in range(60):
        t = A / s  # the threshold τ (as in _active_set)
        S1, S2, n_mid, n_up, n, R = _free_sums_eq(A, s, t, r, c, sup, n, R)
        if n_up < n_f:
            n_f, H1, H2 = 0, 0.0, 0.0
        H1, H2 = _fold(c, n_up, n_f, H1, H2)
        n_f = n_up
        if n_mid == 0:
            if n_up == 0 or not abs(H1 - 1.0) <= 1e-12:
                # _vertex's first test on the same sum (H1 is its Σ_U h bit for bit):
                # no vertex, without its cap array (8 MB at m = 10⁶) and pass
                return False, A, s, n, R, np.nan, -1
            ok, A, s = _vertex(r, np.full(r.size, c), mu, A, s)
            return ok, A, s, n, R, np.nan, -1
        V = S2 - S1 * S1 / n_mid
        c1 = 1.0 - H1
        denom = mu * mu - V
        if denom <= 0.0:
            return False, A, s, n, R, np.nan, -1
        s = np.sqrt((H2 + c1 * c1 / n_mid) / denom)
        A = (c1 + s * S1) / n_mid + s * t
        if n_up == prev_u and n_mid == prev_m:
            break
        prev_u, prev_m = n_up, n_mid
    tot, sq, n_free, n, R = _clip_sums_eq(A, s, r, c, sup, n, R)
    if not _kkt_holds(tot, sq, mu, A, s, n_free, c):
        return False, A, s, n, R, np.nan, -1
    return True, A, s, n, R, tot, n_free


@_jit
def _next_event_eq(
    theta: float,
    f: float,
    s: float,
    r: FloatArray,
    c: float,
    sup: FloatArray,
    n: int,
    R: float,
) -> float:
    """:func:`_next_event`'s ``e`` with every ``h_i = c`` (the same minimum or maximum
    of the same rounded values, so the same ``e``), over the support ``(sup, n, R)``
    when it covers ``θ``.

    The capped records are non-zero, so all in the support. The zero records outside
    it have ``r_i ≥ R`` above every support record, so ``s r_i`` no smaller
    (monotone rounding): the least ``s r_i ≥ θ`` is in the support when any is, and
    only otherwise is every record scanned."""
    covered = _covers(theta, s, R)
    src = sup if covered else r
    cnt = n if covered else r.size
    if f < 0.0:
        e = np.inf
        for i in range(cnt):
            p = s * src[i]
            e = min(e, p if p >= theta else np.inf)
        if e == np.inf and covered:
            for i in range(r.size):
                p = s * r[i]
                e = min(e, p if p >= theta else np.inf)
        return e
    e = -np.inf
    for i in range(cnt):
        p = s * src[i]
        e = max(e, p + c if theta - p >= c else -np.inf)
    return e


@_jit
def _theta_eq(
    s: float, r: FloatArray, c: float, sup: FloatArray, n: int, R: float
) -> tuple[float, int, float]:
    """:func:`_theta` with every ``h_i = c``, its passes over the support ``(sup, n,
    R)`` (the bracket's pass over all records); ``(θ, n, R)``. The next-event and
    chord steps are taken exactly where :func:`_theta` takes them (``h_e = c``,
    :func:`_next_event_eq` finds its ``e``, and ``F`` at the upper end is
    ``m·c − 1`` in both), so the iterates are the same."""
    lo = np.inf
    hi = -np.inf
    for i in range(r.size):
        v = s * r[i]
        lo = min(lo, v)
        hi = max(hi, v + c)
    theta = 0.5 * (lo + hi)
    f_lo = -1.0  # F at the bracket's ends, as in _theta
    f_hi = r.size * c - 1.0
    side = 0
    for _ in range(200):
        tot, _, n_mid, n, R = _clip_sums_eq(theta, s, r, c, sup, n, R)
        n_up = int(tot / c + 0.5) if n_mid == 0 else 0  # every weight 0 or c
        f = tot - 1.0
        stop, step, lo, hi = _theta_step(theta, f, n_mid, lo, hi, n_up)
        if stop:
            theta = step
            break
        f_lo, f_hi, side = _ends(f, f_lo, f_hi, side)
        if n_mid == 0:  # as _theta: the next event's piece, else the chord
            t = np.nan
            if abs(f) < c:
                e = _next_event_eq(theta, f, s, r, c, sup, n, R)
                t = _event_step(f, e, c, lo, hi, n_up)
            if math.isnan(t):
                t = _secant_step(lo, hi, f_lo, f_hi)
            if not math.isnan(t):
                step = t
        theta = step
    # Exact finish on the active set implied by θ (zero records add nothing).
    src, cnt = (sup, n) if _covers(theta, s, R) else (r, r.size)
    n_mid = 0
    acc = 1.0
    for i in range(cnt):
        v = theta - s * src[i]
        if v >= c:
            acc -= c
        elif v > 0.0:
            n_mid += 1
            acc += s * src[i]
    if n_mid > 0:
        cand = acc / n_mid
        # a record zero at both θ and cand cannot differ in class
        if not (_covers(theta, s, R) and _covers(cand, s, R)):
            src, cnt = r, r.size
        for i in range(cnt):
            v0 = theta - s * src[i]
            v1 = cand - s * src[i]
            if (v0 >= c) != (v1 >= c) or ((v0 > 0.0) != (v1 > 0.0)):
                return theta, n, R
        theta = cand
    return theta, n, R


@_jit
def _weights_eq(
    r: FloatArray, c: float, mu: float, A0: float, s0: float
) -> tuple[bool, float, float, float, int]:
    """:func:`weights_kernel` with every ``h_i = c > 0`` (the cap array is built only
    for the rare cold bisection), with the final check's ``Σa`` and free count
    (:func:`_active_set_eq`; ``(NaN, −1)`` where there was none)."""
    sup = np.empty(r.size)
    n = 0
    R = np.nan  # no support yet: the first pass runs over all records
    if s0 > 0.0:
        found, A, n, R = _recentre_eq(A0, s0, r, c, sup, n, R)
        if not found:
            # A stalled re-centring (a free set of 0 or 1 record: the step creeps
            # by ulps) is usually at the root to rounding: try the exact active-set
            # step from there before θ from the full bracket (~50 O(m) passes).
            ok, A2, s2, n, R, tot, n_free = _active_set_eq(r, c, mu, A, s0, sup, n, R)
            if ok:
                return ok, A2, s2, tot, n_free
            A, n, R = _theta_eq(s0, r, c, sup, n, R)
        ok, A, s, n, R, tot, n_free = _active_set_eq(r, c, mu, A, s0, sup, n, R)
        if ok:
            return ok, A, s, tot, n_free
    h = np.full(r.size, c)
    for rel in (1e-1, 1e-4, 1e-14):
        A, s = _bisect(r, h, mu, rel)
        ok, A2, s2, n, R, tot, n_free = _active_set_eq(r, c, mu, A, s, sup, n, R)
        if ok:
            return ok, A2, s2, tot, n_free
    return False, 0.0, 0.0, np.nan, -1


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
    ``s0 > 0``. Equal caps take :func:`_weights_eq` (same results, faster). Not ok
    when some ``r_i`` is not finite (``γηΨ_i`` overflowed: a payment sweep's report
    far up an unbounded prior): the NumPy solver handles that seller."""
    ok, A, s, _, _ = weights_kernel_sums(r, h, _equal_cap(h), mu, A0, s0)
    return ok, A, s


@_jit
def weights_kernel_sums(
    r: FloatArray, h: FloatArray, c: float, mu: float, A0: float, s0: float
) -> tuple[bool, float, float, float, int]:
    """:func:`weights_kernel` given ``c = _equal_cap(h)`` (a caller that has read
    it), and with equal caps the sum and free count of ``clip(A − s r, 0, c)`` in
    index order from the kernel's last check (:func:`_weights_eq`; ``(NaN, −1)``
    otherwise): what :func:`restore_sum` would count again."""
    for i in range(r.size):
        if not abs(r[i]) < np.inf:
            return False, 0.0, 0.0, np.nan, -1
    if c > 0.0:
        return _weights_eq(r, c, mu, A0, s0)
    ok, A, s = _weights_general(r, h, mu, A0, s0)
    return ok, A, s, np.nan, -1


@_jit
def _weights_general(
    r: FloatArray, h: FloatArray, mu: float, A0: float, s0: float
) -> tuple[bool, float, float]:
    """:func:`weights_kernel` for any caps: re-centre ``A`` at ``s0`` (else ``θ`` from
    the full bracket) and iterate the active-set step; cold (or when that fails),
    bisect ``s`` to ever tighter brackets before the active-set step."""
    if s0 > 0.0:
        found, A = _recentre(A0, s0, r, h)
        if not found:  # as _weights_eq: the exact step from a stalled re-centring
            ok, A2, s2 = _active_set(r, h, mu, A, s0)
            if ok:
                return ok, A2, s2
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
def fill_smallest_kernel(r: FloatArray, caps: FloatArray) -> tuple[bool, FloatArray]:
    """``(ok, a)``: the linear programme of problem (A) at ``μ = 0`` — fill the
    smallest ``r_i`` up to their caps, ties by index — by the same steps as
    ``_weights_step.fill_smallest`` (the ``K`` smallest by a partition, ``K`` doubled
    from ``⌈1/max h⌉`` until their caps reach 1, each prefix stably sorted), so the
    same weights. Not ok when some ``r_i`` is NaN (NumPy's sort places NaN last;
    the caller's NumPy version keeps that order)."""
    m = r.size
    a = np.zeros(m)
    for i in range(m):
        if math.isnan(r[i]):
            return False, a
    h_max = caps.max() if m else 0.0
    k = m
    if h_max > 0.0:
        k = min(m, max(1, math.ceil(1.0 / h_max)))
    while True:
        if k >= m:
            idx = np.arange(m)
        else:
            kth = np.partition(r, k - 1)[k - 1]
            idx = np.flatnonzero(r <= kth)
        order = idx[np.argsort(r[idx], kind="mergesort")]
        filled = 0.0
        for j in range(order.size):
            filled += caps[order[j]]
        if k >= m or (order.size > 0 and filled >= 1.0):
            before = 0.0
            for j in range(order.size):
                c = caps[order[j]]
                a[order[j]] = min(max(1.0 - before, 0.0), c)
                before += c
            return True, a
        k = min(m, 2 * k)


@_jit
def _min_of(x: FloatArray) -> float:
    """``min x`` (NaN when ``x`` holds a NaN), four partial minima at a time (the
    order does not matter to a minimum)."""
    m0 = m1 = m2 = m3 = np.inf
    nan = False
    n4 = x.size - x.size % 4
    for i in range(0, n4, 4):
        m0 = min(m0, x[i])
        m1 = min(m1, x[i + 1])
        m2 = min(m2, x[i + 2])
        m3 = min(m3, x[i + 3])
        nan |= (x[i] != x[i]) | (x[i + 1] != x[i + 1])
        nan |= (x[i + 2] != x[i + 2]) | (x[i + 3] != x[i + 3])
    for i in range(n4, x.size):
        m0 = min(m0, x[i])
        nan |= x[i] != x[i]
    return np.nan if nan else min(min(m0, m1), min(m2, m3))


@_jit
def _max_of(x: FloatArray) -> float:
    """``max x`` (NaN when ``x`` holds a NaN, −∞ when empty), four partial maxima at
    a time."""
    m0 = m1 = m2 = m3 = -np.inf
    nan = False
    n4 = x.size - x.size % 4
    for i in range(0, n4, 4):
        m0 = max(m0, x[i])
        m1 = max(m1, x[i + 1])
        m2 = max(m2, x[i + 2])
        m3 = max(m3, x[i + 3])
        nan |= (x[i] != x[i]) | (x[i + 1] != x[i + 1])
        nan |= (x[i + 2] != x[i + 2]) | (x[i + 3] != x[i + 3])
    for i in range(n4, x.size):
        m0 = max(m0, x[i])
        nan |= x[i] != x[i]
    return np.nan if nan else max(max(m0, m1), max(m2, m3))


@_jit
def least_cap_is_kcap(kcap: float, eps_max: FloatArray, eta: float) -> bool:
    """Whether the cap ``min(kcap, ε^max/η)`` of the least ``ε^max`` is ``kcap > 0``,
    and so every cap (with ``0 < η < ∞`` the rounded quotient is monotone in ``ε``);
    ``False`` where that does not decide (a NaN ``ε^max``, ``η`` outside
    ``(0, ∞)``, no records)."""
    if not (kcap > 0.0 and 0.0 < eta < np.inf and eps_max.size > 0):
        return False
    lo = _min_of(eps_max)
    return not math.isnan(lo) and min(kcap, lo / eta) == kcap


@_jit
def _caps_all_kcap(kcap: float, eps_max: FloatArray, eta: float) -> bool:
    """Whether every cap ``min(kcap, ε_i^max/η)`` is ``kcap > 0``. With ``0 < η < ∞``
    the rounded ``ε/η`` is monotone in ``ε``, so the smallest ``ε`` decides (no
    division per record); otherwise, or when it does not, record by record."""
    if not kcap > 0.0:
        return False
    if least_cap_is_kcap(kcap, eps_max, eta):
        return True
    i = 0
    while i < eps_max.size and min(kcap, eps_max[i] / eta) == kcap:
        i += 1
    return i == eps_max.size


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
    and ``a`` its minimiser.

    The value is the Lagrangian ``⟨r, a⟩ + μ‖a‖ + τ(1 − Σ a)`` at the computed ``a``
    (``τ = A/s``, the multiplier of ``Σ a = 1``): ``a_i = A − s r_i`` cancels when
    ``s`` is large (small ``μ``), so ``Σ a`` misses 1 by ``~1e-16·A``; the Lagrangian is
    stationary in the free ``a_i``, so that error enters the value only to second
    order, instead of first order through ``⟨r, a⟩`` (which let the search prefer
    points by rounding noise, away from the stationary ``η``)."""
    m = ell.size
    r = np.empty(m)
    for i in range(m):
        r[i] = ell[i] + q_scale * psi[i]
        if not abs(r[i]) < np.inf:  # as weights_kernel: the NumPy solver's case
            return False, 0.0, 0.0, 0.0, 0.0
    equal = _caps_all_kcap(kcap, eps_max, eta)
    if equal:  # every cap k/m: no cap array (as weights_kernel with h = kcap)
        ok, A, s, _, _ = _weights_eq(r, kcap, mu, A0, s0)
        h = np.empty(0)
    else:
        h = np.empty(m)
        for i in range(m):
            h[i] = min(kcap, eps_max[i] / eta)
        ok, A, s = weights_kernel(r, h, mu, A0, s0)
    if not ok:
        return False, 0.0, 0.0, 0.0, 0.0
    lin = 0.0
    sq = 0.0
    pa = 0.0
    tot = 0.0
    n_free = 0
    for i in range(m):
        hi = kcap if equal else h[i]
        v = min(max(A - s * r[i], 0.0), hi)
        n_free += (v > 0.0) & (v < hi)
        lin += v * r[i]
        sq += v * v
        pa += v * psi[i]
        tot += v
    if not abs(1.0 - tot) <= SUM_RTOL and n_free > 0:
        # A − s r_i cancels at the scale of A (huge for a tiny μ against a large
        # γηΨ): the kernel's own test accepted the active set to that rounding
        # (_kkt_holds), so restore Σ a = 1 on the free weights as _clip_weights
        # does, i.e. take the closed form at A + δ/|M| on the same active set.
        lin, sq, pa, tot = _restored_sums(r, psi, A, s, kcap, h, equal)
    if not abs(1.0 - tot) <= SUM_RTOL:
        # Not rounding any more (r so large that A − s r lost every digit): no
        # solution here; the caller falls back to the NumPy solver.
        return False, 0.0, 0.0, 0.0, 0.0
    if s > 0.0:
        lin += (A / s) * (1.0 - tot)
    return True, const + lin + mu * np.sqrt(sq), A, s, pa


@_jit
def _restored_sums(
    r: FloatArray,
    psi: FloatArray,
    A: float,
    s: float,
    kcap: float,
    h: FloatArray,
    equal: bool,
) -> tuple[float, float, float, float]:
    """``(⟨r, a⟩, ‖a‖², Ψᵀa, Σ a)`` at the weights of :func:`_clip_weights` (``Σ a = 1``
    restored on the free ones); caps ``kcap`` when ``equal``, else ``h``."""
    a = _clip_weights(A, s, r, np.full(r.size, kcap) if equal else h)
    lin = 0.0
    sq = 0.0
    pa = 0.0
    tot = 0.0
    for i in range(a.size):
        lin += a[i] * r[i]
        sq += a[i] * a[i]
        pa += a[i] * psi[i]
        tot += a[i]
    return lin, sq, pa, tot


@_jit
def _clip_weights(A: float, s: float, r: FloatArray, h: FloatArray) -> FloatArray:
    """``clip(A − s r, 0, h)``, then ``Σ a = 1`` restored on the free weights.

    ``A − s r_i`` cancels when ``s`` is large (small ``μ``): the clipped weights miss
    ``Σ a = 1`` by ``~1e-16·A`` (``3e-8`` at ``μ = 2e-6``), enough to let a search rank
    points by rounding noise. Shifting every free weight by the same ``δ/|M|`` is the
    closed form at ``A + δ/|M|`` on the same active set, so the KKT structure is kept
    (:func:`restore_sum`)."""
    a = np.empty(r.size)
    for i in range(r.size):
        a[i] = min(max(A - s * r[i], 0.0), h[i])
    restore_sum(a, h)
    return a


@_jit
def clip_weights_counted(
    A: float, s: float, r: FloatArray, h: FloatArray, tot: float, n_free: int
) -> FloatArray:
    """:func:`_clip_weights` given ``tot`` and ``n_free``, the index-order sum and the
    free count of ``clip(A − s r, 0, h)`` (:func:`weights_kernel_sums`), so without
    :func:`restore_sum`'s counting pass (a chain of ``m`` dependent additions); the
    same weights. ``n_free < 0``: not known, :func:`_clip_weights` itself."""
    if n_free < 0:
        return _clip_weights(A, s, r, h)
    a = np.empty(r.size)
    for i in range(r.size):
        a[i] = min(max(A - s * r[i], 0.0), h[i])
    if n_free == 0:
        return a
    d = (1.0 - tot) / n_free
    for i in range(a.size):
        if 0.0 < a[i] < h[i]:
            a[i] = min(max(a[i] + d, 0.0), h[i])
    return a


@_jit
def restore_sum(a: FloatArray, h: FloatArray) -> None:
    """Add ``(1 − Σ a)/|M|`` to each weight strictly inside ``(0, h_i)`` (in place,
    clipped to the bounds); nothing when no weight is free."""
    tot = 0.0
    n_free = 0
    for i in range(a.size):
        tot += a[i]
        if 0.0 < a[i] < h[i]:
            n_free += 1
    if n_free == 0:
        return
    d = (1.0 - tot) / n_free
    for i in range(a.size):
        if 0.0 < a[i] < h[i]:
            a[i] = min(max(a[i] + d, 0.0), h[i])


SUM_RTOL = 1e-6
""":func:`range_value_kernel` refuses weights whose sum misses 1 by more than this."""


# ------------------------------------------------------ one-seller updates (payments)
#
# A payment re-solve changes one seller's virtual cost Ψ_i. At a fixed (model j, η)
# only r_i moves, so the a-step solution follows from the base's sums over its active
# set (zero Z, free M, at the cap U) without touching the other m − 1 sellers: the
# sellers nearest each class boundary (the K stored per boundary, in order of
# distance: with equal caps the boundary conditions are monotone in r) and seller i
# are solved for explicitly, every other seller keeps its class and enters through
# the sums (``_summary_update``). If a seller beyond the stored ones would change
# class, or caps differ (a binding ε^max), the caller runs the full O(m) kernel.
# Sums are kept relative to r0 (the free set's mean r) so the closed form does not
# cancel.

K_NEAR = 32  # sellers stored per class boundary
_HEAD = 20
# list l (0: Z smallest d, 1: M largest d, 2: M smallest d, 3: U largest d) starts at
# _HEAD + l·(3K + 1): K values d, K values Ψ, K indices, then the (K+1)-th d.
_LIST = 3 * K_NEAR + 1
SUMMARY_SIZE = _HEAD + 4 * _LIST
_INF = np.inf


@_jit
def _keep_near(
    buf: FloatArray, base: int, d: float, psi: float, k: int, larger: bool
) -> None:
    """Insert ``(d, Ψ, k)`` into list ``base`` (sorted, nearest the boundary first:
    smallest d, or largest with ``larger``), keeping K entries and the next d."""
    K = K_NEAR
    key = -d if larger else d
    nxt = buf[base + 3 * K]
    nkey = -nxt if larger else nxt
    if key >= nkey:
        return
    # the K-th entry falls to "next"
    last = buf[base + K - 1]
    buf[base + 3 * K] = last
    pos = K - 1
    while pos > 0:
        prev = buf[base + pos - 1]
        pkey = -prev if larger else prev
        if pkey <= key:
            break
        buf[base + pos] = prev
        buf[base + K + pos] = buf[base + K + pos - 1]
        buf[base + 2 * K + pos] = buf[base + 2 * K + pos - 1]
        pos -= 1
    buf[base + pos] = d
    buf[base + K + pos] = psi
    buf[base + 2 * K + pos] = k


@_jit
def range_summary(
    ell: FloatArray,
    psi: FloatArray,
    q_scale: float,
    eta: float,
    kcap: float,
    eps_max: FloatArray,
    mu: float,
    A0: float,
    s0: float,
) -> FloatArray:
    """Sums and boundary lists of the a-step solution at ``r = ℓ + q_scale·Ψ`` (as
    :func:`range_value_kernel`) for :func:`one_seller_value`; ``out[0] = 0`` when the
    kernel failed, the caps differ, or no weight is free (a vertex)."""
    m = ell.size
    K = K_NEAR
    out = np.zeros(SUMMARY_SIZE)
    r = np.empty(m)
    h = np.empty(m)
    for k in range(m):
        r[k] = ell[k] + q_scale * psi[k]
        h[k] = min(kcap, eps_max[k] / eta)
        if h[k] != kcap:
            return out
    ok, A, s = weights_kernel(r, h, mu, A0, s0)
    if not ok:
        return out
    n_mid = 0
    r0 = 0.0
    for k in range(m):
        v = A - s * r[k]
        if v < kcap and v > 0.0:
            n_mid += 1
            r0 += r[k]
    if n_mid < 1:
        return out
    r0 /= n_mid
    for lst in range(4):
        b = _HEAD + lst * _LIST
        fill = _INF if lst % 2 == 0 else -_INF
        for t in range(K):
            out[b + t] = fill
            out[b + 2 * K + t] = -1.0
        out[b + 3 * K] = fill
    S1 = S2 = P1 = DP = H1 = HR = HP = PP = 0.0
    psi_lo = _INF
    psi_hi = -_INF
    n_up = 0
    for k in range(m):
        v = A - s * r[k]
        d = r[k] - r0
        psi_lo = min(psi_lo, psi[k])
        psi_hi = max(psi_hi, psi[k])
        if v >= kcap:
            n_up += 1
            H1 += kcap
            HR += kcap * r[k]
            HP += kcap * psi[k]
            _keep_near(out, _HEAD + 3 * _LIST, d, psi[k], k, True)
        elif v > 0.0:
            S1 += d
            S2 += d * d
            P1 += psi[k]
            DP += d * psi[k]
            PP += psi[k] * psi[k]
            _keep_near(out, _HEAD + 1 * _LIST, d, psi[k], k, True)
            _keep_near(out, _HEAD + 2 * _LIST, d, psi[k], k, False)
        else:
            _keep_near(out, _HEAD, d, psi[k], k, False)
    out[0] = 1.0
    out[1], out[2], out[3], out[4] = A, s, r0, n_mid
    out[5], out[6], out[7], out[8] = S1, S2, P1, DP
    out[9], out[10], out[11], out[12] = H1, n_up * kcap * kcap, HR, HP
    out[13] = kcap
    out[14], out[15], out[16], out[17] = PP, psi_lo, psi_hi, q_scale
    return out


@_jit
def one_seller_value(
    sm: FloatArray,
    i: int,
    ell_i: float,
    q_scale: float,
    psi_old: float,
    psi_new: float,
    mu: float,
    const: float,
) -> tuple[bool, float, float, float, float]:
    """``(ok, value, A, s, Ψᵀa)`` as :func:`range_value_kernel` for the problem
    summarised by :func:`range_summary` (same ``ℓ``, ``q_scale``, ``η``) with seller
    ``i``'s ``Ψ_i`` changed from ``psi_old`` to ``psi_new``; ``ok = False`` when the
    update cannot certify the active set (then run the kernel).

    First by the sums alone (:func:`_prefix_update`, a few O(1) steps), and where
    that declines by :func:`_summary_update` (O(K): the stored sellers solved for
    explicitly), which also takes the changes through an empty free set. Both
    return the a-step's unique solution; only the summation order differs."""
    got = _prefix_update(sm, i, ell_i, q_scale, psi_old, psi_new, mu, const)
    if got[0]:
        return got
    return _summary_update(sm, i, ell_i, q_scale, psi_old, psi_new, mu, const)


@_jit
def shifted_value(
    sm: FloatArray,
    i: int,
    ell_i: float,
    q_scale: float,
    psi_old: float,
    psi_new: float,
    mu: float,
    const: float,
) -> tuple[bool, float, float, float, float]:
    """:func:`one_seller_value` at another ``η`` of the same model: the summary was
    taken at ``q₀ = sm[17]`` (``r = ℓ + q₀Ψ``), the value is wanted at ``q_scale``
    (caps still all ``k/m``), with seller ``i``'s ``Ψ_i`` changed as there.

    Every other seller's ``r_k`` moves by ``Δq·Ψ_k`` (``Δq = q_scale − q₀``), so the
    class sums follow in closed form from the summary's (``Σd + ΔqΣΨ``,
    ``Σd² + 2ΔqΣdΨ + Δq²ΣΨ²``, …) and the stored boundary sellers are solved for at
    their moved ``r`` (:func:`_prefix_shifted`, else :func:`_summary_update`, as
    :func:`one_seller_value`). ``(ok, value, A, s, Ψᵀa)`` as
    :func:`range_value_kernel`."""
    got = _prefix_shifted(sm, i, ell_i, q_scale, psi_old, psi_new, mu, const)
    if got[0]:
        return got
    return _summary_update(sm, i, ell_i, q_scale, psi_old, psi_new, mu, const)


@_jit
def _without_seller(
    sm: FloatArray, ell_i: float, q: float, psi_old: float
) -> tuple[int, float, float, float, float, float, float, float, float, float, float]:
    """The summary's class sums with seller ``i`` taken out of its base class (at
    ``r_i = ℓ_i + q·Ψ_i``, exactly as :func:`range_summary` computed it): ``(class,
    n, Σd, Σd², ΣΨ, ΣdΨ, ΣΨ², Σh, Σh², Σhr, ΣhΨ)``, class 0 zero, 1 free, 2 capped."""
    A, s, r0, n = sm[1], sm[2], sm[3], sm[4]
    S1, S2, P1, DP = sm[5], sm[6], sm[7], sm[8]
    H1, HU2, HR, HP = sm[9], sm[10], sm[11], sm[12]
    h, PP = sm[13], sm[14]
    r_old = ell_i + q * psi_old
    v = A - s * r_old
    d_old = r_old - r0
    if v >= h:
        H1 -= h
        HU2 -= h * h
        HR -= h * r_old
        HP -= h * psi_old
        return 2, n, S1, S2, P1, DP, PP, H1, HU2, HR, HP
    if v > 0.0:
        n -= 1.0
        S1 -= d_old
        S2 -= d_old * d_old
        P1 -= psi_old
        DP -= d_old * psi_old
        PP -= psi_old * psi_old
        return 1, n, S1, S2, P1, DP, PP, H1, HU2, HR, HP
    return 0, n, S1, S2, P1, DP, PP, H1, HU2, HR, HP


@_jit
def _value_from_sums(
    B: float,
    s: float,
    r0: float,
    c1: float,
    n: float,
    S1: float,
    S2: float,
    P1: float,
    DP: float,
    HU2: float,
    HR: float,
    HP: float,
    mu: float,
    const: float,
) -> tuple[bool, float, float, float, float]:
    """``(ok, value, A, s, Ψᵀa)`` of the a-step solution ``a = clip(B − s d, 0, h)``
    from its class sums (free: ``n``, ``Σd``, ``Σd²``, ``ΣΨ``, ``ΣdΨ``; capped:
    ``Σh²``, ``Σhr``, ``ΣhΨ``; ``c₁ = 1 − Σh``): the Lagrangian value of
    :func:`range_value_kernel` in closed form, ``ok = False`` where
    ``|‖a‖ − μs| > 1e-9·max(1, μs)`` (the update's solution is not accepted)."""
    lin = r0 * c1 + B * S1 - s * S2 + HR
    sq = n * B * B - 2.0 * B * s * S1 + s * s * S2 + HU2
    if not (sq > 0.0) or abs(np.sqrt(sq) - mu * s) > 1e-9 * max(1.0, mu * s):
        return False, 0.0, 0.0, 0.0, 0.0
    pa = B * P1 - s * DP + HP
    return True, const + lin + mu * np.sqrt(sq), B + s * r0, s, pa


@_jit
def _prefix_update(
    sm: FloatArray,
    i: int,
    ell_i: float,
    q_scale: float,
    psi_old: float,
    psi_new: float,
    mu: float,
    const: float,
) -> tuple[bool, float, float, float, float]:
    """:func:`one_seller_value` by the sums alone: the stored sellers that change
    class are a prefix of each boundary list (equal caps: the classes are monotone
    in ``r``), added to or taken from the sums until the prefixes repeat. A few
    O(1) steps; declines where the free set empties on the way or more than K
    sellers of a list would move (then :func:`_summary_update`)."""
    fail = (False, 0.0, 0.0, 0.0, 0.0)
    if sm[0] == 0.0:
        return fail
    K = K_NEAR
    r0, h = sm[3], sm[13]
    r_new = ell_i + q_scale * psi_new
    cls, n, S1, S2, P1, DP, _, H1, HU2, HR, HP = _without_seller(
        sm, ell_i, q_scale, psi_old
    )
    d_i = r_new - r0
    moved = np.zeros(4, dtype=np.int64)  # prefix of each list that changed class
    for _ in range(40):
        n2, S1b, S2b, P1b, DPb = n, S1, S2, P1, DP
        H1b, HU2b, HRb, HPb = H1, HU2, HR, HP
        for lst in range(4):
            b = _HEAD + lst * _LIST
            for t in range(moved[lst]):
                if int(sm[b + 2 * K + t]) == i:
                    continue
                d = sm[b + t]
                p = sm[b + K + t]
                # Z→M (+M), M→Z (−M), M→U (−M, +U), U→M (−U, +M)
                sgn_m = 1.0 if lst == 0 or lst == 3 else -1.0
                n2 += sgn_m
                S1b += sgn_m * d
                S2b += sgn_m * d * d
                P1b += sgn_m * p
                DPb += sgn_m * d * p
                if lst == 2 or lst == 3:
                    sgn_u = 1.0 if lst == 2 else -1.0
                    H1b += sgn_u * h
                    HU2b += sgn_u * h * h
                    HRb += sgn_u * h * (r0 + d)
                    HPb += sgn_u * h * p
        if cls == 1:
            n2 += 1.0
            S1b += d_i
            S2b += d_i * d_i
            P1b += psi_new
            DPb += d_i * psi_new
        elif cls == 2:
            H1b += h
            HU2b += h * h
            HRb += h * r_new
            HPb += h * psi_new
        if n2 < 0.5:
            return fail
        V = S2b - S1b * S1b / n2
        denom = mu * mu - V
        c1 = 1.0 - H1b
        if denom <= 0.0:
            return fail
        s2 = np.sqrt((HU2b + c1 * c1 / n2) / denom)
        B = (c1 + s2 * S1b) / n2
        # re-classify seller i and the stored sellers nearest each boundary
        vi = B - s2 * d_i
        new_cls = 2 if vi >= h else (1 if vi > 0.0 else 0)
        new_moved = np.zeros(4, dtype=np.int64)
        for lst in range(4):
            b = _HEAD + lst * _LIST
            t = 0
            while t < K:
                d = sm[b + t]
                if not np.isfinite(d):
                    break
                vt = B - s2 * d
                if lst == 0:
                    flips = vt > 0.0
                    if vt >= h:
                        return fail  # Z straight to U: not a boundary neighbour
                elif lst == 1:
                    flips = vt <= 0.0
                elif lst == 2:
                    flips = vt >= h
                else:
                    flips = vt < h
                    if vt <= 0.0:
                        return fail
                if not flips:
                    break
                t += 1
            if t == K:
                nxt = sm[b + 3 * K]
                if np.isfinite(nxt):
                    vt = B - s2 * nxt
                    if (
                        (lst == 0 and vt > 0.0)
                        or (lst == 1 and vt <= 0.0)
                        or (lst == 2 and vt >= h)
                        or (lst == 3 and vt < h)
                    ):
                        return fail  # more than K would move
            new_moved[lst] = t
        same = new_cls == cls
        for lst in range(4):
            if new_moved[lst] != moved[lst]:
                same = False
        if same:
            return _value_from_sums(
                B, s2, r0, c1, n2, S1b, S2b, P1b, DPb, HU2b, HRb, HPb, mu, const
            )
        cls = new_cls
        for lst in range(4):
            moved[lst] = new_moved[lst]
    return fail


@_jit
def _prefix_shifted(
    sm: FloatArray,
    i: int,
    ell_i: float,
    q_scale: float,
    psi_old: float,
    psi_new: float,
    mu: float,
    const: float,
) -> tuple[bool, float, float, float, float]:
    """:func:`shifted_value` by the sums alone (as :func:`_prefix_update`, every
    stored seller re-classified at its moved ``r``; the unstored ones of a list lie
    beyond its ``(K+1)``-th value ``d_next``, moved by at most ``Δq·Ψ`` with ``Ψ`` in
    the base's ``[Ψ_min, Ψ_max]``). Declines as :func:`_prefix_update`."""
    fail = (False, 0.0, 0.0, 0.0, 0.0)
    if sm[0] == 0.0:
        return fail
    K = K_NEAR
    r0, h, psi_lo, psi_hi, q0 = sm[3], sm[13], sm[15], sm[16], sm[17]
    dq = q_scale - q0
    r_new = ell_i + q_scale * psi_new
    cls, n, S1, S2, P1, DP, PP, H1, HU2, HR, HP = _without_seller(
        sm, ell_i, q0, psi_old
    )
    # every other seller's d moves by Δq·Ψ_k
    S2 += 2.0 * dq * DP + dq * dq * PP
    S1 += dq * P1
    DP += dq * PP
    HR += dq * HP
    lo_shift = min(dq * psi_lo, dq * psi_hi)
    hi_shift = max(dq * psi_lo, dq * psi_hi)
    d_i = r_new - r0
    flip = np.zeros(4 * K, dtype=np.bool_)
    for _ in range(40):
        n2, S1b, S2b, P1b, DPb = n, S1, S2, P1, DP
        H1b, HU2b, HRb, HPb = H1, HU2, HR, HP
        for lst in range(4):
            b = _HEAD + lst * _LIST
            sgn_m = 1.0 if lst == 0 or lst == 3 else -1.0
            for t in range(K):
                if not flip[lst * K + t]:
                    continue
                p = sm[b + K + t]
                d = sm[b + t] + dq * p
                # Z→M (+M), M→Z (−M), M→U (−M, +U), U→M (−U, +M)
                n2 += sgn_m
                S1b += sgn_m * d
                S2b += sgn_m * d * d
                P1b += sgn_m * p
                DPb += sgn_m * d * p
                if lst == 2 or lst == 3:
                    sgn_u = 1.0 if lst == 2 else -1.0
                    H1b += sgn_u * h
                    HU2b += sgn_u * h * h
                    HRb += sgn_u * h * (r0 + d)
                    HPb += sgn_u * h * p
        if cls == 1:
            n2 += 1.0
            S1b += d_i
            S2b += d_i * d_i
            P1b += psi_new
            DPb += d_i * psi_new
        elif cls == 2:
            H1b += h
            HU2b += h * h
            HRb += h * r_new
            HPb += h * psi_new
        if n2 < 0.5:
            return fail
        V = S2b - S1b * S1b / n2
        denom = mu * mu - V
        c1 = 1.0 - H1b
        if denom <= 0.0:
            return fail
        s2 = np.sqrt((HU2b + c1 * c1 / n2) / denom)
        B = (c1 + s2 * S1b) / n2
        vi = B - s2 * d_i
        new_cls = 2 if vi >= h else (1 if vi > 0.0 else 0)
        same = new_cls == cls
        for lst in range(4):
            b = _HEAD + lst * _LIST
            for t in range(K):
                idx = sm[b + 2 * K + t]
                d0 = sm[b + t]
                if idx < 0.0 or not np.isfinite(d0) or int(idx) == i:
                    f = False
                else:
                    vt = B - s2 * (d0 + dq * sm[b + K + t])
                    if lst == 0:
                        if vt >= h:
                            return fail  # Z straight to U: not a boundary neighbour
                        f = vt > 0.0
                    elif lst == 1:
                        f = vt <= 0.0
                    elif lst == 2:
                        f = vt >= h
                    else:
                        if vt <= 0.0:
                            return fail
                        f = vt < h
                if f != flip[lst * K + t]:
                    same = False
                    flip[lst * K + t] = f
            # the unstored sellers of the list: beyond d_next, moved by ≤ the shift
            nxt = sm[b + 3 * K]
            if np.isfinite(nxt):
                if lst == 0 and B - s2 * (nxt + lo_shift) > 0.0:
                    return fail
                if lst == 1 and B - s2 * (nxt + hi_shift) <= 0.0:
                    return fail
                if lst == 2 and B - s2 * (nxt + lo_shift) >= h:
                    return fail
                if lst == 3 and B - s2 * (nxt + hi_shift) < h:
                    return fail
        if same:
            return _value_from_sums(
                B, s2, r0, c1, n2, S1b, S2b, P1b, DPb, HU2b, HRb, HPb, mu, const
            )
        cls = new_cls
    return fail


@_jit
def _summary_update(
    sm: FloatArray,
    i: int,
    ell_i: float,
    q_scale: float,
    psi_old: float,
    psi_new: float,
    mu: float,
    const: float,
) -> tuple[bool, float, float, float, float]:
    """The a-step of a summarised problem with ``r`` moved to ``ℓ + q_scale·Ψ`` and
    seller ``i``'s ``Ψ_i`` changed, in O(K), or ``ok = False``.

    Write every weight as ``a_k = clip(B − s d_k, 0, h)`` with ``d_k = r_k − r₀``
    (``B = A − s r₀``). The sellers split in two:

    * the *movable* ones: seller ``i`` at its new ``r_i`` and the stored boundary
      sellers of the four lists (each once: a free seller can sit in both free
      lists), at their moved ``d_k = d_k⁰ + Δq Ψ_k``;
    * the *fixed* ones: every other seller keeps its base class (zero, free or at
      the cap), so its contribution is a closed form in ``(B, s)`` of the class
      sums with the movable sellers taken out (``n``, ``Σd``, ``Σd²``, ``ΣΨ``,
      ``ΣdΨ`` of the free ones; ``Σh``, ``Σh²``, ``Σh r``, ``ΣhΨ`` of the capped).

    Then, as :func:`_weights_eq`: (1) at the base's ``s``, ``B`` with ``Σ a = 1``
    exactly (the left side is piecewise linear and non-decreasing in ``B``; its
    kinks are the movable sellers' ``s d_k`` and ``s d_k + h``, located by
    bisection over them, the root then by interpolation on its piece); (2) the
    active-set iteration from the classes at that ``B``: with ``M`` the free set and
    ``U`` the capped one, the closed form (spec §4.1, ``_weights_step``)
    ``s = √((Σ_U h² + c₁²/|M|)/(μ² − V))``, ``B = (c₁ + s Σ_M d)/|M|`` with
    ``c₁ = 1 − Σ_U h`` and ``V = Σ_M d² − (Σ_M d)²/|M|``, until the movable
    sellers' classes repeat. (3) The fixed sellers' classes are certified: the
    unstored sellers of a list lie beyond its ``(K+1)``-th value ``d_next``, moved
    by at most ``Δq·Ψ`` with ``Ψ`` in the base's ``[Ψ_min, Ψ_max]``, so none changes
    class when ``d_next`` moved by the worst such shift does not. The optimum is
    the unique KKT point, so the certified fixed point is the a-step's solution;
    the value is the Lagrangian of :func:`range_value_kernel` in closed form.
    Declines (``ok = False``): no free seller at the solution (a vertex), a
    certificate that fails, or no fixed point in 40 iterations."""
    fail = (False, 0.0, 0.0, 0.0, 0.0)
    if sm[0] == 0.0:
        return fail
    K = K_NEAR
    s, r0 = sm[2], sm[3]
    h, psi_lo, psi_hi, q0 = sm[13], sm[15], sm[16], sm[17]
    dq = q_scale - q0
    # seller i out of its base class (classified as range_summary did)
    _, n, S1, S2, P1, DP, PP, H1, HU2, HR, HP = _without_seller(sm, ell_i, q0, psi_old)
    if dq != 0.0:  # every other seller's d moves by Δq·Ψ_k
        S2 += 2.0 * dq * DP + dq * dq * PP
        S1 += dq * P1
        DP += dq * PP
        HR += dq * HP
    lo_shift = min(dq * psi_lo, dq * psi_hi)
    hi_shift = max(dq * psi_lo, dq * psi_hi)
    # the movable sellers, out of the fixed sums
    md = np.empty(4 * K + 1)
    mp = np.empty(4 * K + 1)
    n_mov = 0
    free_list = _HEAD + _LIST
    overlap = sm[4] < 2 * K + 1  # the free lists hold the same sellers
    for lst in range(4):
        b = _HEAD + lst * _LIST
        for t in range(K):
            d0 = sm[b + t]
            idx = sm[b + 2 * K + t]
            if idx < 0.0 or not np.isfinite(d0):
                break
            if int(idx) == i:
                continue
            if lst == 2 and overlap:  # a free seller in both free lists: taken once
                dup = False
                for u in range(K):
                    if sm[free_list + 2 * K + u] == idx:
                        dup = True
                        break
                if dup:
                    continue
            p = sm[b + K + t]
            d = d0 + dq * p
            md[n_mov] = d
            mp[n_mov] = p
            n_mov += 1
            if lst == 1 or lst == 2:
                n -= 1.0
                S1 -= d
                S2 -= d * d
                P1 -= p
                DP -= d * p
            elif lst == 3:
                H1 -= h
                HU2 -= h * h
                HR -= h * (r0 + d)
                HP -= h * p
    md[n_mov] = ell_i + q_scale * psi_new - r0
    mp[n_mov] = psi_new
    n_mov += 1
    # (1) B with Σ a = 1 at the base's s
    kinks = np.empty(2 * n_mov)
    for k in range(n_mov):
        kinks[2 * k] = s * md[k]
        kinks[2 * k + 1] = s * md[k] + h
    kinks.sort()
    lo = 0
    hi = 2 * n_mov - 1  # g(kinks[lo − 1]) < 0 ≤ g(kinks[hi]) once narrowed
    g_hi = _moved_excess(kinks[hi], s, md, n_mov, h, n, S1, H1)
    if g_hi < 0.0:
        if n < 0.5:
            return fail
        B = kinks[hi] - g_hi / n
    else:
        g_lo = _moved_excess(kinks[0], s, md, n_mov, h, n, S1, H1)
        if g_lo >= 0.0:
            if n < 0.5:
                return fail
            B = kinks[0] - g_lo / n
        else:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                g = _moved_excess(kinks[mid], s, md, n_mov, h, n, S1, H1)
                if g < 0.0:
                    lo, g_lo = mid, g
                else:
                    hi, g_hi = mid, g
            B = kinks[lo] - g_lo * (kinks[hi] - kinks[lo]) / (g_hi - g_lo)
    # (2) the active set from the classes at (B, s)
    cls = np.empty(n_mov, dtype=np.int64)
    for k in range(n_mov):
        vk = B - s * md[k]
        cls[k] = 2 if vk >= h else (1 if vk > 0.0 else 0)
    for _ in range(40):
        n2, S1b, S2b, P1b, DPb = n, S1, S2, P1, DP
        H1b, HU2b, HRb, HPb = H1, HU2, HR, HP
        for k in range(n_mov):
            d = md[k]
            p = mp[k]
            if cls[k] == 1:
                n2 += 1.0
                S1b += d
                S2b += d * d
                P1b += p
                DPb += d * p
            elif cls[k] == 2:
                H1b += h
                HU2b += h * h
                HRb += h * (r0 + d)
                HPb += h * p
        if n2 < 0.5:
            return fail
        V = S2b - S1b * S1b / n2
        denom = mu * mu - V
        c1 = 1.0 - H1b
        if not denom > 0.0:
            return fail
        s2 = np.sqrt((HU2b + c1 * c1 / n2) / denom)
        if not s2 > 0.0:
            return fail
        B = (c1 + s2 * S1b) / n2
        same = True
        for k in range(n_mov):
            vk = B - s2 * md[k]
            c = 2 if vk >= h else (1 if vk > 0.0 else 0)
            if c != cls[k]:
                cls[k] = c
                same = False
        if not same:
            continue
        # (3) the fixed sellers keep their classes
        for lst in range(4):
            nxt = sm[_HEAD + lst * _LIST + 3 * K]
            if not np.isfinite(nxt):
                continue
            if lst == 0 and B - s2 * (nxt + lo_shift) > 0.0:
                return fail
            if lst == 1 and B - s2 * (nxt + hi_shift) <= 0.0:
                return fail
            if lst == 2 and B - s2 * (nxt + lo_shift) >= h:
                return fail
            if lst == 3 and B - s2 * (nxt + hi_shift) < h:
                return fail
        return _value_from_sums(
            B, s2, r0, c1, n2, S1b, S2b, P1b, DPb, HU2b, HRb, HPb, mu, const
        )
    return fail


@_jit
def _moved_excess(
    B: float,
    s: float,
    md: FloatArray,
    n_mov: int,
    h: float,
    n: float,
    S1: float,
    H1: float,
) -> float:
    """``Σ a − 1`` at ``(B, s)`` for :func:`_summary_update`: the fixed sellers'
    closed form plus the movable sellers' clipped weights."""
    tot = H1 + n * B - s * S1 - 1.0
    for k in range(n_mov):
        tot += min(max(B - s * md[k], 0.0), h)
    return tot


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
def chord_argmin(sigma: float, slope: float, e1: float, e2: float) -> float:
    """Where ``σ/η + slope·η`` is least on ``[η₁, η₂]`` (``σ ≥ 0``): the cell bounds'
    closed-form minimum of ``σ/η`` plus a chord."""
    if sigma > 0.0 and slope > 0.0:
        return min(max(math.sqrt(sigma / slope), e1), e2)
    if sigma > 0.0 or slope < 0.0:
        return e2  # σ/η + slope·η is non-increasing on the cell
    return e1


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
    eta = chord_argmin(sigma, slope, e1, e2)
    dual = base + sigma / eta + g[0] + slope * (eta - e1)
    return True, max(plain, dual)
