"""The a-step of the allocation: exact minimiser over the capped simplex.

For fixed ``(w, η)`` and linear ``u``, the allocation objective (spec ``mechanism.md``
§4.2, paper eq. (10)) restricted to ``a`` is

    min_a ⟨r, a⟩ + μ‖a‖₂   s.t.  Σ a_i = 1,  0 ≤ a_i ≤ h_i,            (A)

with ``r_i = ℓ_i(w) + γηΨ_i`` and caps ``h_i = min(k/m, ε_i^max/η)``. Its KKT
conditions (paper Thm 3.3) give ``a_i = clip(s(τ − r_i), 0, h_i)`` with ``Σ a_i = 1`` and
``‖a‖₂ = μ s``. Writing ``A = sτ``, on a fixed active set (``U`` at the cap, ``M``
strictly between, the rest at 0) the two equations are solved in closed form:

    A = (1 − Σ_U h_i + s Σ_M r_i) / |M|,
    s² = (Σ_U h_i² + (1 − Σ_U h_i)²/|M|) / (μ² − V_M),  V_M = Σ_M r_i² − (Σ_M r_i)²/|M|,

so an active-set iteration (re-classify with the new ``(A, s)``, repeat) is exact once the
sets stop changing; from a warm start it takes one or two O(m) passes. A monotone
fallback never fails: ``t ↦ ‖P(−t r)‖/(μ t)`` is non-increasing (it is ``1 − 2ψ'(t)/μ`` for
the convex ``ψ(t) = min_a ⟨r,a⟩ + μ(‖a‖²/t + t)/2``), so bisection on ``log t`` with an
exact O(m log m) capped-simplex projection ``P`` brackets the root. ``μ = 0`` is the linear
programme "fill the smallest ``r_i`` up to their caps".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._weights_kernel import (
    _clip_weights,
    _kkt_holds,
    fill_smallest_kernel,
    restore_sum,
    weights_kernel,
)

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class WeightsStepState:
    """Multipliers ``(A, s)`` of the last solve, for warm starts (``a = clip(A − s r)``)."""

    A: float
    s: float


def solve_weights(
    r: FloatArray,
    caps: FloatArray,
    mu: float,
    *,
    warm: WeightsStepState | None = None,
) -> tuple[FloatArray, WeightsStepState | None]:
    """Solve problem (A) of the module docstring exactly.

    Parameters
    ----------
    r : ndarray of shape (m,)
        Linear costs ``r_i``.
    caps : ndarray of shape (m,)
        Caps ``h_i ≥ 0`` with ``Σ h_i ≥ 1``.
    mu : float
        ``μ ≥ 0``.
    warm : WeightsStepState, optional
        Multipliers of a previous, nearby solve.

    Returns
    -------
    a : ndarray of shape (m,)
    state : WeightsStepState or None
        Multipliers for the next warm start (None when ``μ = 0`` or the caps force ``a``).
    """
    total_cap = float(caps.sum())
    if total_cap <= 1.0 + 1e-12:
        return caps / total_cap, None
    if mu == 0.0:
        return fill_smallest(r, caps), None
    if not np.isfinite(r).all():
        # Some γηΨ_i overflowed (a payment sweep far up an unbounded prior): that
        # seller's weight costs more than any μ‖a‖ can weigh, so the linear
        # programme's weights are the minimiser (it takes weight only where the caps
        # leave no choice).
        return fill_smallest(r, caps), None
    if warm is not None:
        # Keep the warm scale s, re-centre A for the new r, then the exact step.
        A = _recentre(warm.A, warm.s, r, caps)
        out = _active_set(r, caps, mu, A, warm.s)
        if out is not None:
            return out
    # Cold start: bisect to a coarse bracket, then let the exact active-set step
    # finish; tighten the bracket only if it fails.
    for rel in (1e-1, 1e-4, 1e-14):
        A, s = _bisect_multipliers(r, caps, mu, rel=rel)
        out = _active_set(r, caps, mu, A, s)
        if out is not None:
            return out
    a = np.clip(A - s * r, 0.0, caps)
    if abs(float(a.sum()) - 1.0) <= 1e-9:
        return _clip(A, s, r, caps), WeightsStepState(A, s)
    # The multipliers lost every digit (``s·r`` far beyond ``1/ε_mach``: a tiny ``μ``
    # against huge ``r``), so their weights are not on the simplex. At that scale
    # ``μ‖a‖`` is below the rounding of ``⟨r, a⟩``: the linear programme's solution is
    # the minimiser to working precision, and feasible.
    return fill_smallest(r, caps), None


def solve_weights_compiled(
    r: FloatArray, caps: FloatArray, mu: float, warm: WeightsStepState | None
) -> tuple[FloatArray, WeightsStepState | None]:
    """The exact a-block minimiser (problem (A) of :mod:`._weights_step`, this module): the
    compiled kernel (:func:`._weights_kernel.weights_kernel`, same closed form and the
    same ``Σ a = 1``, ``‖a‖ = μs`` checks), else the NumPy solver."""
    if mu > 0.0 and float(caps.sum()) > 1.0 + 1e-12:
        A0, s0 = (warm.A, warm.s) if warm is not None else (0.0, 0.0)
        ok, A, s = weights_kernel(r, caps, mu, A0, s0)
        if ok:
            return _clip_weights(A, s, r, caps), WeightsStepState(A, s)
    return solve_weights(r, caps, mu, warm=warm)


def held_multipliers(
    r: FloatArray,
    h: FloatArray,
    held: NDArray[np.bool_],
    eta: float,
    *,
    mu: float,
    a: FloatArray | None,
    caps: FloatArray,
    state: WeightsStepState | None,
) -> FloatArray | None:
    """``ν ≥ 0`` on the caps ``η a_i ≤ ε_i^max`` of the sellers in ``held`` (those
    whose cap is ``h_i = ε_i^max/η``) at a solution of problem (A); ``None`` where no
    multipliers are known (forced weights).

    With ``μ > 0``: ``a = clip(A − s r, 0, h)`` with ``τ = A/s``, so a held seller
    carries ``β_i = (A − s r_i − h_i)/s ≥ 0`` on ``a_i ≤ h_i``. With ``μ = 0`` (the
    linear programme of :func:`fill_smallest`) ``τ`` is the ``r`` of the partly filled
    seller (or of the last one filled) and ``β_i = τ − r_i`` at a cap. ``ν_i = β_i/η``.
    """
    if mu == 0.0:
        if a is None:
            return None
        part = (a > 0.0) & (a < caps * (1.0 - 1e-12))
        on = part if part.any() else a > 0.0
        if not on.any():
            return None
        tau = float(r[on].max())
        at_cap = a >= caps * (1.0 - 1e-12)
        beta = np.where(held & at_cap, np.maximum(tau - r, 0.0), 0.0)
        return np.asarray(beta / eta, dtype=float)
    if state is None or not state.s > 0.0:
        return None
    beta = np.where(held, np.maximum(state.A - state.s * r - h, 0.0), 0.0)
    return np.asarray(beta / (state.s * eta), dtype=float)


def state_from_weights(
    a: FloatArray, r: FloatArray, caps: FloatArray, mu: float
) -> WeightsStepState | None:
    """Multipliers ``(A, s)`` guessed from nearby weights ``a`` (no previous state).

    ``s = ‖a‖₂/μ`` (the KKT scale) and ``A = s·τ`` with ``τ = median(r_i + a_i/s)`` over
    the weights strictly inside their bounds; :func:`solve_weights` re-centres ``A`` and
    runs the exact active-set step from there, so a poor guess costs only the cold
    fallback. ``None`` when ``a`` carries no scale.
    """
    if mu <= 0.0:
        return None
    norm = float(np.linalg.norm(a))
    if not norm > 0.0:
        return None
    s = norm / mu
    free = (a > 0.0) & (a < caps)
    tau = float(np.median(r[free] + a[free] / s)) if free.any() else float(r.min())
    return WeightsStepState(s * tau, s)


# Up to this many sellers the compiled fill (same steps, same weights) is faster; above
# it NumPy's partition is (4 ms against 6.6 ms at 10⁵ sellers, k = 4).
FILL_KERNEL_MAX_M = 4096


def fill_smallest(r: FloatArray, caps: FloatArray) -> FloatArray:
    """LP solution of (A) with ``μ = 0``: fill the smallest ``r_i`` up to their caps.

    Ties are broken by index (a stable sort), so the rule is deterministic. Only the
    sellers that can take weight are ordered: the ``K`` smallest ``r`` (found by a
    partition, O(m)) and every seller tied with the ``K``-th, stably sorted, with
    ``K`` doubled until their caps reach 1 (from ``⌈1/max h⌉``, the fewest that can).
    That is the prefix a full stable sort would fill (a full sort took 6 of 10 s of
    an allocation at ``m = 10⁶``). Up to :data:`FILL_KERNEL_MAX_M` sellers the same
    steps run compiled (:func:`._weights_kernel.fill_smallest_kernel`: 65 → 8 µs at
    399 sellers, where the reduced Newton method calls this once per evaluation).
    """
    m = r.size
    if m <= FILL_KERNEL_MAX_M:
        ok, out = fill_smallest_kernel(r, caps)
        if ok:
            return out
    a = np.zeros_like(r)
    h_max = float(caps.max()) if m else 0.0  # (∞: one seller may take it all)
    k = m if not h_max > 0.0 else min(m, max(1, math.ceil(1.0 / h_max)))
    while True:
        if k >= m:
            idx = np.arange(m)
        else:
            kth = r[np.argpartition(r, k - 1)[k - 1]]
            idx = np.flatnonzero(r <= kth)  # (NaN never ≤: as a sort, last)
        order = idx[np.argsort(r[idx], kind="stable")]
        c = caps[order]
        filled = np.cumsum(c)
        if k >= m or (filled.size and filled[-1] >= 1.0):
            before = np.concatenate(([0.0], filled[:-1]))
            a[order] = np.clip(1.0 - before, 0.0, c)
            return a
        k = min(m, 2 * k)


def project_capped_simplex(v: FloatArray, caps: FloatArray) -> tuple[FloatArray, float]:
    """Euclidean projection of ``v`` onto ``{a : Σ a = 1, 0 ≤ a ≤ h}``.

    ``a_i = clip(v_i + θ, 0, h_i)`` with ``θ`` the root of the piecewise-linear,
    non-decreasing ``f(θ) = Σ clip(v_i + θ, 0, h_i)``, found exactly from the sorted
    breakpoints ``−v_i`` and ``h_i − v_i`` (O(m log m)).

    Where ``v`` shifted by ``θ = (1 − Σ v)/m`` lies strictly inside every ``(0, h_i)``
    (the uniform weights, for instance), that shift is the root (``f`` rises with
    slope ``m`` there): O(m), no sort (at ``m = 10⁶`` the sorts took 90 ms).

    Returns
    -------
    a, theta
    """
    caps = np.minimum(caps, 1.0)  # exact (a_i ≤ Σ a = 1); keeps inf caps out of sums
    shift = (1.0 - float(v.sum())) / v.size
    inside = v + shift
    if bool(np.all((inside > 0.0) & (inside < caps))):
        return inside, shift
    low = np.sort(-v)
    high = np.sort(caps - v)
    pts = np.concatenate((low, high))
    pts.sort()
    cl = np.concatenate(([0.0], np.cumsum(low)))
    ch = np.concatenate(([0.0], np.cumsum(high)))
    nl = np.searchsorted(low, pts, side="right")
    nh = np.searchsorted(high, pts, side="right")
    f = (nl * pts - cl[nl]) - (nh * pts - ch[nh])
    j = int(np.searchsorted(f, 1.0, side="left"))
    if j == 0:
        theta = float(pts[0])
    elif j >= pts.size:  # pragma: no cover - Σ h ≥ 1 makes f reach 1
        theta = float(pts[-1])
    else:
        f0, f1 = f[j - 1], f[j]
        p0, p1 = pts[j - 1], pts[j]
        theta = float(p0 + (1.0 - f0) * (p1 - p0) / (f1 - f0)) if f1 > f0 else float(p1)
    return np.clip(v + theta, 0.0, caps), theta


def _recentre(A: float, s: float, r: FloatArray, caps: FloatArray) -> float:
    """Solve ``Σ clip(A − s r_i, 0, h_i) = 1`` for ``A`` from a nearby guess.

    Bracketed Newton on the non-decreasing piecewise-linear left side (slope: the
    number of free weights); exact once the free set is right. Falls back to the exact
    sort-based projection when it stalls.
    """
    lo, hi = -np.inf, np.inf
    for _ in range(30):
        v = A - s * r
        mid = (v > 0.0) & (v < caps)
        f = float(np.clip(v, 0.0, caps).sum()) - 1.0
        if abs(f) <= 1e-14:
            return A
        if f > 0:
            hi = min(hi, A)
        else:
            lo = max(lo, A)
        n_mid = int(mid.sum())
        step = A - f / n_mid if n_mid else np.nan
        if not (lo < step < hi):
            if not (np.isfinite(lo) and np.isfinite(hi)):
                break
            step = 0.5 * (lo + hi)
        A = float(step)
    return project_capped_simplex(-s * r, caps)[1]


def _clip(A: float, s: float, r: FloatArray, caps: FloatArray) -> FloatArray:
    """``clip(A − s r, 0, h)`` with ``Σ a = 1`` restored (:func:`_clip_weights`)."""
    a = np.clip(A - s * r, 0.0, caps)
    restore_sum(a, caps)
    return np.asarray(a, dtype=float)


def _active_set(
    r: FloatArray, caps: FloatArray, mu: float, A: float, s: float
) -> tuple[FloatArray, WeightsStepState] | None:
    """Closed-form solve on the active set implied by ``(A, s)``; iterate to a fixed point."""
    prev: tuple[int, int, int] | None = None
    for _ in range(50):
        v = A - s * r
        upper = v >= caps
        mid = (v > 0.0) & ~upper
        n_mid = int(mid.sum())
        if n_mid == 0:
            return _vertex(r, caps, mu, upper)
        h_u = caps[upper]
        H1, H2 = float(h_u.sum()), float(h_u @ h_u)
        rm = r[mid]
        S1 = float(rm.sum())
        V = float(((rm - S1 / n_mid) ** 2).sum())
        c1 = 1.0 - H1
        denom = mu * mu - V
        if denom <= 0.0:
            return None
        s_new = float(np.sqrt((H2 + c1 * c1 / n_mid) / denom))
        A_new = (c1 + s_new * S1) / n_mid
        key = (int(upper.sum()), n_mid, hash(mid.tobytes()) ^ hash(upper.tobytes()))
        A, s = A_new, s_new
        if key == prev:
            break
        prev = key
    # The fixed point must satisfy both equations (to 1e-9 plus the weights' own
    # rounding, _weights_kernel._kkt_holds) before Σ a = 1 is restored; otherwise let
    # the caller fall back.
    v = A - s * r
    raw = np.clip(v, 0.0, caps)
    n_free = int(np.count_nonzero((v > 0.0) & (v < caps)))
    sq = float(raw @ raw)
    if not _kkt_holds(float(raw.sum()), sq, mu, A, s, n_free, float(caps.max())):
        return None
    return _clip(A, s, r, caps), WeightsStepState(A, s)


def _vertex(
    r: FloatArray, caps: FloatArray, mu: float, upper: NDArray[np.bool_]
) -> tuple[FloatArray, WeightsStepState] | None:
    """The degenerate case with no weight strictly between 0 and its cap.

    ``a = h·1_U`` (with ``Σ_U h_i = 1``) is optimal iff, with ``s = ‖a‖/μ``, some ``τ``
    has ``r_i + h_i/s ≤ τ`` on ``U`` and ``τ ≤ r_i`` off ``U``.
    """
    a = np.where(upper, caps, 0.0)
    if abs(a.sum() - 1.0) > 1e-12 or not upper.any():
        return None
    s = float(np.linalg.norm(a)) / mu
    need = float((r[upper] + caps[upper] / s).max())
    room = float(r[~upper].min()) if (~upper).any() else np.inf
    if need > room:
        return None
    tau = need if np.isinf(room) else 0.5 * (need + room)
    return a, WeightsStepState(s * tau, s)


def _bisect_multipliers(
    r: FloatArray, caps: FloatArray, mu: float, *, rel: float
) -> tuple[float, float]:
    """Bisect ``log s`` on the non-increasing ``‖P(−s r)‖/(μ s) − 1``; return ``(A, s)``.

    ``P(−s r) = clip(θ − s r, 0, h)``, so the multiplier ``A`` of the KKT form is ``θ``.
    """

    def excess(s: float) -> tuple[float, float]:
        a, theta = project_capped_simplex(-s * r, caps)
        return float(np.linalg.norm(a)) / (mu * s) - 1.0, theta

    lo = hi = 1.0 / mu
    while excess(lo)[0] < 0.0:
        lo *= 1e-2
    while excess(hi)[0] > 0.0:
        hi *= 1e2
    for _ in range(200):
        mid = float(np.sqrt(lo * hi))
        if excess(mid)[0] > 0.0:
            lo = mid
        else:
            hi = mid
        if hi / lo - 1.0 < rel:
            break
    s = float(np.sqrt(lo * hi))
    return excess(s)[1], s
