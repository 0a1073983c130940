"""One seller's allocation curve ``s ↦ ε_i(s, c_-i)`` and its critical cost (spec §5).

``ε_i(s)`` re-solves the allocation with seller ``i``'s virtual cost set to ``Ψ̄(s)`` and
**everything else frozen** (configuration incl. ``γ``, the ``η`` grid, the other
reports), warm-started from the base solution (:func:`mechanisms.allocation.
solve_allocation`). The curve is close to a threshold rule: it stays near its value and
drops to 0 at the critical cost ``s*_i``. :func:`first_order_estimate` predicts
``s*_i`` from the a-step KKT conditions at the base ``(w, η)`` (paper Thm 3.3:
``a_i > 0`` iff ``r_i(s) = ℓ_i(w) + γηΨ(s) < τ``); :func:`find_critical_cost` brackets
and refines it with re-solves.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation import solve_allocation
from mechanisms.local_resolve import local_resolve
from mechanisms.problem import Problem, utility
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]
Solver = Callable[..., Allocation]


@dataclass(eq=False)
class SellerCurve:
    """``s ↦ ε_i^total(s)`` for one seller with every evaluation cached and recorded.

    ``solver`` is :func:`solve_allocation` (a hook only for planted-bug tests).
    Full re-solves are **cold** (``warm_full=False``), i.e. exactly what
    :func:`mechanisms.allocate` returns for the changed report: ``G`` is not convex in
    ``a``, and a search warm-started from the base can stay on a worse local optimum
    than the cold one (measured: a seller kept at ε ≈ 4.3 by the warm search where the
    cold one excludes it with a lower ``G``), which would pay for a rule the market
    does not run. With ``fast`` (default) a re-solve first tries the certified shortcut of
    :mod:`mechanisms.local_resolve`, with lower bounds on the grid values from the
    full solves seen so far; the full search runs whenever the certificate fails.
    """

    prob: Problem
    base: Allocation
    prior: Any
    index: int
    report: float
    solver: Solver = solve_allocation
    cache: dict[float, float] = field(default_factory=dict)
    signatures: dict[float, bytes] = field(default_factory=dict)
    fast: bool = True
    warm_full: bool = False
    profiles: dict[float, FloatArray] = field(default_factory=dict)
    points: dict[float, tuple[FloatArray, FloatArray, float]] = field(
        default_factory=dict
    )
    fast_keys: set[float] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.base.profile is not None:
            psi_c = float(self.base.virtual_costs[self.index])
            self.profiles[psi_c] = np.asarray(self.base.profile.grid_values)
        self.points[float(self.report)] = (
            self.base.w,
            self.base.weights,
            self.base.eta,
        )
        self.cache[float(self.report)] = float(self.base.epsilon_total[self.index])
        self.signatures[float(self.report)] = active_signature(self.prob, self.base)

    def epsilon(self, s: float) -> float:
        """Seller ``i``'s total guarantee ``ε_i^total`` when it reports ``s``."""
        s = float(s)
        hit = self.cache.get(s)
        if hit is not None:
            return hit
        psi = self.prob.psi.copy()
        psi[self.index] = float(np.asarray(self.prior.virtual_cost(np.array([s])))[0])
        alloc = self._solve(dataclasses.replace(self.prob, psi=psi), s)
        val = float(alloc.epsilon_total[self.index]) if alloc.success else 0.0
        self.cache[s] = val
        self.signatures[s] = active_signature(self.prob, alloc)
        return val

    def _solve(self, prob: Problem, s: float) -> Allocation:
        """The frozen rule at ``prob``: the certified shortcut of
        :mod:`mechanisms.local_resolve` when it applies, else the full search."""
        warm = self.base if self.warm_full else None
        if self.solver is not solve_allocation:
            return self.solver(prob, warm_start=warm)
        psi_i = float(prob.psi[self.index])
        if self.fast and psi_i >= self.base.virtual_costs[self.index]:
            out = local_resolve(
                prob,
                self.base,
                lower_bounds=self._lower_bounds(psi_i),
                start=self._nearest_point(s),
            )
            if out is not None:
                self.points[s] = (out.w, out.weights, out.eta)
                self.fast_keys.add(s)
                return out
        alloc = solve_allocation(prob, warm_start=warm)
        if alloc.profile is not None:
            self.profiles[psi_i] = np.asarray(alloc.profile.grid_values)
        if alloc.success:
            self.points[s] = (alloc.w, alloc.weights, alloc.eta)
        return alloc

    @property
    def n_fast(self) -> int:
        return len(self.fast_keys)

    def verify_fast(
        self, n_check: int = 3, *, points: list[float] | None = None
    ) -> float:
        """Re-solve shortcut points with the full search and keep the full values;
        return the largest ``|Δε_i|`` found (0 if none was taken by the shortcut).

        ``points`` (default: up to ``n_check`` shortcut points spread over ``s``). The
        shortcut follows the local optimum the base sits on; the full search may switch
        to another one (``G`` is not convex in ``a``), so this checks that the curve
        integrated is the rule's curve.
        """
        keys = sorted(self.fast_keys)
        if points is None:
            if not keys:
                return 0.0
            idx = np.linspace(0, len(keys) - 1, n_check).round()
            points = sorted({keys[int(j)] for j in idx})
        worst = 0.0
        for s in points:
            if s not in self.fast_keys:
                continue
            old = self.cache.pop(s)
            self.fast_keys.discard(s)
            fast, self.fast = self.fast, False
            try:
                worst = max(worst, abs(self.epsilon(s) - old))
            finally:
                self.fast = fast
        return worst

    def drop_fast(self) -> None:
        """Forget every shortcut evaluation and stop using the shortcut."""
        for s in self.fast_keys:
            self.cache.pop(s, None)
            self.signatures.pop(s, None)
            self.points.pop(s, None)
        self.fast_keys.clear()
        self.fast = False

    def _lower_bounds(self, psi_i: float) -> FloatArray | None:
        """Lower bounds on the grid values at ``Ψ_i = psi_i``: each ``P_j`` is concave
        (a minimum of affine functions of ``Ψ_i``) and non-decreasing in ``Ψ_i``, so it
        lies above the chord between the nearest fully solved ``Ψ`` on either side,
        and above its value at the nearest one below."""
        below = [p for p in self.profiles if p <= psi_i]
        above = [p for p in self.profiles if p >= psi_i]
        if not below:
            return None
        pa = max(below)
        if not above:
            return self.profiles[pa]
        pb = min(above)
        if pb == pa:
            return self.profiles[pa]
        t = (psi_i - pa) / (pb - pa)
        return (1 - t) * self.profiles[pa] + t * self.profiles[pb]

    def _nearest_point(self, s: float) -> tuple[FloatArray, FloatArray, float] | None:
        """Start for a re-solve at ``s``: the solution at the nearest evaluated report,
        or the linear inter/extrapolation in ``s`` of the two nearest (``(w, a, η)`` are
        smooth in ``s`` between kinks), kept when ``η`` stays positive."""
        if not self.points:
            return None
        near = sorted(self.points, key=lambda v: abs(v - s))[:2]
        p0 = self.points[near[0]]
        if len(near) < 2 or near[1] == near[0]:
            return p0
        p1 = self.points[near[1]]
        t = (s - near[0]) / (near[1] - near[0])
        eta = p0[2] + t * (p1[2] - p0[2])
        if not eta > 0.0:
            return p0
        w = p0[0] + t * (p1[0] - p0[0])
        a = np.maximum(p0[1] + t * (p1[1] - p0[1]), 0.0)
        return w, a, float(eta)

    def signature(self, s: float) -> bytes:
        """Active set (0: at zero, 1: free, 2: at its cap) of every seller at ``s``."""
        self.epsilon(s)
        return self.signatures[float(s)]

    def u(self, s: float) -> float:
        """``u(ε_i(s))`` — the integrand of the Myerson payment."""
        return float(utility(np.array([self.epsilon(s)]), self.prob.cfg)[0])

    @property
    def n_solves(self) -> int:
        return len(self.cache) - 1

    def monotonicity_violation(self) -> float:
        """Largest ``ε(s') − ε(s)`` over evaluated ``s < s'`` (0 for a non-increasing
        sweep): the worst upward violation of the allocation's monotonicity."""
        if len(self.cache) < 2:
            return 0.0
        s = np.array(sorted(self.cache))
        e = np.array([self.cache[v] for v in s])
        running_min = np.minimum.accumulate(e)
        return float(max(0.0, float((e[1:] - running_min[:-1]).max())))


