"""Globally adaptive quadrature with a budget: Gauss–Kronrod ((7, 15) or (3, 7)) or
Simpson–Richardson (endpoints included, nested under bisection).

Used for the Myerson integral ``∫_{c_i}^{s*_i} u(ε_i(s)) ds`` (spec ``mechanism.md`` §5),
whose integrand is expensive (one allocation re-solve per node) and piecewise smooth
(kinks where another seller changes status or ``η`` changes basin). The scheme is
QUADPACK's QAG: keep a heap of sub-intervals, always bisect the one with the largest
Kronrod-minus-Gauss error estimate, stop when the summed estimate is below
``max(atol, rtol·|I|)`` or the evaluation budget is spent. Every node value is passed
through, so the caller can cache and audit them (monotonicity of the sweep).

``rule="simpson"`` uses the same heap with panels of five equispaced nodes: Simpson's
rule on the panel ``S₁`` and on its halves ``S₂``; the panel's value is the Richardson
(Boole) extrapolation ``S₂ + (S₂ − S₁)/15`` and its error estimate ``|S₂ − S₁|/15``.
Its nodes include the ends and are nested under bisection (a child reuses three of its
parent's five), so values the caller already knows at the ends (the seller's own report
and the critical cost) and at earlier panels cost nothing.
Across a kink inside a panel any such estimate can be fooled when the kink's
contributions cancel; measured over 20,000 random kinked, payment-like integrands asked
for 1e-8 (``tests/mechanisms/test_payments_numerics.py``, against
``scipy.integrate.quad``): Simpson–Richardson was off by more than 1e-6 in 11 cases (worst
2.9e-6), the (3, 7) pair in 2,058 (worst 5.6e-4) and the (7, 15) pair in 167 (worst
5.0e-5), with 3–5× the evaluations. The payments use Simpson–Richardson for both reasons.
A panel whose second differences disagree (a kink inside it, :func:`_smooth`) is
estimated without Richardson's ``/15``, so the heap splits it instead of trusting it.

A monotone integrand (``monotone=True``: the payments' ``u(ε_i(s))``, non-increasing in
the report by the allocation rule's monotonicity) has a rigorous bound where Richardson
has only an estimate: on each quarter ``[x_k, x_{k+1}]`` of a panel of width ``h`` the
integral lies between ``(h/4)·v_k`` and ``(h/4)·v_{k+1}``, so the composite trapezoid
value ``(h/8)(v₀ + 2v₁ + 2v₂ + 2v₃ + v₄)`` is within ``(h/8)·Σ|v_{k+1} − v_k|`` of it.
A panel takes that value and bound when the bound is the smaller: across a steep ramp
of ``ε_i`` (a seller leaving its cap over a 10⁻⁵ relative stretch of reports, where
Richardson needs the ramp's curvature resolved) the bound only needs the ramp's width
times its drop to be small. The pieces between the given cuts start from their ends
alone (trapezoid, bound ``(b − a)|f(b) − f(a)|/2``: a flat piece costs nothing), and a
piece whose change sits in one half is halved at one evaluation per step until the
ramp fills it (:data:`RAMP_SHARE`); a piece whose midpoint lies so near the chord that
the trapezoid's three-node error estimate is within the tolerance is taken as
Simpson's value on its ends and midpoint with that estimate as its error
(:func:`_flat_panel`); else five-node panels as above. Where the
caller knows the slope at a piece's left end (``tangent``), the piece is first tried
from its ends and that slope (:func:`_tangent_panel`), before its midpoint is
evaluated. Where the caller has already evaluated points inside a piece (``known``:
a payment sweep's critical-cost search), the piece is first tried from its ends and
three of them (:func:`_scattered_panel`: the quartic through the five, checked
against the cubics that leave one inner point out), and again with its midpoint
once that is evaluated.

An integrand of the release's form (``curvature_split``: spec ``mechanism.md`` §3, eq.
(3.1)), ``f(s) = p(s) + 2·ln(1 + a(s)/κ)`` with ``p = η·a_i`` and ``a = a_i`` smooth
where ``f`` is and ``κ = 4λ``, is not itself smooth on the scale of the sweep where
``λ`` is small: as seller ``i``'s weight falls to 0 at its critical cost the logarithm
turns from ``ln(a/κ)`` into ``a/κ`` over a stretch of reports ``κ/|a'|`` wide, 10⁻⁵ of
the sweep or less, and Simpson's panels bisect down to it (30–60 re-solves a seller
measured on Wisconsin at ``λ = 6·10⁻⁶``, against 3–5 where ``λ`` is large). There a
panel can also be valued through the smooth parts (:func:`_curvature_panel`): the
interpolants of ``p`` and ``a`` through its nodes, the logarithm applied to the
interpolant of ``a`` exactly (a graded Gauss rule, no further evaluations). The
interpolation error in ``a`` enters ``ln(1 + a/κ)`` damped by ``1/(κ + a)``, so that
value needs as many nodes as ``p`` and ``a`` do. A panel takes it where its estimate
(five nodes against three) is the smaller of the two.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# Kronrod 15-point nodes on [-1, 1] (non-negative half) and weights; the Gauss 7-point
# rule uses the odd-indexed Kronrod nodes (QUADPACK qk15).
_XK = np.array(
    [
        0.991455371120812639206854697526329,
        0.949107912342758524526189684047851,
        0.864864423359769072789712788640926,
        0.741531185599394439863864773280788,
        0.586087235467691130294144845693013,
        0.405845151377397166906606412076961,
        0.207784955007898467600689403773245,
        0.000000000000000000000000000000000,
    ]
)
_WK = np.array(
    [
        0.022935322010529224963732008058970,
        0.063092092629978553290700663189204,
        0.104790010322250183839876322541518,
        0.140653259715525918745189590510238,
        0.169004726639267902826583426598550,
        0.190350578064785409913256402421014,
        0.204432940075298892414161999234649,
        0.209482141084727828012999174891714,
    ]
)
_WG = np.array(
    [
        0.129484966168869693270611432679082,
        0.279705391489276667901467771423780,
        0.381830050505118944950369775488975,
        0.417959183673469387755102040816327,
    ]
)
_NODES = np.concatenate([-_XK[:-1], _XK[::-1]])  # 15 nodes, ascending
_WEIGHTS_K = np.concatenate([_WK[:-1], _WK[::-1]])
_WEIGHTS_G = np.zeros(15)
_WEIGHTS_G[[1, 3, 5]] = _WG[:3]
_WEIGHTS_G[[13, 11, 9]] = _WG[:3]
_WEIGHTS_G[7] = _WG[3]


# The (3, 7) pair: Kronrod 7 nodes and weights, Gauss 3 on the odd-indexed nodes.
_NODES7 = np.array(
    [
        -0.960491268708020283423507092629080,
        -0.774596669241483377035853079956480,
        -0.434243749346802558002071502844628,
        0.0,
        0.434243749346802558002071502844628,
        0.774596669241483377035853079956480,
        0.960491268708020283423507092629080,
    ]
)
_WEIGHTS_K7 = np.array(
    [
        0.104656226026467265193823857192073,
        0.268488089868333440728569280666710,
        0.401397414775962222905051818618432,
        0.450916538658474142345110087045571,
        0.401397414775962222905051818618432,
        0.268488089868333440728569280666710,
        0.104656226026467265193823857192073,
    ]
)
_WEIGHTS_G3 = np.array([0.0, 5 / 9, 0.0, 8 / 9, 0.0, 5 / 9, 0.0])
RULES = {
    "gk15": (_NODES, _WEIGHTS_K, _WEIGHTS_G),
    "gk7": (_NODES7, _WEIGHTS_K7, _WEIGHTS_G3),
}


# Gauss–Legendre 8-point rule on [0, 1], for the logarithm of the release's
# curvature term on interpolated weights (:func:`_curvature_integral`).
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)
_GL_T = 0.5 * (_GL_X + 1.0)
_GL_W01 = 0.5 * _GL_W
MAX_GRADING = 60
"""Most halvings toward a panel's end in :func:`_curvature_integral`."""

