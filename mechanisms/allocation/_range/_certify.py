"""Certificates of global optimality for the allocation (spec §4, §5).

Why the search needs one
------------------------
At a fixed ``η`` the allocation objective is **not** convex in ``(w, a)`` in general:
``φ(a) = min_w Σ a_i ℓ_i(w) + (λ/2)‖w‖²`` is concave in ``a`` (a minimum of linear
functions), so ``φ(a) + μ‖a‖₂ + γηΣΨ_i a_i`` over the capped simplex is a DC problem
with several local minima when ``λ`` is small. (The paper's Thm 4.1 convexity in
``(w, z = log a)`` holds for the unconstrained objective; the constraint ``Σ e^{z_i} = 1``
is not a convex set, and relaxing it to ``≤ 1`` lets every ``a_i → 0``.) Measured on
a random instance (``m = 20``, ``d = 5``, ``λ = 0.05``): at every ``η`` near the
optimum there are two KKT points, one with ``a_3 = 0.15`` (``G = 2.1556`` at
``η = 26.19``) and one with ``a_3 = 0`` (``G = 2.1432``); which one the warm-started
grid sweep lands in depends on seller 3's report, so ``ε_3(s)`` jumps 3.9 → 0 → 3.9
as ``s`` grows.

Convexity certificate
---------------------
With ``μ > 0`` the a-block minimiser ``a*(r)`` (``r = ℓ(w) + γηΨ``) is unique and
Lipschitz: ``μ‖a‖₂`` is ``κ``-strongly convex on the capped simplex ``C`` with
``κ = μ / (m ρ³)``, ``ρ² = max_{a∈C} ‖a‖² ≤ min(1, max_i h_i)`` (for ``Σ v = 0``,
``vᵀ∇²‖a‖ v ≥ ‖v‖² / (m‖a‖³)``), so ``‖a*(r) − a*(r')‖ ≤ ‖r − r'‖/κ``. The reduced
objective ``F(w) = min_a G`` has ``∇F(w) = λw + Xᵀ(a*(w) ∘ ℓ'(Xw))``; with
``|ℓ'| ≤ g`` (logistic: 1, pinball: ``max(τ, 1−τ)``),

    ⟨∇F(w) − ∇F(w'), w − w'⟩ ≥ (λ − λ_conv)‖w − w'‖²,   λ_conv = g² ‖X‖²₂ / κ,

so for ``λ > λ_conv`` ``F`` is strongly convex at every ``η`` and any stationary point is
the global minimum there; a point ``w`` with gradient ``∇F(w)`` certifies the lower
bound ``F* ≥ F(w) − ‖∇F(w)‖² / (2(λ − λ_conv))``. ``λ_conv`` depends on the records,
``k``, ``μ`` and the caps, never on the reported costs, so raising ``λ`` to it
(``cfg.certify == "raise_lambda"``) keeps the rule a fixed function of the reports.
Strict mode is always certified (its a-step does not see ``w``).

At the ``λ`` the validation selects the bound fails by orders of magnitude (Wisconsin:
``λ_conv ≥ 0.19`` against ``λ ≤ 1e-2``), so the default rule (``certify="auto"``) then
restricts ``w`` to public candidate models instead
(:mod:`mechanisms.allocation._range._candidate_range`), where the global optimum is certified
by construction.

Range certificate
-----------------
The declared range is every feasible ``(a, η)`` with ``η ∈ [η_lo, η_hi]``
(:func:`mechanisms.allocation._eta_search.eta_bounds`; independent of the costs). On a cell
``[η₁, η₂]``, ``σ/η ≥ σ/η₂``, ``γηΨ_i a_i ≥ γ min(η₁Ψ_i, η₂Ψ_i) a_i`` and the caps are
largest at ``η₁``, so the fixed-``η``-type problem with those constants is a lower bound
of the profile on the whole cell, and it is convex under the same certificate. A
branch-and-bound over ``log η`` cells (bisecting cells whose bound is below the
incumbent, evaluating the midpoint as a new candidate) certifies that the returned
point is within ``RANGE_RTOL·(1 + |G|)`` of the global minimum over the range.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._block_solver import BlockSolution, solve_at_eta
from mechanisms.allocation._eta_polish import compiled_steps_apply
from mechanisms.allocation._kkt_kernel import caps_fixed_above
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range._stale_search import (
    STALE_DONE,
    SUMMARY_FIELDS,
    renewal_bound,
    renewal_bound_one,
    stale_search,
)
from mechanisms.allocation._range._two_point import two_point_bound
from mechanisms.allocation._reduced_newton import (
    loss_pass,
    value_and_gradient,
    value_and_gradient_from_losses,
)
from mechanisms.allocation._weights_step import WeightsStepState, held_multipliers
from mechanisms.config import MechanismConfig

FloatArray = NDArray[np.float64]

RANGE_RTOL = 1e-8  # certified gap, relative to 1 + |G|
MAX_CELLS = 400  # lower-bound solves per certificate before giving up (uncertified)
LAMBDA_MARGIN = 1.01  # raise λ to this multiple of λ_conv


@dataclass(frozen=True, slots=True)
class AllocationCertificate:
    """How (and whether) an allocation was certified globally optimal.

    Attributes
    ----------
    lam : float
        ``λ`` the allocation used (``cfg.lam``, or raised to ``LAMBDA_MARGIN·λ_conv``).
    lam_conv : float or None
        The convexity threshold of the module docstring (``None``: no certificate
        exists for this loss / utility / ``μ``; ``0`` in strict mode).
    convex : bool
        ``lam > lam_conv``: every fixed-``η`` problem is strongly convex.
    range_checked : bool
        Whether the ``η``-range branch-and-bound ran.
    lower_bound : float
        Certified lower bound of ``G`` over the declared range (``-inf`` if not run).
    gap : float
        ``G(returned) − lower_bound`` (``inf`` if not run).
    closed : bool
        ``gap ≤ RANGE_RTOL·(1 + |G|)`` — together with ``convex``, the returned point
        is the global optimum over the range to that tolerance.
    n_bound_solves : int
        Fixed-``η`` and bound problems solved by the branch-and-bound.
    node_bounds : tuple of float
        Certified lower bounds of the fixed-``η`` problems at the coarse grid (reused,
        marked stale, to certify payment re-solves; not serialised).
    rule : {"full_range", "candidate_models"}
        The declared range: every ``(w, a, η)`` with ``η`` in the range, or ``w``
        restricted to public candidate models
        (:mod:`mechanisms.allocation._range._candidate_range`; ``convex`` then means every
        fixed-``(w, η)`` problem is convex, which holds by construction).
    n_models : int
        Candidate models in the range (``0`` for ``"full_range"``).
    models : CandidateModels or None
        The candidate models, reused by re-solves with other reports (not serialised).
    range_seed : RangeSeed or None
        The closed search, reused by re-solves whose virtual costs are all at least
        these (not serialised).
    """

    lam: float
    lam_conv: float | None
    convex: bool
    range_checked: bool
    lower_bound: float
    gap: float
    closed: bool
    n_bound_solves: int
    node_bounds: tuple[float, ...] = ()
    rule: str = "full_range"
    n_models: int = 0
    models: Any = None  # _candidate_range.CandidateModels (not serialised)
    range_seed: Any = None  # _candidate_range.RangeSeed (not serialised)

    @property
    def certified(self) -> bool:
        return self.convex and self.closed

    def relative_gap(self, value: float) -> float | None:
        """The certified gap relative to ``1 + |value|`` (``value``: the point's
        ``G``), or ``None`` where the range was not checked or the gap is not
        finite."""
        if not (self.range_checked and np.isfinite(self.gap)):
            return None
        return float(self.gap) / (1.0 + abs(value))

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.pop("node_bounds")
        out.pop("models")
        out.pop("range_seed")
        for key in ("lower_bound", "gap"):
            v = out[key]
            out[key] = v if np.isfinite(v) else None
        out["certified"] = self.certified
        return out


def loss_slope_bound(prob: Problem) -> float | None:
    """``sup |ℓ'(z)|`` of the per-record loss in the margin (``None``: unbounded)."""
    cfg = prob.cfg
    if cfg.loss == "logistic":
        return 1.0
    if cfg.loss == "pinball":
        return max(cfg.quantile, 1.0 - cfg.quantile)
    return None