def active_signature(prob: Problem, alloc: Allocation) -> bytes:
    """Which bound each ``a_j`` sits at. Between changes of this signature the KKT
    system is smooth in ``s``, so ``ε_i(s)`` is smooth; its kinks sit at changes."""
    a = np.asarray(alloc.weights)
    if alloc.eta <= 0:
        return bytes(a.size)
    caps = prob.caps(alloc.eta)
    status = np.where(a <= 1e-12, 0, np.where(a >= caps * (1 - 1e-9), 2, 1))
    return status.astype(np.uint8).tobytes()


def breakpoints(
    curve: SellerCurve, lo: float, hi: float, *, n_scan: int = 0, xrtol: float = 1e-3
) -> list[float]:
    """Kinks of ``ε_i`` on ``[lo, hi]`` found from the active sets of evaluated reports.

    Optionally evaluates ``n_scan`` equispaced interior points first; then every pair of
    neighbouring evaluated reports whose active sets differ is bisected down to width
    ``xrtol·(hi − lo)``. Returns both ends of every such final bracket (the kink lies
    between them), so a quadrature split there integrates smooth pieces only.
    """
    for s in np.linspace(lo, hi, n_scan + 2)[1:-1]:
        curve.epsilon(float(s))
    width = xrtol * (hi - lo)
    out: set[float] = set()
    pts = sorted(s for s in curve.cache if lo <= s <= hi)
    for a, b in itertools.pairwise(pts):
        stack = [(a, b)]
        while stack:
            x0, x1 = stack.pop()
            if curve.signature(x0) == curve.signature(x1):
                continue
            if x1 - x0 <= width:
                out.update((x0, x1))
                continue
            mid = 0.5 * (x0 + x1)
            stack += [(mid, x1), (x0, mid)]
    return sorted(out - {lo, hi})