CurvatureSplit = Callable[[float], tuple[float, float] | None]
"""``s ↦ (p, a)`` with ``f(s) = p + 2·ln(1 + a/κ)``, or ``None`` where not known."""

Tangent = Callable[[float, float], float | None]
"""``(lo, hi) ↦ f'(lo)`` for the piece ``[lo, hi]``, or ``None`` where not known."""


@dataclass(frozen=True, slots=True)
class QuadratureResult:
    """``value`` of the integral, its error ``estimate``, the number of integrand
    evaluations, whether the tolerance was met, and the final sub-interval count."""

    value: float
    error: float
    n_evals: int
    converged: bool
    n_intervals: int


def _panel(
    f: Callable[[float], float], a: float, b: float, rule: str
) -> tuple[float, float]:
    """Kronrod estimate on ``[a, b]`` and ``|K − G|`` as its error bound."""
    nodes, wk, wg = RULES[rule]
    half, mid = 0.5 * (b - a), 0.5 * (a + b)
    vals = np.array([f(float(mid + half * x)) for x in nodes])
    k = half * float(wk @ vals)
    g = half * float(wg @ vals)
    return k, abs(k - g)


def integrate(
    f: Callable[[float], float],
    a: float,
    b: float,
    *,
    breakpoints: Sequence[float] = (),
    rtol: float = 1e-7,
    atol: float = 0.0,
    max_evals: int = 600,
    rule: str = "gk15",
    monotone: bool = False,
    curvature_split: CurvatureSplit | None = None,
    curvature_scale: float = 0.0,
    tangent: Tangent | None = None,
    known: Known | None = None,
) -> QuadratureResult:
    """Adaptive Gauss–Kronrod integral of ``f`` over ``[a, b]``.

    Parameters
    ----------
    f : callable
        The integrand ``s ↦ f(s)`` (scalar).
    a, b : float
        Finite limits; ``b < a`` integrates the reversed interval with a minus sign.
    breakpoints : sequence of float
        Known kinks inside ``(a, b)``: the initial partition starts there.
    rtol, atol : float
        Stop when the summed error estimate is ``≤ max(atol, rtol·|I|)``.
    max_evals : int
        Evaluation budget (15 or 7 per sub-interval); the result then reports
        ``converged=False`` with its error estimate.
    rule : {"gk15", "gk7", "simpson"}
        The (7, 15) pair (exact to degree 22), the (3, 7) pair (degree 10), or
        Simpson–Richardson panels (degree 5, ends included and nested: the fewest
        new evaluations for the nearly linear, piecewise smooth payment integrands,
        whose end values the caller has cached).
    monotone : bool
        ``f`` is monotone on ``[a, b]`` (``rule="simpson"`` only): a panel may then
        take its composite trapezoid value with the bound ``h·Σ|Δv|/8`` (module
        docstring) where that is below its Richardson estimate.
    curvature_split : callable, optional
        ``rule="simpson"`` only: ``s ↦ (p, a)`` with ``f(s) = p + 2·ln(1 + a/κ)``
        (``None`` where not known), ``p`` and ``a`` smooth where ``f`` is; a panel may
        then take the value of :func:`_curvature_panel` where its estimate is the
        smaller (module docstring). Nodes whose parts do not reproduce ``f`` are not
        split.
    curvature_scale : float
        ``κ > 0`` of ``curvature_split``.
    tangent : callable, optional
        ``monotone`` Simpson only: ``(lo, hi) ↦ f'(lo)`` for a piece ``[lo, hi]``
        where the caller knows that slope without evaluating ``f`` (``None``
        elsewhere); such a piece may then be taken from its ends and that slope
        alone (:func:`_tangent_panel`) instead of its midpoint.
    known : callable, optional
        ``monotone`` Simpson only: ``(lo, hi) ↦`` the points inside ``(lo, hi)``
        where ``f`` is already known (evaluating it there costs nothing); a piece
        between the given cuts may then be taken from its ends and those points
        (:func:`_scattered_panel`) before any new evaluation.
    """
    if rule not in (*RULES, "simpson"):
        raise ValueError(
            f"rule must be one of {sorted((*RULES, 'simpson'))}, got {rule!r}"
        )
    if not (np.isfinite(a) and np.isfinite(b)):
        raise ValueError(f"integrate: limits must be finite, got a={a!r}, b={b!r}")
    if curvature_split is not None and not (
        rule == "simpson" and curvature_scale > 0.0 and math.isfinite(curvature_scale)
    ):
        raise ValueError(
            "curvature_split needs rule='simpson' and a finite curvature_scale > 0, "
            f"got rule={rule!r}, curvature_scale={curvature_scale!r}"
        )
    if b == a:
        return QuadratureResult(0.0, 0.0, 0, True, 0)
    if b < a:
        r = integrate(
            f,
            b,
            a,
            breakpoints=breakpoints,
            rtol=rtol,
            atol=atol,
            max_evals=max_evals,
            rule=rule,
            monotone=monotone,
            curvature_split=curvature_split,
            curvature_scale=curvature_scale,
            tangent=tangent,
            known=known,
        )
        return QuadratureResult(
            -r.value, r.error, r.n_evals, r.converged, r.n_intervals
        )
    cuts = sorted({a, b, *(float(p) for p in breakpoints if a < p < b)})
    if rule == "simpson":
        return _simpson(
            f,
            cuts,
            rtol=rtol,
            atol=atol,
            max_evals=max_evals,
            monotone=monotone,
            curvature_split=curvature_split,
            curvature_scale=curvature_scale,
            tangent=tangent,
            known=known,
        )
    n_node = RULES[rule][0].size
    heap: list[tuple[float, float, float, float]] = []  # (-err, lo, hi, value)
    n_evals = 0
    for lo, hi in itertools.pairwise(cuts):
        val, err = _panel(f, lo, hi, rule)
        n_evals += n_node
        heapq.heappush(heap, (-err, lo, hi, val))
    while True:
        total = sum(item[3] for item in heap)
        err_sum = sum(-item[0] for item in heap)
        if err_sum <= max(atol, rtol * abs(total)):
            return QuadratureResult(total, err_sum, n_evals, True, len(heap))
        if n_evals + 2 * n_node > max_evals:
            return QuadratureResult(total, err_sum, n_evals, False, len(heap))
        _, lo, hi, _ = heapq.heappop(heap)
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:  # interval at floating-point resolution
            return QuadratureResult(total, err_sum, n_evals, False, len(heap) + 1)
        for x0, x1 in ((lo, mid), (mid, hi)):
            val, err = _panel(f, x0, x1, rule)
            heapq.heappush(heap, (-err, x0, x1, val))
        n_evals += 2 * n_node


