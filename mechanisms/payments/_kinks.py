"""Kinks of a seller's allocation curve ``s ↦ ε_i(s)`` (spec ``mechanism.md`` §5).

``ε_i`` is smooth wherever the active set of the a-step (which sellers sit at 0, strictly
between their bounds, or at their caps) is fixed, and has a slope jump where it changes.
The biggest jump is the seller's own exit from its cap (:func:`cap_exit`); the others
come from other sellers changing status (:func:`breakpoints`). Passed to the quadrature
as breakpoints, they leave it smooth pieces to integrate.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence

import numpy as np

from mechanisms.payments._resolve._seller_curve import SellerCurve


def breakpoints(
    curve: SellerCurve,
    lo: float,
    hi: float,
    *,
    n_scan: int = 0,
    xrtol: float = 1e-3,
    atol: float = 0.0,
) -> list[float]:
    """Both ends of every bracket of :func:`kink_brackets`, sorted, without ``lo`` and
    ``hi``."""
    found = kink_brackets(curve, lo, hi, n_scan=n_scan, xrtol=xrtol, atol=atol)
    return sorted({x for pair in found for x in pair} - {lo, hi})


def kink_brackets(
    curve: SellerCurve,
    lo: float,
    hi: float,
    *,
    n_scan: int = 0,
    xrtol: float = 1e-3,
    atol: float = 0.0,
    known: Sequence[tuple[float, float]] = (),
) -> list[tuple[float, float]]:
    """Kinks of ``ε_i`` on ``[lo, hi]`` found from the active sets of evaluated reports.

    Optionally evaluates ``n_scan`` equispaced interior points first; then every pair of
    neighbouring evaluated reports whose active sets differ is bisected down to width
    ``xrtol·(hi − lo)`` and, further, until ``|Δu|·width ≤ atol``: where the rule
    switches model or ``η`` basin, ``ε_i`` jumps, and a jump of ``J`` left inside a
    bracket of width ``δ`` can move the integral by up to ``J·δ`` (measured: a jump of
    0.09 in a bracket of ``6.5·10⁻⁴`` put a payment 3.3e-5 below the payment identity,
    against ``rtol = 1e-5``). Returns every final bracket (the kink or jump lies
    between its ends), so a quadrature split at both ends integrates smooth pieces
    only. A pair inside one of the ``known`` brackets (found by an earlier call, whose
    ends the quadrature already splits at) is not searched again.
    """
    if n_scan > 0:
        for s in np.linspace(lo, hi, n_scan + 2)[1:-1]:
            curve.epsilon(float(s))
    width = xrtol * (hi - lo)
    out: set[tuple[float, float]] = set()
    pts = sorted(s for s in curve.cache if lo <= s <= hi)
    floor = width * 2.0**-MAX_JUMP_HALVINGS
    for a, b in itertools.pairwise(pts):
        if any(k0 <= a and b <= k1 for k0, k1 in known):
            continue
        if _slight(curve, a, b, hi - lo, atol):
            continue
        # (x0, x1, may_probe): a bracket left beside a probe that missed the change
        # is halved before it is probed again. A guess just inside a bracket's end
        # otherwise leaves a bracket barely smaller, two re-solves at a time
        # (measured: a thousand probes without reaching the change).
        stack = [(a, b, True)]
        while stack:
            x0, x1, may_probe = stack.pop()
            if curve.signature(x0) == curve.signature(x1):
                continue
            mid = 0.5 * (x0 + x1)
            small = x1 - x0 <= width
            if small and (
                abs(curve.u(x1) - curve.u(x0)) * (x1 - x0) <= atol
                or x1 - x0 <= floor
                or _kink_not_jump(curve, x0, x1)
            ):
                out.add((x0, x1))
                continue
            if not x0 < mid < x1:  # below floating resolution
                out.add((x0, x1))
                continue
            probe = _probe(curve, x0, x1, width, atol) if may_probe else None
            if probe is not None:  # both ends of a narrow bracket around the guess
                p0, p1 = probe
                stack += [(p1, x1, False), (p0, p1, True), (x0, p0, False)]
                continue
            stack += [(mid, x1, True), (x0, mid, True)]
    return sorted(out)


SLIGHT_SHARE = 0.5
"""Share of a kink search's ``atol`` that the slope jumps left unlocated
(:func:`_slight`) may cost together, over a seller's sweep."""