def kkt_threshold(prob: Problem, base: Allocation) -> float | None:
    """The a-step threshold ``τ`` at the base point (``a_i = clip(S(τ − r_i), 0, h_i)``).

    ``S = ‖a‖₂/μ`` (KKT of the ``μ‖a‖₂`` term), so each seller strictly between its
    bounds gives ``τ = r_i + a_i/S``; with none, ``τ`` is the smallest ``r_i`` of the
    sellers at 0 (the most a dropping-out seller can have). ``None`` if undefined.
    """
    cfg = prob.cfg
    losses = prob.loss.value(prob.X @ base.w, prob.y)
    if cfg.mode == "strict":
        losses = np.full(prob.m, prob.strict_loss_value)
    r = losses + cfg.gamma * base.eta * prob.psi
    a = base.weights
    caps = prob.caps(base.eta)
    free = (a > 1e-12) & (a < caps * (1 - 1e-9))
    if cfg.mu > 0 and free.any():
        S = float(np.linalg.norm(a)) / cfg.mu
        return float(np.median(r[free] + a[free] / S))
    zero = a <= 1e-12
    if zero.any():
        return float(r[zero].min())
    return None


def first_order_estimate(curve: SellerCurve) -> float | None:
    """``s`` with ``ℓ_i(w) + γηΨ(s) = τ`` at the base ``(w, η, τ)`` (linear ``u``).

    Returns ``None`` when the KKT form does not apply (``γ = 0``, power ``u``, no
    threshold) or no ``s`` in the support reaches it.
    """
    prob, base, i = curve.prob, curve.base, curve.index
    cfg = prob.cfg
    if cfg.u != "linear" or cfg.gamma <= 0 or base.eta <= 0:
        return None
    tau = kkt_threshold(prob, base)
    if tau is None:
        return None
    if cfg.mode == "strict":
        loss_i = prob.strict_loss_value
    else:
        loss_i = float(
            prob.loss.value(prob.X[i : i + 1] @ base.w, prob.y[i : i + 1])[0]
        )
    target = (tau - loss_i) / (cfg.gamma * base.eta)
    return invert_virtual_cost(curve.prior, target, low=curve.report)