RAMP_SHARE = 0.1
"""A monotone piece whose halves differ this much (the smaller half's change at most
this share of the piece's) is split at its midpoint instead of given five nodes."""


FLAT_SHARE = 1.0
"""A monotone piece is taken from its ends and midpoint alone (:func:`_flat_panel`)
when that estimate is at most this share of the tolerance: all of it, as a
Gauss–Kronrod pair's difference (the Gauss rule's error) is taken at the full
tolerance as the Kronrod rule's error estimate. On 11 random Wisconsin markets (every
seller, ``rtol = 10⁻⁵``) the payments so computed were within ``10⁻⁷`` relative of
those at ``rtol = 10⁻⁸`` on every market, as with a sixteenth of the tolerance, whose
five-node panels cost up to 46 % more re-solves (``benchmarks/RESULTS.md``)."""


def _flat_panel(
    h: float, f0: float, f1: float, f2: float, rtol: float
) -> tuple[float, float] | None:
    """Simpson's value on three equispaced nodes and ``|T₂ − T₁|/3`` as its error,
    where that is at most ``FLAT_SHARE·rtol`` of the value; else ``None``.

    ``|T₂ − T₁|/3 = (h/12)|f₀ − 2f₁ + f₂|`` is Richardson's estimate of the error
    of the two-panel trapezoid ``T₂``; for a smooth ``f`` Simpson's error is smaller
    by a factor ``O(h²)``, so as Simpson's estimate it is conservative (the lower
    order rule's error standing for the higher's, as in a Gauss–Kronrod pair). A payment
    curve is often this flat: where a small average-``ε`` cap holds ``η`` at the
    top of its range, ``ε_i`` changes by 10⁻⁴ relative over the whole sweep and
    Simpson's three nodes gave the five-node integral to 10⁻⁹ or better
    (``benchmarks/RESULTS.md``); the five-node panel's two extra re-solves only
    confirmed it. Three nodes cannot test smoothness (:func:`_smooth`): steps
    hidden between them with the midpoint on the chord fool the estimate. On the
    payment curves the kinks (active-set changes) and jumps are located between
    the evaluated reports after every pass and split at
    (``mechanisms.payments._seller_payment._integral``); a curve with such steps
    and no active-set change is where this can err."""
    s1 = h / 6.0 * (f0 + 4.0 * f1 + f2)
    est = h / 12.0 * abs(f0 - 2.0 * f1 + f2)
    if est <= FLAT_SHARE * rtol * abs(s1):
        return s1, est
    return None


TANGENT_SHARE = 1.0 / 16.0
"""A piece is taken from its ends and the slope at one end (:func:`_tangent_panel`)
only where that estimate is at most this share of the tolerance. The estimate is the
parabola's curvature, and a curve whose curvature changes sign inside the piece
departs from a parabola of little curvature: for ``f = β(x³ − ahx²)`` on ``[0, h]``
the parabola's error is ``βh⁴/12`` whatever ``a``, its estimate ``|1 − a|·βh⁴/6``.
At ``m = 10⁴`` a seller's ``ε_i`` between the other sellers' status changes is close
to such a cubic: at the full tolerance 9 of 111 winners were paid ``1.2·10⁻⁵`` off
their brute-force integrals (seed 1 draw 17 of ``benchmarks/random_configs.py``), at
a sixteenth the worst was ``2.5·10⁻⁹`` (those pieces take their midpoint: Simpson's
rule, exact on cubics). A sixteenth narrows the blind spot (``|1 − a| < 1/32`` of
the bend is still missed) without removing it; where it matters the slope at the far
end would (a Hermite panel)."""


