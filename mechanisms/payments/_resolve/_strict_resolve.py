"""Lean payment re-solves in mode ``strict`` (spec ``mechanism.md`` §4.4, §5).

A payment sweep re-solves the allocation with one seller's ``Ψ_i`` changed, dozens of
times per seller. In strict mode the search value does not contain ``w`` or the records
(spec §4.4), so the full path
(:func:`mechanisms.allocation._eta_search.solve_allocation`) spends a re-solve on
Python-level steps around an O(m) a-step: the coarse grid, the Brent refinement, the
block polish, the range certificate, the KKT pass over all sellers and the
:class:`~mechanisms.result.Allocation`. Where every seller's cap is the same at every
``η`` — ``h(η) = min(k/m, E/η)`` with one ``ε^max = E`` for all (``∞`` when none
binds: a fresh market's lifetime cap, or none) — and ``μ, γ > 0`` (linear ``u``),
:class:`StrictResolver` runs the same rule in one
compiled call (:func:`._strict_kernel.strict_resolve_kernel`: the certified global
minimum of the profile ``P(η)`` over the same ``[η_lo, η_hi]``, at a root of ``P'``)
and returns only seller ``i``'s values and the optimum's ``(η, A, s)``, from which the
whole ``a = clip(A − s r, 0, h)`` is re-derived on demand.

Acceptance, as for the full path's status ``"optimal"``: the branch-and-bound closed
(gap ``≤ RANGE_RTOL·(1 + |V|)``) and the KKT residuals are below ``KKT_TOL``: the
a-block's from the a-step's own check ``|‖a‖ − μs| ≤ 10⁻⁹·max(1, μs)`` (bound of
:mod:`._range_resolve`), the ``η``-block's ``|P'(η)|·η/(1 + |V|)`` (0 at an end of the
range where ``P`` falls outward). Otherwise ``None``: the caller runs the full path.
Like every shortcut of a sweep it counts in ``SellerCurve.fast_keys``, so the verified
sample cross-checks it against cold full solves (``SellerCurve.verify_fast``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._eta_search import KKT_TOL, eta_bounds, eta_residual
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range._certify import MAX_CELLS, RANGE_RTOL
from mechanisms.payments._base_memo import base_memo
from mechanisms.payments._resolve._range_resolve import (
    CHECK_RTOL,
    NONZERO,
    ActiveSignatures,
    LeanSolve,
)
from mechanisms.payments._resolve._sorted_astep import count_at_least, prefix_sums
from mechanisms.payments._resolve._strict_kernel import (
    grid_states,
    strict_resolve_kernel,
)
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]


@dataclasses.dataclass(eq=False)
class StrictResolver(ActiveSignatures):
    """What every re-solve of one strict payment job shares (:func:`strict_resolver`):
    the base ``Ψ``, the ``η`` grid of the full search, the base's a-step multipliers
    at each grid point (warm starts) and its profile values there (lower bounds for a
    re-solve whose ``Ψ_i`` is not below the base's: :func:`._strict_kernel.grid_states`),
    and ``Ψ`` sorted with the double-double prefix
    sums of ``Ψ − ref`` and ``(Ψ − ref)²`` and each seller's rank
    (:mod:`._sorted_astep`: an a-step in O(log m))."""

    prob: Problem
    base: Allocation
    psi: FloatArray
    grid: FloatArray
    grid_A: FloatArray
    grid_s: FloatArray
    grid_V: FloatArray
    grid_W: FloatArray
    kcap: float
    e_max: float
    two_smallest: tuple[int, int]
    sorted_psi: FloatArray
    prefix: FloatArray
    ref: float
    rank: NDArray[np.int64]
    _signature: bytes | None = None
    _base_status: tuple[NDArray[np.uint8], int, int] | None = None

    def solve(self, i: int, psi_i: float) -> LeanSolve | None:
        """Seller ``i`` re-solved at ``Ψ_i = psi_i`` (any finite value); ``None`` when
        the full path must run (an a-step failed its check, the certificate did not
        close, or a KKT residual is above ``KKT_TOL``)."""
        cfg = self.prob.cfg
        if not math.isfinite(psi_i):
            return None
        # P(η) does not fall as Ψ_i rises: the base's grid values bound it from below
        out = self.kernel(i, psi_i, psi_i >= self.psi[i])
        if out[0] != 1.0:
            return None
        eta, A, s, value, lower, slope = out[1:7].tolist()
        a_i, h = float(out[8]), float(out[10])
        lo, hi = float(self.grid[0]), float(self.grid[-1])
        gap = max(value - lower, 0.0)
        if not gap <= RANGE_RTOL * (1.0 + abs(value)):
            return None
        a_max = self._largest_weight(i, psi_i, eta, A, s, h)
        kkt = max(
            self._a_residual(A, s, a_max), eta_residual(slope, eta, lo, hi, value)
        )
        if not kkt <= KKT_TOL:
            return None
        eps = a_i * eta
        if cfg.curvature_overhead:  # learners.privacy.curvature_slack, one seller
            eps = eps + float(2.0 * np.log1p(np.float64(a_i) / (4.0 * cfg.lam)))
        return LeanSolve(
            int(i), float(psi_i), float(eps), a_i, h, -1, eta, A, s, value,
            "optimal", kkt, gap / (1.0 + abs(value)),
        )  # fmt: skip

    def kernel(self, i: int, psi_i: float, stale: bool) -> FloatArray:
        """:func:`._strict_kernel.strict_resolve_kernel`'s output for seller ``i`` at
        ``Ψ_i = psi_i``; ``stale`` (valid only where ``psi_i ≥ Ψ_i`` of the base):
        start from the base's grid values as lower bounds."""
        cfg = self.prob.cfg
        sc = (
            self.sorted_psi, self.prefix, self.ref, int(self.rank[i]), self.psi,
            int(i), float(psi_i),
        )  # fmt: skip
        return strict_resolve_kernel(
            sc, self.grid, self.grid_A, self.grid_s, self.grid_V, self.grid_W,
            bool(stale), float(self.prob.strict_loss_value), float(cfg.gamma),
            float(cfg.mu), float(cfg.sigma), self.kcap, self.e_max, RANGE_RTOL,
            MAX_CELLS,
        )  # fmt: skip

    def _largest_weight(
        self, i: int, psi_i: float, eta: float, A: float, s: float, h: float
    ) -> float:
        """``max_k a_k = clip(A − s r_min, 0, min(h, 1))``: the smallest ``r`` holds
        the largest weight (``r_min`` from the two smallest base ``Ψ`` and ``psi_i``)."""
        j0, j1 = self.two_smallest
        psi_min = min(float(self.psi[j0 if j0 != i else j1]), psi_i)
        r_min = self.prob.strict_loss_value + (self.prob.cfg.gamma * eta) * psi_min
        return float(min(max(A - s * r_min, 0.0), h, 1.0))

    def _a_residual(self, A: float, s: float, a_max: float) -> float:
        """Bound on the a-block's relative KKT residual at ``a = clip(A − s r, 0, h)``
        from the a-step's check ``|‖a‖ − μs| ≤ CHECK_RTOL·max(1, μs)``
        (:mod:`._range_resolve`, with ``ρ = μs/‖a‖``): a free seller has
        ``g_k − τ = (ρ − 1)a_k/s``, one at a cap at most that, so the residual is at
        most ``|ρ − 1|·max_k a_k/s/(1 + |τ|)`` with ``τ = A/s``."""
        ms = self.prob.cfg.mu * s
        tol = CHECK_RTOL * max(1.0, ms)
        norm_lo = ms - tol
        if not (s > 0.0 and norm_lo > 0.0):
            return math.inf
        return (tol / norm_lo) * (a_max / s) / (1.0 + abs(A / s))

    # Signatures. With every cap k/m the status of every other seller (0: at zero,
    # 1: free, 2: at its cap, as ``bound_status`` reads it) is a non-increasing
    # function of its Ψ, at a re-solve as at a full solve, so the classes are ranges
    # of the sorted order and the active signature is determined by two counts over
    # the other sellers and seller i's own status: O(log m) from a re-solve's
    # (η, A, s) instead of O(m) bytes. Every signature of a sweep with this resolver
    # is in this form, so they compare among themselves exactly as the byte strings.

    def signature(self, lean: LeanSolve) -> bytes:
        """The active signature of a re-solve, in O(log m)."""
        cfg = self.prob.cfg
        q = float(cfg.gamma * lean.eta)
        i = lean.index
        c = float(self.prob.strict_loss_value)
        hi_bound = lean.h_i * (1.0 - 1e-9)
        lo_bound = NONZERO
        n2 = count_at_least(self.sorted_psi, lean.A, lean.s, c, q, hi_bound)
        n_nz = count_at_least(self.sorted_psi, lean.A, lean.s, c, q, lo_bound)
        v_base = lean.A - lean.s * (c + q * float(self.psi[i]))
        n2 -= int(v_base >= hi_bound)
        n_nz -= int(v_base >= lo_bound)
        return _counts(n2, n_nz - n2, _status(lean.a_i, lean.h_i))

    def kink_boundary(
        self, lo: LeanSolve, hi: LeanSolve
    ) -> tuple[float, bool, bool] | None:
        """One status that differs between two re-solves' signatures, as
        ``(Ψ_k, at_cap, own)``: seller ``i``'s own status where it differs (``own``:
        the change that bends ``ε_i`` itself; while the seller sits at its cap, the
        other sellers' changes leave ``u`` level and need no search), else the first
        count that differs names one seller and one bound (the dearest capped other
        seller leaving its cap, the dearest non-zero one reaching 0), whose margin
        (:meth:`kink_margin`) crosses 0 where that status changes. ``None`` when the
        signatures agree."""
        s0 = np.frombuffer(self.signature(lo), dtype=np.int64)
        s1 = np.frombuffer(self.signature(hi), dtype=np.int64)
        ri = int(self.rank[lo.index])

        def psi_of_other(k: int) -> float:  # the k-th cheapest other seller's Ψ
            return float(self.sorted_psi[k if k < ri else k + 1])

        if s0[2] != s1[2]:
            return math.nan, 2 in (s0[2], s1[2]), True
        if s0[0] != s1[0]:
            return psi_of_other(int(min(s0[0], s1[0]))), True, False
        if s0[0] + s0[1] != s1[0] + s1[1]:
            return psi_of_other(int(min(s0[0] + s0[1], s1[0] + s1[1]))), False, False
        return None

    def kink_margin(self, lean: LeanSolve, boundary: tuple[float, bool, bool]) -> float:
        """``g = A − s(c + γηΨ_k) − bound`` at a re-solve (``bound``: the cap
        ``h(η)(1 − 10⁻⁹)`` or just above 0): the value ``bound_status`` compares for
        that seller. It is continuous in the report and smooth on either side of the
        change it marks (where the active set, and so the closed form of ``(A, s)``,
        changes)."""
        psi_k, at_cap, own = boundary
        bound = lean.h_i * (1.0 - 1e-9) if at_cap else NONZERO
        p = lean.psi_i if own else psi_k
        q = float(self.prob.cfg.gamma * lean.eta)
        c = float(self.prob.strict_loss_value)
        return float(lean.A - lean.s * (c + q * p) - bound)

    def own_margin(self, lean: LeanSolve) -> float:
        """Seller ``i``'s own margin against 0 at its re-solve ``lean``
        (:meth:`kink_margin` at its own ``Ψ_i``)."""
        return self.kink_margin(lean, (lean.psi_i, False, True))

    def same_model(self, x: LeanSolve | None, y: LeanSolve | None) -> bool:
        """Always: strict mode has no model to switch (``ε_i`` jumps only where ``η``
        switches basin, which the kink search reads from ``u`` itself)."""
        return True

    def allocation_signature(self, alloc: Allocation, i: int) -> bytes:
        """The signature of a full solve in the same form (O(m))."""
        return _signature_from(_statuses(self.prob, alloc), i)

    def own_status(self, signature: bytes, i: int) -> int:
        """Seller ``i``'s own status: the last of the signature's three counts."""
        return int(np.frombuffer(signature, dtype=np.int64)[2])

    def base_signature(self, i: int) -> bytes:
        """The base's signature for seller ``i`` (the base's statuses and their
        counts once per job and process, then O(1))."""
        if self._base_status is None:
            self._base_status = _statuses(self.prob, self.base)
        return _signature_from(self._base_status, i)

    def weights(self, lean: LeanSolve) -> FloatArray:
        """The whole ``a`` of a re-solve (O(m)): ``clip(A − s r, 0, h)``."""
        cfg = self.prob.cfg
        psi = self.psi.copy()
        psi[lean.index] = lean.psi_i
        r = self.prob.strict_loss_value + (cfg.gamma * lean.eta) * psi
        a = np.clip(lean.A - lean.s * r, 0.0, lean.h_i)
        return np.asarray(a, dtype=float)


def _status(a: float, h: float) -> int:
    """``bound_status`` of one weight under cap ``h``."""
    return 0 if a <= 1e-12 else (2 if a >= h * (1 - 1e-9) else 1)


def _counts(n_capped: int, n_free: int, own: int) -> bytes:
    return np.array([n_capped, n_free, own], dtype=np.int64).tobytes()


def _statuses(prob: Problem, alloc: Allocation) -> tuple[NDArray[np.uint8], int, int]:
    """``bound_status`` of every weight of ``alloc``, and how many are capped and
    free."""
    a = np.asarray(alloc.weights, dtype=float)
    if alloc.eta <= 0:
        return np.zeros(a.size, dtype=np.uint8), 0, 0
    caps = prob.caps(alloc.eta)
    st = np.where(a <= 1e-12, 0, np.where(a >= caps * (1 - 1e-9), 2, 1))
    st = st.astype(np.uint8)
    return st, int(np.count_nonzero(st == 2)), int(np.count_nonzero(st == 1))


def _signature_from(status: tuple[NDArray[np.uint8], int, int], i: int) -> bytes:
    st, n2, n1 = status
    own = int(st[i])
    return _counts(n2 - int(own == 2), n1 - int(own == 1), own)


def strict_resolver(prob: Problem, base: Allocation) -> StrictResolver | None:
    """The lean strict re-solver of ``base`` (one per base, problem and process), or
    ``None`` where it does not apply: not strict mode, power ``u``, ``μ = 0``,
    ``γ = 0``, ``ε_i^max`` caps that differ between sellers where they bind on the
    ``η`` range (the caps then differ and the sorted classes do not hold), or caps that
    force the weights."""
    cfg = prob.cfg
    if cfg.mode != "strict" or cfg.u != "linear" or not (cfg.mu > 0 and cfg.gamma > 0):
        return None
    return base_memo(base, "strict_resolver", prob, lambda: _build(prob, base))


def _build(prob: Problem, base: Allocation) -> StrictResolver | None:
    cfg, m = prob.cfg, prob.m
    bounds = eta_bounds(prob)
    if bounds is None:
        return None
    kcap = cfg.k / m
    if not kcap * m > 1.0 + 1e-12:
        return None
    e_max = _common_eps_max(prob.eps_max, kcap * bounds[1])
    if e_max is None:
        return None
    psi = np.ascontiguousarray(prob.psi, dtype=float)
    if not np.isfinite(psi).all():
        return None
    grid = np.geomspace(bounds[0], bounds[1], cfg.n_grid)
    prof = base.profile
    if prof is not None and not np.array_equal(prof.grid, grid):
        return None
    ok, grid_A, grid_s, grid_V, grid_W = grid_states(
        psi, grid, float(prob.strict_loss_value), float(cfg.gamma), float(cfg.mu),
        float(cfg.sigma), kcap, e_max,
    )  # fmt: skip
    if not ok:
        return None
    order = np.argsort(psi, kind="stable")
    two = (int(order[0]), int(order[min(1, m - 1)]))
    sorted_psi = np.ascontiguousarray(psi[order])
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m, dtype=np.int64)
    ref = float(sorted_psi[m // 2])
    prefix = prefix_sums(sorted_psi, ref)
    return StrictResolver(
        prob, base, psi, grid, grid_A, grid_s, grid_V, grid_W, kcap, e_max, two,
        sorted_psi, prefix, ref, rank,
    )  # fmt: skip


def _common_eps_max(eps_max: FloatArray, never_binds: float) -> float | None:
    """The ``ε^max`` every seller shares (``∞`` when none binds on the ``η`` range:
    every one ``≥ (k/m)·η_hi``), or ``None`` when they differ where they bind (the
    caps then differ between sellers and the sorted classes do not hold)."""
    if np.all(eps_max >= never_binds):
        return math.inf
    first = float(eps_max[0])
    if first > 0.0 and np.all(eps_max == first):
        return first
    return None
