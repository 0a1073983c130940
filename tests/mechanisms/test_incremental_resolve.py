"""Payment re-solves agree with cold full solves (issue 16).

A payment sweep re-solves the allocation with one seller's report raised. The
shortcut (:func:`mechanisms.payments._resolve._local_resolve.local_resolve`, warm from nearby
points, certified by a range branch-and-bound over the base's stale nodes computed
once per job by :func:`stale_nodes`) must return what a cold
:func:`solve_allocation` — i.e. :func:`mechanisms.allocate` — returns for that report,
including when the raise changes the active set (a seller drops out, a capped seller
leaves its cap, another seller hits its cap or enters).
"""

from __future__ import annotations

import dataclasses
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from market.datasets import load_wisconsin, train_val_test_split
from mechanisms import MechanismConfig, UniformPrior, allocate
from mechanisms.allocation._block_solver import solve_at_eta
from mechanisms.allocation._eta_search import solve_allocation
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range import _candidate_range
from mechanisms.allocation._range._candidate_range import scenario_virtual_costs
from mechanisms.allocation._range._certify import (
    Node,
    StaleNodes,
    certify_range,
    effective_problem,
)
from mechanisms.allocation._weights_kernel import (
    one_seller_value,
    range_summary,
    range_value_kernel,
    shifted_value,
)
from mechanisms.payments._payments import payment_job, seller_payment
from mechanisms.payments._resolve import _local_resolve, _range_resolve, _seller_curve
from mechanisms.payments._resolve._local_resolve import (
    LocalSolve,
    base_hessian,
    local_resolve,
    local_resolve_seller,
    sole_change,
    stale_nodes,
)
from mechanisms.payments._resolve._range_resolve import range_resolver
from mechanisms.payments._resolve._seller_curve import (
    active_signature,
    allocation_check,
    weights_status,
)
from mechanisms.result import Allocation

CFG = MechanismConfig(
    gamma=1.0, lam=1e-2, mu=1.0, sigma=1.0, k=2.0, n_grid=12, certify="raise_lambda"
)


