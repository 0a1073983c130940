"""The default allocation rule: maximal-in-range over public candidate models.

Why a declared range
--------------------
At a fixed ``η`` the allocation objective ``G`` is not convex in ``(w, a)`` for
``λ ≤ λ_conv`` (:mod:`mechanisms.allocation._range._certify`), and at the ``λ`` the
validation selects (``1e-4 … 1e-2`` on Wisconsin, against ``λ_conv ≥ 0.19``) a local
search is not a rule: which KKT point it returns depends on the reports, and the
allocation is not monotone. A global optimum of virtual welfare over a
**range fixed before the costs are seen** is monotone in each report (for ``Ψ_i`` rising,
compare the two optima's objectives: ``(Ψ'_i − Ψ_i)(ε_i' − ε_i) ≤ 0``), whatever the
range is. This module declares a range on which the global optimum can be certified:

    R = {(w, a, η) : w ∈ W,  η_lo ≤ η ≤ η_hi,  a ∈ C(η)},

``C(η)`` the capped simplex of spec §4.1 and ``W`` a finite set of **candidate
models** computed from the records, the caps and the configuration only — never from
the reported costs (:func:`candidate_models`): the model of the cost-free problem
(``Ψ ≡ 0``) and those of ``n_scenarios(m)`` public cost scenarios drawn from
the prior with the fixed seed ``SCENARIO_SEED`` (:func:`scenario_virtual_costs`:
``⌈1024/m⌉``, at most 64, up to ``RICH_MAX_M`` = 32 sellers; 4 beyond). Models are
fixed-``η`` KKT points of ``G`` for those scenarios (a deterministic local solve: the
scenario does not depend on the reports, so neither does the model): trust-region
Newton on the reduced objective ``F(w) = min_a G``
(:mod:`mechanisms.allocation._reduced_newton`). Which KKT point a solve reaches
depends on its start and its ``η``, and with few sellers the KKT points are far apart
(each fits a different subset of the records and gives the others no weight), so up
to ``RICH_MAX_M`` sellers the starts are spread over the basins: the cost-free problem
is solved from ``w = 0`` and from the uniform-weight ridge model, and each scenario
from the ridge model at the weights its costs alone would choose, at the ``η`` they
would choose (its cost-only allocation), in addition to the models of the range for
more sellers. There one report moves the model little, and each scenario is solved
from the cost-free model at ``N_LEVELS`` values of ``η``.

For a fixed model ``w_j`` the problem in ``(a, η)`` is

    p_j(η) = λ‖w_j‖²/2 + σ/η + g_j(η),   g_j(η) = min_{a∈C(η)} ⟨ℓ(w_j) + γηΨ, a⟩ + μ‖a‖₂,

and ``g_j(η)`` is solved exactly by the closed-form a-step (a convex problem). Where the
caps do not depend on ``η`` on a cell ``[η₁, η₂]`` (no binding ``ε_i^max``), ``g_j`` is a
minimum of functions affine in ``η`` and so concave: it lies above its chord, and
``p_j ≥ λ‖w_j‖²/2 + σ/η + chord(η)`` is a lower bound exact to second order in the cell
width, minimised in closed form. Otherwise ``C(η) ⊆ C(η₁)`` and ``ΨᵀA ≥ 0`` give the
bound ``λ‖w_j‖²/2 + σ/η₂ + min_{a∈C(η₁)} ⟨ℓ(w_j) + γ min(η₁Ψ, η₂Ψ), a⟩ + μ‖a‖``. A
best-first branch-and-bound over all ``(j, cell)`` pairs closes when every cell's bound is
within ``RANGE_RTOL·(1 + |G|)`` of the best value; the best model's ``η`` is then
polished to ``1e-12`` (bounded Brent in ``log η``) between its evaluated neighbours.

What it costs
-------------
``G`` is minimised over a subset of its domain, so the value is at least the
unrestricted minimum. Measured (``benchmarks/RESULTS.md``, "Default rule: certified
optimum over a declared range"): on Wisconsin within 6e-7 relative of the unrestricted
local search at every setting the trade-off selects, same ``ε_avg`` and test error.
Against a multi-start continuous optimum on random small instances (``m ≤ 20``; "A
richer public range") the spread starts and the larger scenario set for few sellers
bring the excess within ``1e-3·(1 + |G|)`` on 99.5 % of the settings a market accepts,
worst 0.23 % (with 4 scenarios from the cost-free model: 94.5 %, worst 6.4 %). The
released model is refitted privately at ``(a, η)``; ``w`` only scores the sellers'
records.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import heapq
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize_scalar

from learners._newton import minimize_ridge_risk
from mechanisms.allocation._block_solver import (
    BlockSolution,
    solve_at_eta,
    weights_step,
)
from mechanisms.allocation._problem import Problem, objective_from_losses
from mechanisms.allocation._range._model_solves import (
    screening_applies,
    solve_screened,
    solve_subsampled,
    subsampling_applies,
)
from mechanisms.allocation._range._one_seller_search import (
    HAVE_NUMBA,
    OK,
    STATIONARY_SLACK,
    CompiledCache,
    SeedArrays,
    one_seller_search,
    seed_arrays,
)
from mechanisms.allocation._reduced_newton import _norm
from mechanisms.allocation._weights_kernel import (
    cap_cell_bound_kernel,
    chord_argmin,
    one_seller_value,
    range_summary,
    range_value_kernel,
    restore_sum,
    shifted_value,
)
from mechanisms.allocation._weights_step import (
    WeightsStepState,
    held_multipliers,
    project_capped_simplex,
    solve_weights,
    solve_weights_compiled,
)

FloatArray = NDArray[np.float64]

# Public cost scenarios drawn from the prior (a function of m only, n_scenarios):
# up to RICH_MAX_M sellers ⌈SCENARIO_BUDGET/m⌉, at most MAX_SCENARIOS, and their
# models start in several basins (candidate_models); MIN_SCENARIOS from the
# cost-free model beyond.
RICH_MAX_M = 32
COST_ONLY_STEPS = 20  # a/η steps of a scenario's cost-only allocation
SCENARIO_BUDGET = 1024
MIN_SCENARIOS = 4
MAX_SCENARIOS = 64
N_LEVELS = 2  # η levels at which each scenario's model is solved
MODEL_MAX_ITER = 60  # trust-region iterations per candidate model solve
SCENARIO_SEED = 90_2026  # public, fixed: the scenarios never depend on the reports
N_START = 6  # evaluated η per model before branching
RANGE_RTOL = 1e-10  # certified gap of the range search, relative to 1 + |G|
MAX_EVALS = 20_000  # a-steps before giving up (status "uncertified") ...
EVALS_PER_MODEL = 2_000  # ... or this many per candidate model, if more (eval_budget)
COLD_GUESS_MIN_M = 50_000  # a cold a-step of the range search starts from ...
COLD_GUESS_STRIDE = 64  # ... the one on every 64th record (_Search._cold_guess)
DEDUP_RTOL = 1e-9  # candidate models closer than this (relative) are one model
# Bounds on a payment job's one-seller cache (per process): summaries are 3.2 kB each.
MAX_SUMMARIES = 20_000
MAX_VISITS = 200_000


def n_scenarios(m: int) -> int:
    """How many public cost scenarios a market of ``m`` sellers draws: more for few
    sellers, where one seller's report moves the optimum's model most and each
    model costs least (``benchmarks/RESULTS.md``, "A richer public range")."""
    if m > RICH_MAX_M:
        return MIN_SCENARIOS
    return int(min(MAX_SCENARIOS, max(MIN_SCENARIOS, math.ceil(SCENARIO_BUDGET / m))))


def scenario_virtual_costs(prior: Any, m: int) -> FloatArray:
    """``n_scenarios(m) × m`` virtual costs of public cost scenarios from ``prior``.

    Drawn with the fixed seed :data:`SCENARIO_SEED` (so a function of the prior and
    ``m`` only) and mapped through the ironed virtual cost. Remembered (read-only) for
    hashable priors up to ``SCENARIO_MEMO_MAX_M`` sellers: every allocation of a
    market asks again (~0.5 ms on Wisconsin, 4 % of its allocation).
    """
    if m <= SCENARIO_MEMO_MAX_M:
        try:
            return _scenario_memo(prior, m)
        except TypeError:  # unhashable prior (arrays inside)
            pass
    return _scenario_virtual_costs(prior, m)


SCENARIO_MEMO_MAX_M = 100_000


@functools.lru_cache(maxsize=16)
def _scenario_memo(prior: Any, m: int) -> FloatArray:
    out = _scenario_virtual_costs(prior, m)
    out.flags.writeable = False
    return out


def _scenario_virtual_costs(prior: Any, m: int) -> FloatArray:
    from mechanisms.priors import ensure_regular

    regular = ensure_regular(prior)
    rng = np.random.default_rng(SCENARIO_SEED)
    rows = [
        np.asarray(regular.virtual_cost(prior.sample(m, rng=rng)), dtype=float)
        for _ in range(n_scenarios(m))
    ]
    return np.vstack(rows) if rows else np.zeros((0, m))


@dataclass(frozen=True, eq=False)
class CandidateModels:
    """The finite model set ``W`` of the range, with what the search needs per model.

    ``losses[j] = ℓ(X w_j, y)``; ``base[j] = λ‖w_j‖²/2``. ``source`` records the data
    the models were computed from, so a re-solve with other reports can reuse them
    (:meth:`matches`) — they are identical by construction.
    """

    W: FloatArray
    losses: FloatArray
    base: FloatArray
    source: tuple[Any, ...]

    @property
    def n(self) -> int:
        return int(self.W.shape[0])

    def matches(self, prob: Problem) -> bool:
        return _same_source(self.source, _source(prob))


def _source(prob: Problem) -> tuple[Any, ...]:
    return (prob.X, prob.y, prob.eps_max, prob.cfg, prob.scenario_psi)


def _same_source(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    for u, v in zip(a, b, strict=True):
        if u is v:
            continue
        if isinstance(u, np.ndarray) and isinstance(v, np.ndarray):
            if u.shape != v.shape or not np.array_equal(u, v):
                return False
        elif u != v:
            return False
    return True


def candidate_models(prob: Problem, eta_lo: float, eta_hi: float) -> CandidateModels:
    """``W`` of the module docstring (a function of everything but ``prob.psi``).

    The levels: :data:`N_LEVELS` values of ``η`` geometrically spaced up to ``η_hi``.

    1. The cost-free model (``Ψ ≡ 0``), solved from ``w = 0`` and the uniform weights
       projected on the caps, at the top level, and at a lower one from there only if
       its caps differ. With many records (:func:`._model_solves.subsampling_applies`)
       the first solve walks from ``w = 0`` on fixed subsamples of the rows and takes
       only its last iterations on all of them
       (:func:`._model_solves.solve_subsampled`).
    2. With at most :data:`RICH_MAX_M` sellers, the cost-free model solved also from
       the uniform-weight model (the ridge fit at the uniform weights on the caps: a
       convex problem, so one model) at the same levels; it often lies in another
       basin than the one reached from ``w = 0``.
    3. For the first :data:`MIN_SCENARIOS` public scenarios ``Ψ^s`` (all of them
       beyond :data:`RICH_MAX_M` sellers), their KKT points at each level, solved
       at the top level from the cost-free model (its ``w``, ``a`` and a-step
       multipliers): with many sellers one seller moves the model little, the
       scenarios' models stay near the cost-free one, and the warm start is several
       times cheaper. From the second scenario on, the top-level solve starts from
       whichever of the cost-free model and the previous scenario's top-level model
       has the lower ``G`` in this scenario (:func:`_lower_start`): at a small ``λ``
       the scenarios' models lie near each other and far from the cost-free one
       (Wisconsin, ``λ = 1.6·10⁻⁶``: ``‖w‖ ≈ 150`` against 16), and a scenario took 9
       trust-region iterations from the cost-free model, 5–6 from the previous
       scenario's. At each lower level the solve starts from whichever of the
       cost-free model and the scenario's model at the level above has the lower
       ``G`` there (:func:`_lower_start`): where the scenario's costs outweigh the
       losses its model barely moves between levels (on Wisconsin at a small ``λ``
       the cost-free model is ``‖Δw‖ ≈ 140`` away, the level above none), elsewhere
       the lower level returns near the cost-free model. With many
       records (:func:`._model_solves.screening_applies`) such a solve runs on the
       records cheap in the scenario only, confirmed on all rows
       (:func:`._model_solves.solve_screened`: the same KKT conditions).
    4. With at most :data:`RICH_MAX_M` sellers, for every scenario one more KKT
       point, solved at the ``η`` of the scenario's *cost-only* allocation
       (:func:`cost_only_allocation`: every loss replaced by the public constant of
       strict mode, i.e. what the scenario's costs alone would choose) from the
       ridge fit at its weights (convex): each scenario starts in the basin of the
       sellers that are cheap in it, at an ``η`` near where its costs put the
       optimum; a start met before is not solved again.

    So the range of few sellers contains the range of many (items 1 and 3), and no
    scenario is solved when ``γ = 0`` (``Ψ`` then does not enter ``G``: every
    scenario is the cost-free problem).

    Each solve is :func:`mechanisms.allocation._block_solver.solve_at_eta` at
    ``cfg.tol``, stopped after :data:`MODEL_MAX_ITER` iterations: a model need not be
    a KKT point, only a function of the public data (from a start where ``F`` is
    nearly flat, e.g. a tiny ``μ``, where the weights act almost as a linear
    programme's, the cost-free model crawled 380 trust-region iterations at
    ``m = 10⁶``, 95 % of that allocation).
    """
    m = prob.m
    cfg = prob.cfg
    diverse = m <= RICH_MAX_M
    levels = np.geomspace(eta_lo, eta_hi, N_LEVELS + 1)[1:]
    W: list[FloatArray] = []
    L: list[FloatArray | None] = []
    free: Any = None

    def add(sol: Any) -> None:
        W.append(sol.w)
        L.append(sol.losses)

    free_prob = dataclasses.replace(prob, psi=np.zeros(m))
    prev_caps: FloatArray | None = None
    for eta in levels[::-1]:
        caps = prob.caps(float(eta))
        if prev_caps is not None and np.array_equal(caps, prev_caps):
            continue  # Ψ ≡ 0: the solve depends on η only through the caps
        prev_caps = caps
        if free is None:
            w0 = np.zeros(prob.X.shape[1])
            a0, state = project_capped_simplex(np.full(m, 1.0 / m), caps)[0], None
        else:
            w0, a0, state = free.w, free.a, free.state
        if free is None and subsampling_applies(free_prob):
            sol = solve_subsampled(
                free_prob, float(eta), w0=w0, max_iter=MODEL_MAX_ITER
            )
        else:
            sol = solve_at_eta(
                free_prob, float(eta), w0=w0, a0=a0, state=state,
                max_iter=MODEL_MAX_ITER,
            )  # fmt: skip
        free = sol if free is None else free
        add(sol)
        if diverse:
            a_u = project_capped_simplex(np.full(m, 1.0 / m), caps)[0]
            w_u = _ridge_fit(prob, a_u)
            add(
                solve_at_eta(
                    free_prob, float(eta), w0=w_u, a0=a_u, max_iter=MODEL_MAX_ITER
                )
            )
    if prob.scenario_psi is None or cfg.gamma <= 0.0:
        return _collect(prob, W, L)
    last_top: BlockSolution | None = None  # the previous scenario's top-level model
    for psi in prob.scenario_psi[:MIN_SCENARIOS]:
        sp = dataclasses.replace(prob, psi=np.asarray(psi, dtype=float))
        prev = None
        for eta in levels[::-1]:
            start = free if prev is None else prev
            if screening_applies(sp) and start.losses is not None:
                # the scenario's weights sit on the few records cheap in it: solve
                # on those (an exact restriction, confirmed on all rows)
                prev = solve_screened(
                    sp, float(eta), w0=start.w, a0=start.a, losses0=start.losses,
                    state=start.state, max_iter=MODEL_MAX_ITER,
                )  # fmt: skip
                add(prev)
                continue
            w0, a0, st0 = start.w, start.a, start.state
            top_level = prev is None
            if prev is not None:
                w0, a0, st0 = _lower_start(sp, float(eta), (free, prev))
            elif last_top is not None:
                w0, a0, st0 = _lower_start(sp, float(eta), (free, last_top))
            prev = solve_at_eta(
                sp, float(eta), w0=w0, a0=a0, state=st0, max_iter=MODEL_MAX_ITER
            )
            if top_level:
                last_top = prev
            add(prev)
    if diverse:
        seen: list[tuple[float, FloatArray]] = []
        for psi in prob.scenario_psi:
            sp = dataclasses.replace(prob, psi=np.asarray(psi, dtype=float))
            eta, a0 = cost_only_allocation(sp, eta_lo, eta_hi)
            if any(e == eta and np.array_equal(a0, a) for e, a in seen):
                continue  # the same start: the same model
            seen.append((eta, a0))
            add(
                solve_at_eta(
                    sp, eta, w0=_ridge_fit(prob, a0), a0=a0, max_iter=MODEL_MAX_ITER
                )
            )
    return _collect(prob, W, L)


def _lower_start(
    prob: Problem, eta: float, starts: tuple[BlockSolution, ...]
) -> tuple[FloatArray, FloatArray, WeightsStepState | None]:
    """``(w, a*(w), multipliers)`` of the start among ``starts`` (solved models) where
    ``G(w, a*(w), η)`` is lowest, from each model's losses ``ℓ(Xw)`` (they do not
    depend on ``η`` or ``Ψ``) and one exact a-step: no pass over ``X`` where the
    solver kept them."""
    best: tuple[float, FloatArray, FloatArray, WeightsStepState | None] | None = None
    for s in starts:
        losses = s.losses
        if losses is None:
            losses = prob.loss.value(prob.X @ s.w, prob.y)
        a, state = weights_step(prob, losses, eta, s.state)
        value = objective_from_losses(prob, s.w, a, eta, losses)
        if best is None or value < best[0]:
            best = (value, s.w, a, state)
    assert best is not None
    return best[1], best[2], best[3]


def _collect(
    prob: Problem, W: list[FloatArray], L: list[FloatArray | None]
) -> CandidateModels:
    """The deduplicated models with their losses and ridge terms."""
    keep = _dedup(W)
    Wa = np.array([W[k] for k in keep])
    # ℓ(X w_j) from the solver's last evaluation at w_j where it kept it
    losses = np.array(
        [prob.loss.value(prob.X @ W[k], prob.y) if L[k] is None else L[k] for k in keep]
    )
    base = 0.5 * prob.cfg.lam * np.einsum("ij,ij->i", Wa, Wa)
    return CandidateModels(Wa, losses, base, _source(prob))


def cost_only_allocation(
    prob: Problem, eta_lo: float, eta_hi: float
) -> tuple[float, FloatArray]:
    """``(η, a)`` minimising ``G`` with every loss replaced by the public constant of
    strict mode (spec §4.4): the allocation ``prob.psi``'s costs alone would choose.

    Alternates the exact a-step and the closed-form η-step
    (``η = sqrt(σ/(γ Σ Ψ_i a_i))`` clipped to the range) from ``η_hi``, each of which
    does not increase that objective; at most ``COST_ONLY_STEPS`` steps (a start for a
    local solve needs no more)."""
    cfg = prob.cfg
    const = np.full(prob.m, prob.strict_loss_value)
    eta = float(eta_hi)
    r = const + (cfg.gamma * eta) * prob.psi
    a, state = solve_weights_compiled(r, prob.caps(eta), cfg.mu, None)
    for _ in range(COST_ONLY_STEPS):
        slope = cfg.gamma * float(prob.psi @ a)
        if cfg.sigma <= 0.0:
            new = float(eta_lo)
        elif slope <= 0.0:
            new = float(eta_hi)
        else:
            new = float(np.clip(math.sqrt(cfg.sigma / slope), eta_lo, eta_hi))
        if abs(new - eta) <= 1e-9 * eta:
            break
        eta = new
        r = const + (cfg.gamma * eta) * prob.psi
        a, state = solve_weights_compiled(r, prob.caps(eta), cfg.mu, state)
    return eta, a


def _ridge_fit(prob: Problem, a: FloatArray) -> FloatArray:
    """``argmin_w Σ a_i ℓ_i(w) + (λ/2)‖w‖²``: the w-step at fixed weights (convex)."""
    return minimize_ridge_risk(prob.loss, prob.X, prob.y, a, prob.cfg.lam).w


def eval_budget(n_models: int) -> int:
    """A-steps a range search may spend before giving up: :data:`MAX_EVALS`, or
    :data:`EVALS_PER_MODEL` per model where the range holds more models (the search's
    effort grows with them: every model's cells are bounded)."""
    return max(MAX_EVALS, EVALS_PER_MODEL * n_models)


def _dedup(W: list[FloatArray]) -> list[int]:
    """Indices of the models kept: each one farther than ``DEDUP_RTOL·(1 + ‖w‖)``
    from every earlier kept one."""
    keep: list[int] = []
    for k, w in enumerate(W):
        scale = DEDUP_RTOL * (1.0 + _norm(w))
        if all(_norm(w - W[j]) > scale for j in keep):
            keep.append(k)
    return keep


def a_step(
    r: FloatArray, caps: FloatArray, mu: float, warm: WeightsStepState | None
) -> tuple[FloatArray, WeightsStepState | None]:
    """The exact a-block minimiser: the compiled kernel, else the NumPy solver."""
    return solve_weights_compiled(r, caps, mu, warm)


@dataclass(frozen=True, slots=True)
class RangePoint:
    """One evaluation ``p_j(η)`` with its exact a-step."""

    j: int
    eta: float
    value: float
    state: WeightsStepState | None
    slope: float  # dp_j/dη (envelope theorem; exact where the caps do not move)
    a: FloatArray | None = None  # None: clip(A − s r, 0, h) from ``state``


@dataclass(frozen=True, slots=True)
class RangeSolution:
    """The certified optimum over the range: ``best``, the lower bound, the effort."""

    best: RangePoint
    weights: FloatArray
    lower_bound: float
    closed: bool
    n_evals: int
    n_models: int


@dataclass(frozen=True, eq=False)
class SearchConsts:
    """What a search needs from the caps, settings and models only (not from ``Ψ``): one
    O(m) pass, shared by the payment re-solves of one base (:func:`search_consts`)."""

    fixed_caps: bool  # caps are k/m on the whole range: no ε_i^max binds at η_hi
    kcap: float
    no_caps: FloatArray  # ε^max relaxed (dual_cell_bound)
    eps_bind: float  # below this η no ε_i^max binds: min_i ε_i^max/η ≥ k/m
    base: list[float]
    # the compiled a-step applies at every η (μ > 0, caps k/m with Σ h > 1)
    kernel_always: bool


def search_consts(prob: Problem, models: CandidateModels, hi: float) -> SearchConsts:
    cfg = prob.cfg
    held = prob.eps_max[prob.eps_max > 0.0]
    fixed_caps = bool(np.all(prob.eps_max >= (cfg.k / prob.m) * hi))
    kcap = cfg.k / prob.m
    return SearchConsts(
        fixed_caps=fixed_caps,
        kcap=kcap,
        no_caps=np.full(prob.m, np.inf),
        eps_bind=float(held.min()) if held.size else np.inf,
        base=models.base.tolist(),
        kernel_always=cfg.mu > 0.0 and fixed_caps and kcap * prob.m > 1.0 + 1e-12,
    )


class _Search:
    """Best-first branch-and-bound over ``(model, log-η cell)`` pairs."""

    def __init__(
        self,
        prob: Problem,
        models: CandidateModels,
        lo: float,
        hi: float,
        consts: SearchConsts | None = None,
    ):
        self.prob, self.models, self.lo, self.hi = prob, models, lo, hi
        cfg = prob.cfg
        self.gamma, self.sigma, self.mu = cfg.gamma, cfg.sigma, cfg.mu
        self.n_evals = 0
        # ids of the points evaluated at this ``Ψ`` (seed points stay alive during the
        # search, so no fresh point can reuse their id)
        self.fresh: set[int] = set()
        self.best: RangePoint | None = None
        if consts is None:
            consts = search_consts(prob, models, hi)
        self.fixed_caps = consts.fixed_caps
        self.kcap = consts.kcap
        self.no_caps = consts.no_caps
        self.eps_bind = consts.eps_bind
        self.base: list[float] = consts.base
        # (i, cache): only seller i's Ψ differs from the cache's (payment re-solves)
        self.delta: tuple[int, OneSellerCache] | None = None
        self.n_updates = 0
        # seller i's ℓ_j(i) per model, its cached and its new Ψ_i (set_delta)
        self._ell_i: list[float] = []
        self._psi_i = (0.0, 0.0)
        self._kernel_always = consts.kernel_always

    def set_delta(self, i: int, cache: OneSellerCache) -> None:
        """Evaluate by one-seller updates of ``cache`` (only ``Ψ_i`` differs)."""
        self.delta = (i, cache)
        self._ell_i = [float(v) for v in self.models.losses[:, i]]
        self._psi_i = (float(cache.psi[i]), float(self.prob.psi[i]))

    def evaluate(self, j: int, eta: float, warm: WeightsStepState | None) -> RangePoint:
        self.n_evals += 1
        prob = self.prob
        const = self.base[j] + self.sigma / eta
        if self._kernel_always or (self.mu > 0.0 and self.cap_total(eta) > 1.0 + 1e-12):
            A0, s0 = (warm.A, warm.s) if warm is not None else self._cold_guess(j, eta)
            if self.delta is not None:
                got = self._one_seller(j, eta, const, A0, s0)
                if got is not None:
                    value, A, s, pa = got
                    slope = self.gamma * pa - self.sigma / (eta * eta)
                    pt = RangePoint(j, eta, value, WeightsStepState(A, s), slope)
                    return self._record(pt)
            ok, value, A, s, pa = range_value_kernel(
                self.models.losses[j], prob.psi, self.gamma * eta, eta,
                self.kcap, prob.eps_max, self.mu, const, A0, s0,
            )  # fmt: skip
            if ok:
                slope = self.gamma * pa - self.sigma / (eta * eta)
                pt = RangePoint(j, eta, value, WeightsStepState(A, s), slope)
                return self._record(pt)
        r = self.models.losses[j] + (self.gamma * eta) * prob.psi
        a, state = solve_weights(r, prob.caps(eta), self.mu, warm=warm)
        on = a > 0.0  # (a weight 0 on an overflowed r_i = ∞ adds nothing, not NaN)
        value = const + float(a[on] @ r[on]) + self.mu * float(np.linalg.norm(a))
        if state is not None and state.s > 0.0:  # the Lagrangian, as the kernel's
            value += (state.A / state.s) * (1.0 - float(a.sum()))
        slope = self.gamma * float(prob.psi @ a) - self.sigma / (eta * eta)
        return self._record(RangePoint(j, eta, value, state, slope, a))

    def _cold_guess(self, j: int, eta: float) -> tuple[float, float]:
        """Multipliers ``(A, s)`` to start a cold a-step on many records from: the
        a-step on every :data:`COLD_GUESS_STRIDE`-th record with the subsample's
        scaling (caps times ``m/n``, ``μ√(n/m)``: its weights are ``m/n`` times the
        full ones, and so are its multipliers), rescaled. Only a start (the kernel
        solves exactly from any): a cold start bisects the scale in ~50 O(m)
        passes, 0.4–0.9 s at ``m = 10⁶``, when the range search has no previous
        point yet. ``(0, 0)``: no guess."""
        m = self.prob.m
        if m < COLD_GUESS_MIN_M or self.delta is not None:
            return 0.0, 0.0
        prob = self.prob
        rows = slice(0, m, COLD_GUESS_STRIDE)
        ell = np.ascontiguousarray(self.models.losses[j][rows])
        scale = m / ell.size
        ok, _, A, s, _ = range_value_kernel(
            ell, np.ascontiguousarray(prob.psi[rows]), self.gamma * eta, eta,
            self.kcap * scale, np.ascontiguousarray(prob.eps_max[rows]) * scale,
            self.mu / math.sqrt(scale), 0.0, 0.0, 0.0,
        )  # fmt: skip
        if not (ok and s > 0.0):
            return 0.0, 0.0
        return A / scale, s / scale

    def _one_seller(
        self, j: int, eta: float, const: float, A0: float, s0: float
    ) -> tuple[float, float, float, float] | None:
        """``p_j(η)`` by the O(1) one-seller update of the cached base summary at
        ``(j, η)`` (:func:`one_seller_value`); the summary (one O(m) pass) is built on
        the second visit of ``(j, η)`` by any re-solve of the same base. ``None``: no
        summary yet, or the update could not certify the active set."""
        assert self.delta is not None
        i, cache = self.delta
        key = (j, eta)
        sm = cache.summaries.get(key)
        q = self.gamma * eta
        prob = self.prob
        if sm is None and (self.fixed_caps or self.eps_bind / eta >= self.kcap):
            got = self._shifted(j, eta, const)
            if got is not None:
                return got
        if sm is None:
            if len(cache.visits) >= MAX_VISITS:
                cache.visits.clear()  # forget one-off points (seller-specific η)
            seen = cache.visits.get(key, 0) + 1
            cache.visits[key] = seen
            if seen < 2 or len(cache.summaries) >= MAX_SUMMARIES:
                return None
            sm = range_summary(
                self.models.losses[j], cache.psi, q, eta,
                self.kcap, prob.eps_max, self.mu, A0, s0,
            )  # fmt: skip
            cache.summaries[key] = sm
            if sm[0] != 0.0:
                bisect.insort(cache.etas.setdefault(j, []), eta)
        ok, value, A, s, pa = one_seller_value(
            sm, i, self._ell_i[j], q, *self._psi_i, self.mu, const
        )
        if not ok:
            return None
        self.n_updates += 1
        return value, A, s, pa

    def _shifted(
        self, j: int, eta: float, const: float
    ) -> tuple[float, float, float, float] | None:
        """``p_j(η)`` from the cached summary of model ``j`` at the nearest other
        ``η`` (:func:`shifted_value`; the caps are ``k/m`` at ``η``), or ``None``."""
        assert self.delta is not None
        i, cache = self.delta
        etas = cache.etas.get(j)
        if not etas:
            return None
        k = bisect.bisect_left(etas, eta)
        near = sorted(etas[max(k - 1, 0) : k + 1], key=lambda e: abs(e - eta))
        for e0 in near:
            sm = cache.summaries[(j, e0)]
            ok, value, A, s, pa = shifted_value(
                sm, i, self._ell_i[j], self.gamma * eta, *self._psi_i, self.mu, const
            )
            if ok:
                self.n_updates += 1
                return value, A, s, pa
        return None

    def same_caps(self, e1: float, e2: float) -> bool:
        """Whether ``h(η₁) = h(η₂)`` for ``η₁ < η₂`` (no ``ε_i^max/η`` below ``k/m``
        at ``η₂``; a zero ``ε_i^max`` gives a zero cap at both)."""
        return self.fixed_caps or self.eps_bind / e2 >= self.kcap

    def cap_total(self, eta: float) -> float:
        if self.fixed_caps:
            return self.kcap * self.prob.m
        return float(self.prob.caps(eta).sum())

    def _record(self, pt: RangePoint) -> RangePoint:
        self.fresh.add(id(pt))
        if self.best is None or pt.value < self.best.value:
            self.best = pt
        return pt

    def weights(self, pt: RangePoint) -> FloatArray:
        """``a`` at an evaluated point (re-derived from its multipliers)."""
        if pt.a is not None:
            return pt.a
        assert pt.state is not None
        r = self.models.losses[pt.j] + (self.gamma * pt.eta) * self.prob.psi
        caps = self.prob.caps(pt.eta)
        a = np.asarray(np.clip(pt.state.A - pt.state.s * r, 0.0, caps), dtype=float)
        restore_sum(a, caps)  # Σ a = 1 to rounding (A − s r cancels for small μ)
        return a

    def cell_bound(self, p1: RangePoint, p2: RangePoint) -> float:
        e1, e2 = p1.eta, p2.eta
        base = self.base[p1.j]
        if self.same_caps(e1, e2):
            g1 = p1.value - base - self.sigma / e1
            g2 = p2.value - base - self.sigma / e2
            slope = (g2 - g1) / (e2 - e1)
            eta = chord_argmin(self.sigma, slope, e1, e2)
            val = base + self.sigma / eta + g1 + slope * (eta - e1)
            return min(val, p1.value, p2.value)
        prob = self.prob
        low = p1 if p1.value <= p2.value else p2
        if self.mu > 0.0 and low.state is not None:
            self.n_evals += 3
            ok, val = cap_cell_bound_kernel(
                self.models.losses[p1.j], prob.psi, self.gamma, e1, e2, self.kcap,
                prob.eps_max, self.mu, self.sigma, base, low.eta, low.state.A,
                low.state.s,
            )  # fmt: skip
            if ok:
                return float(min(val, p1.value, p2.value))
            self.n_evals -= 3
        self.n_evals += 1
        psi_lo = np.minimum(e1 * prob.psi, e2 * prob.psi)
        r = self.models.losses[p1.j] + self.gamma * psi_lo
        a, _ = a_step(r, prob.caps(e1), self.mu, p1.state)
        val = base + self.sigma / e2 + float(a @ r) + self.mu * float(np.linalg.norm(a))
        val = max(val, self.dual_cell_bound(p1, p2, self.cap_multipliers(low)))
        return float(min(val, p1.value, p2.value))

    def cap_multipliers(self, pt: RangePoint) -> FloatArray:
        """``ν ≥ 0`` for the caps ``η a_i ≤ ε_i^max`` at an evaluated point.

        KKT of problem (A) (``_weights_step``): ``a = clip(A − s r, 0, h)`` with
        ``τ = A/s`` the simplex multiplier, so a seller held at ``h_i = ε_i^max/η``
        carries ``β_i = (A − s r_i − h_i)/s ≥ 0`` on ``a_i ≤ h_i``, i.e. ``ν_i = β_i/η``
        on ``η a_i ≤ ε_i^max``. Any ``ν ≥ 0`` gives a valid bound
        (:meth:`dual_cell_bound`); these make it exact at ``pt`` (zero where no
        multipliers are known: forced weights;
        :func:`mechanisms.allocation._weights_step.held_multipliers`, also for ``μ = 0``).
        """
        r = self.models.losses[pt.j] + (self.gamma * pt.eta) * self.prob.psi
        h = self.prob.eps_max / pt.eta
        nu = held_multipliers(
            r, h, h < self.kcap, pt.eta, mu=self.mu, a=pt.a,
            caps=self.prob.caps(pt.eta), state=pt.state,
        )  # fmt: skip
        return np.zeros(self.prob.m) if nu is None else nu

    def dual_cell_bound(self, p1: RangePoint, p2: RangePoint, nu: FloatArray) -> float:
        """Lower bound of ``p_j`` on ``[η₁, η₂]`` by relaxing the ``η``-dependent caps.

        With multipliers ``ν ≥ 0`` on ``η a_i ≤ ε_i^max`` (weak duality),

            g_j(η) ≥ L_ν(η) = min_{a ∈ C₀} ⟨ℓ(w_j) + η(γΨ + ν), a⟩ + μ‖a‖ − νᵀε^max,

        ``C₀`` the simplex capped at ``k/m`` only. ``L_ν`` is a minimum of functions
        affine in ``η``, hence concave: it lies above its chord on the cell, and
        ``λ‖w_j‖²/2 + σ/η + chord(η)`` is minimised in closed form. With ``ν`` the
        multipliers at an end of the cell (:meth:`cap_multipliers`, strong duality
        there) the bound is exact at that end and tight to second order in the cell
        width, where the plain bound ``σ/η₂ + g_j(η₁)`` is only first order — which
        left near-cap instances (most ``ε_i^max`` binding) uncertified after
        ``MAX_EVALS`` a-steps (``benchmarks/RESULTS.md``, "Near-cap orders").
        """
        prob, j = self.prob, p1.j
        e1, e2 = p1.eta, p2.eta
        psi_nu = self.gamma * prob.psi + nu
        held = nu > 0.0  # ν_i = 0 where ε_i^max = ∞ (0·∞ would be NaN)
        shift = -float(nu[held] @ prob.eps_max[held])
        g = [self.relaxed_value(j, psi_nu, e, shift) for e in (e1, e2)]
        slope = (g[1] - g[0]) / (e2 - e1)
        eta = chord_argmin(self.sigma, slope, e1, e2)
        return self.base[j] + self.sigma / eta + g[0] + slope * (eta - e1)

    def relaxed_value(
        self, j: int, psi_nu: FloatArray, eta: float, shift: float
    ) -> float:
        """``L_ν(η)`` of :meth:`dual_cell_bound` (one exact a-step on ``C₀``)."""
        self.n_evals += 1
        m = self.prob.m
        if self.mu > 0.0 and self.kcap * m > 1.0 + 1e-12:
            ok, value, _, _, _ = range_value_kernel(
                self.models.losses[j], psi_nu, eta, eta, self.kcap,
                self.no_caps, self.mu, shift, 0.0, 0.0,
            )  # fmt: skip
            if ok:
                return float(value)
        r = self.models.losses[j] + eta * psi_nu
        a, _ = solve_weights(r, np.full(m, self.kcap), self.mu)
        return shift + float(a @ r) + self.mu * float(np.linalg.norm(a))


@dataclass(eq=False)
class OneSellerCache:
    """Summaries of the base problem (virtual costs ``psi``) at ``(model, η)`` points,
    shared by the payment re-solves of every seller (each changes one ``Ψ_i``): a
    re-solve's B&B bisects the same cells as the base's and its neighbours', so most
    of its points recur across sellers and are evaluated by an O(1) update
    (:func:`mechanisms.allocation._weights_kernel.one_seller_value`)."""

    psi: FloatArray
    summaries: dict[tuple[int, float], FloatArray] = field(default_factory=dict)
    visits: dict[tuple[int, float], int] = field(default_factory=dict)
    # per model, the sorted η of its valid summaries (for shifted_value)
    etas: dict[int, list[float]] = field(default_factory=dict)
    # the payments' lean re-solver of this base in this process
    # (mechanisms.payments._resolve._range_resolve.RangeResolver; not pickled)
    resolver: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["resolver"] = None
        return state


@dataclass(frozen=True, eq=False)
class RangeSeed:
    """The closed search of one allocation, reusable by a re-solve whose virtual costs
    are all at least ``psi`` (``G`` is non-decreasing in each ``Ψ_i``, so every cell
    bound stays a valid lower bound; the ends are re-evaluated before a cell is used).
    """

    models: CandidateModels
    bounds: tuple[float, float]
    psi: FloatArray
    best: RangePoint
    cells: tuple[tuple[float, int, RangePoint, RangePoint], ...]
    cache: OneSellerCache | None = None

    def usable(
        self, prob: Problem, models: CandidateModels, bounds: tuple[float, float]
    ) -> bool:
        return (
            models is self.models
            and bounds == self.bounds
            and bool(np.all(prob.psi >= self.psi))
        )


Cell = tuple[float, int, int, RangePoint, RangePoint, bool]


def solve_in_range(
    prob: Problem,
    models: CandidateModels,
    lo: float,
    hi: float,
    *,
    seed: RangeSeed | None = None,
    rtol: float = RANGE_RTOL,
    max_evals: int | None = None,
) -> tuple[RangeSolution, list[RangePoint], RangeSeed]:
    """Certified global minimum of ``G`` over the range (module docstring).

    ``seed``: the closed search of an allocation with virtual costs ``≤ prob.psi``
    (:class:`RangeSeed`); its cells start the search as stale bounds. Returns the
    solution, the best model's partition points (its ``η`` profile) and the seed of
    this search.
    """
    if max_evals is None:
        max_evals = eval_budget(models.n)
    search = _Search(prob, models, lo, hi)
    delta = None
    if seed is not None and seed.usable(prob, models, (lo, hi)):
        changed = np.flatnonzero(prob.psi != seed.psi)
        if changed.size == 1 and seed.cache is not None:
            delta = int(changed[0])
    else:
        seed = None
    best, lower, heap, part = _branch_and_bound(search, seed, delta, rtol, max_evals)
    closed = lower >= best.value - rtol * (1.0 + abs(best.value)) - 1e-15
    sol = RangeSolution(
        best, search.weights(best), lower, closed, search.n_evals, models.n
    )
    new_seed = RangeSeed(
        models, (lo, hi), prob.psi, best, _coarse_cells(search, heap),
        OneSellerCache(prob.psi),
    )  # fmt: skip
    profile = [part[e] for e in sorted(part)]
    return sol, profile, new_seed


@dataclass(frozen=True, slots=True)
class OneSellerSolution:
    """A payment re-solve's optimum without the O(m) weights (:func:`resolve_one_seller`):
    the best point, the certified lower bound, and the search (for the weights or the
    caps where they are needed)."""

    best: RangePoint
    lower_bound: float
    closed: bool
    n_evals: int
    search: _Search


@dataclass(frozen=True, eq=False)
class CompiledResolve:
    """What :func:`resolve_one_seller` needs to run its search compiled
    (:mod:`mechanisms.allocation._range._one_seller_search`): the seed as arrays and the
    summaries of the seed's virtual costs (one per base and process)."""

    seed: SeedArrays
    cache: CompiledCache
    losses: FloatArray
    base: FloatArray
    eps_max: FloatArray


def compiled_resolve(
    prob: Problem, models: CandidateModels, seed: RangeSeed, consts: SearchConsts
) -> CompiledResolve | None:
    """The compiled search's state for the re-solves of ``seed``, or ``None`` where
    it does not apply: some cap ``ε_i^max/η`` binds on the range, ``μ = 0``, the caps
    sum to at most 1 (the search's points then are not all compiled a-steps), or the
    seed keeps no one-seller cache."""
    if not (HAVE_NUMBA and consts.kernel_always and seed.cache is not None):
        return None
    cache = CompiledCache.empty(seed.psi, models.n, MAX_SUMMARIES, MAX_VISITS)
    return CompiledResolve(
        seed_arrays(seed),
        cache,
        np.ascontiguousarray(models.losses, dtype=np.float64),
        np.ascontiguousarray(models.base, dtype=np.float64),
        np.ascontiguousarray(prob.eps_max, dtype=np.float64),
    )


def resolve_one_seller(
    prob: Problem,
    models: CandidateModels,
    lo: float,
    hi: float,
    seed: RangeSeed,
    index: int,
    consts: SearchConsts,
    *,
    rtol: float = RANGE_RTOL,
    max_evals: int | None = None,
    compiled: CompiledResolve | None = None,
) -> OneSellerSolution:
    """:func:`solve_in_range` for a payment re-solve: ``prob.psi`` equals ``seed.psi``
    except at ``index``, where it is not lower (the caller's guarantee, so the seed is
    usable without the O(m) comparisons), and the cap constants ``consts`` of the
    base are reused. The same branch-and-bound and polish, so the same optimum and
    certificate; only the O(m) weights and the new seed are not built. With
    ``compiled`` (:func:`compiled_resolve` of the same seed) the search runs as one
    compiled call, and in Python only where that needs the NumPy a-step."""
    if not prob.psi[index] >= seed.psi[index]:
        raise ValueError("index: the re-solve must not lower the seller's Ψ_i")
    if max_evals is None:
        max_evals = eval_budget(models.n)
    search = _Search(prob, models, lo, hi, consts)
    if compiled is not None:
        cfg = prob.cfg
        status, row, lower, n_evals = one_seller_search(
            compiled.losses, np.ascontiguousarray(prob.psi, dtype=np.float64),
            compiled.eps_max, compiled.base,
            (cfg.gamma, cfg.sigma, cfg.mu, consts.kcap), index, compiled.seed,
            compiled.cache, rtol, max_evals,
        )  # fmt: skip
        if status == OK:
            j, eta, value, A, s, slope = row.tolist()
            best = RangePoint(int(j), eta, value, WeightsStepState(A, s), slope)
            closed = lower >= value - rtol * (1.0 + abs(value)) - 1e-15
            return OneSellerSolution(best, lower, closed, n_evals, search)
    delta = index if seed.cache is not None else None
    best, lower, _, _ = _branch_and_bound(search, seed, delta, rtol, max_evals)
    closed = lower >= best.value - rtol * (1.0 + abs(best.value)) - 1e-15
    return OneSellerSolution(best, lower, closed, search.n_evals, search)


def _branch_and_bound(
    search: _Search,
    seed: RangeSeed | None,
    delta: int | None,
    rtol: float,
    max_evals: int,
) -> tuple[RangePoint, float, list[Cell], dict[float, RangePoint]]:
    """The search of :func:`solve_in_range` (from ``seed``'s cells when given, with
    the one-seller update of its cache for seller ``delta``): the polished best point,
    the lower bound, the open cells and the best model's partition points."""
    models = search.models
    heap: list[Cell] = []
    counter = 0
    fresh: dict[tuple[int, float], RangePoint] = {}

    def push(lb: float, j: int, p1: RangePoint, p2: RangePoint, stale: bool) -> None:
        nonlocal counter
        counter += 1
        heapq.heappush(heap, (lb, counter, j, p1, p2, stale))

    def renew(p: RangePoint) -> RangePoint:
        key = (p.j, p.eta)
        if key not in fresh:
            fresh[key] = search.evaluate(p.j, p.eta, p.state)
        return fresh[key]

    if seed is not None:
        if delta is not None and seed.cache is not None:
            search.set_delta(delta, seed.cache)
        renew(seed.best)
        for lb, j, p1, p2 in seed.cells:
            push(lb, j, p1, p2, True)
    else:
        start = np.geomspace(search.lo, search.hi, N_START)
        prev: list[RangePoint] = []  # the previous model's points: warm starts
        for j in range(models.n):
            pts: list[RangePoint] = []
            for k, eta in enumerate(start):
                warm = prev[k].state if prev else (pts[-1].state if pts else None)
                pts.append(search.evaluate(j, float(eta), warm))
            prev = pts
            for p1, p2 in itertools.pairwise(pts):
                push(search.cell_bound(p1, p2), j, p1, p2, False)

    def target() -> float:
        assert search.best is not None
        v = search.best.value
        return v - rtol * (1.0 + abs(v))

    dropped = np.inf
    while heap and search.n_evals < max_evals:
        if search.best is not None and heap[0][0] >= target():
            break
        lb, _, j, p1, p2, _ = heapq.heappop(heap)
        if id(p1) not in search.fresh or id(p2) not in search.fresh:
            q1, q2 = renew(p1), renew(p2)
            push(search.cell_bound(q1, q2), j, q1, q2, False)
            continue
        mid = float(np.sqrt(p1.eta * p2.eta))
        if not (p1.eta < mid < p2.eta):
            # Cannot be split in floating point: its bound stays in the certificate.
            dropped = min(dropped, lb)
            continue
        pm = search.evaluate(j, mid, p1.state)
        push(search.cell_bound(p1, pm), j, p1, pm, False)
        push(search.cell_bound(pm, p2), j, pm, p2, False)
    assert search.best is not None
    lower = min([search.best.value, dropped, *(c[0] for c in heap)])
    j_best = search.best.j
    part = {c[3].eta: c[3] for c in heap if c[2] == j_best}
    part.update({c[4].eta: c[4] for c in heap if c[2] == j_best})
    best = _polish(search, search.best, sorted(part))
    return best, lower, heap, part


def _coarse_cells(
    search: _Search, heap: list[Cell]
) -> tuple[tuple[float, int, RangePoint, RangePoint], ...]:
    """The seed's cells: per model, only the starting grid and the best point.

    A partition refined to the certificate's tolerance around every near-optimal
    ``η`` would have all its cells re-evaluated by each later re-solve (their bounds
    sit just below the rising optimum); the coarse cells' bounds are chords of values
    that are lower bounds at any later ``Ψ ≥`` this one, so still valid, and the
    re-solve refines only where it needs to.
    """
    keep = {float(e) for e in np.geomspace(search.lo, search.hi, N_START)}
    assert search.best is not None
    best = search.best
    pts: dict[int, dict[float, RangePoint]] = {}
    for c in heap:
        for p in (c[3], c[4]):
            if p.eta in keep or p is best:
                pts.setdefault(c[2], {})[p.eta] = p
    pts.setdefault(best.j, {})[best.eta] = best
    cells = []
    for j, by_eta in pts.items():
        row = [by_eta[e] for e in sorted(by_eta)]
        for p1, p2 in itertools.pairwise(row):
            cells.append((search.cell_bound(p1, p2), j, p1, p2))
    return tuple(cells)


def _polish(search: _Search, best: RangePoint, etas: list[float]) -> RangePoint:
    """Minimise ``p_j`` for the best model near the best point.

    Where the caps do not move, ``p_j'(η) = γΨᵀa*(η) − σ/η²`` (envelope theorem); a
    safeguarded secant (Illinois) on it in ``log η`` finds the stationary point to
    ``1e-13`` relative, in the bracket from the best point to the first partition
    point downhill where the slope changes sign, and answers the point of least slope
    (:func:`_stationary_point`). Otherwise a bounded Brent search on ``p_j`` between
    the partition points around the best point.
    """
    below = [e for e in etas if e < best.eta]
    above = [e for e in etas if e > best.eta]
    lo = below[-1] if below else best.eta
    hi = above[0] if above else best.eta
    if lo == hi:
        return best
    j = best.j
    if not search.same_caps(lo, hi):
        state = best.state

        def f(log_eta: float) -> float:
            nonlocal state
            pt = search.evaluate(j, float(np.exp(log_eta)), state)
            state = pt.state
            return pt.value

        minimize_scalar(
            f, bounds=(np.log(lo), np.log(hi)), method="bounded",
            options={"xatol": 1e-12, "maxiter": 200},
        )  # fmt: skip
        assert search.best is not None
        return search.best
    # Bracket a sign change of the slope: from the best point towards descent,
    # through the partition points (a neighbour can sit within rounding of the best
    # point, its slope of the same sign), while the caps stay fixed.
    if best.slope == 0.0:
        return best
    ends = above if best.slope < 0.0 else below[::-1]
    tried = [best]
    near, far = best, None
    for e in ends:
        if not search.same_caps(min(lo, e), max(hi, e)):
            break
        pt = search.evaluate(j, e, near.state)
        tried.append(pt)
        if (pt.slope > 0.0) if best.slope < 0.0 else (pt.slope < 0.0):
            far = pt
            break
        near = pt
    if far is None:
        assert search.best is not None
        return search.best  # descending up to the range's end or a cap change
    left, right = (near, far) if best.slope < 0.0 else (far, near)
    x0, f0 = math.log(left.eta), left.slope
    x1, f1 = math.log(right.eta), right.slope
    side = 0
    state = best.state
    for _ in range(100):
        x = (x0 * f1 - x1 * f0) / (f1 - f0)
        if not (min(x0, x1) < x < max(x0, x1)):
            x = 0.5 * (x0 + x1)
        pt = search.evaluate(j, math.exp(x), state)
        tried.append(pt)
        state = pt.state
        if pt.slope == 0.0 or abs(x1 - x0) <= 1e-13:
            break
        if (pt.slope < 0.0) == (f0 < 0.0):
            x0, f0 = x, pt.slope
            if side == -1:
                f1 *= 0.5
            side = -1
        else:
            x1, f1 = x, pt.slope
            if side == 1:
                f0 *= 0.5
            side = 1
        if abs(x1 - x0) <= 1e-13 * max(1.0, abs(x)):
            break
    return _stationary_point(search, tried)


def _stationary_point(search: _Search, tried: list[RangePoint]) -> RangePoint:
    """The polish's answer: of the points ``tried`` by the secant (the bracket's ends,
    then its iterates), the first with the least ``|p_j'(η)|``, unless the search
    holds a point lower by more than ``STATIONARY_SLACK·(1 + |G|)``.

    Near the stationary point ``p_j(η) − p_j(η*) ≈ ½ p_j''(η*)(η − η*)²`` is below the
    rounding of ``G`` for ``|η − η*|/η*`` up to about ``10⁻⁷``, so the lowest value
    there names an ``η`` by rounding noise alone: an ``O(m)`` pass, a cached summary's
    one-seller update and a shifted one round differently, and a seller's ``ε_i`` can
    be steep in ``η`` (near its exclusion: ``2·10⁻⁴`` in ``ε_i`` for ``7·10⁻⁹``
    relative in ``η``). The slope's root is well conditioned, so the same ``(j, η)``
    comes out whichever way the points were evaluated.
    """
    root = tried[0]
    for pt in tried[1:]:
        if abs(pt.slope) < abs(root.slope):
            root = pt
    best = search.best
    assert best is not None
    if best.value < root.value - STATIONARY_SLACK * (1.0 + abs(root.value)):
        return best
    return root