def invert_virtual_cost(prior: Any, target: float, *, low: float) -> float | None:
    """Smallest ``s ≥ low`` in the support with ``Ψ̄(s) ≥ target`` (bisection)."""
    psi = lambda s: float(np.asarray(prior.virtual_cost(np.array([s])))[0])  # noqa: E731
    if psi(low) >= target:
        return low
    hi = float(prior.high)
    if not np.isfinite(hi):
        hi = max(2.0 * low, low + 1.0)
        for _ in range(200):
            if psi(hi) >= target:
                break
            hi = 2.0 * hi
        else:
            return None
    elif psi(hi) < target:
        return None
    lo = low
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if psi(mid) >= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-13 * max(1.0, abs(hi)):
            break
    return hi


@dataclass(frozen=True, slots=True)
class CriticalCost:
    """Bracket ``[lo, hi]`` of the critical cost: ``ε_i(lo) > 0`` and ``ε_i(hi) = 0``
    (``hi = lo = c̄`` when the seller is never excluded on the support)."""

    lo: float
    hi: float
    estimate: float | None
    excluded_on_support: bool


def find_critical_cost(
    curve: SellerCurve, *, rtol: float = 1e-9, max_steps: int = 80
) -> CriticalCost:
    """Bracket the drop-out point from the first-order estimate, then refine it.

    Refinement: linear extrapolation to zero through the last two positive points
    (the curve is close to linear in ``Ψ`` near ``s*``), safeguarded into the middle
    80% of the bracket, else bisection. Stops when ``u(ε(lo))·(hi − lo)`` (the most the
    bracket can add to the integral) is below ``rtol`` times the integral's lower bound
    ``max_j (s_j − c)·u(ε(s_j))`` over evaluated ``s_j ≤ lo`` (valid for a
    non-increasing curve), or the bracket is at floating-point resolution.
    """
    c = curve.report
    top = float(curve.prior.high)
    if curve.epsilon(c) <= 0.0:
        return CriticalCost(c, c, None, True)
    est = first_order_estimate(curve)
    scale = max(abs(c), 1e-12)
    guess = est if est is not None and est > c else c + scale
    guess = min(guess, top)
    lo, hi = c, None
    for _ in range(max_steps):
        if curve.epsilon(guess) > 0.0:
            lo = guess
            if guess >= top:
                return CriticalCost(top, top, est, False)
            guess = min(top, c + 2.0 * (guess - c))
        else:
            hi = guess
            break
    if hi is None:
        raise RuntimeError(f"seller {curve.index}: no critical cost found")
    for _ in range(max_steps):
        if curve.u(lo) * (hi - lo) <= rtol * _integral_lower_bound(curve, lo) or not (
            lo < 0.5 * (lo + hi) < hi
        ):
            break
        mid = _next_point(curve, lo, hi)
        if curve.epsilon(mid) > 0.0:
            lo = mid
        else:
            hi = mid
    return CriticalCost(lo, hi, est, True)


def _integral_lower_bound(curve: SellerCurve, lo: float) -> float:
    """``max_j (s_j − c)·u(ε(s_j))`` over evaluated ``c < s_j ≤ lo``."""
    c = curve.report
    vals = [(s - c) * curve.u(s) for s in curve.cache if c < s <= lo]
    return max(vals, default=0.0)