def lambda_conv(prob: Problem) -> float | None:
    """``λ_conv`` of the module docstring; ``None`` when no certificate applies
    (``μ = 0``, power utility, the paper's noise mode, squared loss)."""
    cfg = prob.cfg
    if cfg.mode == "strict":
        return 0.0
    if cfg.mode == "paper" or cfg.u != "linear" or cfg.mu <= 0.0:
        return None
    g = loss_slope_bound(prob)
    if g is None:
        return None
    m = prob.m
    h_max = min(1.0, cfg.k / m)
    rho = float(np.sqrt(h_max))
    kappa = cfg.mu / (m * rho**3)
    x_norm2 = float(prob.from_records("spectral_norm_sq", spectral_norm_sq))
    return g * g * x_norm2 / kappa


def spectral_norm_sq(X: FloatArray) -> float:
    """``‖X‖²₂`` as the top eigenvalue of the smaller Gram matrix, rounded up by
    ``1e-12`` relative (a full SVD of a 399×31 matrix took 0.1 s under load, more than
    the whole allocation search)."""
    # BLAS, not einsum: einsum's loop took 0.25 ms at 399 × 31 (BLAS 0.05 ms, with or
    # without threads) and 0.16 s at 10⁶ × 20 (BLAS ~0.03 s).
    G = X.T @ X if X.shape[0] >= X.shape[1] else X @ X.T
    top = float(np.linalg.eigvalsh(G)[-1])
    return max(top, 0.0) * (1.0 + 1e-12)


