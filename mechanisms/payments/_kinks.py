"""Kinks of a seller's allocation curve ``s ↦ ε_i(s)`` (spec ``mechanism.md`` §5).

``ε_i`` is smooth wherever the active set of the a-step (which sellers sit at 0, strictly
between their bounds, or at their caps) is fixed, and has a slope jump where it changes.
The biggest jump is the seller's own exit from its cap (:func:`cap_exit`); the others
come from other sellers changing status (:func:`breakpoints`). Passed to the quadrature
as breakpoints, they leave it smooth pieces to integrate.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

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
    the bracket's mean slope. Evaluating both ends costs two re-solves where
    bisection costs one per halving (about twenty per change at ``m = 10⁴``); the
    three sub-brackets it leaves are searched as before (a wrong guess only adds the
    two points; :func:`kink_brackets` halves a bracket left beside a missed probe
    before it probes there again). ``None`` without an estimate."""
    guess = curve.kink_guess(x0, x1)
    if guess is None:
        return None
    slope = abs(curve.u(x1) - curve.u(x0)) / (x1 - x0)
    half = 0.5 * width
    if slope > 0.0 and atol > 0.0:
        half = min(half, 0.5 * float(np.sqrt(atol / slope)))
    half = min(half, 0.25 * (guess - x0), 0.25 * (x1 - guess))
    p0, p1 = guess - half, guess + half
    if not x0 < p0 < p1 < x1:
        return None
    curve.epsilon(p0)
    curve.epsilon(p1)
    return p0, p1


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