def _tangent_panel(
    h: float, f0: float, f1: float, d0: float, rtol: float
) -> tuple[float, float] | None:
    """The integral over ``[x₀, x₀ + h]`` of the parabola through ``f₀``, ``f₁`` at
    the ends with slope ``d₀`` at ``x₀``, and ``(h/6)|f₁ − f₀ − d₀h|`` as its error,
    where that is at most ``TANGENT_SHARE·rtol`` of the value; else ``None``.

    The parabola ``q(x) = f₀ + d₀x + κx²``, ``κ = (f₁ − f₀ − d₀h)/h²``, has
    ``∫q = T − κh³/6`` with ``T = h(f₀ + f₁)/2`` the trapezoid; ``|κ|h³/6``, the
    trapezoid's error for ``q``, is the estimate (for a smooth ``f`` of nearly
    constant curvature the parabola's own error is smaller by a factor ``O(h)``; a
    curvature that changes sign inside the piece hides from it, hence the smaller
    share, :data:`TANGENT_SHARE`). It is :func:`_flat_panel` with the slope at one end in
    place of the value at the midpoint, and sees what that rule sees: the curve's
    departure from the line through its ends, here as the end value's departure
    from the tangent. A payment sweep's first piece gets the slope at the seller's
    own report from the base allocation without a re-solve
    (:mod:`mechanisms.payments._resolve._report_slope`), where a flat curve
    otherwise pays one re-solve at the midpoint to confirm a line (``ε_i`` falling
    by ``2·10⁻⁴`` of itself over the sweep with a second difference of ``10⁻¹⁴``,
    ``benchmarks/RESULTS.md``). The same caveat as :func:`_flat_panel`'s: a step or
    kink hidden inside the piece whose effects cancel at the far end fools it; the
    sweep locates the kinks (active-set changes) between its evaluated reports and
    splits there, and the slope is given only where ``η`` is at the same end of its
    range at both ends of the piece."""
    kappa_h3 = h * (f1 - f0 - d0 * h)  # κh³
    value = 0.5 * h * (f0 + f1) - kappa_h3 / 6.0
    est = abs(kappa_h3) / 6.0
    if math.isfinite(value) and est <= TANGENT_SHARE * rtol * abs(value):
        return value, est
    return None


Known = Callable[[float, float], Sequence[float]]
"""``(lo, hi) ↦`` points inside ``(lo, hi)`` where the integrand is already known."""

SCATTER_NODES = 5
""":func:`_scattered_panel` fits this many points (the ends and three inside)."""
SCATTER_SPACING = 1.0 / 64.0
"""... no two of them closer than this share of the piece (the interpolant's
conditioning)."""


def _scattered_panel(
    lo: float,
    hi: float,
    inside: Sequence[float],
    val: Callable[[float], float],
    rtol: float,
    split: Parts | None = None,
) -> tuple[float, float] | None:
    """A piece taken from points already evaluated inside it: the integral of the
    quartic through its ends and three of ``inside`` (spread: each at least
    :data:`SCATTER_SPACING` of the piece from the others), and as its error the
    largest change of that integral when one inner point is left out (the cubic
    through the other four): ``(value, estimate)`` where the estimate is at most
    ``FLAT_SHARE·rtol`` of the value, else ``None``.

    A payment sweep evaluates reports for other ends before the quadrature runs
    (the critical-cost search brackets ``s*_i`` from the report up, often through
    the middle of the first piece), and a piece between the given cuts otherwise
    starts from its ends alone, evaluating midpoints that sit next to those
    reports. Like Simpson's estimate, and a Gauss–Kronrod pair's, it compares two
    rules of neighbouring degree on the same smooth piece, the lower one's error
    standing for the higher's; where the piece bends more than a quartic follows
    (a kink inside, a bend of the curvature term), the five- and four-point
    integrals differ and the piece is refined as before. The kinks (active-set
    changes) between the evaluated reports are located after every pass, as for
    every panel."""
    width = hi - lo
    picked = _spread(lo, hi, inside)
    if len(picked) < SCATTER_NODES - 2:
        return None
    if len(picked) > SCATTER_NODES - 2:  # the three nearest the quarter points
        near = {_nearest(picked, lo + q * width) for q in (0.25, 0.5, 0.75)}
        if len(near) < SCATTER_NODES - 2:
            return None
        picked = sorted(near)
    xs = [lo, *picked, hi]
    t = np.array([(x - lo) / width for x in xs])
    v = np.array([val(x) for x in xs])
    rules = _left_out_bases(t, _GL4_T) @ _GL4_W  # the quartic's, then the cubics'
    full, parts = width * float(rules[0] @ v), width * (rules[1:] @ v)
    spread = float(np.max(np.abs(parts - full)))
    if split is not None and not spread <= FLAT_SHARE * rtol * abs(full):
        mapped = split(xs, list(v))
        if mapped is not None:
            full, spread = _scattered_split(t, width, *mapped)
    if math.isfinite(full) and spread <= FLAT_SHARE * rtol * abs(full):
        return full, spread
    return None


Parts = Callable[
    [Sequence[float], Sequence[float]],
    tuple[Sequence[float], Sequence[float], float] | None,
]
"""``(xs, values) ↦ (p, a, κ)``: the parts of the curvature split at ``xs`` where
every node has them (:func:`_curvature_panel`), else ``None``."""