def _caps_fixed(prob: Problem, bound: float) -> bool:
    """``caps_fixed_above(prob.eps_max, bound)``, remembered for the last ``ε^max``
    array and bound of these records (a payment job's re-solves share both: one O(m)
    pass per job instead of one per re-solve)."""
    hit = prob.records_memo.get("caps_fixed_above")
    if hit is not None and hit[0] is prob.X:
        eps_max, hit_bound, value = hit[1]
        if eps_max is prob.eps_max and hit_bound == bound:
            return bool(value)
    value = bool(caps_fixed_above(prob.eps_max, bound))
    prob.records_memo["caps_fixed_above"] = (prob.X, (prob.eps_max, bound, value))
    return value


def effective_problem(prob: Problem) -> tuple[Problem, float | None]:
    """The problem the rule actually solves, and its ``λ_conv``.

    With ``cfg.certify == "raise_lambda"`` and ``λ ≤ λ_conv``, ``λ`` is raised to
    ``LAMBDA_MARGIN·λ_conv`` (a function of the records and the configuration only).
    """
    lc = lambda_conv(prob)
    cfg = prob.cfg
    if cfg.certify == "raise_lambda" and lc is not None and cfg.lam <= lc:
        prob = dataclasses.replace(prob, cfg=cfg.with_(lam=LAMBDA_MARGIN * lc))
    return prob, lc


def _cell_problem(prob: Problem, eta1: float, eta2: float) -> Problem:
    """The lower-bound problem of cell ``[η₁, η₂]`` as a fixed-``η₁`` problem."""
    cfg = prob.cfg
    psi = np.minimum(eta1 * prob.psi, eta2 * prob.psi) / eta1
    return dataclasses.replace(
        prob, psi=psi, cfg=cfg.with_(sigma=cfg.sigma * eta1 / eta2)
    )


def _rigorous_value(prob: Problem, sol: BlockSolution, modulus: float) -> float:
    """Certified lower bound of ``min_w F`` at ``sol.eta`` from an approximate minimiser."""
    if prob.cfg.mode == "strict":
        return sol.search_value  # the a-step is exact and w does not enter
    if sol.gradient is not None and prob.linear_term(sol.eta) is None:
        grad = sol.gradient  # the Newton solver's ∇F at (w, a*(w)): no pass over X
    else:
        z = prob.X @ sol.w
        deriv = prob.loss.derivative(z, prob.y)
        grad = prob.X.T @ (sol.a * deriv) + prob.cfg.lam * sol.w
    return sol.search_value - float(grad @ grad) / (2.0 * modulus)


def _relaxed_at(prob: Problem, eta1: float, eta2: float) -> Problem:
    """The problem whose feasible set at ``η₂`` is ``C(η₁)``: caps
    ``min(k/m, ε_i^max/η₁)`` (``ε^max`` scaled by ``η₂/η₁``). Its fixed-``η₂`` value
    bounds ``G(x, η₂)`` below for every ``x`` feasible anywhere in ``[η₁, η₂]``
    (``C(η) ⊆ C(η₁)``), which is what the two-point bound needs at that end."""
    return dataclasses.replace(prob, eps_max=prob.eps_max * (eta2 / eta1))