def instance(seed: int, m: int, capped: bool, cfg: MechanismConfig = CFG) -> Problem:
    rng = np.random.default_rng(seed)
    d = 2
    X = rng.normal(size=(m, d))
    X /= 1.2 * np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ np.ones(d) + 0.3 * rng.normal(size=m) >= 0, 1.0, -1.0)
    psi = 2.0 * rng.uniform(0.02, 0.6, size=m)  # U[0, 1] prior: Ψ(c) = 2c
    eps_max = np.full(m, np.inf)
    if capped:  # binding caps ε_i^max on a third of the sellers
        eps_max[rng.permutation(m)[: m // 3]] = rng.uniform(0.5, 3.0, size=m // 3)
    return Problem(X, y, psi, eps_max, cfg)


def _raised(prob: Problem, i: int, factor: float) -> Problem:
    """``prob`` with seller ``i``'s virtual cost ``Ψ_i`` scaled by ``factor``."""
    psi = prob.psi.copy()
    psi[i] *= factor
    return dataclasses.replace(prob, psi=psi)


def compare(prob: Problem, i: int, factor: float) -> tuple[bool, bool]:
    """Raise ``Ψ_i`` by ``factor``; check a certified shortcut against the cold solve.
    Returns (shortcut taken, active set changed)."""
    base = solve_allocation(prob)
    raised = _raised(prob, i, factor)
    if not base.certified:  # e.g. binding ε^max caps: the shortcut must decline
        assert local_resolve(raised, base, nodes=stale_nodes(prob, base)) is None
        return False, False
    nodes = stale_nodes(prob, base)
    cold = solve_allocation(raised)
    fast = local_resolve(raised, base, nodes=nodes)
    if fast is None:
        return False, False
    assert fast.certified
    assert cold.certified
    # Both are the certified global optimum over the range: the same point.
    np.testing.assert_allclose(
        fast.epsilon_total, cold.epsilon_total, rtol=1e-6, atol=1e-7
    )
    assert fast.objective == pytest.approx(cold.objective, rel=1e-8, abs=1e-10)
    assert fast.kkt.max() <= 1e-6
    # with chord steps on the base's Hessian (a payment job's): the same optimum
    hessian = base_hessian(prob, base)
    assert hessian is not None
    chord = local_resolve(raised, base, nodes=nodes, hessian=hessian)
    assert chord is not None
    assert chord.certified
    np.testing.assert_allclose(
        chord.epsilon_total, cold.epsilon_total, rtol=1e-6, atol=1e-7
    )
    assert chord.objective == pytest.approx(cold.objective, rel=1e-8, abs=1e-10)
    assert chord.kkt.max() <= 1e-6
    changed = active_signature(prob, base) != active_signature(raised, cold)
    return True, changed


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    seed=st.integers(0, 10_000),
    m=st.integers(5, 12),
    capped=st.booleans(),
    pick=st.integers(0, 11),
    factor=st.floats(1.0 + 1e-6, 4.0),
)
def test_shortcut_equals_cold_solve(
    seed: int, m: int, capped: bool, pick: int, factor: float
) -> None:
    prob = instance(seed, m, capped)
    compare(prob, pick % m, factor)


def test_shortcut_is_taken_across_active_set_changes() -> None:
    """Not vacuous: on fixed instances the shortcut is taken (and agrees) for raises
    that change the active set, including a seller at its ``k/m`` cap leaving it."""
    taken = changed = left_cap = 0
    for seed in range(3):
        prob = instance(seed, 10, capped=False)
        base = solve_allocation(prob)
        caps = prob.caps(base.eta)
        at_cap = np.flatnonzero(base.weights >= caps * (1 - 1e-9))
        for i in np.flatnonzero(base.weights > 0):
            for factor in (1.05, 2.0):
                t, c = compare(prob, int(i), factor)
                taken += t
                changed += t and c
                left_cap += t and c and i in at_cap
    assert taken >= 10
    assert changed >= 3
    assert left_cap >= 1


def test_without_sigma_the_shortcut_is_one_solve_at_the_lowest_eta() -> None:
    """``σ = 0``: ``P(η)`` rises with ``η`` (``γηΨᵀa`` with ``Ψ > 0``, shrinking caps),
    so the rule ends at ``η_lo`` for every report. The grid cells' values then differ
    by less than the cell test's margin (flat ``P`` at a small ``γ``) and the cell
    shortcut declined every re-solve; the shortcut now solves at ``η_lo`` once,
    certified, and agrees with the full search, with and without binding caps."""
    taken = 0
    for seed, capped in ((0, False), (1, True), (2, False)):
        prob = instance(seed, 12, capped)
        prob = dataclasses.replace(prob, cfg=CFG.with_(sigma=0.0, gamma=1e-4))
        base = solve_allocation(prob)
        assert base.certified
        lo = float(base.profile.grid[0])
        assert base.eta == lo
        for i in range(0, prob.m, 3):
            for factor in (1.01, 3.0):
                raised = _raised(prob, i, factor)
                fast = local_resolve(raised, base)
                assert fast is not None
                assert fast.certified
                cold = solve_allocation(raised)
                assert fast.eta == cold.eta == lo
                np.testing.assert_allclose(
                    fast.epsilon_total, cold.epsilon_total, rtol=1e-7, atol=1e-12
                )
                taken += 1
    assert taken == 24


def test_a_flat_profile_takes_the_shortcut_from_certified_bounds() -> None:
    """A small ``γ`` leaves the grid values within the cell test's margin of each
    other, so that test cannot tell the full search's cell; the base's certified
    node bounds can (no margin, the grid solve's error bound instead). The shortcut
    declined 11 of these 12 raises at ``seed = 2`` and all 12 at ``seed = 0``; it is
    now taken, and agrees with the cold full search."""
    taken = 0
    for seed in (0, 2):
        prob = instance(seed, 12, capped=False)
        prob = dataclasses.replace(prob, cfg=CFG.with_(gamma=1e-5, sigma=1e-2))
        base = solve_allocation(prob)
        assert base.certified
        nodes = stale_nodes(prob, base)
        for i in range(prob.m):
            raised = _raised(prob, i, 2.0)
            fast = local_resolve(raised, base, nodes=nodes)
            if fast is None:
                continue
            taken += 1
            cold = solve_allocation(raised)
            np.testing.assert_allclose(
                fast.epsilon_total, cold.epsilon_total, rtol=1e-9, atol=1e-12
            )
    assert taken >= 16


def test_a_near_tie_with_a_neighbouring_grid_point_keeps_the_shortcut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At ``γ = 10⁻³`` a raised report lifts the best grid value to within the cell
    test's margin of a neighbour's: the optimum lies between the two grid points,
    which the full search may pick either of. The shortcut keeps such raises when its
    polished ``η`` lies between the two (where both searches' cells overlap), and
    then agrees with the cold full search; declining every tie (the rule before)
    takes none of them."""
    cfg = CFG.with_(gamma=1e-3)
    ties: list[tuple[float, float] | None] = []
    tied_cell = _local_resolve._tied_cell

    def recorded(*args: Any) -> tuple[float, float] | None:
        ties.append(tied_cell(*args))
        return ties[-1]

    monkeypatch.setattr(_local_resolve, "_tied_cell", recorded)
    taken = 0
    for seed in (0, 1):
        prob = dataclasses.replace(instance(seed, 12, capped=False), cfg=cfg)
        base = solve_allocation(prob)
        assert base.certified
        nodes = stale_nodes(prob, base)
        for i in range(prob.m):
            raised = _raised(prob, i, 3.0)
            n_ties = len(ties)
            fast = local_resolve(raised, base, nodes=nodes)
            if len(ties) == n_ties or ties[-1] is None:
                continue  # no tie (or one the shortcut declines)
            lo, hi = ties[-1]
            grid = np.asarray(base.profile.grid)
            assert grid[grid > lo][0] == hi  # one grid step: the cells' overlap
            if fast is None:
                continue
            assert lo <= fast.eta <= hi
            taken += 1
            cold = solve_allocation(raised)
            np.testing.assert_allclose(
                fast.epsilon_total, cold.epsilon_total, rtol=1e-8, atol=1e-10
            )
            monkeypatch.setattr(_local_resolve, "_tied_cell", lambda *a: None)
            assert local_resolve(raised, base, nodes=nodes) is None
            monkeypatch.setattr(_local_resolve, "_tied_cell", recorded)
    assert taken >= 20


def test_stale_nodes_are_graded_and_bound_the_base() -> None:
    """The stale set is the base's own branch-and-bound partition: nodes closer to
    the optimum than the evenly spaced fine nodes, each bound at most the base's
    fixed-``η`` value there (a solve from that node's point)."""
    prob = instance(1, 12, capped=False)
    base = solve_allocation(prob)
    nodes = stale_nodes(prob, base)
    grid = np.asarray(base.profile.grid)
    fine_step = np.log(grid[1] / grid[0]) * 2 / 17  # two cells, 16 inner points
    dist = sorted(abs(np.log(e / base.eta)) for e in nodes)
    assert 0 < dist[1] < fine_step / 4
    eff, _ = effective_problem(prob)  # λ raised to λ_conv ("raise_lambda")
    for e, nd in nodes.items():
        assert nd.stale
        sol = solve_at_eta(eff, e, w0=nd.w, a0=nd.a)
        assert nd.bound <= sol.search_value + 1e-12 * (1 + abs(sol.search_value))


def test_renewed_bounds_are_lower_bounds_of_the_raised_problem() -> None:
    """A stale node renewed from one evaluation at its point, with the raised
    report, bounds the raised fixed-``η`` problem from below (it is never above a
    solve's value there) and above the stale bound; the certificate still closes
    at the cold optimum's value."""
    renewed = 0
    for seed, i in ((0, 3), (1, 5), (2, 0)):
        prob = instance(seed, 12, capped=False)
        base = solve_allocation(prob)
        stale = stale_nodes(prob, base)
        raised = _raised(prob, i, 4.0)
        cold = solve_allocation(raised)
        eff, lam_conv = effective_problem(raised)
        best = solve_at_eta(eff, cold.eta, w0=cold.w, a0=cold.weights)
        grid = base.profile.grid
        partition: dict[float, Node] = {}
        _, lower, _ = certify_range(
            eff, best, float(grid[0]), float(grid[-1]), nodes=dict(stale),
            lam_conv=lam_conv, partition=partition,
        )  # fmt: skip
        assert lower <= best.search_value + 1e-12
        for e, nd in partition.items():
            if not nd.renewed:
                continue
            renewed += 1
            assert nd.bound >= stale[e].bound
            sol = solve_at_eta(eff, e, w0=nd.w, a0=nd.a)
            assert nd.bound <= sol.search_value + 1e-12 * (1 + abs(sol.search_value))
    assert renewed >= 3


def test_cached_stale_cells_give_the_same_certificate() -> None:
    """The stale set's cached cell bounds (only the cells below the target enter the
    heap) change nothing: the same best point, lower bound, count of solves and final
    partition as the branch-and-bound over a plain copy of the same nodes, with and
    without renewals."""
    for seed, i, factor in ((0, 3, 4.0), (1, 5, 1.01), (2, 0, 2.0), (3, 7, 8.0)):
        prob = instance(seed, 12, capped=False)
        base = solve_allocation(prob)
        stale = stale_nodes(prob, base)
        assert isinstance(stale, StaleNodes)
        raised = _raised(prob, i, factor)
        eff, lam_conv = effective_problem(raised)
        cold = solve_allocation(raised)
        best = solve_at_eta(eff, cold.eta, w0=cold.w, a0=cold.weights)
        grid = base.profile.grid
        out = []
        for nodes in (stale, dict(stale), stale):  # the cache built, then reused
            part: dict[float, Node] = {}
            found, lower, n = certify_range(
                eff, best, float(grid[0]), float(grid[-1]), nodes=nodes,
                lam_conv=lam_conv, partition=part,
            )  # fmt: skip
            out.append((found.search_value, lower, n, sorted(part)))
        assert out[0] == out[1] == out[2]
        assert stale.cells  # the cache was used


# ------------------------------------------- the default rule (candidate-model range)

AUTO = MechanismConfig(gamma=1.0, lam=1e-2, mu=1.0, sigma=1.0, k=2.0, certify="auto")
PRIOR01 = UniformPrior(0.0, 1.0)  # Ψ(c) = 2c, as in ``instance``


def auto_instance(seed: int, m: int, capped: bool) -> Problem:
    """``instance`` under the default rule (its public cost scenarios included)."""
    prob = instance(seed, m, capped)
    return dataclasses.replace(
        prob, cfg=AUTO, scenario_psi=scenario_virtual_costs(PRIOR01, m)
    )


def compare_range(
    prob: Problem, i: int, factor: float, *, base: Allocation | None = None
) -> tuple[bool, bool]:
    """Scale ``Ψ_i`` by ``factor``: the payment re-solve (``warm_start=base``: the
    base's candidate models, ``λ_conv`` and closed search reused, nothing retrained)
    must equal a cold :func:`solve_allocation` — what :func:`mechanisms.allocate`
    returns for that report. Returns (rule applied, active set changed)."""
    base = solve_allocation(prob) if base is None else base
    if base.certificate is None or base.certificate.rule != "candidate_models":
        return False, False
    moved = _raised(prob, i, factor)
    fast = solve_allocation(moved, warm_start=base)
    cold = solve_allocation(moved)
    assert fast.certificate.models is base.certificate.models  # nothing retrained
    assert fast.certified == cold.certified
    np.testing.assert_allclose(
        fast.epsilon_total, cold.epsilon_total, rtol=1e-6, atol=1e-7
    )
    assert fast.eta == pytest.approx(cold.eta, rel=1e-6)
    assert fast.objective == pytest.approx(cold.objective, rel=1e-9, abs=1e-10)
    changed = active_signature(prob, base) != active_signature(moved, cold)
    return True, changed


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    seed=st.integers(0, 10_000),
    m=st.integers(5, 12),
    capped=st.booleans(),
    pick=st.integers(0, 11),
    factor=st.floats(0.25, 4.0),
)
def test_range_resolve_equals_cold_solve(
    seed: int, m: int, capped: bool, pick: int, factor: float
) -> None:
    compare_range(auto_instance(seed, m, capped), pick % m, factor)


def test_range_resolve_across_active_set_changes() -> None:
    """Not vacuous: raises that change the active set, including sellers leaving
    their caps (``k/m`` or a binding ``ε_i^max``), agree with cold solves."""
    taken = changed = left_cap = 0
    for seed in range(3):
        for capped in (False, True):
            prob = auto_instance(seed, 10, capped)
            base = solve_allocation(prob)
            caps = prob.caps(base.eta)
            at_cap = np.flatnonzero(base.weights >= caps * (1 - 1e-9))
            for i in np.flatnonzero(base.weights > 0):
                for factor in (1.05, 2.0):
                    t, c = compare_range(prob, int(i), factor)
                    taken += t
                    changed += t and c
                    left_cap += t and c and i in at_cap
    assert taken >= 10
    assert changed >= 3
    assert left_cap >= 1


def _equals_the_kernel(
    got: tuple[float, float, float, float],
    ell: np.ndarray,
    psi: np.ndarray,
    q: float,
    eta: float,
    kcap: float,
    eps_max: np.ndarray,
    mu: float,
) -> np.ndarray:
    """Assert that an update's ``(value, A, s, Ψᵀa)`` (constant 0.25) is the full
    kernel's at ``r = ℓ + qΨ``; return every seller's class there (0 zero, 1 free,
    2 capped)."""
    val, a_mul, s, pa = got
    ref = range_value_kernel(ell, psi, q, eta, kcap, eps_max, mu, 0.25, a_mul, s)
    assert ref[0]
    assert val == pytest.approx(ref[1], rel=1e-11, abs=1e-13)
    assert s == pytest.approx(ref[3], rel=1e-9)
    assert a_mul == pytest.approx(ref[2], rel=1e-9, abs=1e-13)
    assert pa == pytest.approx(ref[4], rel=1e-9, abs=1e-13)
    return np.digitize(a_mul - s * (ell + q * psi), [0.0, kcap], right=False)


def test_one_seller_update_equals_the_full_a_step() -> None:
    """The O(1) one-seller update of a cached base summary (payment re-solves under
    the default rule) returns the full kernel's value, multipliers and ``Ψᵀa`` for
    the changed report — including changes that move sellers across the zero and cap
    boundaries (the seller itself and its neighbours) — or declines."""
    rng = np.random.default_rng(3)
    done = moved = 0
    for _ in range(40):
        m = int(rng.integers(150, 600))
        ell = rng.uniform(0.2, 1.2, m)
        psi = rng.uniform(0.0, 2.0, m)
        eta, kcap, mu = 1.0, 4.0 / m, float(10 ** rng.uniform(0.5, 1.3))
        q = float(rng.uniform(0.05, 1.0))
        eps_max = np.full(m, np.inf)
        sm = range_summary(ell, psi, q, eta, kcap, eps_max, mu, 0.0, 0.0)
        if sm[0] == 0.0:
            continue
        ok0, _, A0, s0, _ = range_value_kernel(
            ell, psi, q, eta, kcap, eps_max, mu, 0.0, 0.0, 0.0
        )
        assert ok0
        cls0 = np.digitize(A0 - s0 * (ell + q * psi), [0.0, kcap], right=False)
        for _ in range(10):
            i = int(rng.integers(m))
            new = psi.copy()
            new[i] = psi[i] * float(rng.choice([0.0, 0.5, 1.01, 1.5, 3.0, 10.0]))
            ok, val, a_mul, s, pa = one_seller_value(
                sm, i, float(ell[i]), q, float(psi[i]), float(new[i]), mu, 0.25
            )
            if not ok:
                continue
            got = (val, a_mul, s, pa)
            cls = _equals_the_kernel(got, ell, new, q, eta, kcap, eps_max, mu)
            done += 1
            moved += int(np.count_nonzero(np.delete(cls != cls0, i)) > 0)
    assert done >= 100
    assert moved >= 10  # other sellers changed class in some of them


def test_range_resolves_with_one_seller_updates_equal_cold_solves() -> None:
    """End to end at a size where re-solves share the base's cached summaries (the
    O(1) one-seller update is used): every re-solve equals the cold solve."""
    prob = dataclasses.replace(
        auto_instance(5, 300, capped=False), cfg=AUTO.with_(mu=10.0, k=4.0)
    )
    base = solve_allocation(prob)
    assert base.certificate.rule == "candidate_models"
    rng = np.random.default_rng(0)
    for i in rng.choice(300, size=5, replace=False):
        for factor in (1.02, 1.5, 3.0):
            assert compare_range(prob, int(i), factor, base=base)[0]
    cache = base.certificate.range_seed.cache
    assert len(cache.summaries) > 0  # the update path was exercised


# ------------------------------- the lean payment re-solve (mechanisms.payments._resolve._range_resolve)


def test_shifted_summary_update_equals_the_full_a_step() -> None:
    """The summary of a cached ``(model, η₀)`` reused at another ``η`` (every ``r_k``
    moved by ``Δq·Ψ_k``) with one seller's ``Ψ_i`` changed returns the full kernel's
    value, multipliers and ``Ψᵀa`` at that ``η`` — including shifts that reorder
    sellers and move them across the zero and cap boundaries — or declines."""
    rng = np.random.default_rng(4)
    done = moved = declined = 0
    for _ in range(40):
        m = int(rng.integers(150, 1500))
        ell = rng.uniform(0.2, 1.2, m)
        psi = rng.uniform(0.0, 2.0, m)
        eta, kcap, mu = 1.0, 4.0 / m, float(10 ** rng.uniform(0.5, 1.3))
        q = float(rng.uniform(0.05, 1.0))
        eps_max = np.full(m, np.inf)
        sm = range_summary(ell, psi, q, eta, kcap, eps_max, mu, 0.0, 0.0)
        if sm[0] == 0.0:
            continue
        ok0, _, A0, s0, _ = range_value_kernel(
            ell, psi, q, eta, kcap, eps_max, mu, 0.0, 0.0, 0.0
        )
        assert ok0
        cls0 = np.digitize(A0 - s0 * (ell + q * psi), [0.0, kcap], right=False)
        for _ in range(12):
            i = int(rng.integers(m))
            new = psi.copy()
            new[i] = psi[i] * float(rng.choice([1.0, 0.5, 1.01, 1.5, 3.0, 10.0]))
            rel = float(rng.choice([0.0, 1e-9, -1e-7, 1e-5, -1e-4, 1e-3, -1e-2, 0.1]))
            q2 = q * (1.0 + rel)
            ok, val, a_mul, s, pa = shifted_value(
                sm, i, float(ell[i]), q2, float(psi[i]), float(new[i]), mu, 0.25
            )
            if not ok:
                declined += 1
                continue
            got = (val, a_mul, s, pa)
            cls = _equals_the_kernel(got, ell, new, q2, eta, kcap, eps_max, mu)
            done += 1
            moved += int(np.count_nonzero(np.delete(cls != cls0, i)) > 0)
    assert done >= 150
    assert moved >= 30  # other sellers changed class in some of them
    assert declined >= 1  # large shifts are declined, not guessed


def test_summary_update_with_a_small_free_set() -> None:
    """With a small ``μ`` almost every weight sits at 0 or at its cap and one to a few
    are free (``s`` is large: the free band ``k/(m s)`` is narrower than the gaps
    between the ``r_i``). A raised report then moves the free seller to a bound and
    another into the free set. The update solves the stored boundary sellers and the
    seller itself explicitly, so it takes these changes (an active-set iteration on
    the sums alone passes through an empty free set there) and agrees with the
    full kernel, at the summary's ``η`` and shifted."""
    rng = np.random.default_rng(11)
    done = tried = moved = 0
    for _ in range(30):
        m = int(rng.integers(150, 600))
        ell = rng.uniform(0.2, 1.2, m)
        psi = rng.uniform(0.0, 2.0, m)
        eta, kcap = 1.0, float(rng.uniform(2.0, 20.0)) / m
        mu = float(10 ** rng.uniform(-5.0, -3.0))
        q = float(rng.uniform(0.05, 1.0))
        eps_max = np.full(m, np.inf)
        sm = range_summary(ell, psi, q, eta, kcap, eps_max, mu, 0.0, 0.0)
        ok0, _, A0, s0, _ = range_value_kernel(
            ell, psi, q, eta, kcap, eps_max, mu, 0.0, 0.0, 0.0
        )
        assert ok0
        v0 = A0 - s0 * (ell + q * psi)
        n_free = int(np.count_nonzero((v0 > 0.0) & (v0 < kcap)))
        assert 1 <= n_free <= 5  # the regime of this test
        assert sm[0] == 1.0
        cls0 = np.digitize(v0, [0.0, kcap], right=False)
        for _ in range(8):
            i = int(rng.choice(np.flatnonzero(v0 > 0.0)))  # a winner's raise
            new = psi.copy()
            new[i] = psi[i] * float(rng.choice([1.01, 1.5, 3.0, 10.0]))
            q2 = q * (1.0 + float(rng.choice([0.0, 1e-6, -1e-4])))
            update = one_seller_value if q2 == q else shifted_value
            tried += 1
            ok, val, a_mul, s, pa = update(
                sm, i, float(ell[i]), q2, float(psi[i]), float(new[i]), mu, 0.25
            )
            if not ok:
                continue
            got = (val, a_mul, s, pa)
            cls = _equals_the_kernel(got, ell, new, q2, eta, kcap, eps_max, mu)
            done += 1
            moved += int(np.count_nonzero(np.delete(cls != cls0, i)) > 0)
    assert done >= 0.9 * tried
    assert moved >= 40  # the free seller or another changed class in many


def compare_lean(
    prob: Problem, i: int, factor: float, *, base: Allocation | None = None
) -> bool:
    """Raise ``Ψ_i`` by ``factor ≥ 1``: the lean re-solve (seller ``i``'s values, the
    optimum's ``(j, η, A, s)``, the O(1) KKT bound) must equal a cold
    :func:`solve_allocation`; returns whether it applied (else the full path runs)."""
    base = solve_allocation(prob) if base is None else base
    res = range_resolver(prob, base)
    if res is None:
        assert not base.certified or base.certificate.rule != "candidate_models"
        return False
    psi_i = float(prob.psi[i]) * factor
    lean = res.solve(i, psi_i)
    assert np.array_equal(res.psi_work, prob.psi)  # restored after the re-solve
    if lean is None:
        return False
    psi = prob.psi.copy()
    psi[i] = psi_i
    moved = dataclasses.replace(prob, psi=psi)
    cold = solve_allocation(moved)
    assert cold.certified
    assert str(cold.status) == lean.status
    assert lean.epsilon_total == pytest.approx(
        float(cold.epsilon_total[i]), rel=1e-6, abs=1e-7
    )
    assert lean.eta == pytest.approx(cold.eta, rel=1e-6)
    assert lean.value == pytest.approx(cold.objective, rel=1e-9, abs=1e-10)
    a = res.weights(lean)
    np.testing.assert_allclose(a, cold.weights, rtol=1e-6, atol=1e-7)
    assert lean.a_i == a[i]
    # The O(1) KKT value bounds the a-block residual at τ = A/s and the η residual.
    g = res.models.losses[lean.j] + prob.cfg.gamma * lean.eta * psi
    g = g + prob.cfg.mu * a / np.linalg.norm(a)
    tau = lean.A / lean.s
    caps = prob.caps(lean.eta)
    zero, cap = a <= 0.0, a >= caps
    free = ~zero & ~cap
    viol = np.concatenate(
        [np.abs(g[free] - tau), np.maximum(tau - g[zero], 0.0), g[cap] - tau]
    )
    assert (
        float(np.max(viol, initial=0.0)) / (1 + abs(tau))
        <= lean.kkt * (1 + 1e-6) + 1e-15
    )
    assert lean.kkt <= 1e-6
    assert cold.kkt.max() <= 1e-6
    assert res.signature(lean) == active_signature(moved, cold) or np.allclose(
        a, cold.weights, atol=1e-12
    )
    return True


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    seed=st.integers(0, 10_000),
    m=st.integers(5, 12),
    capped=st.booleans(),
    pick=st.integers(0, 11),
    factor=st.floats(1.0, 4.0),
)
def test_lean_resolve_equals_cold_solve(
    seed: int, m: int, capped: bool, pick: int, factor: float
) -> None:
    compare_lean(auto_instance(seed, m, capped), pick % m, factor)


@pytest.mark.parametrize("compiled", [True, False])
def test_lean_resolves_with_summary_updates_equal_cold_solves(
    monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """At a size where the lean re-solves use the O(1) one-seller and shifted-``η``
    updates of cached summaries (both exercised), including raises that change the
    active set, every lean re-solve equals the cold solve: with the compiled search
    (:mod:`mechanisms.allocation._range._one_seller_search`, what the payments run here) and
    with the Python one."""
    used = {True: 0, False: 0}

    def counted(*args: object) -> tuple[bool, float, float, float, float]:
        out = shifted_value(*args)
        used[bool(out[0])] += 1
        return out

    monkeypatch.setattr(_candidate_range, "shifted_value", counted)
    if not compiled:
        monkeypatch.setattr(_range_resolve, "compiled_resolve", lambda *a: None)
    prob = dataclasses.replace(
        auto_instance(5, 300, capped=False), cfg=AUTO.with_(mu=10.0, k=4.0)
    )
    base = solve_allocation(prob)
    assert base.certificate.rule == "candidate_models"
    rng = np.random.default_rng(1)
    winners = np.flatnonzero(base.weights > 0)
    taken = 0
    for i in [*rng.choice(winners, size=4, replace=False), *rng.choice(300, 2)]:
        for factor in (1.0, 1.02, 1.5, 3.0):
            taken += compare_lean(prob, int(i), factor, base=base)
    assert taken >= 20
    res = range_resolver(prob, base)
    assert res is not None
    assert (res.compiled is not None) == compiled
    if compiled:
        assert res.compiled is not None
        one_seller, shifted, built, _ = res.compiled.cache.stats.tolist()
        assert built > 0
        assert one_seller >= 20
        assert shifted >= 20
        return
    cache = base.certificate.range_seed.cache
    assert len(cache.summaries) > 0
    assert cache.etas
    assert used[True] >= 20, used


def test_lean_resolves_where_no_weight_is_near_its_cap() -> None:
    """A large ``μ`` spreads the weights (each far below ``1`` and below ``k/m > 1``)
    and makes ``s = ‖a‖/μ`` small. The O(1) KKT bound scales the a-step's rounding by
    the largest possible weight over ``s``: bounded by ``k/m`` it exceeded the
    tolerance and every re-solve ran the full path; bounded by ``A − s r_min`` (the
    model's least loss, the least ``Ψ``) it certifies them, and they equal the cold
    solves (``compare_lean`` also checks that the bound holds)."""
    prob = dataclasses.replace(
        auto_instance(3, 120, capped=False), cfg=AUTO.with_(mu=1e4, k=600.0)
    )
    base = solve_allocation(prob)
    assert base.certificate.rule == "candidate_models"
    res = range_resolver(prob, base)
    assert res is not None
    rng = np.random.default_rng(2)
    taken = 0
    for i in rng.choice(np.flatnonzero(base.weights > 0), size=4, replace=False):
        for factor in (1.02, 1.5, 3.0):
            taken += compare_lean(prob, int(i), factor, base=base)
    assert taken == 12


def test_lean_resolve_declines_a_lower_report() -> None:
    """A lower ``Ψ_i`` than the base's is not a payment sweep's re-solve (the seed's
    bounds need ``Ψ ≥ Ψ_base``): the lean path declines and the full path runs."""
    prob = auto_instance(2, 10, capped=False)
    base = solve_allocation(prob)
    res = range_resolver(prob, base)
    assert res is not None
    i = int(np.argmax(prob.psi))
    assert res.solve(i, float(prob.psi[i]) * 0.5) is None


def test_lean_resolves_in_threads_equal_serial_ones() -> None:
    """Sellers of one base may run in threads of one process (Dask's in-process
    workers; the compiled kernels release the GIL): concurrent lean re-solves must not
    see each other's changed ``Ψ_i`` (each thread changes its own copy). A tiny GIL
    switch interval makes the threads interleave inside the re-solves."""
    prob = auto_instance(7, 40, capped=False)
    base = solve_allocation(prob)
    res = range_resolver(prob, base)
    assert res is not None
    jobs = [(i, float(prob.psi[i]) * f) for i in range(40) for f in (1.1, 2.0)]
    serial = [res.solve(i, p) for i, p in jobs]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(4) as pool:
            threaded = list(pool.map(lambda job: res.solve(*job), jobs))
    finally:
        sys.setswitchinterval(interval)
    for a, b in zip(serial, threaded, strict=True):
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert b.epsilon_total == pytest.approx(
                a.epsilon_total, rel=1e-9, abs=1e-12
            )
            assert b.eta == pytest.approx(a.eta, rel=1e-9)
    assert sum(a is not None for a in serial) >= 40


def _wisconsin_market() -> tuple[np.ndarray, np.ndarray, np.ndarray, UniformPrior]:
    """The benchmarks' Wisconsin market: the training split, costs ``U[1e-4, 5e-4]``
    (seed 0) and their prior."""
    X, y = load_wisconsin()
    split = train_val_test_split(X, y, random_state=0)
    Xt, yt = split.X_train, split.y_train
    costs = np.random.default_rng(0).uniform(1e-4, 5e-4, size=yt.size)
    return Xt, yt, costs, UniformPrior(1e-4, 5e-4)


def test_a_polish_ending_at_the_range_end_keeps_the_shortcut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the optimum sits at ``η_hi`` (a tiny ``L``), the polished point is the
    base's grid point itself, and its value and the upper bound from the base's grid
    value are the same ``G`` by two roundings (1.9e-9 apart at ``|G| ≈ 10⁷``). The
    shortcut must not decline on that rounding (it did for 21 of 591 re-solves of
    this market, each then a cold full solve), and its values must match the cold
    solves of the seller's checks."""
    Xt, yt, costs, prior = _wisconsin_market()
    cfg = MechanismConfig(
        gamma=172.04692539096837, lam=5.14553497077016, mu=8323.734846786823,
        sigma=75749.38708654502, k=4.159932073031441, eps_avg_max=1.857773080166169e-05,
    )  # fmt: skip
    base = allocate(Xt, yt, costs, prior, cfg)
    assert base.certified
    assert base.eta == base.profile.grid[-1]
    job = payment_job(Xt, yt, costs, prior, cfg, base=base)
    declined = []
    shortcut = _seller_curve.local_resolve_seller

    def spy(*args: Any, **kwargs: Any) -> LocalSolve | None:
        out = shortcut(*args, **kwargs)
        declined.append(out is None)
        return out

    monkeypatch.setattr(_seller_curve, "local_resolve_seller", spy)
    for i in (17, 55, 67, 181):
        sp = seller_payment(job, i)
        assert sp.verified  # its shortcut values checked against cold solves
        assert not sp.fell_back
        assert sp.fast_mismatch <= 1e-6 * sp.epsilon
    assert len(declined) >= 4
    assert not any(declined)


@pytest.mark.parametrize("lam", [31.0, 2.0])
def test_the_sweeps_lean_shortcut_reads_what_the_allocation_says(lam: float) -> None:
    """``local_resolve_seller`` accepts exactly where ``local_resolve`` returns an
    allocation, with the same point, the seller's ``ε_i^total`` to the bit, and what
    ``allocation_check`` and ``active_signature`` read from that allocation."""
    Xt, yt, costs, prior = _wisconsin_market()
    cfg = MechanismConfig(
        gamma=3.7e5, lam=lam, mu=4.4e5, sigma=3e3, k=2.11, eps_avg_max=0.027
    )
    base = allocate(Xt, yt, costs, prior, cfg)
    assert base.certified
    job = payment_job(Xt, yt, costs, prior, cfg, base=base)
    kw = {"nodes": job.nodes, "hessian": job.hessian, "fit_w": False}
    n_taken = 0
    for i, raise_by in [(3, 1.05), (40, 1.4), (41, 2.0), (200, 1.2), (398, 3.0)]:
        psi_i = float(job.prob.psi[i]) * raise_by
        prob = job.prob.with_seller_psi(i, psi_i)
        full = local_resolve(prob, base, **kw)
        lean = local_resolve_seller(prob, base, i, **kw)
        assert (full is None) == (lean is None)
        # read at seller i alone (the sweep's case): the same result, to the bit but
        # the certificate's gap, whose stale renewals are then one-seller updates
        # (the same bounds to rounding)
        assert sole_change(job.prob, base)
        sole = local_resolve_seller(prob, base, i, **kw, sole_change=True)
        assert (sole is None) == (lean is None)
        if sole is not None and lean is not None:
            assert dataclasses.astuple(sole)[2:6] == dataclasses.astuple(lean)[2:6]
            assert sole.gap is not None
            assert lean.gap is not None
            assert sole.gap == pytest.approx(lean.gap, rel=1e-9, abs=1e-14)
            np.testing.assert_array_equal(sole.w, lean.w)
            np.testing.assert_array_equal(sole.weights, lean.weights)
        if full is None or lean is None:
            continue
        n_taken += 1
        assert isinstance(lean, LocalSolve)
        assert lean.epsilon_total == float(full.epsilon_total[i])
        assert lean.eta == full.eta
        np.testing.assert_array_equal(lean.w, full.w)
        np.testing.assert_array_equal(lean.weights, full.weights)
        assert (lean.status, lean.kkt, lean.gap) == allocation_check(full)
        assert weights_status(job.prob, lean.weights, lean.eta) == active_signature(
            job.prob, full
        )
        assert not lean.w.flags.writeable
        assert not lean.weights.flags.writeable
    assert n_taken >= 3


def test_sole_change_holds_only_for_the_bases_own_finite_costs() -> None:
    """The one-seller reading of a raise needs the job's virtual costs to be the
    base's bit for bit and finite: an allocation of other (close) costs, or a
    problem with an infinite virtual cost, is read over all sellers."""
    Xt, yt, costs, prior = _wisconsin_market()
    cfg = MechanismConfig(
        gamma=3.7e5, lam=2.0, mu=4.4e5, sigma=3e3, k=2.11, eps_avg_max=0.027
    )
    base = allocate(Xt, yt, costs, prior, cfg)
    job = payment_job(Xt, yt, costs, prior, cfg, base=base)
    assert sole_change(job.prob, base)
    nudged = job.prob.psi.copy()
    nudged[5] = np.nextafter(nudged[5], np.inf)  # within allclose, not equal
    other = Problem(Xt, yt, nudged, job.prob.eps_max, job.prob.cfg)
    assert not sole_change(other, base)
    with_inf = job.prob.psi.copy()
    with_inf[7] = np.inf
    assert not sole_change(Problem(Xt, yt, with_inf, job.prob.eps_max, cfg), base)


def test_a_second_payment_job_on_one_base_keeps_its_fixed_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shortcut's per-job part (:func:`_local_resolve._fixed_part`) is computed
    once per job, also when a second job (another problem object for the same
    reports, as a market paid in parts makes) runs on the same base in one process:
    a part kept for the first job's records and caps must be replaced, not
    recomputed at every re-solve of the second."""
    Xt, yt, costs, prior = _wisconsin_market()
    cfg = MechanismConfig(
        gamma=0.03, lam=2.6e5, mu=0.083, sigma=1.7e-6, k=2.55, eps_avg_max=1.4e5
    )
    base = allocate(Xt, yt, costs, prior, cfg)
    winners = [int(i) for i in np.flatnonzero(base.epsilon > 0)[:4]]
    assert len(winners) == 4
    computed: list[int] = []
    compute = _local_resolve._compute_fixed

    def counted(prob: Problem, base: Allocation) -> Any:
        computed.append(1)
        return compute(prob, base)

    monkeypatch.setattr(_local_resolve, "_compute_fixed", counted)
    pays, solves = [], []
    for part in (winners[:2], winners[2:], winners):
        job = payment_job(Xt, yt, costs, prior, cfg, base=base)
        job = dataclasses.replace(job, unverified=frozenset(part))
        done = [seller_payment(job, i) for i in part]
        solves.append(sum(sp.n_solves for sp in done))
        pays.append([sp.payment for sp in done])
    assert min(solves) >= 2 * len(winners)  # each part re-solves through the shortcut
    assert len(computed) == 3  # once per job
    assert pays[0] + pays[1] == pays[2]  # and the same payments in parts as in one