HINGE_FACTOR = 1.0
"""A slope jump of ``Δ`` left inside a panel of width ``H`` is charged
``HINGE_FACTOR·|Δ|·H²``: six times the largest error of the quadrature's equispaced
panels on a hinge ``Δ·(x − t)₊`` (the tangent panel's ``|Δ|H²/6``; the trapezoid's
``|Δ|H²/8``, Simpson's ``|Δ|H²/24``), for the panels on scattered nodes and for the
estimate of ``Δ`` (taken at the pair's ends, the other sellers as at the base)."""


def _slight(
    curve: SellerCurve, x0: float, x1: float, width: float, atol: float
) -> bool:
    """Whether the changes of the active set between the evaluated reports ``x0 <
    x1`` may stay unlocated: each is another seller's between neighbouring
    statuses, so ``u`` only changes slope there
    (:meth:`SellerCurve.kink_slope_bound`), and what those slope jumps can cost
    inside a panel as wide as the search's range, ``HINGE_FACTOR·|Δ|·width²``,
    fits with the pairs already left in :data:`SLIGHT_SHARE` of ``atol``. At
    ``m = 10⁴`` a change of one seller among thousands moves ``ε_i``'s slope by
    ``10⁻⁸`` of itself, far below what locating it (two re-solves) could buy.
    Recorded in ``curve.slight_kinks`` (the sweep adds it to its error)."""
    if not hasattr(curve, "kink_slope_bound"):  # a curve without the estimate
        return False
    if atol <= 0.0 or curve.signature(x0) == curve.signature(x1):
        return False
    if (x0, x1) in curve.slight_kinks:
        return True
    bound = curve.kink_slope_bound(x0, x1)
    if bound is None:
        return False
    cost = HINGE_FACTOR * bound * width**2
    spent = sum(curve.slight_kinks.values())
    if not spent + cost <= SLIGHT_SHARE * atol:
        return False
    curve.slight_kinks[(x0, x1)] = cost
    return True


def _kink_not_jump(curve: SellerCurve, x0: float, x1: float) -> bool:
    """Whether ``u`` looks continuous across the bracket ``[x0, x1]``: the secant
    lines through the two nearest evaluated reports on each side (each pair sharing
    its end's signature, so on one smooth piece) cross inside it, as they do at a
    kink (a change of slope). At a jump of ``u`` the two lines run apart by the
    jump instead, and the bracket is narrowed further as before (its area
    ``|Δu|·width`` bounds what a jump left inside a panel can cost). Only for curves
    whose resolver locates kinks (:attr:`SellerCurve.locates_kinks`): the bracket
    ends there are placed around the change itself. Under the default rule the four
    reports must also lie on one model (:meth:`SellerCurve.same_model`): a switch of
    model is a jump of ``ε_i`` whatever the secants say, and is narrowed."""
    if not curve.locates_kinks:
        return False
    pts = sorted(curve.cache)
    k0, k1 = pts.index(x0), pts.index(x1)
    if k0 < 1 or k1 + 1 >= len(pts):
        return False
    xl, xr = pts[k0 - 1], pts[k1 + 1]
    if not all(curve.same_model(p, q) for p, q in ((xl, x0), (x0, x1), (x1, xr))):
        return False
    if curve.signature(xl) != curve.signature(x0) or curve.signature(xr) != (
        curve.signature(x1)
    ):
        return False
    ul, u0, u1, ur = (curve.u(x) for x in (xl, x0, x1, xr))
    left = (u0 - ul) / (x0 - xl)
    right = (ur - u1) / (xr - x1)
    # D(x) = L(x) − R(x) is linear; the lines cross inside iff D changes sign
    d0 = u0 - (u1 + right * (x0 - x1))
    d1 = (u0 + left * (x1 - x0)) - u1
    return (d0 <= 0.0 <= d1) or (d1 <= 0.0 <= d0)