def cap_multipliers(prob: Problem, sol: BlockSolution) -> FloatArray | None:
    """``ν ≥ 0`` on the caps ``η a_i ≤ ε_i^max`` at a block solution
    (:func:`mechanisms.allocation._weights_step.held_multipliers` with
    ``r_i = ℓ_i(w) + γηΨ_i``; ``None`` without a-step multipliers: forced weights)."""
    cfg, eta = prob.cfg, sol.eta
    if cfg.mode == "strict":
        losses = np.full(prob.m, prob.strict_loss_value)
    else:
        losses = prob.loss.value(prob.X @ sol.w, prob.y)
    r = losses + (cfg.gamma * eta) * prob.psi
    h = prob.eps_max / eta
    held = (h < cfg.k / prob.m) & (prob.eps_max > 0.0)
    return held_multipliers(
        r, h, held, eta, mu=cfg.mu, a=sol.a, caps=prob.caps(eta), state=sol.state
    )


def _dual_bound(
    prob: Problem,
    e1: float,
    n1: Node,
    e2: float,
    n2: Node,
    nu: FloatArray,
    modulus: float,
) -> float:
    """Lower bound of ``G`` over the cell by relaxing the ``η``-dependent caps.

    With ``ν ≥ 0`` on ``η a_i ≤ ε_i^max`` (weak duality), every feasible ``x`` has
    ``G(x, η) ≥ G(x, η) + Σ ν_i(η a_i − ε_i^max) = G_ν(x, η) − νᵀε^max``, where
    ``G_ν`` is ``G`` with ``γΨ + ν`` for ``γΨ`` on ``C₀`` (the caps ``k/m`` only, zero
    caps kept): the feasible set no longer depends on ``η`` and the two-point bound
    (:func:`._two_point.two_point_bound`) applies with ``G_ν``'s certified minima at
    both ends.
    With ``ν`` the multipliers at an end of the cell (:func:`cap_multipliers`) the
    bound is exact there and second order in the width, where the relaxed bound over
    ``C(η₁)`` is first order in the width times the multipliers (which left cells at
    binding caps open after ``MAX_CELLS`` solves).
    """
    held = nu > 0.0
    if not held.any():
        return -np.inf
    # γΨ + ν as the virtual costs of a problem with γ = 1 (so γ = 0 works too)
    free_caps = np.where(prob.eps_max > 0.0, np.inf, 0.0)
    dp = dataclasses.replace(
        prob,
        psi=prob.cfg.gamma * prob.psi + nu,
        eps_max=free_caps,
        cfg=prob.cfg.with_(gamma=1.0),
    )
    shift = float(nu[held] @ prob.eps_max[held])
    ends = []
    for e, nd in ((e1, n1), (e2, n2)):
        sol = solve_at_eta(dp, e, w0=nd.w, a0=nd.a)
        ends.append(_rigorous_value(dp, sol, modulus) - shift)
    return two_point_bound(dp.cfg.sigma, dp.cfg.gamma, e1, ends[0], e2, ends[1])


@dataclass(eq=False)
class Node:
    """A point of the ``η`` partition: a certified lower bound of the fixed-``η``
    problem there, and the solution it came from (``stale``: the bound is inherited
    from a problem with lower virtual costs, valid because ``G`` is non-decreasing in
    each ``Ψ_i``; the solution is only a warm start; ``renewed``: the bound is this
    problem's, from one evaluation at the stale point, not a solve)."""

    bound: float
    w: FloatArray
    a: FloatArray
    stale: bool = False
    solution: BlockSolution | None = None
    state: WeightsStepState | None = None  # the a-step's multipliers there
    # the bound was renewed from one evaluation at the stale point (no solve): a
    # cell still below the incumbent solves it before bisecting
    renewed: bool = False


def node_of(prob: Problem, sol: BlockSolution, lam_conv: float) -> Node:
    modulus = _modulus(prob, lam_conv)
    bound = _rigorous_value(prob, sol, modulus)
    return Node(bound, sol.w, sol.a, False, sol, sol.state)


def _modulus(prob: Problem, lam_conv: float) -> float:
    return prob.cfg.lam - lam_conv if prob.cfg.mode != "strict" else 1.0