def _next_point(curve: SellerCurve, lo: float, hi: float) -> float:
    """Aim just short of the secant-to-zero through the two largest positive
    evaluations below ``hi``.

    ``ε_i`` is smooth on its positive branch and reaches 0 at ``s*_i``, so the secant
    root ``z`` converges superlinearly from the left; aiming at ``lo + 0.99 (z − lo)``
    keeps the new point on the positive side, where it shrinks ``u(ε(lo))`` (the
    stopping test is ``u(ε(lo))·(hi − lo)``). Safeguarded into
    ``[lo + 0.02 w, hi − 0.02 w]`` of the bracket width ``w``; bisection without a usable
    secant.
    """
    pos = sorted(s for s, e in curve.cache.items() if e > 0.0 and s <= lo)
    mid = 0.5 * (lo + hi)
    if len(pos) < 2:
        return mid
    s0, s1 = pos[-2], pos[-1]
    e0, e1 = curve.cache[s0], curve.cache[s1]
    if e0 <= e1:
        return mid
    z = s1 + e1 * (s1 - s0) / (e0 - e1)
    if not z < hi:
        return mid
    width = hi - lo
    aim = lo + 0.99 * (z - lo)
    return float(np.clip(aim, lo + 0.02 * width, hi - 0.02 * width))


def own_status(curve: SellerCurve, s: float) -> int:
    """Seller ``i``'s own bound at report ``s``: 0 at zero, 1 free, 2 at its cap."""
    return int(curve.signature(s)[curve.index])


def cap_slack(curve: SellerCurve, s: float) -> float:
    """``h_i − a_i`` at report ``s`` (0 while seller ``i`` sits at its cap)."""
    curve.epsilon(s)
    _w, a, eta = curve.points[float(s)]
    return float(curve.prob.caps(eta)[curve.index] - a[curve.index])


def cap_exit(
    curve: SellerCurve,
    lo: float,
    hi: float,
    *,
    xrtol: float = 1e-3,
    max_steps: int = 6,
) -> float | None:
    """Where seller ``i`` leaves its cap on ``[lo, hi]`` (the curve's main kink).

    A winner at its cap ``a_i = h_i`` keeps ``ε_i ≈ h_i η`` as its report rises, until
    the KKT form ``a_i = clip(S(τ − r_i(s)), 0, h_i)`` drops below the cap; from there
    ``ε_i`` falls to 0 at ``s*_i``. The slope jumps at that point, which costs an
    adaptive rule many panels; located and passed as a breakpoint, both pieces are
    smooth. The slack ``h_i − a_i`` is smooth (nearly linear) on the free side and 0 on
    the capped side, so the secant through the two lowest free reports extrapolates to
    the exit ``z``; a report 1 % of the bracket into the free side of ``z`` confirms it
    (bisection without a usable secant). Stops when the bracket is below ``xrtol`` of
    ``[lo, hi]``: a kink misplaced by ``δ`` changes the integral by about
    ``|Δ slope|·δ²/2``, far below the quadrature tolerance. Returns the secant estimate
    of the exit (or the lowest free report), ``None`` when seller ``i`` is not capped
    at ``lo`` or not free at ``hi``.
    """
    if own_status(curve, lo) != 2 or own_status(curve, hi) != 1:
        return None
    best = hi
    for _ in range(max_steps):
        pts = sorted(s for s in curve.cache if lo <= s <= hi)
        s_cap = max(s for s in pts if own_status(curve, s) == 2)
        free = [s for s in pts if s > s_cap and own_status(curve, s) == 1]
        s_free, width = free[0], free[0] - s_cap
        best, nxt = s_free, 0.5 * (s_cap + s_free)
        if len(free) >= 2:
            g0, g1 = cap_slack(curve, free[0]), cap_slack(curve, free[1])
            if g1 > g0 > 0.0:
                z = free[0] - g0 * (free[1] - free[0]) / (g1 - g0)
                if s_cap < z < s_free:
                    best = z
                    nxt = float(
                        np.clip(
                            z + 0.01 * width,
                            s_cap + 0.02 * width,
                            s_free - 0.02 * width,
                        )
                    )
        if width <= xrtol * (hi - lo):
            break
        curve.epsilon(nxt)
    return best