def _probe(
    curve: SellerCurve, x0: float, x1: float, width: float, atol: float
) -> tuple[float, float] | None:
    """A bracket ``(p0, p1)`` inside ``(x0, x1)`` around the curve's own estimate of
    the change (:meth:`SellerCurve.kink_guess`), narrow enough to end the search if
    the change lies inside it: half-width ``δ ≤ width/2`` with ``|Δu|·2δ ≤ atol`` at
    the bracket's mean slope. Without a kink's estimate, the crossing of the two
    ends' optima (:meth:`SellerCurve.value_crossing`) is taken as a jump's, with
    ``2δ ≤ atol/|Δu|`` for the bracket's whole ``|Δu|``, where its rounding error is
    within :data:`CROSSING_SHARE` of ``δ``. Evaluating both ends costs two re-solves where
    bisection costs one per halving (about twenty per change at ``m = 10⁴``); the
    three sub-brackets it leaves are searched as before (a wrong guess only adds the
    two points; :func:`kink_brackets` halves a bracket left beside a missed probe
    before it probes there again). ``None`` without an estimate, and where one
    halving already ends the search (either half is at most ``width`` wide with
    ``|Δu|·width ≤ atol`` for the whole bracket's ``|Δu|``, which bounds each
    half's: ``u(ε_i)`` is monotone in the report): one re-solve instead of two."""
    half_width = 0.5 * (x1 - x0)
    if half_width <= width and (abs(curve.u(x1) - curve.u(x0)) * half_width <= atol):
        return None
    guess = curve.kink_guess(x0, x1)
    jump = guess is None
    err = 0.0
    if jump:
        crossing = curve.value_crossing(x0, x1)
        guess, err = crossing if crossing is not None else (None, 0.0)
    if guess is None:
        return None
    rise = abs(curve.u(x1) - curve.u(x0))
    slope = rise / (x1 - x0)
    half = 0.5 * width
    if slope > 0.0 and atol > 0.0:
        half = min(half, PROBE_SHARE * 0.5 * float(np.sqrt(atol / slope)))
        if jump:  # the whole rise at one point: |Δu|·2δ ≤ atol ends the search
            half = min(half, 0.5 * atol / rise)
    half = min(half, 0.25 * (guess - x0), 0.25 * (x1 - guess))
    if not err <= CROSSING_SHARE * half:
        return None
    p0, p1 = guess - half, guess + half
    if not x0 < p0 < p1 < x1:
        return None
    curve.epsilon(p0)
    curve.epsilon(p1)
    return p0, p1


PROBE_SHARE = 0.9
"""A kink's probe pair is this share of the widest that passes the area test at the
bracket's mean slope: the slope at the change differs from the mean, and a pair just
too wide took one more re-solve, a bisection, to pass."""


CROSSING_SHARE = 1e-3
"""A crossing of two optima's objectives (:meth:`SellerCurve.value_crossing`) places a
pair of re-solves only where its rounding error is at most this share of the pair's
half-width: the pair then brackets an exact crossing, and rounding differences between
re-solves move the reports evaluated by a negligible share of the bracket."""


MAX_JUMP_HALVINGS = 40
"""A bracket is not narrowed for a jump beyond ``2⁻⁴⁰`` of the kink search's width (a
payment sweep far up an unbounded prior can span ``10³⁰⁰``; each halving is a
re-solve)."""


JUMP_SLOPE = 8.0
"""A pair of neighbouring evaluated reports is a jump suspect when its secant slope is
this many times steeper than both neighbouring pairs'."""
JUMP_SHARE = 0.9
"""Bisection follows a suspect while one half holds this share of its change."""


def jumps(curve: SellerCurve, lo: float, hi: float, *, atol: float) -> list[float]:
    """Jumps of ``u(ε_i)`` on ``[lo, hi]`` that leave the active sets unchanged.

    Where the rule switches candidate model or ``η`` basin, ``ε_i`` can jump with every
    seller keeping its status (:func:`breakpoints` does not see it). A pair of
    neighbouring evaluated reports whose secant slope is ``JUMP_SLOPE`` times steeper
    than both neighbours' is bisected while one half holds ``JUMP_SHARE`` of the change
    (a jump: the change stays in one half; a smooth steep stretch splits it) and its
    area ``|Δu|·width`` exceeds ``atol``. Returns both ends of each final bracket.
    """
    pts = sorted(s for s in curve.cache if lo <= s <= hi)
    if len(pts) < 3:
        return []
    vals = [curve.u(s) for s in pts]
    slopes = [
        abs(v1 - v0) / (x1 - x0) if x1 > x0 else 0.0
        for (x0, v0), (x1, v1) in itertools.pairwise(zip(pts, vals, strict=True))
    ]
    out: set[float] = set()
    for k, slope in enumerate(slopes):
        near = [slopes[j] for j in (k - 1, k + 1) if 0 <= j < len(slopes)]
        if not slope > JUMP_SLOPE * max(near):
            continue
        x0, x1, u0, u1 = pts[k], pts[k + 1], vals[k], vals[k + 1]
        found = False
        floor = (x1 - x0) * 2.0**-MAX_JUMP_HALVINGS
        while abs(u1 - u0) * (x1 - x0) > atol and x1 - x0 > floor:
            mid = 0.5 * (x0 + x1)
            if not x0 < mid < x1:
                break
            um = curve.u(mid)
            left, right = abs(um - u0), abs(u1 - um)
            if max(left, right) < JUMP_SHARE * (left + right):
                break  # smooth here
            found = True
            if left >= right:
                x1, u1 = mid, um
            else:
                x0, u0 = mid, um
        if found:
            out.update((x0, x1))
    return sorted(out - {lo, hi})