def _scattered_split(
    t: np.ndarray, width: float, p: Sequence[float], a: Sequence[float], kappa: float
) -> tuple[float, float]:
    """:func:`_scattered_panel` through the parts of ``f = p + 2·ln(1 + a/κ)``: ``p``'s
    quartic interpolant at the nodes ``t`` (in ``[0, 1]``) plus the logarithm on
    ``a``'s (:func:`_curvature_integral`'s graded rule), and as the error the largest
    change when one inner node is left out (as :func:`_curvature_panel`'s smooth case:
    near ``a = 0`` the logarithm of ``a``'s interpolant is far more accurate than an
    interpolant of ``f``)."""
    gt, gw = _graded_points(*_grading(a, kappa))
    bases = _left_out_bases(t, gt)  # (1 + inner) × nodes × points
    logs = 2.0 * np.log1p(np.maximum(np.einsum("j,rjg->rg", a, bases), 0.0) / kappa)
    rules = width * (np.einsum("j,rjg->rg", p, bases) + logs) @ gw
    return float(rules[0]), float(np.max(np.abs(rules[1:] - rules[0])))


def _left_out_bases(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The Lagrange bases at the points ``x`` of the nodes ``t`` (ends first and last)
    and of each set that leaves out one inner node: ``out[0, j] = ℓ_j(x)``, and
    ``out[r, j]`` the basis of node ``j`` without inner node ``k = r`` (0 for
    ``j = k``), ``ℓ_j(x)·(t_j − t_k)/(x − t_k)``, with the product taken directly
    where ``x`` is at a node."""
    n = t.size
    full = _lagrange_basis(list(t), x)
    out = np.zeros((n - 1, n, x.size))
    out[0] = full
    for k in range(1, n - 1):
        keep = np.arange(n) != k
        gap = x - t[k]
        if np.all(np.abs(gap) > 1e-9):
            out[k, keep] = full[keep] * ((t[keep] - t[k])[:, None] / gap[None, :])
        else:
            out[k, keep] = _lagrange_basis(list(t[keep]), x)
    return out


_GL4_T = 0.5 * (np.polynomial.legendre.leggauss(4)[0] + 1.0)
_GL4_W = 0.5 * np.polynomial.legendre.leggauss(4)[1]
"""Gauss–Legendre on ``[0, 1]`` exact to degree 7, its points away from a panel's
quarters and midpoint (three points would put one at ``1/2``, a node where
:func:`_left_out_bases` cannot divide): the quartic and cubic rules of
:func:`_scattered_panel` as integrals of their Lagrange bases."""


@functools.lru_cache(maxsize=2 * (MAX_GRADING + 1))
def _graded_points(levels: int, toward_end: bool) -> tuple[np.ndarray, np.ndarray]:
    """The points and weights of :func:`_graded_rule` (no basis)."""
    edges = np.concatenate(([0.0], 2.0 ** -np.arange(levels, -1, -1.0)))
    width = np.diff(edges)
    t = (edges[:-1, None] + width[:, None] * _GL_T[None, :]).ravel()
    weights = (width[:, None] * _GL_W01[None, :]).ravel()
    if toward_end:
        t = 1.0 - t
    t.flags.writeable = False
    weights.flags.writeable = False
    return t, weights


def _third_node(
    lo: float, hi: float, inside: Sequence[float], *, with_mid: bool = False
) -> float | None:
    """The node of ``[lo, hi]`` (:func:`_nodes`: a quarter, or with ``with_mid`` also
    the midpoint) that makes a third inner point for :func:`_scattered_panel` where
    ``inside`` spreads to exactly two (the one farthest from them), else ``None``.
    A coarse piece that knows two reports inside would otherwise take its midpoint
    and then the five-node panel's quarters, often next to them (a critical-cost
    search that bisected down from the top of the support leaves reports at about
    a half and three quarters of the first piece); the quartic through the three
    needs one node, and where it is not accepted the panel uses that one again (the
    quadrature memoises its nodes)."""
    picked = _spread(lo, hi, inside)
    if len(picked) != SCATTER_NODES - 3:
        return None
    gap = SCATTER_SPACING * (hi - lo)
    _, q1, mid, q3, _ = _nodes(lo, hi)
    candidates = (q1, mid, q3) if with_mid else (q1, q3)
    fits = [q for q in candidates if min(abs(q - x) for x in picked) >= gap]
    if not fits:
        return None
    return max(fits, key=lambda q: min(abs(q - x) for x in picked))


def _spread(lo: float, hi: float, inside: Sequence[float]) -> list[float]:
    """The points of ``inside`` that :func:`_scattered_panel` may use, in order: at
    least :data:`SCATTER_SPACING` of the piece from its ends and from each other."""
    gap = SCATTER_SPACING * (hi - lo)
    picked: list[float] = []
    for x in sorted(inside):
        if lo + gap <= x <= hi - gap and (not picked or x - picked[-1] >= gap):
            picked.append(x)
    return picked


def _nearest(points: Sequence[float], target: float) -> float:
    return min(points, key=lambda x: abs(x - target))


def _interpolatory_weights(t: np.ndarray) -> np.ndarray:
    """Weights ``w`` with ``Σ w_k p(t_k) = ∫₀¹ p`` for every polynomial ``p`` of
    degree below ``len(t)`` (distinct nodes in ``[0, 1]``): ``Vᵀw = (1/(j+1))_j``
    with ``V`` the Vandermonde matrix in ``2t − 1`` (nodes in ``[−1, 1]``)."""
    n = t.size
    z = 2.0 * t - 1.0
    V = np.vander(z, n, increasing=True)
    j = np.arange(n)
    moments = np.where(j % 2 == 0, 1.0 / (j + 1.0), 0.0)  # ∫₀¹ (2t − 1)^j dt
    return np.asarray(np.linalg.solve(V.T, moments), dtype=float)


def _lagrange_basis(t_nodes: Sequence[float], t: np.ndarray) -> np.ndarray:
    """``L[k, j] = ℓ_k(t_j)``: the Lagrange basis of ``t_nodes`` at the points ``t``
    (each ``ℓ_k`` as the product over the other nodes, in one array operation)."""
    nodes = np.asarray(t_nodes, dtype=float)
    n = nodes.size
    other = ~np.eye(n, dtype=bool)  # other[k, m]: m ≠ k
    gaps = np.where(other, nodes[:, None] - nodes[None, :], 1.0)
    factors = np.where(
        other[:, :, None],
        np.asarray(t, dtype=float)[None, None, :] - nodes[None, :, None],
        1.0,
    )
    out: np.ndarray = factors.prod(axis=1) / gaps.prod(axis=1)[:, None]
    return out


@functools.lru_cache(maxsize=16 * (MAX_GRADING + 1))
def _graded_rule(
    nodes: tuple[float, ...], levels: int, toward_end: bool
) -> tuple[np.ndarray, ...]:
    """``(basis, weights)`` of :func:`_curvature_integral`'s graded Gauss rule on
    ``[0, 1]`` (``levels`` halvings toward ``t = 0``, or ``t = 1`` if ``toward_end``),
    the basis that of the interpolation nodes ``nodes`` (in ``[0, 1]``) at its
    points."""
    t, weights = _graded_points(levels, toward_end)
    basis = _lagrange_basis(list(nodes), t)
    basis.flags.writeable = False
    return basis, weights


def _curvature_integral(
    a_nodes: Sequence[float], kappa: float, t_nodes: tuple[float, ...] | None = None
) -> float:
    """``∫₀¹ 2·ln(1 + A(t)/κ) dt``, ``A`` the polynomial interpolant of ``a`` at
    the nodes ``t_nodes`` in ``[0, 1]`` (default equispaced, ``t_k = k/n``: a panel's
    nodes by halving, :func:`_nodes`, are these to rounding), clipped at 0 (a weight
    is never negative); the first and last node are the ends.

    ``A`` near 0 puts the logarithm's singularity at ``A = −κ`` close to the panel's
    end, so one Gauss rule over ``[0, 1]`` would converge slowly. The rule is graded
    toward the end where ``|a|`` is smaller: 8-point Gauss–Legendre on ``[0, 2^−K]``,
    ``[2^−K, 2^{1−K}]``, …, ``[1/2, 1]`` with ``2^K ≥ (max|a| + κ)/(min end |a| + κ)``,
    so on each piece ``A`` changes by at most about its distance to the singularity and
    the rule's error is ~10⁻¹² relative."""
    levels, toward_end = _grading(a_nodes, kappa)
    if t_nodes is None:  # a panel's equispaced nodes: the basis is cached
        equispaced = tuple(np.linspace(0.0, 1.0, len(a_nodes)).tolist())
        basis, weights = _graded_rule(equispaced, levels, toward_end)
    else:
        points, weights = _graded_points(levels, toward_end)
        basis = _lagrange_basis(list(t_nodes), points)
    A = np.asarray(a_nodes, dtype=float) @ basis
    return float(weights @ (2.0 * np.log1p(np.maximum(A, 0.0) / kappa)))