class StaleNodes(dict[float, Node]):
    """Stale nodes (``η → Node``) for the re-solves of one payment job, with the
    bounds of the cells between consecutive nodes cached (:func:`stale_cell_bounds`:
    the same for every re-solve, since a cell's two-point bound is a function of its
    ends' bounds), and the per-record losses ``(ℓ(Xw), ℓ'(Xw))`` at each stale point
    once a re-solve renewed it (the same for every re-solve: ``w`` and the records
    are fixed, only ``Ψ`` changes), so a renewal is one a-step and one gradient, no
    product ``Xw`` or loss pass; and, for the compiled branch-and-bound, those
    losses with every node's point and multipliers stacked in arrays
    (:meth:`renewal_arrays`)."""

    cells: dict[tuple[float, float, float, float], tuple[FloatArray, FloatArray]]
    losses: dict[float, tuple[FloatArray, FloatArray]]
    renewal: dict[tuple[float, float, int], tuple[NDArray[Any], ...] | None]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cells = {}
        self.losses = {}
        self.renewal = {}
        self._sorted: tuple[list[float], dict[float, int]] | None = None

    def nearest(self, eta: float) -> float:
        """The node nearest ``η``: ``min(self, key=lambda e: abs(e − η))``, the first
        in insertion order on a tie, by bisection on the keys sorted once (a payment
        job asks at every re-solve, of some hundred nodes)."""
        if self._sorted is None or len(self._sorted[0]) != len(self):
            self._sorted = (sorted(self), {e: n for n, e in enumerate(self)})
        keys, order = self._sorted
        k = bisect.bisect_left(keys, eta)
        if k == 0:
            return keys[0]
        if k == len(keys):
            return keys[-1]
        below, above = keys[k - 1], keys[k]
        d_below, d_above = abs(below - eta), abs(above - eta)
        if d_below != d_above:
            return below if d_below < d_above else above
        return below if order[below] < order[above] else above

    def renewal_arrays(
        self, prob: Problem, keys: FloatArray
    ) -> tuple[NDArray[Any], ...] | None:
        """``(B, W, A0, S0, L, DL, STATUS, FS, PS)``: entry ``j`` the bound of node
        ``keys[j]``, its stale point ``w``, a-step multipliers (:func:`_multipliers`),
        ``(ℓ(Xw), ℓ'(Xw))`` (one loss pass each, once per job; :attr:`losses` then
        holds views of these rows) and the rows of its one-seller summary
        (:func:`._stale_search.renewal_bound_one`, filled at its first renewal), for
        :func:`._stale_search.stale_search`. ``None`` where the rows would exceed
        :data:`RENEWAL_FLOATS_MAX` floats."""
        key = (float(keys[0]), float(keys[-1]), int(keys.size))
        if key in self.renewal:
            return self.renewal[key]
        nds = [self[float(e)] for e in keys]
        out: tuple[NDArray[Any], ...] | None = None
        if 2 * keys.size * prob.m <= RENEWAL_FLOATS_MAX:
            L = np.empty((keys.size, prob.m))
            DL = np.empty((keys.size, prob.m))
            for j, e in enumerate(keys.tolist()):
                got = self.losses.get(e)
                L[j], DL[j] = loss_pass(prob, nds[j].w) if got is None else got
                self.losses[e] = (L[j], DL[j])
            W = np.ascontiguousarray([nd.w for nd in nds], dtype=np.float64)
            A0 = np.array([_multipliers(nd)[0] for nd in nds])
            S0 = np.array([_multipliers(nd)[1] for nd in nds])
            B = np.array([nd.bound for nd in nds])
            # one-seller summaries, filled at each node's first renewal
            status = np.zeros((keys.size, prob.m), dtype=np.uint8)
            fs = np.zeros((keys.size, SUMMARY_FIELDS))
            ps = np.zeros((keys.size, 3 * W.shape[1]))
            out = (B, W, A0, S0, L, DL, status, fs, ps)
        self.renewal[key] = out
        return out


def _multipliers(node: Node) -> tuple[float, float]:
    """The node's a-step multipliers ``(A, s)`` as the compiled a-step's warm start;
    ``(0, 0)`` (a cold start) where it has none, as :func:`value_and_gradient` then
    starts."""
    return (0.0, 0.0) if node.state is None else (node.state.A, node.state.s)


RENEWAL_FLOATS_MAX = 8_000_000  # 64 MB of stale-point losses per payment job (m ≤ 10⁵)


