"""The compiled one-seller branch-and-bound is the Python search (issue 16).

:mod:`mechanisms.allocation._range._one_seller_search` runs the payment re-solve's range
search in one numba call. It must make the same decisions as
``_candidate_range._branch_and_bound`` with the one-seller cache: the same cells in
the same order, the same points evaluated the same way (cached summary, shifted
summary, summary built on a key's second visit, O(m) kernel), the same polish. Run
from fresh caches over the same sequence of re-solves, both searches therefore
return the same floating-point numbers — compared here with ``==``, which any
difference in order, tolerance, visit rule or polish would break.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mechanisms.allocation._eta_search import solve_allocation
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range import _candidate_range
from mechanisms.allocation._range._candidate_range import (
    OneSellerCache,
    OneSellerSolution,
    compiled_resolve,
    resolve_one_seller,
    search_consts,
)
from mechanisms.allocation._range._one_seller_search import (
    BAIL,
    CompiledCache,
    KeyTable,
    seed_arrays,
)
from mechanisms.payments._resolve._range_resolve import RangeResolver, range_resolver
from tests.mechanisms.test_incremental_resolve import AUTO, auto_instance


def market(seed: int = 5, m: int = 300) -> tuple[Problem, RangeResolver]:
    """A default-rule instance whose re-solves run compiled (caps k/m, μ > 0)."""
    prob = dataclasses.replace(
        auto_instance(seed, m, capped=False), cfg=AUTO.with_(mu=10.0, k=4.0)
    )
    base = solve_allocation(prob)
    res = range_resolver(prob, base)
    assert res is not None
    assert res.compiled is not None
    return prob, res


def sweep(prob: Problem, n: int, seed: int = 1) -> list[tuple[int, float]]:
    """Re-solves as a payment sweep asks them: winners and losers, reports from the
    seller's own up to 3× its virtual cost, some repeated (cached keys revisited)."""
    rng = np.random.default_rng(seed)
    jobs = [
        (int(i), float(prob.psi[i]) * f)
        for i, f in zip(
            rng.integers(0, prob.m, n),
            rng.choice([1.0, 1.02, 1.5, 3.0], n),
            strict=False,
        )
    ]
    return jobs + jobs[::3]


def key(out: OneSellerSolution) -> tuple[object, ...]:
    b = out.best
    assert b.state is not None
    assert b.a is None
    return (
        b.j, b.eta, b.value, b.state.A, b.state.s, b.slope,
        out.lower_bound, out.closed, out.n_evals,
    )  # fmt: skip


def both(
    prob: Problem, res: RangeResolver, jobs: list[tuple[int, float]], **limits: int
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], CompiledCache]:
    """Every re-solve of ``jobs`` by the compiled and by the Python search, each
    from a fresh cache (the compiled one with ``limits``, if given)."""
    compiled = res.compiled
    assert compiled is not None
    if limits:
        cache = CompiledCache.empty(
            res.seed.psi, res.models.n, limits["summaries"], limits["visits"]
        )
    else:
        cache = CompiledCache.empty(
            res.seed.psi,
            res.models.n,
            _candidate_range.MAX_SUMMARIES,
            _candidate_range.MAX_VISITS,
        )
    compiled = dataclasses.replace(compiled, cache=cache)
    seed_py = dataclasses.replace(res.seed, cache=OneSellerCache(res.seed.psi))
    lo, hi = res.bounds
    fast, slow = [], []
    for i, psi_i in jobs:
        psi = prob.psi.copy()
        psi[i] = psi_i
        raised = dataclasses.replace(prob, psi=psi)
        args = (raised, res.models, lo, hi)
        fast.append(
            key(resolve_one_seller(*args, res.seed, i, res.consts, compiled=compiled))
        )
        slow.append(key(resolve_one_seller(*args, seed_py, i, res.consts)))
    return fast, slow, cache


def test_compiled_search_is_the_python_search() -> None:
    prob, res = market()
    fast, slow, cache = both(prob, res, sweep(prob, 120))
    assert fast == slow
    one_seller, shifted, built, kernel = cache.stats.tolist()
    # every kind of evaluation took part
    assert one_seller > 1000
    assert shifted > 200
    assert built > 5
    assert kernel > 5
    assert all(k[7] for k in fast)  # closed: certified re-solves


