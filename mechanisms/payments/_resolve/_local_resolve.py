"""Certified fast re-solve when one seller's virtual cost goes **up** (payment sweeps).

:func:`mechanisms.allocation._eta_search.solve_allocation` re-runs the whole ``η`` search: every
coarse-grid point, a Brent refinement around the best one, then the exact block polish.
In a payment sweep seller ``i`` reports ``s ≥ c_i`` so ``Ψ_i`` only increases, and then
the grid values can only increase: ``P_j(Ψ) = min_{w,a} G(w, a, η_j; Ψ)`` is a minimum
of functions non-decreasing in ``Ψ_i`` (``γ η_j a_i u' ≥ 0``). Hence if the base's best
grid point ``j*`` re-solved with the new ``Ψ`` is still below every *base* value
``P_j(Ψ_base)`` (``j ≠ j*``, minus a tolerance margin), the full search would pick the
same cell ``j*`` again, and its refinement + polish end at the local optimum of the
profile in that cell — which the polish from the base point reaches directly. The
re-solve at ``j*`` is skipped when ``G`` at the base's grid solution there, evaluated with
the new ``Ψ`` (an upper bound on ``P_j*``), already clears the other cells' floors.
The shortcut is used only when that certificate holds and the polished ``η`` stays in
the cell ``[η_{j*−1}, η_{j*+1}]``; otherwise it returns ``None`` and the caller runs
the full search. Where the cell test fails at a neighbour ``k = j* ± 1`` alone (a
near tie of two grid values, the optimum between them, which the full search may pick
either of), the two cells overlap between ``η_{j*}`` and ``η_k``, and the polished
``η`` must lie there (:func:`_tied_cell`). Linear ``u`` only (the polish is defined
there).

The base values are the grid solves' values, not bounds, hence the margin ``MARGIN``
above. Where the profile is flat in ``η`` (grid values within ``MARGIN`` of each
other: a small ``γ``), that test never holds, and the same conclusion is drawn from
the base's *certified* node bounds instead, which need no margin: the full search's
grid value at ``j ≠ j*`` is at least that node bound (``P_j`` only rises with
``Ψ_i``), and its value at ``j*`` at most the upper bound plus the grid solve's
error, ``‖∇F‖²/(2(λ − λ_conv))`` at its stopping gradient (:func:`grid_error`).

Several local minima: the cell argument above only shows the shortcut reaches the *same local*
optimum as the full search's refinement; it says nothing when the fixed-``η`` problems
have several local minima. So the shortcut now runs only when the base allocation is
certified (``status == "optimal"``), and its result is accepted only with its own
certificate: the ``η``-range branch-and-bound of :mod:`mechanisms.allocation._range._certify` closes at
the re-solved point, using the base's grid bounds as stale node bounds (valid since
``G`` is non-decreasing in ``Ψ_i``, renewed when a cell needs it). With ``λ > λ_conv``
both the shortcut and the full search then return the global optimum over the range
(to ``RANGE_RTOL``), so they agree; otherwise ``None`` (full search).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._blas import single_blas_thread
from mechanisms.allocation._block_solver import BlockSolution, solve_at_eta
from mechanisms.allocation._eta_search import (
    GRID_TOL,
    KKT_TOL,
    _polish,
    _result,
    eta_bounds,
    result_kkt,
    solve_allocation,
    solve_and_polish,
)
from mechanisms.allocation._logistic_kernel import logistic_pass
from mechanisms.allocation._problem import Problem, search_value
from mechanisms.allocation._range._certify import (
    RANGE_RTOL,
    AllocationCertificate,
    Node,
    StaleNodes,
    _modulus,
    certify_range,
    effective_problem,
    node_of,
)
from mechanisms.allocation._reduced_newton import hessian_at, value_and_gradient
from mechanisms.allocation._weights_step import WeightsStepState
from mechanisms.config import MechanismConfig
from mechanisms.payments._base_memo import base_memo
from mechanisms.result import Allocation, EtaProfile, SolveStatus

FloatArray = NDArray[np.float64]

MARGIN = 1e-5  # relative; well above the grid solves' tolerance GRID_TOL
# The shortcut's η polish stops where the full search's does (|T(η) − η| ≤ 1e-13·η):
# with 1e-10 the two differed by ~5e-8 in ε_i, enough for a visible (tiny) upward step
# of a sweep mixing shortcut and full evaluations.
ETA_RTOL = 1e-13
FINE_NODES = 16  # extra stale nodes around the base optimum (see stale_nodes)
ROUNDING = 1e-12  # relative allowance for the rounding of G and of its bounds


@single_blas_thread
def local_resolve(
    prob: Problem,
    base: Allocation,
    *,
    lower_bounds: FloatArray | None = None,
    start: tuple[FloatArray, FloatArray, float] | None = None,
    nodes: dict[float, Node] | None = None,
    fit_w: bool = True,
    hessian: FloatArray | None = None,
) -> Allocation | None:
    """The allocation ``solve_allocation(prob, warm_start=base, fit_w=fit_w)`` would
    return, when the certificate of the module docstring holds; else ``None``.

    Parameters
    ----------
    prob : Problem
        ``base``'s problem with some virtual costs raised (never lowered).
    base : Allocation
        The base solution (its ``η`` grid and stored grid solutions).
    lower_bounds : ndarray, optional
        Lower bounds on the grid values ``P_j`` at ``prob.psi`` (default: the base's
        values, valid because ``P_j`` is non-decreasing in ``Ψ``).
    start : (w, a, η), optional
        Where the local polish starts (default the base point): a nearby solution.
    nodes : dict, optional
        Stale certified nodes of the base (:func:`stale_nodes`) for the range
        branch-and-bound (default: the base's coarse-grid bounds only).
    fit_w : bool
        Strict mode: whether to fit ``w`` for the result
        (:func:`mechanisms.allocation._eta_search.solve_allocation`); payment sweeps
        need only ``ε`` and pass ``False``.
    hessian : ndarray, optional
        The base's ``∇²F`` (:func:`base_hessian`) for chord steps from the
        re-solve's start instead of Hessians at its iterates
        (:func:`mechanisms.allocation._reduced_newton.newton_reduced`).
    """
    t0 = time.perf_counter()
    found = _certified_resolve(prob, base, lower_bounds, start, nodes, fit_w, hessian)
    if found is None:
        return None
    eff, best, cert, n_iter, n_evals = found
    timings = {"total": time.perf_counter() - t0}
    out = _result(eff, best, base.profile, n_iter, n_evals, timings, cert, fit_w=fit_w)
    return out if out.certified else None


@dataclass(frozen=True, slots=True)
class LocalSolve:
    """One certified shortcut re-solve as a payment sweep reads it: the point
    ``(w, a, η)`` (read-only arrays, the next re-solve's start), seller ``index``'s
    ``ε_i^total``, and what :func:`mechanisms.payments._resolve._seller_curve.allocation_check`
    reads from :func:`local_resolve`'s allocation (``status``, the largest KKT
    residual, the range gap relative to ``1 + |G|``), without that allocation's O(m)
    arrays (``ε``, ``ε^total``, copies of ``w`` and ``a``); ``value``: the search's
    objective ``G`` at the point (of the certified problem, whose ``λ`` the
    certificate may have raised: the same for every re-solve of one base)."""

    w: FloatArray
    weights: FloatArray
    eta: float
    epsilon_total: float
    status: str
    kkt: float
    gap: float | None
    value: float = math.nan


@single_blas_thread
def local_resolve_seller(
    prob: Problem,
    base: Allocation,
    index: int,
    *,
    lower_bounds: FloatArray | None = None,
    start: tuple[FloatArray, FloatArray, float] | None = None,
    nodes: dict[float, Node] | None = None,
    fit_w: bool = True,
    hessian: FloatArray | None = None,
    sole_change: bool = False,
) -> LocalSolve | None:
    """:func:`local_resolve` for a payment sweep of seller ``index``: the same
    re-solve and the same acceptance (a closed range certificate and block KKT
    residuals within ``KKT_TOL``, i.e. status ``"optimal"``), returned as a
    :class:`LocalSolve` with the same values (``ε_index^total`` by the same
    operations as the allocation's). ``sole_change``: the caller's promise that
    ``prob``'s virtual costs are the base's, bit for bit and finite, but seller
    ``index``'s (:func:`sole_change`), so the raise is read at that seller alone
    instead of by passes over all ``m``, and the range certificate's stale renewals
    are one-seller updates (``certify_range``'s ``one_seller``: the same bounds to
    rounding, so the same result but for the last bits of ``gap``)."""
    found = _certified_resolve(
        prob, base, lower_bounds, start, nodes, fit_w, hessian,
        index if sole_change else None,
    )  # fmt: skip
    if found is None:
        return None
    eff, best, cert, _, _ = found
    kkt = result_kkt(eff, best, base.profile, cert, fit_w=fit_w).max()
    if not (best.converged and kkt <= KKT_TOL and cert.certified):
        return None  # local_resolve's allocation would not be "optimal"
    a_i = best.a[index]
    eps_i = a_i * best.eta  # epsilon_total's operations, one seller
    if eff.cfg.curvature_overhead:
        eps_i = eps_i + 2.0 * np.log1p(a_i / (4.0 * eff.cfg.lam))
    eps_i = float(eps_i)
    gap = cert.relative_gap(best.search_value or best.value)
    w, a = best.w, best.a
    w.flags.writeable = False
    a.flags.writeable = False
    return LocalSolve(
        w, a, float(best.eta), eps_i, str(SolveStatus.OPTIMAL), kkt, gap,
        float(best.search_value),
    )  # fmt: skip


def _certified_resolve(
    prob: Problem,
    base: Allocation,
    lower_bounds: FloatArray | None,
    start: tuple[FloatArray, FloatArray, float] | None,
    nodes: dict[float, Node] | None,
    fit_w: bool,
    hessian: FloatArray | None,
    index: int | None = None,
) -> tuple[Problem, BlockSolution, AllocationCertificate, int, int] | None:
    """The body of :func:`local_resolve`: ``(effective problem, point, closed
    certificate, iterations, η evaluations)``, or ``None`` where the shortcut
    declines. ``index``: the only seller whose virtual cost differs from the
    base's (:func:`local_resolve_seller`'s ``sole_change``), else ``None``."""
    fixed = _fixed_part(prob, base)
    if fixed is None:
        return None
    if fixed.cfg is not prob.cfg:  # λ raised to the certified one (effective_problem)
        prob = dataclasses.replace(prob, cfg=fixed.cfg)
    cfg, lam_conv, grid, prof = prob.cfg, fixed.lam_conv, fixed.grid, fixed.profile
    raised: FloatArray | None = None
    raised_i = 0.0
    if index is not None and math.isfinite(float(prob.psi[index])):
        # every other entry of Ψ − Ψ_base is +0 exactly: the tests and the dot
        # product below read seller index's alone, with the same values
        raised_i = float(prob.psi[index]) - float(base.virtual_costs[index])
        if raised_i < 0.0:
            return None
    else:
        raised = prob.psi - base.virtual_costs  # ≥ 0 (NaN where both are ∞)
        if (raised < 0.0).any():
            return None
    if rises_with_eta(prob):
        state = _nearest_state(nodes, fixed.lo)
        return _at_lowest_eta(prob, base, fixed.lo, lam_conv, start, state, hessian)
    if lower_bounds is None or lower_bounds is prof.grid_values:
        j, floor = fixed.grid_best, fixed.grid_floor
    else:
        j, floor = _best_and_floor(lower_bounds)
    w_j, a_j = prof.starts[j]
    # Upper bound on P_j*: G at the base's grid solution with the new Ψ; re-solve
    # at η_j* only when that bound is not already below every other cell's floor.
    # G is affine in Ψ (linear u: the privacy term is γηΨᵀa), so from the base's
    # value there it is one dot product instead of a pass over X.
    rise = float(a_j @ raised) if raised is not None else float(a_j[index]) * raised_i
    upper = float(prof.grid_values[j]) + cfg.gamma * float(grid[j]) * rise
    if not math.isfinite(upper):
        upper = search_value(prob, w_j, a_j, float(grid[j]))
    n_iter = 0
    node_floor = fixed.node_floors[j]
    cell = fixed.cells[j]

    def keeps_cell(upper: float) -> bool:
        return _clears(upper, floor, node_floor, grid_error(prob, lam_conv, upper))

    if not keeps_cell(upper):
        at_j = solve_at_eta(prob, float(grid[j]), w0=w_j, a0=a_j, tol=GRID_TOL)
        upper, n_iter = at_j.search_value, at_j.iterations
        if not keeps_cell(upper):
            values = prof.grid_values if lower_bounds is None else lower_bounds
            tied = _tied_cell(prob, fixed, j, upper, values)
            if tied is None:
                return None
            cell = tied
    w_s, a_s, eta_s = (base.w, base.weights, base.eta) if start is None else start
    lo, hi = fixed.lo, fixed.hi
    best = solve_and_polish(
        prob, eta_s, w0=w_s, a0=a_s, state=_nearest_state(nodes, eta_s), lo=lo,
        hi=hi, eta_rtol=ETA_RTOL, hessian0=hessian,
        losses0=base_losses(prob, base) if w_s is base.w else None,
    )  # fmt: skip
    cell_lo, cell_hi = cell
    # the upper bound and the polished value are the same G by two roundings where
    # the polish ends at the grid point itself (an end of the range): compare them
    # with the rounding allowance of grid_error
    slack = ROUNDING * (1.0 + abs(upper))
    if not cell_lo <= best.eta <= cell_hi or best.search_value > upper + slack:
        return None
    if nodes is None:
        nodes = grid_nodes(base)
    found, lower, n_bb = certify_range(
        prob,
        best,
        lo,
        hi,
        nodes=nodes,  # read only (its cell cache is filled on first use)
        lam_conv=lam_conv,
        one_seller=None if index is None else (index, float(base.virtual_costs[index])),
    )
    if found is not best:
        found = _polish(prob, found, lo, hi)
        if found.search_value < best.search_value:
            best = found
    gap = max(best.search_value - lower, 0.0)
    closed = gap <= RANGE_RTOL * (1.0 + abs(best.search_value))
    if not closed:
        return None
    cert = AllocationCertificate(cfg.lam, lam_conv, True, True, lower, gap, True, n_bb)
    return prob, best, cert, n_iter + best.iterations, 2


def _clears(upper: float, floor: float, bound: float, err: float) -> bool:
    """The cell test against one floor: ``upper`` (an upper bound on the re-solve's
    grid value in the shortcut's cell) below the base's grid value ``floor`` by the
    margin ``MARGIN``, or ``upper`` plus the grid solve's error ``err``
    (:func:`grid_error`) below the certified base bound ``bound``."""
    return upper < floor - MARGIN * (1.0 + abs(upper)) or upper + err < bound


def _tied_cell(
    prob: Problem, fixed: _FixedPart, j: int, upper: float, values: FloatArray
) -> tuple[float, float] | None:
    """Where the floors show the full search's grid minimum at ``j`` **or at a
    neighbour of** ``j``: the part of ``j``'s cell ``[η_{j−1}, η_{j+1}]`` that the
    neighbours' cells share, else ``None``. ``upper``: the re-solved value at
    ``η_j``; ``values``: the floors the margin test reads (the base's grid values or
    the caller's lower bounds).

    A grid point ``k`` passes when its floor clears ``upper`` as in the cell test
    (``values[k]`` by the margin, or its certified node bound by ``grid_error``). A
    neighbour ``k = j ± 1`` that does not pass may hold the full search's minimum
    instead of ``j``, a near tie of two grid values where the optimum lies between
    them; the full search's refinement then runs in ``[η_{k−1}, η_{k+1}]``, which
    shares with ``j``'s cell the interval between ``η_j`` and ``η_k``. When the
    shortcut's polished ``η`` lies there (the caller's test), both searches end at
    the same local optimum of the profile, as in ``j``'s cell alone. Any other point
    that does not pass: ``None``."""
    err_j = grid_error(prob, fixed.lam_conv, upper)
    grid = fixed.grid
    cell_lo, cell_hi = fixed.cells[j]
    for k in range(grid.size):
        if k == j or _clears(upper, float(values[k]), fixed.node_bounds[k], err_j):
            continue
        if k == j - 1:
            cell_hi = float(grid[j])
        elif k == j + 1:
            cell_lo = float(grid[j])
        else:
            return None
    return cell_lo, cell_hi


@dataclass(frozen=True, eq=False)
class _FixedPart:
    """What the shortcut reads from the base and the problem's records, caps and
    configuration, the same for every re-solve of a payment job
    (:func:`_fixed_part`): the effective configuration (``λ`` raised where the rule
    raises it) and ``λ_conv``, the base's ``η`` profile and grid with its ends, each
    grid point's cell ``[η_{j−1}, η_{j+1}]``, the certified base bounds of the grid
    points and the least of the others' at each (:func:`_node_floors`), and the best
    grid point of the base's values with the least value of the others (the
    shortcut's cell and floor where no other lower bounds are given)."""

    X: FloatArray
    eps_max: FloatArray
    cfg: MechanismConfig
    lam_conv: float
    profile: EtaProfile
    grid: FloatArray
    lo: float
    hi: float
    cells: tuple[tuple[float, float], ...]
    node_floors: tuple[float, ...]
    node_bounds: tuple[float, ...]
    grid_best: int
    grid_floor: float


def _fixed_part(prob: Problem, base: Allocation) -> _FixedPart | None:
    """The :class:`_FixedPart` of ``prob`` and ``base`` (once per base, process and
    configuration object while the records and caps stay the same), or ``None``
    where the shortcut does not apply whatever the costs: no profile, a
    configuration other than linear ``u`` outside the paper mode, an uncertified
    base, no ``λ_conv``, or a grid that is not the search's for this problem."""
    owner = (prob.cfg, prob.X, prob.eps_max)
    return base_memo(base, "shortcut_fixed", owner, lambda: _compute_fixed(prob, base))


def _compute_fixed(prob: Problem, base: Allocation) -> _FixedPart | None:
    """:func:`_fixed_part` computed."""
    prof = base.profile
    if prof is None:  # e.g. the candidate-model rule: its re-solves reuse the base
        return None
    eff, lam_conv = effective_problem(prob)
    cfg = eff.cfg
    if cfg.u != "linear" or cfg.mode == "paper" or not base.certified:
        return None
    base_cert = base.certificate
    if (
        lam_conv is None
        or base_cert is None
        or len(base_cert.node_bounds) != len(prof.grid)
    ):
        return None
    bounds = eta_bounds(eff)
    if bounds is None:
        return None
    # the search's grid is np.geomspace(lo, hi, n_grid), whose ends are lo and hi
    # exactly: the same ends and size are the same grid (no 50 µs geomspace per call)
    grid = np.asarray(prof.grid)
    if not (grid.size == cfg.n_grid and grid[0] == bounds[0] and grid[-1] == bounds[1]):
        return None
    n = grid.size
    cells = tuple((grid[max(j - 1, 0)], grid[min(j + 1, n - 1)]) for j in range(n))
    best, floor = _best_and_floor(prof.grid_values)
    return _FixedPart(
        prob.X, prob.eps_max, cfg, lam_conv, prof, grid, float(grid[0]),
        float(grid[-1]), cells, _node_floors(base_cert.node_bounds),
        tuple(base_cert.node_bounds), best, floor,
    )  # fmt: skip


def _best_and_floor(values: FloatArray) -> tuple[int, float]:
    """``(j, floor)``: the grid point of the least value and the least value of the
    others (``∞`` where there are none): the shortcut's cell and the floor it must
    stay below."""
    j = int(values.argmin())
    rest = min(values[:j].min(initial=np.inf), values[j + 1 :].min(initial=np.inf))
    return j, float(rest)


def sole_change(prob: Problem, base: Allocation) -> bool:
    """Whether a problem ``prob.with_seller_psi(i, ψ)`` (finite ``ψ``) differs from
    ``base``'s virtual costs at seller ``i`` alone, bit for bit: ``prob``'s virtual
    costs are its given ones and equal the base's, all finite (once per base and
    problem; :func:`local_resolve_seller`'s ``sole_change``)."""

    def compute() -> bool:
        psi = prob.psi
        return bool(
            psi is prob.given_psi
            and prob.eps_max is prob.given_eps_max
            and np.array_equal(psi, base.virtual_costs)
            and np.isfinite(psi).all()
        )

    return base_memo(base, "sole_change", prob, compute)


def _nearest_state(
    nodes: dict[float, Node] | None, eta: float
) -> WeightsStepState | None:
    """The a-step multipliers of the stale node nearest ``η`` (a warm start for the
    compiled a-step: without one it guesses them from the weights, a NumPy median)."""
    if not nodes:
        return None
    if isinstance(nodes, StaleNodes):
        near = nodes.nearest(eta)
    else:
        near = min(nodes, key=lambda e: abs(e - eta))
    return nodes[near].state


@functools.lru_cache(maxsize=8)
def _node_floors(node_bounds: tuple[float, ...]) -> tuple[float, ...]:
    """The least certified base bound of the grid points other than ``j``, at every
    ``j`` (prefix and suffix minima): the same for every re-solve of a payment job."""
    n = len(node_bounds)
    prefix = [np.inf] * (n + 1)
    suffix = [np.inf] * (n + 1)
    for k in range(n):
        prefix[k + 1] = min(prefix[k], node_bounds[k])
        suffix[n - 1 - k] = min(suffix[n - k], node_bounds[n - 1 - k])
    return tuple(min(prefix[j], suffix[j + 1]) for j in range(n))


def grid_error(prob: Problem, lam_conv: float, value: float) -> float:
    """How far above ``P_j`` the full search's coarse-grid value can be, plus rounding.

    A grid solve stops at ``‖∇F(w)‖ ≤ GRID_TOL·(1 + ‖w‖)``
    (:func:`mechanisms.allocation._reduced_newton.newton_reduced`), and ``F`` is
    strongly convex with modulus ``λ − λ_conv`` (``1`` in strict mode,
    :func:`mechanisms.allocation._range._certify.node_of`), so
    ``F(w) − P_j ≤ ‖∇F‖²/(2(λ − λ_conv))``. Every term of ``G`` but the ridge is
    non-negative, so ``‖w‖² ≤ 2F(w)/λ``, and ``F(w) ≤ 2(1 + |value|)`` for the
    values compared here (``value`` an upper bound on ``P_j``). Plus ``1e-12``
    relative for the rounding of ``F`` and of the bounds. (A grid solve that stops
    short of that gradient, at its iteration limit, is outside this bound, as it is
    outside the margin test's; the shortcut's own certificate and the sampled
    cross-check against full searches still apply.)"""
    cfg = prob.cfg
    modulus = _modulus(prob, lam_conv)
    if not modulus > 0.0:
        return np.inf
    w_norm = np.sqrt(4.0 * (1.0 + abs(value)) / cfg.lam)
    grad = GRID_TOL * (1.0 + w_norm)
    return float(grad * grad / (2.0 * modulus) + ROUNDING * (1.0 + abs(value)))


def rises_with_eta(prob: Problem) -> bool:
    """Whether ``P(η) = min_{w, a∈C(η)} G(w, a, η)`` is increasing in ``η``: ``σ = 0``,
    no noise term, ``γ > 0`` and every ``Ψ_i > 0``, linear ``u``. At fixed ``(w, a)``,
    ``G`` then grows with ``η`` through ``γηΨᵀa`` alone (``Σ a = 1``), and
    ``C(η)`` shrinks as ``η`` grows (``h_i = min(k/m, ε_i^max/η)``), so the rule's
    optimum is the range's lower end ``η_lo`` for every report."""
    cfg = prob.cfg
    return (
        cfg.sigma == 0.0
        and cfg.gamma > 0.0
        and cfg.u == "linear"
        and prob.noise is None
        and bool(np.all(prob.psi > 0.0))
    )


def _at_lowest_eta(
    prob: Problem,
    base: Allocation,
    eta_lo: float,
    lam_conv: float,
    start: tuple[FloatArray, FloatArray, float] | None,
    state: WeightsStepState | None = None,
    hessian: FloatArray | None = None,
) -> tuple[Problem, BlockSolution, AllocationCertificate, int, int] | None:
    """The re-solve where ``P`` rises with ``η`` (:func:`rises_with_eta`): one
    fixed-``η`` solve at ``η_lo``, where the full search also ends (its ``η``-step is
    ``clip(√(σ/(γΨᵀa)), η_lo, η_hi) = η_lo``), certified by that solve's rigorous
    bound ``F(w) − ‖∇F(w)‖²/(2(λ − λ_conv))`` (:func:`node_of`), a lower bound on
    ``P(η_lo) ≤ P(η)`` for every ``η`` of the range. ``state``: a-step multipliers to
    start from (a stale node's at ``η_lo``; else guessed from the start's weights);
    ``hessian``: the base's, for chord steps."""
    w0, a0 = (base.w, base.weights) if start is None else (start[0], start[1])
    best = solve_at_eta(prob, eta_lo, w0=w0, a0=a0, state=state, hessian0=hessian)
    lower = min(node_of(prob, best, lam_conv).bound, best.search_value)
    gap = max(best.search_value - lower, 0.0)
    if not gap <= RANGE_RTOL * (1.0 + abs(best.search_value)):
        return None
    cert = AllocationCertificate(
        prob.cfg.lam, lam_conv, True, True, lower, gap, True, 0
    )
    return prob, best, cert, best.iterations, 1


def grid_nodes(base: Allocation) -> dict[float, Node]:
    """The base's coarse-grid certified bounds as stale nodes (empty without them)."""
    prof, cert = base.profile, base.certificate
    if prof is None or cert is None or len(cert.node_bounds) != len(prof.grid):
        return {}
    return {
        float(e): Node(lb, w, a, stale=True)
        for e, lb, (w, a) in zip(prof.grid, cert.node_bounds, prof.starts, strict=True)
    }


@single_blas_thread
def stale_nodes(
    prob: Problem, base: Allocation, *, n_fine: int = FINE_NODES
) -> dict[float, Node]:
    """Certified lower bounds of the base's fixed-``η`` problems, for every re-solve.

    The coarse grid's bounds (:func:`grid_nodes`) plus ``n_fine`` log-spaced points
    across the two grid cells around the base optimum and the base ``η`` itself,
    each a fixed-``η`` solve at the **base** virtual costs with its rigorous bound
    (``F(w) − ‖∇F(w)‖²/(2(λ − λ_conv))``, :func:`mechanisms.allocation._range._certify.node_of`).
    A re-solve raises one ``Ψ_i``, and ``G`` is non-decreasing in each ``Ψ_i``, so every
    bound stays valid (marked stale: the branch-and-bound renews a stale end only
    where its bound is below the incumbent, from one evaluation at the stale point).
    Without the fine nodes each re-solve's branch-and-bound re-bisected the optimum's
    cell from the coarse grid (13 solves per re-solve at ``m = 10⁴``). From these
    nodes the base's own branch-and-bound then runs once, and every node of its final
    partition is returned: the two-point cell bound sags by about the profile's
    curvature times the cell's width squared, so the cells next to the optimum must be
    bisected to a width of about ``√(RANGE_RTOL/curvature)``, and a re-solve near the
    base needs the same graded cells (on Wisconsin at a large ``γ``, 9.4 solves per
    re-solve went to these bisections). All of this runs once per payment job.
    """
    nodes = grid_nodes(base)
    prof = base.profile
    eff, lam_conv = effective_problem(prob)
    if not nodes or prof is None or lam_conv is None or not base.certified:
        return nodes
    grid = np.asarray(prof.grid)
    j = int(np.argmin(prof.grid_values))
    lo, hi = float(grid[max(j - 1, 0)]), float(grid[min(j + 1, grid.size - 1)])
    fine = [float(e) for e in np.geomspace(lo, hi, n_fine + 2)[1:-1]]
    for eta in sorted({*fine, float(base.eta)} - set(nodes)):
        sol = solve_at_eta(eff, eta, w0=base.w, a0=base.weights)
        nodes[eta] = node_of(eff, sol, lam_conv)
    # The base's own branch-and-bound from these nodes: its final partition is
    # graded around the optimum as finely as the profile's curvature and RANGE_RTOL
    # need, which is what a re-solve near the base needs too.
    incumbent = nodes[float(base.eta)].solution  # solved above, unless a grid point
    if incumbent is None:
        incumbent = solve_at_eta(eff, float(base.eta), w0=base.w, a0=base.weights)
    fresh = {
        e: dataclasses.replace(nd, stale=False, solution=None)
        for e, nd in nodes.items()
    }
    partition: dict[float, Node] = {}
    certify_range(
        eff, incumbent, float(grid[0]), float(grid[-1]), nodes=fresh,
        lam_conv=lam_conv, partition=partition,
    )  # fmt: skip
    # Every node keeps its a-step multipliers at the base costs: a renewal's a-step
    # starts from them (7.5 µs on Wisconsin) instead of cold (32 µs); the coarse
    # grid's nodes come without them.
    return StaleNodes(
        {
            e: dataclasses.replace(
                nd,
                stale=True,
                solution=None,
                state=nd.state or value_and_gradient(eff, e, nd.w, None)[2],
            )
            for e, nd in partition.items()
        }
    )


def base_losses(
    prob: Problem, base: Allocation
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None:
    """``(Xw, ℓ, ℓ', ℓ'')`` at the base's ``w`` (logistic loss; ``None`` otherwise),
    once per base and process: a re-solve from the base's own ``w`` (a sweep's first,
    at the support's top or the critical cost's first probe) needs neither the
    product ``Xw`` nor the loss pass, which do not depend on the virtual costs. The
    same operations as the compiled solve's, so the same values."""
    if prob.cfg.loss != "logistic":
        return None

    def compute() -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        w = np.ascontiguousarray(base.w, dtype=np.float64)
        z = prob.X @ w
        losses, dl, d2, _ = logistic_pass(z, prob.y, 0.0, prob.psi)
        return z, losses, dl, d2

    return base_memo(base, "base_losses", prob.X, compute)


@single_blas_thread
def base_hessian(prob: Problem, base: Allocation) -> FloatArray | None:
    """``∇²F`` of the rule's fixed-``η`` problem at the base's ``(w, η)`` and virtual
    costs: the frozen Hessian of every re-solve of a payment job (``local_resolve``'s
    ``hessian``). ``None`` where the shortcut does not apply (no profile, no
    certificate, not the default mode's linear utility) or where it is not positive
    definite (no Newton step on it).

    A re-solve raises one ``Ψ_i``; at the base's ``w`` its Hessian differs from this
    one only through the a-step's response to one ``r_i``, so a step on it is
    nearly the Newton step, without the weighted Gram product over all records
    (at ``m = 10⁴``, ``d = 20``, about a millisecond, the largest part of a
    re-solve). Computed once per job, from the job's own problem, so every seller's
    re-solve uses the same matrix wherever it runs."""
    eff, lam_conv = effective_problem(prob)
    cfg = eff.cfg
    if (
        base.profile is None
        or lam_conv is None
        or not base.certified
        or cfg.mode != "default"
        or cfg.u != "linear"
        or not np.all(np.isfinite(base.w))
    ):
        return None
    H = hessian_at(eff, float(base.eta), base.w, base.weights)
    try:
        np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        return None
    return H


def fast_solve(prob: Problem, *, warm_start: Allocation | None = None) -> Allocation:
    """:func:`local_resolve` (base bounds) when certified, else :func:`solve_allocation`."""
    if warm_start is not None:
        out = local_resolve(prob, warm_start)
        if out is not None:
            return out
    return solve_allocation(prob, warm_start=warm_start)