def stale_cell_bounds(
    nodes: dict[float, Node] | None,
    cfg: MechanismConfig,
    eta_lo: float,
    eta_hi: float,
) -> tuple[FloatArray, FloatArray] | None:
    """``(keys, bounds)``: the sorted stale nodes in ``[η_lo, η_hi]`` and the two-point
    bound of each cell between consecutive ones, computed once per stale set and
    ``(σ, γ)``; ``None`` unless ``nodes`` is a :class:`StaleNodes` of stale nodes
    holding both ends of the range (the caps must not depend on ``η``: the caller's
    ``fixed_set``)."""
    if not isinstance(nodes, StaleNodes):
        return None
    key = (float(cfg.sigma), float(cfg.gamma), float(eta_lo), float(eta_hi))
    hit = nodes.cells.get(key)
    if hit is not None:
        return hit
    keys = sorted(e for e in nodes if eta_lo <= e <= eta_hi)
    if not keys or keys[0] != eta_lo or keys[-1] != eta_hi:
        return None
    if not all(nodes[e].stale for e in keys):
        return None
    lbs = np.array(
        [
            two_point_bound(
                cfg.sigma, cfg.gamma, e1, nodes[e1].bound, e2, nodes[e2].bound
            )
            for e1, e2 in itertools.pairwise(keys)
        ]
    )
    out = (np.array(keys), lbs)
    nodes.cells[key] = out
    return out