def own_status(curve: SellerCurve, s: float) -> int:
    """Seller ``i``'s own bound at report ``s``: 0 at zero, 1 free, 2 at its cap."""
    return curve.own_status(s)


def cap_slack(curve: SellerCurve, s: float) -> float:
    """``h_i − a_i`` at report ``s`` (0 while seller ``i`` sits at its cap; NaN when
    the re-solve there did not succeed, which makes :func:`cap_exit` bisect)."""
    return curve.cap_slack(s)


def cap_exit(
    curve: SellerCurve,
    lo: float,
    hi: float,
    *,
    xrtol: float = 1e-3,
    max_steps: int = 6,
    atol: float = 0.0,
) -> tuple[float, float] | None:
    """Where seller ``i`` leaves its cap on ``[lo, hi]`` (the curve's main kink), as a
    bracket ``(x₀, x₁)`` of evaluated reports: capped at ``x₀``, free at ``x₁``.

    A winner at its cap ``a_i = h_i`` keeps ``ε_i ≈ h_i η`` as its report rises, until
    the KKT form ``a_i = clip(S(τ − r_i(s)), 0, h_i)`` drops below the cap; from there
    ``ε_i`` falls to 0 at ``s*_i``. The slope jumps at that point, which costs an
    adaptive rule many panels; both ends of the bracket passed as breakpoints leave
    smooth pieces (and a piece of width at most ``xrtol·(hi − lo)`` between them,
    whose trapezoid is within ``width·|Δu|/2`` of it: ``u`` is continuous at the
    exit). The slack ``h_i − a_i`` is smooth (nearly linear) on the free side and 0
    on the capped side, so the secant through the two lowest free reports
    extrapolates to the exit ``z``: the first steps (:data:`PAIR_STEPS`) evaluate a
    pair ``z ± δ``, ``2δ = xrtol·(hi − lo)``, which closes the bracket in two
    re-solves where the secant is right (a seller whose slack is linear in its
    report; the critical-cost search leaves two free reports near ``s*_i``, and a
    pair that misses leaves two next to the exit). Later steps aim 1 % of the
    bracket into the free side of ``z`` (bisection without a usable secant). Stops
    when the bracket is below ``xrtol`` of ``[lo, hi]``: a kink misplaced by ``δ``
    changes the integral by about ``|Δ slope|·δ²/2``, far below the quadrature
    tolerance. Where the weights change only as other reports are passed
    (:meth:`SellerCurve.crossings`) the exit is a jump, found first by
    :func:`crossing_bracket` with a pair of width ``atol/u(lo)`` (a jump of at most
    ``u(lo)`` inside it moves the integral by at most ``atol/2``; ``atol = 0``: the
    width ``xrtol·(hi − lo)``). Where the slack does not grow over the two lowest
    free reports (no secant: a plateau beyond a jump out of the cap, a switch of
    optimum), a pair around the crossing of the optima on either side
    (:func:`_cap_jump_pair`) is tried once first. ``None`` when seller ``i`` is not
    capped at ``lo`` or not free at ``hi``.
    """
    if own_status(curve, lo) != 2 or own_status(curve, hi) != 1:
        return None
    tol = xrtol * (hi - lo)
    pairs = PAIR_STEPS
    jumped = crossed = False
    steps = 0
    while steps < max_steps:
        s_cap, free = _exit_bracket(curve, lo, hi)
        s_free, width = free[0], free[0] - s_cap
        if width <= tol:
            break
        if not crossed:  # once: the brackets after it lie inside this one
            crossed = True
            top = curve.u(lo)
            half = 0.5 * tol
            if atol > 0.0 and top > 0.0:
                half = min(half, 0.5 * atol / top)
            if crossing_bracket(
                curve, s_cap, s_free, lambda s: own_status(curve, s) == 2,
                functools.partial(_constant, half),
            ):  # fmt: skip
                steps += 1
                continue
        z = _exit_secant(curve, free, s_cap)
        # no secant from the free side (its slack does not grow: a plateau beyond a
        # jump out of the cap): once, besides the steps, a pair at the switch of
        # optimum
        if (
            z is None
            and not jumped
            and _cap_jump_pair(curve, s_cap, s_free, tol, atol, lo)
        ):
            jumped = True
            continue
        steps += 1
        if z is not None and pairs > 0:
            pairs -= 1
            for p in (z - 0.5 * tol, z + 0.5 * tol):
                if s_cap < p < s_free:
                    curve.epsilon(p)
            continue
        nxt = 0.5 * (s_cap + s_free)
        if z is not None:
            nxt = float(
                np.clip(z + 0.01 * width, s_cap + 0.02 * width, s_free - 0.02 * width)
            )
        curve.epsilon(nxt)
    s_cap, free = _exit_bracket(curve, lo, hi)
    return s_cap, free[0]