def test_compiled_search_keeps_the_cache_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With room for 3 summaries and 40 remembered visits (all forgotten when full),
    the compiled cache fills and forgets as the Python one does."""
    monkeypatch.setattr(_candidate_range, "MAX_SUMMARIES", 3)
    monkeypatch.setattr(_candidate_range, "MAX_VISITS", 40)
    prob, res = market(seed=6, m=200)
    jobs = sweep(prob, 40, seed=3)
    fast, slow, cache = both(prob, res, jobs, summaries=3, visits=40)
    assert fast == slow
    assert cache.n_summaries == 3  # full
    # forgetting mattered: remembering every visit builds the summaries earlier
    monkeypatch.setattr(_candidate_range, "MAX_VISITS", 10**6)
    _, _, keep = both(prob, res, jobs, summaries=3, visits=10**6)
    assert keep.stats.tolist() != cache.stats.tolist()
    assert cache.stats[3] > 40  # most points then need the O(m) kernel


def test_compiled_search_falls_back_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the compiled search needs the NumPy a-step it returns ``BAIL``, and
    :func:`resolve_one_seller` runs the Python search instead."""
    prob, res = market(seed=7, m=120)
    lo, hi = res.bounds
    i = int(np.argmax(res.base.weights))
    psi = prob.psi.copy()
    psi[i] *= 1.5
    raised = dataclasses.replace(prob, psi=psi)
    calls = []

    def bail(*args: object) -> tuple[int, np.ndarray, float, int]:
        calls.append(args)
        return BAIL, np.zeros(6), 0.0, 0

    seed_py = dataclasses.replace(res.seed, cache=OneSellerCache(res.seed.psi))
    expected = key(
        resolve_one_seller(raised, res.models, lo, hi, seed_py, i, res.consts)
    )
    monkeypatch.setattr(_candidate_range, "one_seller_search", bail)
    got = resolve_one_seller(
        raised, res.models, lo, hi, res.seed, i, res.consts, compiled=res.compiled
    )
    assert len(calls) == 1
    assert key(got) == expected


def test_compiled_search_only_where_every_point_is_compiled() -> None:
    """Binding ``ε^max`` caps (the caps move with ``η``) or ``μ = 0``: no compiled
    search (its points would need the NumPy a-step and the capped cell bounds)."""
    prob, res = market(seed=8, m=60)
    assert compiled_resolve(prob, res.models, res.seed, res.consts) is not None
    eps = np.full(prob.m, np.inf)
    eps[:5] = 1e-3
    capped = dataclasses.replace(prob, eps_max=eps)
    consts = search_consts(capped, res.models, res.bounds[1])
    assert not consts.fixed_caps
    assert compiled_resolve(capped, res.models, res.seed, consts) is None
    flat = dataclasses.replace(prob, cfg=prob.cfg.with_(mu=0.0))
    flat_consts = search_consts(flat, res.models, res.bounds[1])
    assert flat_consts.fixed_caps
    assert compiled_resolve(flat, res.models, res.seed, flat_consts) is None
    no_cache = dataclasses.replace(res.seed, cache=None)
    assert compiled_resolve(prob, res.models, no_cache, res.consts) is None


def test_seed_arrays_keep_each_point_once() -> None:
    _, res = market(seed=9, m=60)
    arr = seed_arrays(res.seed)
    ids = {id(res.seed.best)} | {id(p) for c in res.seed.cells for p in c[2:]}
    assert arr.points.shape == (len(ids), 7)
    assert not arr.points[:, 6].any()  # seed points are stale
    best = res.seed.best
    assert arr.points[arr.best, 1] == best.eta
    assert arr.points[arr.best, 0] == best.j
    # cells refer to their own end points
    for row, (lb, j, p1, p2) in zip(arr.cells, res.seed.cells, strict=True):
        assert row[0] == lb
        assert row[1] == j
        assert arr.points[int(row[2]), 1] == p1.eta
        assert arr.points[int(row[3]), 1] == p2.eta
    keys = {(r[0], r[1]) for r in arr.points}
    assert len(set(arr.key_of.tolist())) == len(keys)


def test_key_table_is_at_most_half_full() -> None:
    for n in (1, 3, 8, 20_000):
        t = KeyTable.empty(n)
        size = t.keys_j.size
        assert size & (size - 1) == 0
        assert size >= 2 * n
        assert (t.keys_j == 0).all()  # every slot empty
        assert t.count[0] == 0


def test_a_second_payment_call_keeps_the_lean_path() -> None:
    """A second payment job on the same base has its own (equal) problem object: its
    re-solves still take the lean path, with the first job's compiled summaries; a
    problem with other virtual costs gets no resolver (the seed is not its own)."""
    prob, res = market(seed=10, m=80)
    copy = dataclasses.replace(prob, psi=prob.psi.copy())
    again = range_resolver(copy, res.base)
    assert again is not None
    assert again is not res
    assert again.prob is copy
    assert again.compiled is res.compiled
    assert range_resolver(copy, res.base) is again  # then found at once
    i = int(np.argmax(res.base.weights))
    psi_i = float(prob.psi[i]) * 1.3
    first, second = res.solve(i, psi_i), again.solve(i, psi_i)
    assert first is not None
    assert second is not None
    # the first solve filled the cache, so the second may take other (exact) paths
    assert second.epsilon_total == pytest.approx(first.epsilon_total, rel=1e-8)
    assert second.eta == pytest.approx(first.eta, rel=1e-8)
    assert second.j == first.j
    moved = copy.psi.copy()
    moved[0] *= 1.5
    other = dataclasses.replace(prob, psi=moved)
    assert range_resolver(other, res.base) is None
