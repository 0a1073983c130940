"""Candidate-model solves that touch fewer records (large ``m``).

The solves below return models that are functions of the records, the caps, the
configuration and the public scenario only (never of the reported costs), as
:func:`mechanisms.allocation._range._candidate_range.candidate_models` requires.

Restriction to a set of rows
----------------------------
For a set ``C`` of records let ``F_C(w) = min_{a ∈ C(η), a_i = 0 (i ∉ C)} G(w, a, η)``:
the same a-step on a smaller feasible set, so ``F_C ≥ F`` everywhere, with equality
at every ``w`` where the (unique, ``μ > 0``) a-step minimiser ``a*(w)`` is supported
on ``C``. With ``a_i* = clip(A − s r_i, 0, h_i)`` that holds on a neighbourhood of
``w`` as soon as ``A − s r_i < 0`` off ``C``, so there ``∇F_C = ∇F`` and
``∇²F_C = ∇²F`` too. Hence (:func:`solve_screened`):

- a trust-region solve of ``F_C`` from a point where ``F_C = F`` is a descent method
  on ``F`` (``F(w⁺) ≤ F_C(w⁺) < F_C(w) = F(w)``), and its limit is a KKT point of
  ``F`` to the same tolerance once one evaluation of ``F`` on all rows confirms the
  support;
- each evaluation of ``F_C`` costs O(|C|·d) instead of O(m·d).

For a public cost scenario at a large ``η`` the weights go to the few records that
are cheap in it (``r_i = ℓ_i + γηΨ_i``): at ``m = 10⁶`` a few hundred, so ``C`` of a few
thousand rows replaces ``m``. ``C`` is the ``n`` records with the smallest ``r_i`` at
the current point, ``n`` a multiple of the support there; when the confirming
evaluation finds weight off ``C``, ``C`` is chosen again there, twice as large.

A subsample of the rows
-----------------------
For a random subset ``S`` of ``n`` rows the problem with caps ``h_i·m/n`` and ``μ√(n/m)``
has ``F_S(w) ≈ F(w)``: its weights ``a_i·m/n`` on ``S`` give ``Σ_S a_i r_i`` as a sample
mean of ``Σ a_i r_i``, and ``μ√(n/m)·‖a_S‖ = μ‖a‖`` in expectation. Its minimiser
is a start for the solve on all rows (:func:`solve_subsampled`): the long way from
``w = 0`` (a tiny first trust radius where ``∇²F`` is far from positive definite)
is walked at ``n/m`` of the cost, and the solve on all rows is left the last
steps, with the Newton steps extended while ``F`` falls
(:func:`mechanisms.allocation._reduced_newton._extrapolate`: with a small ``μ`` the
subsets' minimisers sit in a long valley of ``F`` that plain Newton steps walk
slowly). The model is then not a KKT point, which the range does not need. A scenario's
solve from the cost-free model whose weights are too spread for the restriction
above runs on the largest subset first (:func:`solve_warm_subsampled`).
The subset is drawn with the fixed seed :data:`SUBSAMPLE_SEED` (a function of ``m``
only).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._block_solver import BlockSolution, solve_at_eta
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._weights_step import (
    WeightsStepState,
    project_capped_simplex,
    solve_weights_compiled,
)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]


@dataclass(frozen=True, eq=False)
class RowSubset(Problem):
    """``Problem`` on a subset of the rows whose caps are those of the full problem
    (``min(k/cap_m, ε_i^max/η)`` with the full ``m``), times ``cap_scale``."""

    cap_m: int = 1
    cap_scale: float = 1.0

    def caps(self, eta: float) -> FloatArray:
        return self.cap_scale * np.minimum(self.cfg.k / self.cap_m, self.eps_max / eta)


def restrict(prob: Problem, rows: IntArray, scale: float = 1.0) -> RowSubset:
    """``prob`` on ``rows`` (sorted), caps times ``scale``, ``μ`` divided by
    ``√scale`` (``scale = 1``: the restriction ``F_C``; ``m/n``: the subsample)."""
    cfg = prob.cfg
    if scale != 1.0:
        cfg = dataclasses.replace(cfg, mu=cfg.mu / math.sqrt(scale))
    return RowSubset(
        np.ascontiguousarray(prob.X[rows]),
        np.ascontiguousarray(prob.y[rows]),
        np.ascontiguousarray(prob.psi[rows]),
        np.ascontiguousarray(prob.eps_max[rows]),
        cfg,
        cap_m=prob.m,
        cap_scale=scale,
    )


def _smallest(r: FloatArray, n: int) -> tuple[IntArray, float]:
    """The indices (ascending) of the ``n`` smallest entries of ``r`` and of every
    entry tied with the ``n``-th (so the set does not depend on how ties sort), and
    that ``n``-th smallest value (``inf`` when ``n ≥ r.size``)."""
    if n >= r.size:
        return np.arange(r.size), math.inf
    t = float(np.partition(r, n - 1)[n - 1])
    return np.flatnonzero(r <= t), t


def _screened_a_step(
    r: FloatArray, caps: FloatArray, mu: float, max_rows: int
) -> tuple[IntArray, FloatArray, WeightsStepState] | None:
    """The a-step on all rows solved on the smallest ``r_i`` only: ``(rows, a on
    rows, state)``, or ``None`` when that needs more than ``max_rows`` rows.

    For ``C`` the rows with ``r_i ≤ t``, the a-step on ``C`` with multipliers
    ``(A, s)`` is the one on all rows when ``A/s ≤ t``: every other row has
    ``A − s r_i < 0``, so weight 0 (the minimiser is unique for ``μ > 0``). ``C``
    grows fourfold until that holds. (A warm start from another ``r`` — the
    cost-free model's multipliers for a scenario's costs — takes several O(m)
    active-set passes; this takes one partition.)
    """
    n = SCREEN_MIN_ROWS
    while n <= max_rows:
        rows, t = _smallest(r, n)
        if float(caps[rows].sum()) > 1.0 + 1e-9:
            a, st = solve_weights_compiled(r[rows], caps[rows], mu, None)
            if st is not None and st.s > 0.0 and st.s * t >= st.A:
                return rows, a, st
        n *= 4
    return None


SCREEN_MIN_M = 20_000  # fewer records: every solve is cheap, solve on all rows
SCREEN_FACTOR = 8  # |C| = this × the support of the weights where C is chosen, ...
SCREEN_MIN_ROWS = 4_096  # ... and at least this many rows
SCREEN_MAX_FRACTION = 0.25  # a larger C saves too little: solve on all rows
SCREEN_MAX_ROUNDS = 8


def screening_applies(prob: Problem) -> bool:
    """:func:`solve_screened` needs the trust-region solve (``μ > 0``, linear ``u``:
    a zero-iteration solve is then one evaluation of ``F``) and pays off only for
    many records."""
    cfg = prob.cfg
    return prob.m >= SCREEN_MIN_M and cfg.mu > 0.0 and cfg.u == "linear"


def solve_screened(
    prob: Problem,
    eta: float,
    *,
    w0: FloatArray,
    a0: FloatArray,
    losses0: FloatArray,
    state: WeightsStepState | None,
    max_iter: int,
) -> BlockSolution:
    """A KKT point of ``F`` at ``η`` from ``w0`` (``losses0 = ℓ(X w0)``; ``a0``,
    ``state``: weights and multipliers near there) by solves of ``F_C`` (module
    docstring), as :func:`solve_at_eta` returns it, with at most ``max_iter``
    trust-region iterations over all rounds.

    The a-step at ``w0`` is solved on the smallest ``r_i`` (:func:`_screened_a_step`);
    when its support needs more than :data:`SCREEN_MAX_FRACTION` of the rows the
    solve runs on all rows. Each round: ``C`` = the :data:`SCREEN_FACTOR`-fold support
    of ``a*`` (at least :data:`SCREEN_MIN_ROWS` rows) with the smallest ``r_i`` at the
    current point,
    a solve of ``F_C`` from there, and one evaluation of ``F`` on all rows at its
    result. That evaluation is returned when it converged, used up the
    iterations or put no weight off ``C`` (then ``F = F_C`` there: the solve of
    ``F_C`` was one of ``F``). Otherwise the next round chooses ``C`` there, at least
    twice as large. A ``C`` beyond :data:`SCREEN_MAX_FRACTION` of the rows, or
    :data:`SCREEN_MAX_ROUNDS` rounds, leave the rest to the solve on all rows.
    """
    m = prob.m
    cfg = prob.cfg
    caps = prob.caps(eta)
    q = cfg.gamma * eta
    r = losses0 + q * prob.psi
    w = np.asarray(w0, dtype=float)
    first = _screened_a_step(r, caps, cfg.mu, int(SCREEN_MAX_FRACTION * m))
    if first is None:  # the weights are spread over many records: all rows
        if subsampling_applies(prob):
            return solve_warm_subsampled(
                prob, eta, w0=w, a0=a0, state=state, max_iter=max_iter
            )
        return solve_at_eta(prob, eta, w0=w, a0=a0, state=state, max_iter=max_iter)
    support, a_support, st0 = first
    st: WeightsStepState | None = st0
    a = np.zeros(m)
    a[support] = a_support
    n = max(SCREEN_MIN_ROWS, SCREEN_FACTOR * int(np.count_nonzero(a_support)))
    used = 0
    for _ in range(SCREEN_MAX_ROUNDS):
        if n > SCREEN_MAX_FRACTION * m:
            break
        rows, _ = _smallest(r, n)
        if not float(caps[rows].sum()) > 1.0 + 1e-9:
            n *= 2  # the caps on C admit no other weights than a vertex
            continue
        sub = solve_at_eta(
            restrict(prob, rows), eta, w0=w, a0=a[rows], state=st,
            max_iter=max_iter - used,
        )  # fmt: skip
        used += sub.iterations
        a_sub = np.zeros(m)
        a_sub[rows] = sub.a
        full = solve_at_eta(prob, eta, w0=sub.w, a0=a_sub, state=sub.state, max_iter=0)
        full = dataclasses.replace(full, iterations=used)
        off = np.ones(m, dtype=bool)
        off[rows] = False
        if full.converged or used >= max_iter or not np.any(full.a[off] > 0.0):
            return full
        assert full.losses is not None
        w, a, st = full.w, full.a, full.state
        r = full.losses + q * prob.psi
        n = max(2 * n, SCREEN_FACTOR * int(np.count_nonzero(a)))
    rest = solve_at_eta(prob, eta, w0=w, a0=a, state=st, max_iter=max_iter - used)
    return dataclasses.replace(rest, iterations=used + rest.iterations)


SUBSAMPLE_SEED = 27_11_2026  # public, fixed: the subsets are a function of m only
SUBSAMPLE_MIN_M = 100_000  # fewer records: solve on all rows from the start
SUBSAMPLE_DIVISORS = (64, 8)  # subsets of m/64, then m/8 rows (nested) ...
SUBSAMPLE_MIN_ROWS = 10_000  # ... of at least this many rows
SUBSAMPLE_MAX_ITER = (60, 10)  # trust-region iterations on each subset
FINAL_MAX_ITER = 2  # and on all rows (Newton steps extended)
WARM_FINAL_MAX_ITER = 2  # on all rows after a warm start's subset solve


def subsampling_applies(prob: Problem) -> bool:
    """:func:`solve_subsampled` for many records (``μ > 0``, linear ``u``: the
    trust-region solve)."""
    cfg = prob.cfg
    return prob.m >= SUBSAMPLE_MIN_M and cfg.mu > 0.0 and cfg.u == "linear"


def subsample_rows(m: int) -> list[IntArray]:
    """The nested subsets of :func:`solve_subsampled` (ascending rows each), drawn
    with the fixed seed :data:`SUBSAMPLE_SEED` (remembered, read-only: every
    scenario solve asks again)."""
    return list(_subsample_rows(m, SUBSAMPLE_DIVISORS, SUBSAMPLE_MIN_ROWS))


@functools.lru_cache(maxsize=4)
def _subsample_rows(
    m: int, divisors: tuple[int, ...], min_rows: int
) -> tuple[IntArray, ...]:
    perm = np.random.default_rng(SUBSAMPLE_SEED).permutation(m)
    sizes = [max(min_rows, m // k) for k in divisors]
    out = tuple(np.sort(perm[:n]) for n in sizes if n < m)
    for rows in out:
        rows.flags.writeable = False
    return out


def solve_subsampled(
    prob: Problem, eta: float, *, w0: FloatArray, max_iter: int
) -> BlockSolution:
    """A model of ``F`` at ``η`` by continuation over subsamples (module docstring):
    from ``w0`` and the uniform weights on the caps, at most
    :data:`SUBSAMPLE_MAX_ITER` trust-region iterations on each subset of
    :func:`subsample_rows` in turn (each from the last one's model and its
    multipliers rescaled to the subset), then at most ``min(max_iter,``
    :data:`FINAL_MAX_ITER`) on all rows. A function of the rows, the caps, the
    configuration and ``prob.psi`` only (deterministic)."""
    m = prob.m
    w = np.asarray(w0, dtype=float)
    st: WeightsStepState | None = None
    prev_scale = 1.0
    used = 0
    for rows, cap_iter in zip(subsample_rows(m), SUBSAMPLE_MAX_ITER, strict=False):
        scale = m / rows.size
        sub = restrict(prob, rows, scale)
        a0 = np.full(rows.size, 1.0 / rows.size)
        if st is not None:
            # a_i on the last subset ≈ (m/n_prev)·a_i: (A, s) scale alike
            st = WeightsStepState(st.A * scale / prev_scale, st.s * scale / prev_scale)
        else:
            a0 = project_capped_simplex(a0, sub.caps(eta))[0]
        sol = solve_at_eta(sub, eta, w0=w, a0=a0, state=st, max_iter=cap_iter)
        used += sol.iterations
        w, st, prev_scale = sol.w, sol.state, scale
    if st is not None:
        st = WeightsStepState(st.A / prev_scale, st.s / prev_scale)
    a0 = project_capped_simplex(np.full(m, 1.0 / m), prob.caps(eta))[0]
    full = solve_at_eta(
        prob, eta, w0=w, a0=a0, state=st, max_iter=min(max_iter, FINAL_MAX_ITER),
        extrapolate=True,
    )  # fmt: skip
    return dataclasses.replace(full, iterations=used + full.iterations)


def solve_warm_subsampled(
    prob: Problem,
    eta: float,
    *,
    w0: FloatArray,
    a0: FloatArray,
    state: WeightsStepState | None,
    max_iter: int,
) -> BlockSolution:
    """A model of ``F`` at ``η`` from a nearby ``(w0, a0, state)`` (a scenario's from
    the cost-free model): solved on the largest subset of :func:`subsample_rows`
    (weights and multipliers rescaled to it), then at most
    :data:`WARM_FINAL_MAX_ITER` iterations on all rows from there. Near a KKT point
    where ``∇²F ≻ 0`` the subset's minimiser is within the Newton step's quadratic
    convergence: at ``m = 10⁶`` two iterations reach the same KKT point as the
    three to five of the solve on all rows (``F`` equal to 1e-15 relative), at a
    fifth of an iteration's cost per subset iteration."""
    m = prob.m
    rows = subsample_rows(m)[-1]
    scale = m / rows.size
    st = None if state is None else WeightsStepState(state.A * scale, state.s * scale)
    sub = solve_at_eta(
        restrict(prob, rows, scale), eta, w0=w0, a0=a0[rows] * scale, state=st,
        max_iter=max_iter,
    )  # fmt: skip
    st = sub.state
    if st is not None:
        st = WeightsStepState(st.A / scale, st.s / scale)
    full = solve_at_eta(
        prob, eta, w0=sub.w, a0=a0, state=st,
        max_iter=min(max_iter, WARM_FINAL_MAX_ITER),
    )  # fmt: skip
    return dataclasses.replace(full, iterations=sub.iterations + full.iterations)