def _cap_jump_pair(
    curve: SellerCurve,
    s_cap: float,
    s_free: float,
    tol: float,
    atol: float,
    lo: float,
) -> bool:
    """Evaluate a pair ``z ± δ`` around the crossing of the optima at ``s_cap`` and
    ``s_free`` (:meth:`SellerCurve.value_crossing`), where the seller leaves its cap
    by a jump: ``2δ ≤ tol`` and ``δ·u(lo) ≤ atol/2`` (a jump of at most ``u(lo)``
    left inside moves the integral by at most ``atol/2``, as
    :func:`crossing_bracket`'s pairs). Whether it was evaluated (a crossing inside,
    its rounding error within :data:`CROSSING_SHARE` of ``δ``)."""
    crossing = curve.value_crossing(s_cap, s_free)
    if crossing is None:
        return False
    z, err = crossing
    half = 0.5 * tol
    top = curve.u(lo)
    if atol > 0.0 and top > 0.0:
        half = min(half, 0.5 * atol / top)
    if not (err <= CROSSING_SHARE * half and s_cap < z - half < z + half < s_free):
        return False
    curve.epsilon(z - half)
    curve.epsilon(z + half)
    return True


def _constant(value: float, _x: float) -> float:
    return value


PAIR_STEPS = 2
""":func:`cap_exit` evaluates a pair around the secant's exit at most this many times
(a pair that misses leaves two free reports next to the exit, whose secant is then
nearly exact), then one report per step."""


def _exit_bracket(
    curve: SellerCurve, lo: float, hi: float
) -> tuple[float, list[float]]:
    """The highest capped evaluated report in ``[lo, hi]`` and the free ones above it,
    ascending (``lo`` capped and ``hi`` free: neither is empty)."""
    pts = sorted(s for s in curve.cache if lo <= s <= hi)
    s_cap = max(s for s in pts if own_status(curve, s) == 2)
    return s_cap, [s for s in pts if s > s_cap and own_status(curve, s) == 1]


def _exit_secant(curve: SellerCurve, free: list[float], s_cap: float) -> float | None:
    """Zero of the secant of the cap slack through the two lowest free reports, where
    it lies between the highest capped report ``s_cap`` and them; else ``None``."""
    if len(free) < 2:
        return None
    g0, g1 = cap_slack(curve, free[0]), cap_slack(curve, free[1])
    if not g1 > g0 > 0.0:
        return None
    z = free[0] - g0 * (free[1] - free[0]) / (g1 - g0)
    return float(z) if s_cap < z < free[0] else None


def crossing_bracket(
    curve: SellerCurve,
    x0: float,
    x1: float,
    side: Callable[[float], bool],
    half: Callable[[float], float],
) -> bool:
    """Evaluate reports that narrow a change of ``side`` (true at ``x0``, false at
    ``x1``) to a pair ``2·half(x₀')`` apart around another seller's report (``x₀'``
    the lower end of the bracket left by the search; no pair where that is 0), where the
    curve's weights change only as those are passed
    (:meth:`SellerCurve.crossings`): a binary search over the gaps between the
    reports in ``[x0, x1]`` (one re-solve per halving of their number, each at
    the midpoint of a gap, where no tie is possible), then the pair around the one
    report left. Bisection of a jump to the width a payment needs takes some twenty
    re-solves; this about ``log₂(n) + 2`` for ``n`` reports inside. Only evaluates:
    the caller reads its bracket from the evaluated reports, so a change that is
    not at a crossing (``η`` moving a cap) leaves a bracket only narrowed, searched
    as before. Returns whether there were crossings to search (nothing is evaluated
    without)."""
    marks = curve.crossings(x0, x1)
    if marks.size == 0:
        return False
    lo, hi = 0, int(marks.size)  # the change is at one of marks[lo:hi], if at one
    while hi - lo > 1:
        k = (lo + hi) // 2
        gap = 0.5 * (float(marks[k - 1]) + float(marks[k]))
        if not x0 < gap < x1:
            return True
        if side(gap):
            lo, x0 = k, gap
        else:
            hi, x1 = k, gap
    mark, width = float(marks[lo]), half(x0)
    for p in (mark - width, mark + width):
        if width > 0.0 and x0 < p < x1:
            side(p)
    return True
