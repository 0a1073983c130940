"""The critical cost ``s*_i`` of one seller: where it drops out (spec ``mechanism.md`` §5).

The curve ``ε_i(s)`` (:class:`mechanisms.payments._resolve._seller_curve.SellerCurve`) is close to a
threshold rule: it stays near its value and drops to 0 at the critical cost ``s*_i``.
:func:`first_order_estimate` predicts ``s*_i`` from the a-step KKT conditions at the base
``(w, η)`` (paper Thm 3.3: ``a_i > 0`` iff ``r_i(s) = ℓ_i(w) + γηΨ(s) < τ``);
:func:`find_critical_cost` brackets and refines it with re-solves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._problem import Problem
from mechanisms.payments._base_memo import base_memo
from mechanisms.payments._kinks import (
    CROSSING_SHARE,
    breakpoints,
    cap_exit,
    crossing_bracket,
)
from mechanisms.payments._resolve._seller_curve import (
    SellerCurve,
    Solver,
    active_signature,
)
from mechanisms.priors import CostPrior
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]

__all__ = [
    "CriticalCost",
    "SellerCurve",
    "Solver",
    "active_signature",
    "breakpoints",
    "cap_exit",
    "find_critical_cost",
    "first_order_estimate",
    "invert_virtual_cost",
    "kkt_threshold",
]


def kkt_threshold(
    prob: Problem, base: Allocation, losses: FloatArray | None = None
) -> float | None:
    """The a-step threshold ``τ`` at the base point (``a_i = clip(S(τ − r_i), 0, h_i)``).

    ``S = ‖a‖₂/μ`` (KKT of the ``μ‖a‖₂`` term), so each seller strictly between its
    bounds gives ``τ = r_i + a_i/S``; with none, ``τ`` is the smallest ``r_i`` of the
    sellers at 0 (the most a dropping-out seller can have). ``None`` if undefined.
    ``losses``: every seller's loss at the base (:func:`_base_losses`) where the
    caller has them.
    """
    cfg = prob.cfg
    if losses is None:
        losses = _base_losses(prob, base)
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
    target = _first_order_target(curve)
    if target is None:
        return None
    return invert_virtual_cost(curve.prior, target, low=curve.report)


def predicted_to_stay(curve: SellerCurve) -> bool:
    """Whether the first-order reading keeps seller ``i`` in over the whole (bounded)
    support: ``ℓ_i(w) + γηΨ(c̄) < τ`` at the base ``(w, η, τ)``, i.e. no ``s ≤ c̄``
    reaches the threshold (:func:`first_order_estimate` is then ``None``)."""
    target = _first_order_target(curve)
    top = float(curve.prior.high)
    if target is None or not np.isfinite(top):
        return False
    return float(curve.prior.virtual_cost(top)) < target


def _first_order_target(curve: SellerCurve) -> float | None:
    """The virtual cost ``(τ − ℓ_i(w))/(γη)`` at which seller ``i`` leaves in the
    first-order reading; ``None`` where that reading does not apply."""
    prob, base, i = curve.prob, curve.base, curve.index
    cfg = prob.cfg
    if cfg.u != "linear" or cfg.gamma <= 0 or base.eta <= 0:
        return None
    tau, losses = base_memo(
        base, "kkt_threshold", prob, lambda: _threshold_and_losses(prob, base)
    )
    if tau is None:
        return None
    return float((tau - float(losses[i])) / (cfg.gamma * base.eta))


def _threshold_and_losses(
    prob: Problem, base: Allocation
) -> tuple[float | None, FloatArray]:
    """``(τ, ℓ)`` at the base: the threshold and every seller's loss from one pass
    (once per base and process; a seller's ``ℓ_i`` is then a lookup). In strict
    mode every loss is the public constant, and no pass over ``X`` is made."""
    losses = _base_losses(prob, base)
    return kkt_threshold(prob, base, losses), losses


def _base_losses(prob: Problem, base: Allocation) -> FloatArray:
    """Every seller's loss at the base: ``ℓ(Xw, y)`` at its ``w``, or in strict
    mode the public constant (no pass over ``X``)."""
    if prob.cfg.mode == "strict":
        return np.full(prob.m, prob.strict_loss_value)
    return np.asarray(prob.loss.value(prob.X @ base.w, prob.y), dtype=float)


SEARCH_POINTS = 256
""":func:`invert_virtual_cost` narrows its bracket this many times per pass."""


def invert_virtual_cost(prior: CostPrior, target: float, *, low: float) -> float | None:
    """Smallest ``s ≥ low`` in the support with ``Ψ̄(s) ≥ target``, to ``10⁻¹³``
    relative (``Ψ̄`` is non-decreasing).

    A ``SEARCH_POINTS``-ary search: each pass evaluates ``Ψ̄`` at that many points
    across the bracket in one array call (every point inside the support, so
    through :meth:`CostPrior.virtual_cost_in_support`, without validation) and keeps
    the cell where it first reaches ``target``; six passes reach the tolerance
    where bisection took some 45 scalar calls (130 µs a winner against 245 µs for
    the uniform prior)."""

    def psi(s: float) -> float:
        return float(prior.virtual_cost(float(s)))

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
    steps = np.arange(1, SEARCH_POINTS) / SEARCH_POINTS
    for _ in range(40):
        if hi - lo <= 1e-13 * max(1.0, abs(hi)):
            break
        xs = lo + (hi - lo) * steps
        reached = np.flatnonzero(prior.virtual_cost_in_support(xs) >= target)
        j = int(reached[0]) if reached.size else xs.size  # xs.size: only hi reaches
        new_lo = float(xs[j - 1]) if j > 0 else lo
        new_hi = float(xs[j]) if j < xs.size else hi
        if (new_lo, new_hi) == (lo, hi):  # no representable point inside
            break
        lo, hi = new_lo, new_hi
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
    curve: SellerCurve,
    *,
    rtol: float = 1e-9,
    max_steps: int = 80,
    secant_on_weight: bool = False,
) -> CriticalCost:
    """Bracket the drop-out point from the first-order estimate, then refine it.

    Bracketing: from a positive estimate, a probe just above it for a local slope,
    then past the secant-to-zero (:func:`_bracket_step`), at most doubling the
    distance from the report each step, until ``ε_i = 0``. Where the first-order
    reading keeps the seller in up to the top ``c̄`` of a bounded support
    (:func:`predicted_to_stay`), ``c̄`` is probed first: a seller never excluded is
    then settled by one re-solve (doubling from ``c + |c|`` took two or three more on
    Wisconsin, none of them a node the integral reuses); where the reading is wrong,
    ``[c, c̄]`` is the bracket the refinement starts from.
    Where ``ε_i`` can fall to 0 only as another report is passed
    (:meth:`SellerCurve.crossings`: a jump), the bracket is first narrowed to a pair
    around one of them (:func:`mechanisms.payments._kinks.crossing_bracket`).
    Refinement: linear extrapolation to zero through the last two positive points
    (the curve is close to linear in ``Ψ`` near ``s*``), safeguarded into the middle
    80% of the bracket, else bisection. Stops when ``u(ε(lo))·(hi − lo)`` (the most the
    bracket can add to the integral) is below ``rtol`` times the integral's lower bound
    ``max_j (s_j − c)·u(ε(s_j))`` over evaluated ``s_j ≤ lo`` (valid for a
    non-increasing curve), or the bracket is at floating-point resolution.

    ``secant_on_weight``: the secants run through seller ``i``'s weight ``a_i`` where
    both points have it (:meth:`SellerCurve.release_terms`) instead of through
    ``ε_i``. Both vanish at ``s*_i``; ``a_i`` is close to linear there, while
    ``ε_i = η·a_i + 2·ln(1 + a_i/(4λ))`` is logarithmic in it until ``a_i ≲ 4λ``, so
    at a small ``λ`` the secants through ``ε_i`` fall short of ``s*_i`` and the
    refinement only about halves ``ε(lo)`` per re-solve (measured on Wisconsin,
    ``λ = 6·10⁻⁶``: six re-solves where the weight's secant takes two). The bracket
    and its stopping test are the same.

    Before the refinement, where ``hi`` is a re-solve that keeps the a-step's
    multipliers, ``s*_i`` is read there and bracketed by a pair (:func:`_exit_pair`).
    """
    c = curve.report
    top = float(curve.prior.high)
    if curve.epsilon(c) <= 0.0:
        return CriticalCost(c, c, None, True)
    est = first_order_estimate(curve)
    scale = max(abs(c), 1e-12)
    guess = est if est is not None and est > c else c + scale
    if est is None and predicted_to_stay(curve):
        guess = top  # one re-solve where the reading holds (most winners)
    guess = min(guess, top)
    lo, hi = c, None
    paired = False
    for step in range(max_steps):
        if curve.epsilon(guess) > 0.0:
            lo = guess
            if guess >= top:
                return CriticalCost(top, top, est, False)
            if step == 0 and est is not None and guess == est:
                # a local slope at the estimate: the next point just above it
                guess = min(top, lo + SLOPE_STEP * (lo - c))
                continue
            pair = None if paired else _secant_pair(curve, lo, rtol, secant_on_weight)
            paired = True
            if pair is not None and pair[1] < top and curve.epsilon(pair[1]) <= 0.0:
                hi = pair[1]
                if curve.epsilon(pair[0]) > 0.0:
                    lo = pair[0]
                else:
                    hi = pair[0]
                break
            if pair is not None and pair[1] < top:
                lo = pair[1]  # the secant fell short: on from there
            guess = min(top, _bracket_step(curve, c, lo, secant_on_weight))
        else:
            hi = guess
            break
    if hi is None:
        raise RuntimeError(f"seller {curve.index}: no critical cost found")
    # where ε_i falls to 0 at another report (a jump): a pair around it whose
    # bracket passes the stopping test below
    if crossing_bracket(
        curve, lo, hi, lambda s: curve.epsilon(s) > 0.0,
        lambda x: 0.25 * rtol * integral_lower_bound(curve, x) / curve.u(x),
    ):  # fmt: skip
        lo, hi = _bracket_in_cache(curve, lo, hi)
    if not _settled(curve, lo, hi, rtol):
        lo, hi = _exit_pair(curve, lo, hi, rtol)
    for _ in range(MAX_JUMP_PAIRS):
        if _settled(curve, lo, hi, rtol):
            break
        pair = _jump_pair(curve, lo, hi, rtol)
        if pair == (lo, hi):
            break
        lo, hi = pair
    for _ in range(max_steps):
        if _settled(curve, lo, hi, rtol):
            break
        mid = _next_point(curve, lo, hi, secant_on_weight)
        if curve.epsilon(mid) > 0.0:
            lo = mid
        else:
            hi = mid
    return CriticalCost(lo, hi, est, True)


EXIT_ACCURACY = 1e-7
""":func:`_exit_pair` takes one report below the exit where it lies at least this far
below it, relative to its distance from the report: the exit is read from a re-solve
at its KKT tolerance (within 10⁻⁸ of the sweep of the critical cost bisected, where no
other point becomes the optimum first; ``tests/mechanisms/test_exit_pair.py``)."""


def _settled(curve: SellerCurve, lo: float, hi: float, rtol: float) -> bool:
    """:func:`find_critical_cost`'s stopping test for the bracket ``[lo, hi]``."""
    return curve.u(lo) * (hi - lo) <= rtol * integral_lower_bound(curve, lo) or not (
        lo < 0.5 * (lo + hi) < hi
    )


def _exit_pair(
    curve: SellerCurve, lo: float, hi: float, rtol: float
) -> tuple[float, float]:
    """The bracket after a pair of re-solves ``z ± δ`` around the report ``z`` where
    the seller's weight leaves 0 as read at ``hi`` (:meth:`SellerCurve.exit_psi`:
    exact unless another point becomes the optimum first, which puts ``s*_i``
    above ``z``), ``δ`` sized for the stopping test with the slope of ``u`` from
    ``lo`` to ``z`` (as :func:`_secant_pair`'s, or so that ``z − δ`` passes it
    alone); ``[lo, hi]`` itself where there is no such ``z`` inside.

    ``z + δ`` is evaluated first: where it is still positive (``s*_i`` above it) it
    becomes ``lo`` and ``z − δ`` is not evaluated. Where ``hi`` is close enough that
    one positive report ``z − δ₁`` passes the test with it, and ``δ₁`` is well above
    the exit's error (:data:`EXIT_ACCURACY`), that one report alone.

    A secant through positive reports only reaches ``s*_i`` from one side and the
    fall steepens or flattens toward it; on Wisconsin the refinement took two to
    eight re-solves after an estimate that overshot ``s*_i`` by 0.2–0.4 % of its
    distance from the report, or a bracket grown across a plateau of ``ε_i``."""
    psi = curve.exit_psi(hi)
    if psi is None:
        return lo, hi
    z = invert_virtual_cost(curve.prior, psi, low=lo)
    if z is None or not lo < z < hi:
        return lo, hi
    slope = curve.u(lo) / (z - lo)
    if not slope > 0.0:
        return lo, hi
    # the stopping test u(z − δ)·2δ ≤ rtol·I, u(z − δ) ≈ slope·δ, passes with I the
    # integral's lower bound now, or with the one z − δ adds, (z − δ − c)·u(z − δ)
    bound = integral_lower_bound(curve, lo)
    delta = max(
        0.5 * math.sqrt(rtol * bound / (2.0 * slope)),
        0.45 * rtol * (z - curve.report),
    )
    delta = min(delta, 0.5 * (z - lo), 0.5 * (hi - z))
    if not delta > 0.0:
        return lo, hi
    # one report z − δ₁ settles the bracket with hi as it is where the exit is read
    # more accurately than δ₁: slope·δ₁·(hi − z + δ₁) = ½·rtol·I
    width = hi - z
    one = 0.5 * (math.sqrt(width * width + 2.0 * rtol * bound / slope) - width)
    if EXIT_ACCURACY * (z - curve.report) <= one < z - lo:
        return _split_at(curve, lo, hi, z - one)
    return _pair_at(curve, lo, hi, z, delta, rtol)


def _split_at(
    curve: SellerCurve, lo: float, hi: float, x: float
) -> tuple[float, float]:
    """The bracket ``[lo, hi]`` after a re-solve at ``x`` inside it."""
    return (x, hi) if curve.epsilon(x) > 0.0 else (lo, x)


def _pair_at(
    curve: SellerCurve, lo: float, hi: float, z: float, delta: float, rtol: float
) -> tuple[float, float]:
    """The bracket ``[lo, hi]`` after the pair ``z ± δ`` inside it: ``z + δ`` first,
    which becomes ``lo`` where ``ε_i`` is still positive there; else ``z − δ``, unless
    ``[lo, z + δ]`` already passes the stopping test."""
    if curve.epsilon(z + delta) > 0.0:
        return z + delta, hi
    hi = z + delta
    if _settled(curve, lo, hi, rtol):
        return lo, hi
    return _split_at(curve, lo, hi, z - delta)


MAX_JUMP_PAIRS = 3
""":func:`find_critical_cost` tries at most this many :func:`_jump_pair` in a row: a
pair whose ``z + δ`` is still positive leaves ``lo`` on the next plateau of ``ε_i``
(one jump per pair: Wisconsin's curves had up to two before the fall to 0)."""


def _jump_pair(
    curve: SellerCurve, lo: float, hi: float, rtol: float
) -> tuple[float, float]:
    """The bracket after a pair of re-solves ``z ± δ`` around the report ``z`` where
    the optima at ``lo`` and ``hi`` cost the same (:meth:`SellerCurve.value_crossing`):
    where ``ε_i`` falls to 0 from a plateau (the rule switches to an optimum without
    the seller), ``s*_i = z`` exactly, and ``δ`` is sized for the stopping test as
    :func:`_exit_pair`'s (``u`` does not rise above ``u(ε(lo))`` on the bracket), where
    bisection took a re-solve per halving (some eighteen on Wisconsin). ``z + δ`` is
    evaluated first: where it is still positive (``ε_i`` fell smoothly, the crossing
    then lies below ``s*_i``) it becomes ``lo``; where ``hi`` lies within ``δ`` of
    ``z``, ``z − δ`` alone is evaluated. ``[lo, hi]`` itself where there is no
    such ``z`` inside, or where its rounding error is not within
    :data:`mechanisms.payments._kinks.CROSSING_SHARE` of ``δ``."""
    crossing = curve.value_crossing(lo, hi)
    u_lo = curve.u(lo)
    if crossing is None or not u_lo > 0.0:
        return lo, hi
    z, err = crossing
    # the stopping test u(ε(z − δ))·2δ ≤ rtol·I passes with I the integral's lower
    # bound now (u(ε(z − δ)) ≤ u(ε(lo))), or with the one z − δ adds, (z − δ − c)·u
    delta = max(
        0.45 * rtol * integral_lower_bound(curve, lo) / u_lo,
        0.45 * rtol * (z - curve.report),
    )
    delta = min(delta, 0.5 * (z - lo))
    if not (delta > 0.0 and err <= CROSSING_SHARE * delta):
        return lo, hi
    if hi - z <= delta:  # hi is near enough: one report below z settles the bracket
        return _split_at(curve, lo, hi, z - delta)
    return _pair_at(curve, lo, hi, z, delta, rtol)


def _bracket_in_cache(curve: SellerCurve, lo: float, hi: float) -> tuple[float, float]:
    """The narrowest ``[lo', hi']`` inside ``[lo, hi]`` between evaluated reports
    with ``ε_i(lo') > 0`` and ``ε_i(hi') = 0`` (``hi'`` the least such zero, ``lo'``
    the largest positive report below it)."""
    inside = [s for s in curve.cache if lo <= s <= hi]
    hi = min(s for s in inside if s > lo and curve.cache[s] <= 0.0)
    lo = max(s for s in inside if s < hi and curve.cache[s] > 0.0)
    return lo, hi


def _secant_pair(
    curve: SellerCurve, lo: float, rtol: float, on_weight: bool
) -> tuple[float, float] | None:
    """``(z − δ, z + δ)`` around the zero ``z`` of the secant through the two
    largest positive reports (:func:`_last_secant`), where it lies above ``lo``:
    ``δ = ½·√(rtol·I/(2g))`` with ``g`` the secant's slope of ``u`` and ``I`` the
    integral's lower bound, so that a bracket ``[z − δ, z + δ]`` around ``s*_i``
    passes the stopping test (``u(z − δ)·2δ ≈ 2gδ² ≤ rtol·I``). Where ``ε_i`` falls
    linearly to ``s*_i`` (the seller free, ``η`` at an end of its range) the pair is
    the whole refinement: two re-solves where a probe past the secant and two
    secant steps back took three. ``None`` without a falling secant."""
    secant = _last_secant(curve, lo, on_weight)
    if secant is None:
        return None
    s0, s1, z = secant
    if z is None:
        return None
    g = (curve.u(s0) - curve.u(s1)) / (s1 - s0)
    if not (g > 0.0 and z > lo):
        return None
    delta = 0.5 * float(np.sqrt(rtol * integral_lower_bound(curve, lo) / (2.0 * g)))
    delta = min(delta, 0.5 * (z - lo))
    if not delta > 0.0:
        return None
    return z - delta, z + delta


SLOPE_STEP = 1e-3
"""After a positive first-order estimate ``e``, :func:`find_critical_cost` probes
``e + SLOPE_STEP·(e − c)`` for a local slope (:func:`_bracket_step`)."""
OVERSHOOT = 1.25
""":func:`_bracket_step` aims this far past the secant-to-zero, in units of its
distance from ``lo``."""
FLAT_GROWTH = 4.0
""":func:`_bracket_step`'s step, in units of the last one, where the curve is flat."""


def _bracket_step(
    curve: SellerCurve, c: float, lo: float, on_weight: bool = False
) -> float:
    """The next probe above the positive point ``lo`` while no zero is known: past
    the secant-to-zero ``z`` through the two largest positive evaluations
    (``lo + OVERSHOOT·(z − lo)``; the zero of the power law through the three
    largest, :func:`_power_zero`, where it has one below that cap), at most twice
    ``lo``'s distance from ``c``. A fall that flattens toward ``s*_i`` (``ε ∝ (s* −
    s)²``) put every secant's zero short of it, and the overshoot never crossed it
    (sixty probes on a stand-in curve, six with the power law).

    Near ``s*_i`` the curve often falls steeply over a small fraction of the sweep
    (a market where many sellers leave together): doubling the distance from ``c``
    past the first-order estimate then overshoots by far, and the refinement bisected
    back (Wisconsin, strict mode: ten of seventeen re-solves). A local secant lands
    near ``s*_i``. Where the last two points are level (a plateau before the fall)
    the step grows fourfold from the last one; where the secant's root lies far above
    (the estimate far below ``s*_i``), the doubling bounds the step, as before.
    """
    far = c + 2.0 * (lo - c)
    secant = _last_secant(curve, lo, on_weight)
    if secant is None:
        return far
    s0, s1, z = secant
    if z is not None:  # a fall that flattens or steepens: the power law's zero
        z = _power_zero(curve, lo, far, on_weight) or z
    # past the zero, or where the curve is flat the last step grown
    aim = s1 + FLAT_GROWTH * (s1 - s0) if z is None else lo + OVERSHOOT * (z - lo)
    return float(aim) if lo < aim < far else far


def _last_secant(
    curve: SellerCurve, lo: float, on_weight: bool = False
) -> tuple[float, float, float | None] | None:
    """``(s₀, s₁, z)``: the two largest evaluated reports ``s₀ < s₁ ≤ lo`` with
    ``ε > 0`` and the zero ``z`` of the secant through them (``None`` where ``ε`` does
    not fall from ``s₀`` to ``s₁``); ``None`` with fewer than two such reports.
    ``on_weight``: through seller ``i``'s weight ``a_i`` where both reports have it."""
    pos = sorted(s for s, e in curve.cache.items() if e > 0.0 and s <= lo)
    if len(pos) < 2:
        return None
    s0, s1 = pos[-2], pos[-1]
    e0, e1 = _secant_values(curve, [s0, s1], on_weight)
    if not e0 - e1 > LEVEL_RTOL * e0:
        return s0, s1, None
    return s0, s1, s1 + e1 * (s1 - s0) / (e0 - e1)


def _secant_values(
    curve: SellerCurve, points: list[float], on_weight: bool
) -> list[float]:
    """``ε_i`` at the evaluated ``points``, or (``on_weight``) seller ``i``'s weight
    ``a_i`` where every one of them has a positive one
    (:meth:`SellerCurve.release_terms`)."""
    if on_weight:
        terms = [curve.release_terms(s) for s in points]
        weights = [t[1] for t in terms if t is not None and t[1] > 0.0]
        if len(weights) == len(points):
            return weights
    return [curve.cache[s] for s in points]


LEVEL_RTOL = 1e-9
""":func:`_last_secant` reads two values this close (relative) as level: re-solves stop
at a KKT tolerance, so a flat stretch of ``ε_i`` reads equal only to ~1e-11 relative,
and a secant through such a difference put its zero at ``10⁶`` times the step (a probe
at twice the distance from the report, then six bisections back: seed 5's draw 19 on
Wisconsin)."""


def integral_lower_bound(curve: SellerCurve, lo: float) -> float:
    """``max_j (s_j − c)·u(ε(s_j))`` over evaluated ``c < s_j ≤ lo``."""
    c = curve.report
    vals = [(s - c) * curve.u(s) for s in curve.cache if c < s <= lo]
    return max(vals, default=0.0)


def _next_point(
    curve: SellerCurve, lo: float, hi: float, on_weight: bool = False
) -> float:
    """Aim just short of the secant-to-zero through the two largest positive
    evaluations below ``hi``.

    ``ε_i`` is smooth on its positive branch and reaches 0 at ``s*_i``, so the secant
    root ``z`` converges superlinearly from the left; aiming at ``lo + 0.99 (z − lo)``
    keeps the new point on the positive side, where it shrinks ``u(ε(lo))`` (the
    stopping test is ``u(ε(lo))·(hi − lo)``). With three falling positive reports
    the zero is that of the power law through them (:func:`_power_zero`; ``p = 1``
    is the secant's), which a fall that steepens toward ``s*_i`` puts short of the
    secant's (past ``s*_i``) and one that flattens beyond it. Safeguarded into
    ``[lo + 0.02 w, hi − 0.02 w]`` of the bracket width ``w``; bisection without
    either.
    """
    mid = 0.5 * (lo + hi)
    z = _power_zero(curve, lo, hi, on_weight)
    if z is None:
        secant = _last_secant(curve, lo, on_weight)
        z = None if secant is None else secant[2]
    if z is None or not z < hi:
        return mid
    width = hi - lo
    aim = lo + 0.99 * (z - lo)
    return float(np.clip(aim, lo + 0.02 * width, hi - 0.02 * width))


def _power_zero(
    curve: SellerCurve, lo: float, hi: float, on_weight: bool = False
) -> float | None:
    """The zero ``z ∈ (lo, hi)`` of ``A·(z − s)^p`` (``A, p > 0``) through the three
    largest positive reports ``s₁ < s₂ < s₃ ≤ lo`` (through seller ``i``'s weight
    where all three have it, as :func:`_last_secant`), or ``None``.

    A fall that steepens toward ``s*_i`` (``p < 1``) puts every secant's zero past
    it: each secant step then lands on a zero, and the refinement halved the bracket
    every two re-solves (measured: thirteen re-solves to take ``ε(lo)`` from 70 to
    1.7 on a one-winner Wisconsin market); one that flattens (``p > 1``) puts them
    short of it. Equal exponents from the two pairs,
    ``log(e₁/e₂)·log((z − s₂)/(z − s₃)) = log(e₂/e₃)·log((z − s₁)/(z − s₂))``,
    has its left side infinite at ``z → s₃`` and the difference turns negative
    where the log-slope steepens; ``z`` by bisection (60 halvings, no re-solve).
    A linear fall gives ``p = 1`` and the secant's zero."""
    pos = sorted(s for s, e in curve.cache.items() if e > 0.0 and s <= lo)
    if len(pos) < 3:
        return None
    s1, s2, s3 = pos[-3:]
    e1, e2, e3 = _secant_values(curve, [s1, s2, s3], on_weight)
    if not (e1 > e2 > e3 > 0.0 and s3 < hi):
        return None
    r12, r23 = math.log(e1 / e2), math.log(e2 / e3)

    def excess(z: float) -> float:
        return r12 * math.log((z - s2) / (z - s3)) - r23 * math.log((z - s1) / (z - s2))

    if not excess(hi) < 0.0:
        return None  # no such zero below the known one
    a, b = s3, hi
    for _ in range(60):
        m = 0.5 * (a + b)
        if not a < m < b:
            break
        if excess(m) > 0.0:
            a = m
        else:
            b = m
    return b if s3 < b < hi else None