def _grading(a_nodes: Sequence[float], kappa: float) -> tuple[int, bool]:
    """:func:`_curvature_integral`'s halvings ``K`` and whether they grade toward the
    panel's far end."""
    big = max(abs(v) for v in a_nodes) + kappa
    small = min(abs(a_nodes[0]), abs(a_nodes[-1])) + kappa
    levels = min(MAX_GRADING, max(0, math.ceil(math.log2(big / small)) + 1))
    return levels, abs(a_nodes[-1]) < abs(a_nodes[0])


@functools.lru_cache(maxsize=4 * (MAX_GRADING + 1))
def _left_out_rules(
    levels: int, toward_end: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three cubic rules of a five-node panel that each leave out one inner node,
    as matrices over the five values: ``P`` (3 × 5) the interpolatory weights for
    ``p`` (0 at the node left out), ``B`` (5 × 3N) the cubic interpolation bases of
    ``a`` at the graded rule's ``N`` points (:func:`_graded_rule`, one block per rule)
    and ``W`` (3N) its weights, so that ``P p`` and the block sums of
    ``W·2·ln(1 + max(aB, 0)/κ)`` are the three rules' parts."""
    t5 = (0.0, 0.25, 0.5, 0.75, 1.0)
    P = np.zeros((3, 5))
    blocks, weights = [], []
    for row, k in enumerate((1, 2, 3)):
        keep = [j for j in range(5) if j != k]
        nodes = tuple(t5[j] for j in keep)
        P[row, keep] = _interpolatory_weights(np.array(nodes))
        basis, w = _graded_rule(nodes, levels, toward_end)
        block = np.zeros((5, basis.shape[1]))
        block[keep] = basis
        blocks.append(block)
        weights.append(w)
    B, W = np.hstack(blocks), np.concatenate(weights)
    for arr in (P, B, W):
        arr.flags.writeable = False
    return P, B, W


def _curvature_panel(
    xs: Sequence[float], p: Sequence[float], a: Sequence[float], kappa: float
) -> tuple[float, float]:
    """A five-node panel of ``f = p + 2·ln(1 + a/κ)`` valued through its smooth parts:
    ``(I₅, estimate)``, ``I₅`` integrating ``p``'s quartic interpolant (Boole's rule)
    plus ``2·ln(1 + A/κ)`` on ``a``'s quartic interpolant ``A``
    (:func:`_curvature_integral`).

    The estimate compares ``I₅`` with rules of lower degree on the same nodes, whose
    error stands for ``I₅``'s from above where ``p`` and ``a`` are smooth, as in a
    Kronrod–Gauss pair. ``I₃``: the ends and midpoint (Simpson's rule, ``a``'s
    quadratic interpolant). ``I₄``: the cubic rules that leave out one inner node
    (as :func:`_scattered_panel`). Where the fourth differences of ``p`` and of
    ``a`` look smooth (:func:`_smooth_part`) the estimate is the largest
    ``|I₅ − I₄|``, but at least :data:`QUADRATIC_SHARE` of ``|I₅ − I₃|``; else
    ``|I₅ − I₃|``, a slope jump showing in it at full size.

    Near ``a = 0`` the logarithm magnifies ``a``'s interpolation error, the
    quadratic's by far the most: on a strict-mode Wisconsin seller at
    ``λ = 6·10⁻⁶`` whose weight falls nearly linearly to 0 over the panel,
    ``|I₅ − I₃|`` read 3·10⁻⁵ of the integral, the cubics 3·10⁻⁸, and ``I₅``'s error
    against an adaptive 10⁻¹¹ quadrature was 1.9·10⁻⁸; the halving the first
    estimate asked for cost four re-solves. Five samples cannot tell a slope jump
    near a third of the panel from a cubic: there the cubics alone read it up to 12
    times too small; with the floor of a tenth of ``|I₅ − I₃|``, over 147 slope jumps
    inside a panel the estimate is at worst 7.5 times too small, as ``|I₅ − I₃|``
    itself is for a jump at 0.28 of the panel. The payment sweeps split at the
    active-set changes they locate between passes (``mechanisms.payments._kinks``),
    where such slope jumps come from."""
    h = xs[-1] - xs[0]
    fine = (
        h / 90.0 * (7.0 * p[0] + 32.0 * p[1] + 12.0 * p[2] + 32.0 * p[3] + 7.0 * p[4])
    )
    fine += h * _curvature_integral(a, kappa)
    coarse = h / 6.0 * (p[0] + 4.0 * p[2] + p[4])
    coarse += h * _curvature_integral(a[::2], kappa)
    if not (_smooth_part(p) and _smooth_part(a)):
        return fine, abs(fine - coarse)
    P, B, W = _left_out_rules(*_grading(a, kappa))
    av = np.asarray(a, dtype=float)
    logs = W * (2.0 * np.log1p(np.maximum(av @ B, 0.0) / kappa))
    parts = h * (P @ np.asarray(p, dtype=float) + logs.reshape(3, -1).sum(axis=1))
    spread = float(np.max(np.abs(parts - fine)))
    return fine, max(spread, QUADRATIC_SHARE * abs(fine - coarse))


def _smooth_part(v: Sequence[float]) -> bool:
    """Whether one part of a split panel looks smooth on its five equispaced values:
    the fourth difference ``d₀ − 2d₁ + d₂`` of its second differences ``d_k`` is
    below :data:`FOURTH_SHARE` of the largest ``|d_k|`` (``h⁴f⁗`` against ``h²f″``
    for a smooth part; a slope jump between two nodes puts its ``h·Δf′`` into one
    or two ``d_k`` and a fourth difference of their size), or every ``d_k`` is below
    ``10⁻⁹`` of the largest first difference (a part linear to rounding). Unlike
    :func:`_smooth` it reads a part that bends one way and then the other (a cubic:
    second differences of both signs) as smooth."""
    first = max(abs(v[k + 1] - v[k]) for k in range(4))
    d = [v[k] - 2.0 * v[k + 1] + v[k + 2] for k in range(3)]
    top = max(abs(x) for x in d)
    return top <= 1e-9 * first or abs(d[0] - 2.0 * d[1] + d[2]) <= FOURTH_SHARE * top


QUADRATIC_SHARE = 0.1
""":func:`_curvature_panel` never reads its error below this share of ``|I₅ − I₃|``
(five samples cannot tell a slope jump near a third of the panel from a cubic)."""
FOURTH_SHARE = 0.1
""":func:`_smooth_part`'s bound on the fourth difference, as a share of the largest
second difference."""


def _split_matches(value: float, parts: tuple[float, float], kappa: float) -> bool:
    """Whether ``parts = (p, a)`` reproduce ``value = p + 2·ln(1 + a/κ)`` to rounding
    (a guard: a node whose value came from elsewhere, e.g. a raised ridge, is not of
    this form)."""
    p, a = parts
    if not (a >= 0.0 and math.isfinite(p)):
        return False
    rebuilt = p + 2.0 * math.log1p(a / kappa)
    return abs(rebuilt - value) <= 1e-12 * max(abs(value), abs(p), 1e-300)


def _smooth(v: Sequence[float]) -> bool:
    """Whether a panel's five equispaced values look smooth: their three second
    differences agree to half the largest (``h²f''`` plus ``O(h³)`` for a smooth
    ``f``). Across a kink one or two of them carry the slope jump, and Richardson's
    ``/15`` (which assumes the ``h⁴`` error law) underestimates the error: measured, a
    payment integrand with a kink and no active-set change inside its last panel was
    off by 5.3e-7 against an estimate of 6.7e-8. Such panels get the plain
    ``|S₂ − S₁|`` as their estimate, so the heap bisects them."""
    d = [v[k] - 2.0 * v[k + 1] + v[k + 2] for k in range(3)]
    top = max(abs(x) for x in d)
    return max(d) - min(d) <= 0.5 * top + 1e-300


def _nodes(lo: float, hi: float) -> tuple[float, float, float, float, float]:
    """A panel's five nodes by repeated halving: ``mid = (lo + hi)/2`` and the
    quarters as the halves' midpoints, the very floating-point numbers the two
    half-panels (and a coarse piece split at its midpoint) use as their ends and
    centres, so a bisected panel re-evaluates none of its nodes (``np.linspace``'s
    ``lo + k·h/4`` differs from them in the last bit, which cost a duplicate
    re-solve for ~5 % of the nodes of a payment sweep)."""
    mid = 0.5 * (lo + hi)
    return lo, 0.5 * (lo + mid), mid, 0.5 * (mid + hi), hi


def _simpson(
    f: Callable[[float], float],
    cuts: Sequence[float],
    *,
    rtol: float,
    atol: float,
    max_evals: int,
    monotone: bool = False,
    curvature_split: CurvatureSplit | None = None,
    curvature_scale: float = 0.0,
    tangent: Tangent | None = None,
    known: Known | None = None,
) -> QuadratureResult:
    """Adaptive Simpson–Richardson on the partition ``cuts`` (module docstring).

    ``n_evals`` counts distinct nodes (each is evaluated once and memoised here).
    """
    memo: dict[float, float] = {}

    def val(x: float) -> float:
        if x not in memo:
            memo[x] = float(f(x))
        return memo[x]

    def split_parts(
        xs: Sequence[float], v: Sequence[float]
    ) -> tuple[list[float], list[float], float] | None:
        """The curvature split's parts ``(p, a, κ)`` at ``xs``, where every node has
        them."""
        if curvature_split is None:
            return None
        parts = [curvature_split(x) for x in xs]
        if any(
            q is None or not _split_matches(fx, q, curvature_scale)
            for q, fx in zip(parts, v, strict=True)
        ):
            return None
        p = [q[0] for q in parts if q is not None]
        a = [q[1] for q in parts if q is not None]
        return p, a, curvature_scale

    def split(xs: Sequence[float], v: Sequence[float]) -> tuple[float, float] | None:
        """The panel valued through the curvature split, where every node has it."""
        mapped = split_parts(xs, v)
        return None if mapped is None else _curvature_panel(xs, *mapped)

    scattered_split = None if curvature_split is None else split_parts

    def panel(lo: float, hi: float) -> tuple[float, float]:
        xs = _nodes(lo, hi)
        v = [val(x) for x in xs]
        h = hi - lo
        s1 = h / 6.0 * (v[0] + 4.0 * v[2] + v[4])
        s2 = h / 12.0 * (v[0] + 4.0 * v[1] + 2.0 * v[2] + 4.0 * v[3] + v[4])
        est = abs(s2 - s1) / (15.0 if _smooth(v) else 1.0)
        best = (s2 + (s2 - s1) / 15.0, est)
        if monotone:
            bound = h / 8.0 * sum(abs(v[k + 1] - v[k]) for k in range(4))
            if bound < best[1]:
                best = (h / 8.0 * (v[0] + 2.0 * (v[1] + v[2] + v[3]) + v[4]), bound)
        mapped = split(xs, v)
        if mapped is not None and mapped[1] < best[1]:
            best = mapped
        return best

    # (−error, lo, hi, value, coarse): a coarse panel has only its two ends evaluated
    heap: list[tuple[float, float, float, float, bool]] = []
    for lo, hi in itertools.pairwise(cuts):
        if monotone:
            # the ends alone: the trapezoid, within (hi − lo)|f(hi) − f(lo)|/2
            flo, fhi = val(lo), val(hi)
            value = 0.5 * (hi - lo) * (flo + fhi)
            err = 0.5 * (hi - lo) * abs(fhi - flo)
            inside = () if known is None or err == 0.0 else known(lo, hi)
            fitted = _scattered_panel(lo, hi, inside, val, rtol, scattered_split)
            if fitted is not None and fitted[1] < err:
                # if popped again, its halves get five-node panels
                heapq.heappush(heap, (-fitted[1], lo, hi, fitted[0], False))
                continue
            heapq.heappush(heap, (-err, lo, hi, value, True))
        else:
            value, err = panel(lo, hi)
            heapq.heappush(heap, (-err, lo, hi, value, False))
    while True:
        total = sum(item[3] for item in heap)
        err_sum = sum(-item[0] for item in heap)
        if err_sum <= max(atol, rtol * abs(total)):
            return QuadratureResult(total, err_sum, len(memo), True, len(heap))
        if len(memo) + 4 > max_evals:
            return QuadratureResult(total, err_sum, len(memo), False, len(heap))
        _, lo, hi, _, coarse = heapq.heappop(heap)
        mid = 0.5 * (lo + hi)
        if coarse and lo < mid < hi:
            # Monotone f known at the ends only. Its midpoint says whether the change
            # is concentrated in one half (a ramp much narrower than the piece):
            # then split into two such pieces (one evaluation per halving, where
            # five-node panels cost four); else the five-node panel.
            flo, fhi = val(lo), val(hi)
            slope = None if tangent is None else tangent(lo, hi)
            if slope is not None:
                line = _tangent_panel(hi - lo, flo, fhi, slope, rtol)
                if line is not None:  # if popped again, its halves get five-node panels
                    heapq.heappush(heap, (-line[1], lo, hi, line[0], False))
                    continue
            if known is not None:  # two reports inside: one node may complete three
                inside = known(lo, hi)
                first = _third_node(lo, hi, inside, with_mid=True)
                fitted = None
                if first is not None:
                    fitted = _scattered_panel(
                        lo, hi, [*inside, first], val, rtol, scattered_split
                    )
                if fitted is not None:  # if popped again, its halves get panels
                    heapq.heappush(heap, (-fitted[1], lo, hi, fitted[0], False))
                    continue
            fmid = val(mid)
            d1, d2 = abs(fmid - flo), abs(fhi - fmid)
            if min(d1, d2) <= RAMP_SHARE * (d1 + d2):
                for x0, x1, f0, f1 in ((lo, mid, flo, fmid), (mid, hi, fmid, fhi)):
                    err = 0.5 * (x1 - x0) * abs(f1 - f0)
                    value = 0.5 * (x1 - x0) * (f0 + f1)
                    heapq.heappush(heap, (-err, x0, x1, value, True))
                continue
            flat = _flat_panel(hi - lo, flo, fmid, fhi, rtol)
            if flat is None and known is not None:  # the midpoint and known points
                inside = [*known(lo, hi), mid]
                flat = _scattered_panel(lo, hi, inside, val, rtol, scattered_split)
                third = None if flat is not None else _third_node(lo, hi, inside)
                if third is not None:  # one of the panel's quarters: never wasted
                    flat = _scattered_panel(
                        lo, hi, [*inside, third], val, rtol, scattered_split
                    )
            if flat is not None:  # if popped again, its halves get five-node panels
                heapq.heappush(heap, (-flat[1], lo, hi, flat[0], False))
            else:
                value, err = panel(lo, hi)
                heapq.heappush(heap, (-err, lo, hi, value, False))
            continue
        if not all(x0 < x1 for x0, x1 in itertools.pairwise(_nodes(lo, hi))):
            return QuadratureResult(total, err_sum, len(memo), False, len(heap) + 1)
        for x0, x1 in ((lo, mid), (mid, hi)):
            value, err = panel(x0, x1)
            heapq.heappush(heap, (-err, x0, x1, value, False))
