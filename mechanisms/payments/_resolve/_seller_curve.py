"""One seller's allocation curve ``s ↦ ε_i(s, c_-i)`` (spec ``mechanism.md`` §5).

``ε_i(s)`` re-solves the allocation with seller ``i``'s virtual cost set to ``Ψ̄(s)`` and
**everything else frozen** (configuration incl. ``γ``, the ``η`` grid, the other
reports): what :func:`mechanisms.allocate` returns for that report. Every evaluation is
cached with its solution and active set, so the critical-cost search
(:mod:`mechanisms.payments._critical_cost`), the kink locators (:mod:`mechanisms.payments._kinks`) and the
quadrature share them and the sweep can be audited for monotonicity.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._eta_search import solve_allocation
from mechanisms.allocation._problem import Problem, utility
from mechanisms.allocation._range._certify import Node
from mechanisms.payments._base_memo import base_memo
from mechanisms.payments._resolve._local_resolve import (
    local_resolve,
    local_resolve_seller,
    sole_change,
)
from mechanisms.payments._resolve._range_resolve import (
    LeanSolve,
    RangeResolver,
    range_resolver,
    weights_signature,
)
from mechanisms.payments._resolve._report_slope import (
    Response,
    kink_slope_change,
    report_slope,
    response,
)
from mechanisms.payments._resolve._strict_resolve import (
    StrictResolver,
    strict_resolver,
)
from mechanisms.priors import CostPrior
from mechanisms.priors._ironing import IronedPrior
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]
Solver = Callable[..., Allocation]


@dataclass(eq=False)
class SellerCurve:
    """``s ↦ ε_i^total(s)`` for one seller with every evaluation cached and recorded.

    ``solver`` is :func:`solve_allocation` (a hook only for planted-bug tests).
    The shortcut is taken only when the base allocation is certified and
    each shortcut result carries its own closed range certificate
    (:func:`mechanisms.payments._resolve._local_resolve.local_resolve`); ``checks`` records every
    evaluation's status, KKT residual and certified gap for the seller's certificate.
    Full re-solves are **cold** (``warm_full=False``), i.e. exactly what
    :func:`mechanisms.allocate` returns for the changed report: ``G`` is not convex in
    ``a``, and a search warm-started from the base can stay on a worse local optimum
    than the cold one (measured: a seller kept at ε ≈ 4.3 by the warm search where the
    cold one excludes it with a lower ``G``), which would pay for a rule the market
    does not run. With ``fast`` (default) a re-solve first tries the certified shortcut of
    :mod:`mechanisms.payments._resolve._local_resolve`, with lower bounds on the grid values from the
    full solves seen so far; the full search runs whenever the certificate fails.
    ``checkpoint`` (optional) is called before every re-solve; what it raises ends
    the sweep (cooperative cancellation, ``PaymentJob.checkpoint``).
    Under the default rule (candidate-model range) a re-solve with ``Ψ_i`` raised is
    the lean one of :mod:`mechanisms.payments._resolve._range_resolve`: the same
    certified range search, returning seller ``i``'s values and the optimum's
    ``(j, η, A, s)`` instead of an O(m) allocation; it counts as a shortcut
    (``fast_keys``), so the verified sample cross-checks it against the full path
    (:meth:`verify_fast`). Active signatures are derived from it only when the kink
    locators ask (:meth:`signature`; :meth:`own_status` and :meth:`cap_slack` are
    O(1)). In mode ``strict`` (every cap ``k/m`` on the ``η`` range, ``μ, γ > 0``) a
    re-solve at any finite ``Ψ_i`` is the compiled one of
    :mod:`mechanisms.payments._resolve._strict_resolve` (the same rule's certified
    optimum, returned as a :class:`LeanSolve`), checked the same way. Where ``η``
    sits at an end of its range, the base's first-order response to ``Ψ_i``
    (:mod:`mechanisms.payments._resolve._report_slope`) gives the curve's slope at
    the report (:meth:`tangent`, for the quadrature's first piece) and the start of
    the sweep's first re-solve.
    """

    prob: Problem
    base: Allocation
    prior: CostPrior
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
    # Per evaluated report: (status, max KKT residual, relative range gap or None).
    checks: dict[float, tuple[str, float, float | None]] = field(default_factory=dict)
    checkpoint: Callable[[], None] | None = None
    nodes: dict[float, Node] | None = None  # the base's stale certified nodes
    hessian: FloatArray | None = None  # the base's ∇²F (local_resolve's frozen one)
    # Re-solves by the lean path of the default rule (mechanisms.payments._resolve.
    # _range_resolve): seller i's values and the optimum's (j, η, A, s) only.
    lean: dict[float, LeanSolve] = field(default_factory=dict)
    resolver: RangeResolver | StrictResolver | None = None
    # every seller's report (the job's): where another's is passed (crossings())
    reports: FloatArray | None = None
    # per report with weights: A − S·r_k of every seller (_weights_kink_guess)
    _scores: dict[float, FloatArray] = field(default_factory=dict)
    # per shortcut re-solve: (G, Ψ_i, η, a_i) at its optimum (value_crossing)
    values: dict[float, tuple[float, float, float, float]] = field(default_factory=dict)
    # pairs of evaluated reports whose changes of the active set were left unlocated
    # (mechanisms.payments._kinks.kink_brackets): the bound on what each can cost
    slight_kinks: dict[tuple[float, float], float] = field(default_factory=dict)

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
        if self.resolver is None and self.solver is solve_allocation:
            self.resolver = range_resolver(self.prob, self.base) or strict_resolver(
                self.prob, self.base
            )
        # the base's active signature is computed when asked (signature())

    def epsilon(self, s: float) -> float:
        """Seller ``i``'s total guarantee ``ε_i^total`` when it reports ``s``."""
        s = float(s)
        hit = self.cache.get(s)
        if hit is not None:
            return hit
        if self.checkpoint is not None:
            self.checkpoint()
        psi_i = float(self.prior.virtual_cost(s))
        if psi_i == math.inf and self.prob.cfg.gamma > 0:
            # Ψ(s) = ∞ (a density vanishing at the support's edge): any ε_i > 0 costs
            # ∞ in G, so the exact rule gives ε_i = 0 (Problem's cap-0 reading).
            self.checks[s] = ("optimal", 0.0, None)
            self.cache[s] = 0.0
            return 0.0
        if self.fast and self.resolver is not None and math.isfinite(psi_i):
            lean = self.resolver.solve(self.index, psi_i)
            if lean is not None:
                self.lean[s] = lean
                self.fast_keys.add(s)
                self.checks[s] = (lean.status, lean.kkt, lean.gap)
                self.cache[s] = lean.epsilon_total
                return lean.epsilon_total
        prob = self.prob.with_seller_psi(self.index, psi_i)
        if self.resolver is None and self._takes_shortcut(psi_i):
            local = local_resolve_seller(
                prob, self.base, self.index, **self._shortcut_kwargs(psi_i, s),
                sole_change=math.isfinite(psi_i) and sole_change(self.prob, self.base),
            )  # fmt: skip
            if local is not None:
                self.points[s] = (local.w, local.weights, local.eta)
                self.values[s] = (
                    local.value,
                    psi_i,
                    local.eta,
                    float(local.weights[self.index]),
                )
                self.fast_keys.add(s)
                self.checks[s] = (local.status, local.kkt, local.gap)
                self.cache[s] = local.epsilon_total
                self.signatures[s] = weights_status(self.prob, local.weights, local.eta)
                return local.epsilon_total
            alloc = self._solve(prob, s, shortcut=False)
        else:
            alloc = self._solve(prob, s)
        val = float(alloc.epsilon_total[self.index]) if alloc.success else 0.0
        self.checks[s] = allocation_check(alloc)
        self.cache[s] = val
        if self.resolver is not None:
            self.signatures[s] = self.resolver.allocation_signature(alloc, self.index)
        else:
            self.signatures[s] = active_signature(self.prob, alloc)
        return val

    def _takes_shortcut(self, psi_i: float) -> bool:
        """Whether a re-solve at ``Ψ_i = psi_i`` tries the certified shortcut of
        :mod:`mechanisms.payments._resolve._local_resolve` (it declines without the
        base's ``η`` profile, and applies to raised costs only)."""
        return (
            self.solver is solve_allocation
            and self.fast
            and self.base.profile is not None
            and psi_i >= self.base.virtual_costs[self.index]
        )

    def _shortcut_kwargs(self, psi_i: float, s: float) -> dict[str, Any]:
        """The shortcut's arguments for the report ``s`` (``Ψ_i = psi_i``): lower
        bounds from the full solves seen, a start from the evaluated reports, the
        base's stale nodes and Hessian; ``ε`` needs no fitted ``w``."""
        return {
            "lower_bounds": self._lower_bounds(psi_i),
            "start": self._predicted_point(psi_i) or self._nearest_point(s),
            "nodes": self.nodes,
            "fit_w": False,
            "hessian": self.hessian,
        }

    def _solve(self, prob: Problem, s: float, *, shortcut: bool = True) -> Allocation:
        """The frozen rule at ``prob``: the certified shortcut of
        :mod:`mechanisms.payments._resolve._local_resolve` when it applies (and
        ``shortcut``), else the full search."""
        # The candidate-model rule reuses the base's models (cost-independent, so
        # identical to recomputing them): always pass the base there.
        reuse = getattr(self.base.certificate, "models", None) is not None
        warm = self.base if self.warm_full or reuse else None
        if self.solver is not solve_allocation:
            return self.solver(prob, warm_start=warm)
        psi_i = float(prob.psi[self.index])
        if shortcut and self._takes_shortcut(psi_i):
            out = local_resolve(prob, self.base, **self._shortcut_kwargs(psi_i, s))
            if out is not None:
                self.points[s] = (out.w, out.weights, out.eta)
                self.fast_keys.add(s)
                return out
        # ε needs no w: strict mode's search value does not contain it (spec §4.4),
        # so the final w-step that solve_allocation adds for the model is skipped.
        alloc = solve_allocation(prob, warm_start=warm, fit_w=False)
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
            self.checks.pop(s, None)
            self.lean.pop(s, None)
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
            self.checks.pop(s, None)
            self.lean.pop(s, None)
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

    def _predicted_point(
        self, psi_i: float
    ) -> tuple[FloatArray, FloatArray, float] | None:
        """Start for the sweep's first re-solve where the base's first-order response
        applies (:func:`mechanisms.payments._resolve._report_slope.response`): the
        base's model moved by ``(dw/dΨ_i)·ΔΨ_i``, at the base's ``η`` (which stays at
        its end of the range), while that predicts the seller still free; ``None``
        once another report is evaluated (the inter/extrapolation of
        :meth:`_nearest_point` then starts nearer). A start only: the re-solve
        converges and is certified from wherever it starts."""
        if len(self.points) != 1 or not self.fast:
            return None
        res = self._response
        if res is None:
            return None
        d_psi = psi_i - float(self.base.virtual_costs[self.index])
        a_i = float(self.base.weights[self.index])
        if not (d_psi > 0.0 and math.isfinite(d_psi) and a_i + res.da_i * d_psi > 0.0):
            return None
        return self.base.w + d_psi * res.dw, self.base.weights, self.base.eta

    @functools.cached_property
    def _response(self) -> Response | None:
        """The base's first-order response of this seller (once per curve)."""
        return response(self.prob, self.base, self.hessian, self.index)

    @functools.cached_property
    def _report_slope(self) -> float | None:
        """``dε_i/ds`` at the report from :attr:`_response` (once per curve)."""
        return report_slope(
            self.prob, self.base, self.hessian, self.prior, self.index, self.report,
            self._response,
        )  # fmt: skip

    def _nearest_point(self, s: float) -> tuple[FloatArray, FloatArray, float] | None:
        """Start for a re-solve at ``s``: the solution at the nearest evaluated report,
        or the linear inter/extrapolation in ``s`` of the two nearest (``(w, a, η)`` are
        smooth in ``s`` between kinks), kept when ``η`` stays positive."""
        if not self.points:
            return None
        x0, x1 = _two_nearest(self.points, s)
        p0 = self.points[x0]
        if x1 is None or x1 == x0:
            return p0
        p1 = self.points[x1]
        t = (s - x0) / (x1 - x0)
        eta = p0[2] + t * (p1[2] - p0[2])
        if not eta > 0.0:
            return p0
        w = p0[0] + t * (p1[0] - p0[0])
        a = np.maximum(p0[1] + t * (p1[1] - p0[1]), 0.0)
        return w, a, float(eta)

    def signature(self, s: float) -> bytes:
        """Active set (0: at zero, 1: free, 2: at its cap) of every seller at ``s``."""
        s = float(s)
        self.epsilon(s)
        sig = self.signatures.get(s)
        if sig is None:
            lean = self.lean.get(s)
            if lean is not None and self.resolver is not None:
                sig = self.resolver.signature(lean)
            elif s == float(self.report) and self.resolver is not None:
                sig = self.resolver.base_signature(self.index)
            elif self.resolver is not None:
                sig = self.resolver.allocation_signature(self.base, self.index)
            elif s == float(self.report):  # the base's: once per base and process
                sig = base_memo(
                    self.base, "active_signature", self.prob,
                    lambda: active_signature(self.prob, self.base),
                )  # fmt: skip
            else:
                sig = active_signature(self.prob, self.base)
            self.signatures[s] = sig
        return sig

    def crossings(self, lo: float, hi: float) -> FloatArray:
        """The other sellers' reports in ``[lo, hi]``, ascending, where seller
        ``i``'s weight changes only as its report passes one of them (or with
        ``η``): mode ``strict`` (every ``ℓ_j`` the public constant), ``γ > 0`` and
        linear ``u``, where the a-step's order is that of ``Ψ̄``, and so of the
        reports, at every ``η`` (spec ``mechanism.md`` §4.2). With ``μ = 0`` it is
        the linear programme that fills the smallest ``r_j = ℓ + γηΨ_j`` up to
        their caps, and the weight jumps where the report passes the last filled
        seller's, not along a ramp a secant could follow; with ``μ > 0`` it is
        ``a_j = clip(A − S·r_j, 0, h_j)``, whose ramps are ``h/(S·γη)`` wide in
        ``Ψ`` (``S = ‖a‖/μ``), and the reports are where those sit while that
        width is below :data:`NARROW_RAMP` of the mean gap between the virtual
        costs (:meth:`_narrow_ramps`). Empty elsewhere, and without ``reports``."""
        cfg = self.prob.cfg
        if self.reports is None or not (
            cfg.mode == "strict"
            and cfg.gamma > 0.0
            and cfg.u == "linear"
            and (cfg.mu == 0.0 or self._narrow_ramps())
        ):
            return np.empty(0)
        reports = self.reports
        ordered: FloatArray = base_memo(
            self.base, "sorted_reports", reports, lambda: np.sort(reports)
        )
        k0 = int(np.searchsorted(ordered, lo, side="left"))
        k1 = int(np.searchsorted(ordered, hi, side="right"))
        marks = np.unique(ordered[k0:k1])
        out: FloatArray = marks[marks != float(self.report)]
        return out

    def _narrow_ramps(self) -> bool:
        """Whether the base's ramps ``h/(S·γη)`` (largest cap ``h``, ``S =
        ‖a‖/μ``) are below :data:`NARROW_RAMP` of the mean gap between the
        sellers' virtual costs (once per base)."""

        def narrow() -> bool:
            cfg, eta = self.prob.cfg, float(self.base.eta)
            a = np.asarray(self.base.weights, dtype=float)
            norm = float(np.linalg.norm(a))
            psi = np.asarray(self.prob.psi, dtype=float)
            if not (eta > 0.0 and norm > 0.0 and psi.size > 1):
                return False
            ramp = (
                float(np.max(self.prob.caps(eta))) * cfg.mu / (norm * cfg.gamma * eta)
            )
            gap = float(psi.max() - psi.min()) / (psi.size - 1)
            return bool(ramp <= NARROW_RAMP * gap)

        return bool(base_memo(self.base, "narrow_ramps", self.prob, narrow))

    @property
    def locates_kinks(self) -> bool:
        """Whether the resolver reads where the active set changes
        (:meth:`kink_guess`)."""
        return hasattr(self.resolver, "kink_margin")

    def kink_guess(self, x0: float, x1: float) -> float | None:
        """Where the active set changes between the evaluated reports ``x0 < x1``
        (both lean re-solves with different signatures), or ``None``.

        The resolver names one status that differs and its margin ``g`` (smooth on
        either side of the change, 0 at it; none where the two re-solves sit on
        different models of the default rule, across which ``ε_i`` can jump). ``g``
        is extrapolated to 0 through the two nearest evaluated reports on one side
        that share that side's signature (and model: ``g`` is NaN on another): a
        secant on a smooth piece, accurate to second order in their spacing (a
        secant across the change is not: ``g``'s slope jumps there). The side with
        the nearer pair is used; through ``x0`` and ``x1`` only when neither side
        has two."""
        res = self.resolver
        if res is None:
            return self._weights_kink_guess(x0, x1)
        lo, hi = self._kink_lean(x0), self._kink_lean(x1)
        if not self.locates_kinks or lo is None or hi is None:
            return None
        boundary: Any = res.kink_boundary(lo, hi)  # each resolver reads its own
        if boundary is None:
            return None
        margin: Callable[[LeanSolve, Any], float] = res.kink_margin
        leans = {x: v for x in self.cache if (v := self._kink_lean(x)) is not None}
        for a, b, _ in self._secant_pairs(sorted(leans), x0, x1):
            ga = margin(leans[a], boundary)
            gb = margin(leans[b], boundary)
            if not (math.isfinite(ga) and math.isfinite(gb)) or ga == gb:
                continue  # NaN: a re-solve on another model
            z = a - ga * (b - a) / (gb - ga)
            if x0 < z < x1:
                return float(z)
        return None

    def value_crossing(self, x0: float, x1: float) -> tuple[float, float] | None:
        """The report ``z`` in ``(x0, x1)`` where the optima re-solved at ``x0`` and
        ``x1``, each held fixed, have the same objective, with a bound on its rounding
        error, or ``None`` (linear ``u``, ``γ > 0``, ``ε_i`` lower at ``x1``, and at
        both ends a lean re-solve or at both a shortcut re-solve).

        A fixed point ``(j, η, a)`` holds ``Ψ_i`` only in ``γη·Ψ_i·a_i`` (``r_i`` of
        the a-step, eq. (4.1)), so its objective is affine in ``Ψ_i`` with slope
        ``g = γη·a_i``; the rule's optimum ``G(Ψ_i)``, the least over the range, is
        concave and below both lines. Where ``ε_i`` jumps between the two optima
        (a switch of model or ``η`` basin, or a fall to 0 from a plateau), ``G`` is the
        lesser of the two lines and the switch is exactly where they cross:
        ``Ψ* = Ψ₀ + (G₁ − G₀ − g₁(Ψ₁ − Ψ₀))/(g₀ − g₁)``. Where the optimum moves
        smoothly in between, the crossing lies at or below the last change of the
        two optima (the tangent at ``x0`` lies above ``G``): a guess callers evaluate.
        ``Ψ*`` is mapped to a report linearly between the ends (exact for the
        uniform prior, whose ``Ψ`` is affine).

        The error bound: each ``G`` is a re-solve's value, good to a few units in
        its last place (and re-solves reached from other warm starts differ there),
        and their difference is divided by ``g₀ − g₁``, which is small where ``a_i``
        is (``ε_i`` carried by its curvature term at a small ``λ``); callers place
        nothing by a crossing whose bound is not well inside what they place."""
        cfg = self.prob.cfg
        if cfg.u != "linear" or not cfg.gamma > 0.0:
            return None
        p, q = self._optimum_line(x0), self._optimum_line(x1)
        if p is None or q is None or p[1] != q[1]:
            return None
        (v0, _, psi0, g0), (v1, _, psi1, g1) = p, q
        span = psi1 - psi0
        if not (g0 > g1 and span > 0.0 and math.isfinite(span)):
            return None
        psi = psi0 + (v1 - v0 - g1 * span) / (g0 - g1)
        scale = (x1 - x0) / span
        z = x0 + (psi - psi0) * scale
        size = abs(v0) + abs(v1) + g1 * abs(span)
        err = VALUE_ULPS * np.finfo(float).eps * size / (g0 - g1) * scale
        if not (x0 < z < x1 and math.isfinite(err)):
            return None
        return float(z), float(err)

    def _optimum_line(self, x: float) -> tuple[float, str, float, float] | None:
        """``(G, source, Ψ_i, γη·a_i)`` of the optimum re-solved at ``x``: a lean
        re-solve's (or the base's optimum in that form), else a shortcut's
        (:meth:`value_crossing`); values of the two kinds are not compared (the
        shortcut's ``G`` is the certified problem's, whose ``λ`` may be raised)."""
        gamma = self.prob.cfg.gamma
        lean = self._kink_lean(x)
        if lean is not None:
            return lean.value, "lean", lean.psi_i, gamma * lean.eta * lean.a_i
        got = self.values.get(float(x))
        if got is None:
            return None
        value, psi_i, eta, a_i = got
        return value, "shortcut", psi_i, gamma * eta * a_i

    def _secant_pairs(
        self, pts: list[float], x0: float, x1: float
    ) -> list[tuple[float, float, bool]]:
        """The pairs a kink guess extrapolates through, tried in order: each end of
        ``[x0, x1]`` with its neighbour in ``pts`` (sorted evaluated reports) where
        the two share a signature, the nearer pair first, then ``(x0, x1)`` itself;
        each with whether its side is ``x0``'s."""
        k0, k1 = pts.index(x0), pts.index(x1)
        pairs = []
        if k0 >= 1 and self.signature(pts[k0 - 1]) == self.signature(x0):
            pairs.append((pts[k0 - 1], x0, True))
        if k1 + 1 < len(pts) and self.signature(pts[k1 + 1]) == self.signature(x1):
            pairs.append((x1, pts[k1 + 1], False))
        pairs.sort(key=lambda p: p[1] - p[0])
        pairs.append((x0, x1, True))
        return pairs

    def _weights_kink_guess(self, x0: float, x1: float) -> float | None:
        """:meth:`kink_guess` where re-solves return weights (the full search and the
        shortcut of :mod:`mechanisms.payments._resolve._local_resolve`), for linear
        ``u`` and ``μ > 0``. The a-step's weights are ``a_k = clip(A − S·r_k, 0,
        h_k)`` with ``r_k = ℓ_k(w) + γηΨ_k`` and ``S = ‖a‖/μ`` (module
        ``mechanisms.allocation._weights_step``, eq. (A)), ``A`` read from the free
        sellers; a seller ``k`` whose status differs between ``x0`` and ``x1`` changes
        it where its margin ``g_k = A − S·r_k − bound`` crosses 0 (``bound``: its
        cap ``h_k(η)(1 − 10⁻⁹)`` when it crosses that first from ``x0``'s side, else
        ``10⁻¹²``: the comparisons of :func:`weights_status`). ``g_k`` is continuous
        in the report and smooth on either side of the change, so it is
        extrapolated as in :meth:`kink_guess`: through the nearer pair of
        neighbouring evaluated reports sharing a signature on either side (the
        first change met from that side), else through ``x0`` and ``x1``. Where
        seller ``i`` keeps its own status across the bracket, the secant's zero is
        refined on the quadratic through that pair and the bracket's other end
        (:func:`_quadratic_root`): another seller's change bends ``g_k`` only
        slightly there (its weight is one of many), while the pair's secant misses
        the curvature over the distance it extrapolates (at ``m = 10⁴``, d = 20: a
        miss of 1 % of the bracket, against a probe a few thousandths wide; kink
        searches 7.3 → 4.4 re-solves per seller). Across seller ``i``'s own change
        (leaving its cap, where ``A`` and ``S`` move fast) the far end is on another
        piece, and the secant alone is kept. ``None`` where no extrapolated zero lies
        inside the bracket."""
        cfg = self.prob.cfg
        if cfg.u != "linear" or not cfg.mu > 0.0:
            return None
        if x0 not in self.points or x1 not in self.points:
            return None
        sig0 = np.frombuffer(self.signature(x0), dtype=np.uint8)
        sig1 = np.frombuffer(self.signature(x1), dtype=np.uint8)
        ks = np.flatnonzero(sig0 != sig1)
        if ks.size == 0:
            return None
        first, last = sig0[ks], sig1[ks]
        to_cap = (np.maximum(first, last) == 2) & (first != 0)
        pts = sorted(x for x in self.cache if x in self.points)
        for a, b, from_left in self._secant_pairs(pts, x0, x1):
            ga, gb = self._margins(a, ks, to_cap), self._margins(b, ks, to_cap)
            if ga is None or gb is None:
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                z = a - ga * (b - a) / (gb - ga)
                if (a, b) != (x0, x1) and sig0[self.index] == sig1[self.index]:
                    far = x1 if from_left else x0
                    gf = self._margins(far, ks, to_cap)
                    if gf is not None:
                        z = _quadratic_root(a, b, far, ga, gb, gf, z)
            z = z[np.isfinite(z) & (z > x0) & (z < x1)]
            if z.size:
                return float(z.min() if from_left else z.max())
        return None

    def _margins(
        self, x: float, ks: NDArray[np.intp], to_cap: NDArray[np.bool_]
    ) -> FloatArray | None:
        """The margins ``g_k`` of :meth:`_weights_kink_guess` at the report ``x``
        (``None`` without free sellers, a positive ``η`` or a finite ``Ψ_i(x)``)."""
        cfg = self.prob.cfg
        w, a, eta = self.points[x]
        if not eta > 0.0:
            return None
        a = np.asarray(a, dtype=float)
        score = self._scores.get(x)
        if score is None:
            psi = np.array(self.prob.psi, dtype=float)
            psi[self.index] = float(self.prior.virtual_cost(x))
            if cfg.mode == "strict":
                losses = np.full(self.prob.m, self.prob.strict_loss_value)
            else:
                losses = self.prob.loss.value(self.prob.X @ w, self.prob.y)
            r = losses + cfg.gamma * eta * psi
            slope = float(np.linalg.norm(a)) / cfg.mu
            free = np.frombuffer(self.signature(x), dtype=np.uint8) == 1
            if not (free.any() and np.isfinite(r).all()):
                return None
            level = float(np.mean(a[free] + slope * r[free]))
            score = self._scores[x] = level - slope * r
        h_k = np.minimum(cfg.k / self.prob.m, np.asarray(self.prob.eps_max)[ks] / eta)
        out: FloatArray = score[ks] - np.where(to_cap, h_k * (1.0 - 1e-9), 1e-12)
        return out

    def exit_psi(self, x: float) -> float | None:
        """The virtual cost ``Ψ_i`` at which seller ``i``'s weight leaves 0, read at
        an evaluated report ``x`` where ``ε_i = 0`` (linear ``u``, ``γ, μ > 0``), or
        ``None``.

        With ``a_i = 0`` nothing in the allocation depends on ``Ψ_i`` (``G`` holds it
        only in ``γη·Ψ_i·a_i``), so the same point stays a KKT point for every ``Ψ_i``
        down to where the a-step's margin ``g_i = A − S·r_i`` reaches 0; ``g_i`` is
        linear in ``Ψ_i`` with slope ``−Sγη`` there, so that point is ``Ψ_i(x) +
        g_i/(Sγη)``. The allocation at ``x`` is the rule's optimum, but another
        point can become the optimum before ``g_i`` reaches 0 (``G`` falls with
        ``Ψ_i`` elsewhere): the seller then re-enters above this ``Ψ_i``, never
        below it, and callers evaluate what they place by it."""
        x = float(x)
        if not self.prob.cfg.gamma > 0.0 or self.cache.get(x) != 0.0:
            return None
        found = self._margin_and_slope(x)  # linear u, μ > 0, and multipliers kept
        if found is None:
            return None
        g, slope, eta = found
        rate = slope * self.prob.cfg.gamma * eta
        if not (g < 0.0 and rate > 0.0 and math.isfinite(rate)):
            return None
        out = float(self.prior.virtual_cost(x)) + g / rate
        return out if math.isfinite(out) else None

    def _margin_and_slope(self, x: float) -> tuple[float, float, float] | None:
        """``(g_i, S, η)`` at the evaluated report ``x``: seller ``i``'s a-step margin
        ``g_i = A − S·r_i`` (its weight before the clip to ``[0, h_i]``, less
        ``10⁻¹²``, :func:`weights_status`'s threshold) with the a-step's ``S`` and
        ``η``, for linear ``u`` and ``μ > 0``; ``None`` where the re-solve kept no
        multipliers (a full search without weights, a lean resolver without them)."""
        cfg = self.prob.cfg
        if cfg.u != "linear" or not cfg.mu > 0.0 or x not in self.cache:
            return None
        lean = self.lean.get(x)
        if lean is not None:
            own_margin = getattr(self.resolver, "own_margin", None)
            if own_margin is None or not (math.isfinite(lean.s) and lean.s > 0.0):
                return None
            g, slope, eta = float(own_margin(lean)), float(lean.s), float(lean.eta)
        else:
            # a full solve under a lean resolver: its signature is the resolver's
            # form, not the per-seller statuses _margins reads
            point = self.points.get(x)
            if point is None or self.resolver is not None:
                return None
            eta = float(point[2])
            margins = self._margins(x, np.array([self.index]), np.array([False]))
            if margins is None:
                return None
            g = float(margins[0])
            slope = float(np.linalg.norm(point[1])) / cfg.mu
        if not (math.isfinite(g) and math.isfinite(slope) and eta > 0.0):
            return None
        return g, slope, eta

    def same_model(self, x: float, y: float) -> bool:
        """Whether the evaluations at ``x`` and ``y`` are known to lie on one model of
        the rule (always in strict mode; under the default rule both must be lean
        re-solves with the same ``j``): where the model switches, ``ε_i`` can jump."""
        res = self.resolver
        if res is None or not hasattr(res, "same_model"):
            return True
        return bool(res.same_model(self._kink_lean(x), self._kink_lean(y)))

    def _kink_lean(self, s: float) -> LeanSolve | None:
        """The lean re-solve at ``s``, or at the seller's own report the base's
        optimum in that form where the resolver has it (:meth:`RangeResolver.
        base_lean`: the base's ``(j, η, A, s)``, no re-solve)."""
        s = float(s)
        lean = self.lean.get(s)
        if lean is None and s == float(self.report):
            base_lean = getattr(self.resolver, "base_lean", None)
            if base_lean is not None:
                out: LeanSolve | None = base_lean(self.index)
                return out
        return lean

    def own_status(self, s: float) -> int:
        """Seller ``i``'s own entry of :meth:`signature` (O(1) on the lean path)."""
        s = float(s)
        self.epsilon(s)
        lean = self.lean.get(s)
        if lean is not None:
            a_i, h_i = lean.a_i, lean.h_i
        elif s == float(self.report) and self.base.eta > 0:
            a_i = float(self.base.weights[self.index])
            h_i = float(
                min(
                    self.prob.cfg.k / self.prob.m,
                    self.prob.eps_max[self.index] / self.base.eta,
                )
            )
        elif self.resolver is not None:
            return self.resolver.own_status(self.signature(s), self.index)
        else:
            return int(self.signature(s)[self.index])
        return 0 if a_i <= 1e-12 else (2 if a_i >= h_i * (1 - 1e-9) else 1)

    def cap_slack(self, s: float) -> float:
        """``h_i − a_i`` at report ``s`` (NaN when the re-solve there failed)."""
        s = float(s)
        self.epsilon(s)
        lean = self.lean.get(s)
        if lean is not None:
            return lean.h_i - lean.a_i
        point = self.points.get(s)
        if point is None:
            return float("nan")
        _w, a, eta = point
        return float(self.prob.caps(eta)[self.index] - a[self.index])

    def release_terms(self, s: float) -> tuple[float, float] | None:
        """``(η·a_i, a_i)`` of the allocation at report ``s`` (evaluating it if needed),
        the parts of ``ε_i^total = η·a_i + 2·ln(1 + a_i/(4λ))`` (spec §3, eq. (3.1));
        ``None`` where only ``ε_i`` was kept."""
        s = float(s)
        self.epsilon(s)
        lean = self.lean.get(s)
        if lean is not None:
            return lean.a_i * lean.eta, lean.a_i
        point = self.points.get(s)
        if point is None:
            return None
        a_i = float(point[1][self.index])
        return a_i * float(point[2]), a_i

    def tangent(self, lo: float, hi: float) -> float | None:
        """The slope of :meth:`u` at ``lo`` for the piece ``[lo, hi]``, or ``None``.

        Only at the seller's own report, from the base allocation
        (:func:`mechanisms.payments._resolve._report_slope.report_slope`: ``η`` at an
        end of its range, the seller free, linear ``u``), and only where the
        evaluation at ``hi`` still has ``η`` at that end and the seller free: the
        piece then starts and ends where that slope's conditions hold (a change of
        the active set between them is located by the kink passes of the sweep, which
        compare the signatures of its evaluated reports)."""
        if lo != float(self.report) or self.prob.cfg.u != "linear" or not self.fast:
            return None
        point = self.points.get(float(hi))
        if point is None or point[2] != self.base.eta or self.own_status(hi) != 1:
            return None
        if self._response is None:
            return None
        return self._report_slope

    def kink_slope_bound(self, x0: float, x1: float) -> float | None:
        """An estimate of ``Σ |Δ du/ds|`` over the slope jumps between the evaluated
        reports ``x0 < x1``, where every change of the active set between them is
        another seller's between neighbouring statuses and ``u`` is continuous
        across it; ``None`` where that is not known.

        Under the conditions of :meth:`tangent` at both ends (linear ``u``, ``η`` at
        the base's end of its range, seller ``i`` free, fitted weights known), the
        jump of each change is
        :func:`mechanisms.payments._resolve._report_slope.kink_slope_change`'s,
        evaluated at both ends' own weight and virtual cost; the larger is taken,
        times the larger ``|Ψ'|`` of the two ends."""
        if (
            not self.fast
            or self.prob.cfg.u != "linear"
            or isinstance(self.prior, IronedPrior)
            or self._response is None
        ):
            return None
        ends = []
        for x in (float(x0), float(x1)):
            point = self.points.get(x)
            if point is None or point[2] != self.base.eta or self.own_status(x) != 1:
                return None
            ends.append((x, float(point[1][self.index])))
        sig0 = np.frombuffer(self.signature(x0), dtype=np.uint8)
        sig1 = np.frombuffer(self.signature(x1), dtype=np.uint8)
        changed = np.flatnonzero(sig0 != sig1)
        changes = [(int(j), int(sig0[j]), int(sig1[j])) for j in changed]
        worst, dpsi = 0.0, 0.0
        for x, a_i in ends:
            psi_i = float(self.prior.virtual_cost(x))
            jump = kink_slope_change(
                self.prob, self.base, self.hessian, self.index, a_i, psi_i, changes
            )
            dpsi = max(dpsi, abs(float(self.prior.virtual_cost_derivative(x))))
            if jump is None or not math.isfinite(dpsi):
                return None
            worst = max(worst, jump)
        return worst * dpsi

    def u(self, s: float) -> float:
        """``u(ε_i(s))`` — the integrand of the Myerson payment."""
        eps = self.epsilon(s)
        if self.prob.cfg.u == "linear":
            return eps
        return float(utility(np.array([eps]), self.prob.cfg)[0])

    def evaluated_inside(self, lo: float, hi: float) -> list[float]:
        """The reports strictly inside ``(lo, hi)`` already evaluated."""
        return [s for s in self.cache if lo < s < hi]

    @property
    def n_solves(self) -> int:
        return len(self.cache) - 1

    def monotonicity_violation(self) -> float:
        """Largest ``ε(s') − ε(s)`` over evaluated ``s < s'`` (0 for a non-increasing
        sweep): the worst upward violation of the allocation's monotonicity."""
        worst, low = 0.0, math.inf  # low: the least ε at the reports below
        for s in sorted(self.cache):
            v = self.cache[s]
            worst = max(worst, v - low)
            low = min(low, v)
        return float(worst)


VALUE_ULPS = 16.0
"""Units in the last place :meth:`SellerCurve.value_crossing` allows each re-solve's
objective value (KKT-converged values from different warm starts differ in their last
few)."""


def _two_nearest(keys: Iterable[float], s: float) -> tuple[float, float | None]:
    """The two keys nearest ``s``, nearer first (``None`` for a second where there is
    one key); ties go to the key met first, as in ``sorted(keys, key=distance)``."""
    it = iter(keys)
    x0 = next(it)
    d0 = abs(x0 - s)
    x1: float | None = None
    d1 = math.inf
    for x in it:
        d = abs(x - s)
        if d < d0:
            x1, d1, x0, d0 = x0, d0, x, d
        elif d < d1:
            x1, d1 = x, d
    return x0, x1


NARROW_RAMP = 0.25
""":meth:`SellerCurve.crossings` names the other reports under ``μ > 0`` (strict mode)
while the a-step's ramps are at most this share of the mean gap between the virtual
costs: a search over the gaps between them then lands a few gaps from the ramp."""


def allocation_check(alloc: Allocation) -> tuple[str, float, float | None]:
    """``(status, max KKT residual, relative certified gap or None)`` of a solve."""
    cert = alloc.certificate
    gap = None
    if cert is not None:
        gap = cert.relative_gap(alloc.mode_objective or alloc.objective)
    kkt = alloc.kkt.max()
    return str(alloc.status), float(kkt) if np.isfinite(kkt) else float("inf"), gap


def active_signature(prob: Problem, alloc: Allocation) -> bytes:
    """Which bound each ``a_j`` sits at. Between changes of this signature the KKT
    system is smooth in ``s``, so ``ε_i(s)`` is smooth; its kinks sit at changes."""
    return weights_status(prob, alloc.weights, alloc.eta)


def weights_status(prob: Problem, weights: FloatArray, eta: float) -> bytes:
    """:func:`active_signature` of the weights ``weights`` at ``η = eta``."""
    a = np.asarray(weights, dtype=np.float64)
    if eta <= 0:
        return bytes(a.size)
    kcap = prob.cfg.k / prob.m
    return weights_signature(a, kcap, prob.eps_max, float(eta)).tobytes()


def _quadratic_root(
    a: float,
    b: float,
    c: float,
    ga: FloatArray,
    gb: FloatArray,
    gc: FloatArray,
    z: FloatArray,
) -> FloatArray:
    """The zero nearest the secant guess ``z`` of the quadratic through ``(a, ga)``,
    ``(b, gb)`` and ``(c, gc)`` (elementwise; Newton's divided differences:
    ``p(b + t) = f[a,b,c]·t² + (f[a,b] + f[a,b,c](b − a))·t + g_b``, its zeros by
    the cancellation-free formula); ``z`` itself where ``p`` has no real zero in
    the three points' span."""
    f1 = (gb - ga) / (b - a)
    f2 = ((gc - gb) / (c - b) - f1) / (c - a)
    lin = f1 + f2 * (b - a)
    disc = lin * lin - 4.0 * f2 * gb
    q = -0.5 * (lin + np.copysign(np.sqrt(np.maximum(disc, 0.0)), lin))
    t1 = np.where(f2 != 0.0, q / f2, np.inf)
    t2 = gb / q  # the zero of the linear part where f2 = 0
    near = z - b
    t = np.where(np.abs(t1 - near) < np.abs(t2 - near), t1, t2)
    x = b + t
    lo, hi = min(a, b, c), max(a, b, c)
    ok = (disc >= 0.0) & np.isfinite(x) & (x > lo) & (x < hi)
    out: FloatArray = np.where(ok, x, z)
    return out