def certify_range(
    prob: Problem,
    incumbent: BlockSolution,
    eta_lo: float,
    eta_hi: float,
    *,
    nodes: dict[float, Node] | None = None,
    lam_conv: float,
    rtol: float = RANGE_RTOL,
    max_cells: int = MAX_CELLS,
    partition: dict[float, Node] | None = None,
    compiled: bool = True,
    one_seller: tuple[int, float] | None = None,
) -> tuple[BlockSolution, float, int]:
    """Branch-and-bound over ``log η`` cells; return ``(best, lower_bound, n_solves)``.

    ``nodes``: points of ``[η_lo, η_hi]`` with certified bounds (the coarse grid, or
    a base allocation's grid marked stale); the incumbent is added as a node. A
    cell's bound is the two-point bound (:func:`._two_point.two_point_bound`) when the
    caps do not depend on ``η`` on the range (no binding ``ε_i^max``), else the cell
    problem of the module docstring. The lowest cell is refined — a stale end is
    renewed from one evaluation of ``F`` and its gradient at the stale point (the
    bound ``F(w) − ‖∇F(w)‖²/(2(λ − λ_conv))`` of a solve, looser by how far the
    stale ``w`` is from this problem's minimiser, where a payment re-solve has moved
    it little), a renewed end still too low is solved, otherwise the cell is bisected
    (one fixed-``η`` solve at its midpoint, also a new candidate) — until every
    cell's bound is within ``rtol·(1 + |G|)`` of the best value. ``best`` may
    improve on ``incumbent``. Over a :class:`StaleNodes` set (a payment job's), the
    cells between untouched stale nodes take their bounds from the set's cache, and
    only those below the target enter the heap, and (logistic loss, ``μ > 0``,
    caps that do not move with ``η``) the loop runs compiled
    (:func:`._stale_search.stale_search`) until a cell needs a solve; ``compiled=False``
    runs this Python loop only (the reference it is tested against).
    ``one_seller = (i, Ψ_i⁰)``: ``prob``'s virtual costs are those the stale set was
    built for but at seller ``i`` (not lower than ``Ψ_i⁰`` there), so a renewal of a
    :class:`StaleNodes` node takes :func:`._stale_search.renewal_bound_one` (the
    same bound in ``O(d)`` where the node's a-step keeps its classes). ``partition``
    (optional) receives the final nodes: bisected where the profile needed it, around
    the optimum, and so a graded set of stale nodes for problems near this one.
    """
    cfg = prob.cfg
    modulus = _modulus(prob, lam_conv)
    i_one, psi_one = (-1, 0.0) if one_seller is None else one_seller
    rows: dict[float, int] = {}  # a StaleNodes node's row in the compiled loop's arrays
    summaries: tuple[NDArray[Any], ...] = ()
    # A zero ε^max is a zero cap at every η (a report at the top of a support with
    # an infinite virtual cost): it does not make the feasible set depend on η.
    fixed_set = cfg.gamma > 0.0 and _caps_fixed(prob, (cfg.k / prob.m) * eta_hi)
    # the reduced Newton method's F (default mode, linear u), no paper noise term
    renewable = cfg.mode == "default" and cfg.u == "linear" and prob.noise is None
    # the compiled renewal (_stale_search.renewal_bound)
    compiled_renewal = compiled_steps_apply(prob)
    if (
        compiled
        and fixed_set
        and compiled_renewal
        and partition is None
        and isinstance(nodes, StaleNodes)
        and eta_lo <= incumbent.eta <= eta_hi
    ):
        # the same branch-and-bound compiled, over the stale set and the incumbent
        # (the loop below from the start where it hands back)
        cells = stale_cell_bounds(nodes, cfg, eta_lo, eta_hi)
        data = None if cells is None else nodes.renewal_arrays(prob, cells[0])
        if cells is not None and data is not None:
            B, W, A0, S0, L, DL, status, fs, ps = data
            code, lower, n_renewed = stale_search(
                cells[0], B, cells[1], float(incumbent.eta),
                node_of(prob, incumbent, lam_conv).bound, incumbent.search_value, rtol,
                max_cells, cfg.sigma, cfg.gamma, modulus, prob.X, prob.psi,
                prob.eps_max, cfg.k / prob.m, cfg.mu, cfg.lam, W, A0, S0, L, DL,
                status, fs, ps, i_one, psi_one,
            )  # fmt: skip
            if code == STALE_DONE:
                return incumbent, lower, n_renewed
            rows = {float(e): j for j, e in enumerate(cells[0].tolist())}
            summaries = (status, fs, ps)
    best = incumbent
    n = 0
    pts: dict[float, Node] = {
        float(e): nd for e, nd in (nodes or {}).items() if eta_lo <= e <= eta_hi
    }
    pts[float(incumbent.eta)] = node_of(prob, incumbent, lam_conv)

    def solve(eta: float, start: Node) -> Node:
        nonlocal n, best
        n += 1
        sol = solve_at_eta(prob, eta, w0=start.w, a0=start.a, state=start.state)
        if sol.search_value < best.search_value:
            best = sol
        bound = _rigorous_value(prob, sol, modulus)
        return Node(bound, sol.w, sol.a, False, sol, sol.state)

    def renew(eta: float, node: Node) -> Node:
        """A stale node's bound at this problem from one evaluation of ``F`` and its
        gradient at the stale ``w`` (no Newton step): ``F(w) − ‖∇F(w)‖²/(2·modulus)``,
        the same strong-convexity bound as a solve's, looser by how far the stale
        ``w`` is from this problem's minimiser; never below the stale bound."""
        nonlocal n
        if not renewable:
            return solve(eta, node)
        n += 1
        if isinstance(nodes, StaleNodes) and nodes.get(eta) is node:
            # the stale point's losses are the same for every re-solve of the job
            got = nodes.losses.get(eta)
            if got is None:
                got = nodes.losses[eta] = loss_pass(prob, node.w)
            if compiled_renewal:
                args = (
                    prob.X, prob.psi, prob.eps_max, cfg.k / prob.m, cfg.gamma * eta,
                    eta, cfg.mu, cfg.lam, cfg.sigma, node.w, *_multipliers(node),
                    got[0], got[1], modulus, node.bound,
                )  # fmt: skip
                j = rows.get(eta)
                if j is None:
                    ok, lb, A, s = renewal_bound(*args)
                else:  # as the compiled loop renewed it
                    ok, lb, A, s = renewal_bound_one(
                        *args, i_one, psi_one, *(a[j] for a in summaries)
                    )
                if ok:
                    renewed = WeightsStepState(A, s)
                    return Node(lb, node.w, node.a, False, None, renewed, renewed=True)
            value, g, state = value_and_gradient_from_losses(
                prob, eta, node.w, node.state, *got
            )
        else:
            value, g, state = value_and_gradient(prob, eta, node.w, node.state)
        bound = max(value - float(g @ g) / (2.0 * modulus), node.bound)
        return Node(bound, node.w, node.a, False, None, state, renewed=True)

    for eta in (eta_lo, eta_hi):
        if eta not in pts:
            pts[eta] = solve(eta, pts[float(incumbent.eta)])

    def bound(e1: float, e2: float) -> float:
        nonlocal n
        n1, n2 = pts[e1], pts[e2]
        if fixed_set:
            return two_point_bound(cfg.sigma, cfg.gamma, e1, n1.bound, e2, n2.bound)
        # Caps move with η: on the cell every feasible x lies in C(η₁), so the
        # two-point bound holds with G's minimum over C(η₁) at both ends — n1's
        # bound at η₁, and one solve of the relaxed problem at η₂. Exact to second
        # order in the width, where the cell problem (σ/η₂ + the fixed-η₁ problem
        # with γη₁Ψ) is only first order.
        n += 1
        rp = _relaxed_at(prob, e1, e2)
        sol = solve_at_eta(rp, e2, w0=n2.w, a0=n2.a)
        l2 = _rigorous_value(rp, sol, modulus)
        val = two_point_bound(cfg.sigma, cfg.gamma, e1, n1.bound, e2, l2)
        if val < target():
            low = n1 if n1.bound <= n2.bound else n2
            nu = None if low.solution is None else cap_multipliers(prob, low.solution)
            if nu is not None and np.any(nu > 0.0):
                n += 2
                val = max(val, _dual_bound(prob, e1, n1, e2, n2, nu, modulus))
        return min(val, n1.bound, n2.bound)

    def target() -> float:
        return best.search_value - rtol * (1.0 + abs(best.search_value))

    keys = sorted(pts)
    right = dict(itertools.pairwise(keys))  # cell (e1, right[e1])
    left = {v: k for k, v in right.items()}
    current: dict[float, float] = {}
    heap: list[tuple[float, float]] = []

    def push(e1: float) -> None:
        lb = bound(e1, right[e1])
        current[e1] = lb
        heapq.heappush(heap, (lb, e1))

    # Cells between two untouched stale nodes have the bound of every re-solve of the
    # same stale set (two_point_bound of stale values): from the set's cache, and
    # only those below the incumbent's target enter the heap; the others are closed
    # (the target only falls) and enter the lower bound as their least bound.
    closed = math.inf
    cells = stale_cell_bounds(nodes, cfg, eta_lo, eta_hi) if fixed_set else None
    if cells is None:
        for e1 in right:
            push(e1)
    else:
        skeys, slbs = cells
        fresh = np.ones(slbs.size, dtype=bool)  # a cell of the stale set, untouched
        for e in keys:
            nd = pts[e]
            if nd.stale and nodes is not None and nodes.get(e) is nd:
                continue
            k = int(np.searchsorted(skeys, e))  # e in (skeys[k−1], skeys[k]]
            fresh[max(k - 1, 0) : min(k + 1, slbs.size)] = False
        tgt = target()
        low = fresh & (slbs < tgt)
        high = np.flatnonzero(fresh & ~low)
        for j in np.flatnonzero(low).tolist():
            e1 = float(skeys[j])
            current[e1] = float(slbs[j])
            heapq.heappush(heap, (float(slbs[j]), e1))
        untouched = set(skeys[:-1][fresh].tolist())
        for e1 in right:
            if e1 not in untouched:
                push(e1)
    while heap and n < max_cells:
        lb, e1 = heap[0]
        if current.get(e1) != lb:
            heapq.heappop(heap)  # superseded
            continue
        if lb >= target():
            break
        heapq.heappop(heap)
        e2 = right[e1]
        stale = [e for e in (e1, e2) if pts[e].stale]
        if stale:
            for e in stale:
                pts[e] = renew(e, pts[e])
                for c in (left.get(e), e if e in right else None):
                    if c is not None:
                        push(c)
            continue
        renewed = [e for e in (e1, e2) if pts[e].renewed]
        if renewed:
            for e in renewed:
                pts[e] = solve(e, pts[e])
                for c in (left.get(e), e if e in right else None):
                    if c is not None:
                        push(c)
            continue
        mid = float(np.sqrt(e1 * e2))
        if not e1 < mid < e2:  # below floating resolution: the bound stands
            heapq.heappush(heap, (lb, e1))
            break
        start = pts[e1] if pts[e1].bound <= pts[e2].bound else pts[e2]
        pts[mid] = solve(mid, start)
        right[e1], right[mid] = mid, e2
        left[mid], left[e2] = e1, mid
        push(e1)
        push(mid)
    if cells is not None:  # closed stale cells whose ends were never renewed
        closed = min(
            (float(slbs[j]) for j in high.tolist() if float(skeys[j]) not in current),
            default=math.inf,
        )
    live = [lb for lb, e1 in heap if current.get(e1) == lb]
    lower = min([*live, best.search_value, closed])
    if partition is not None:
        partition.update(pts)
    return best, lower, n
