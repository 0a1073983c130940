"""The compiled branch-and-bound over a payment job's stale nodes is the Python loop.

:func:`mechanisms.allocation._range._certify.certify_range` over a
:class:`StaleNodes` set runs :func:`._stale_search.stale_search` first and falls back
to its own loop where that hands back. Both must give the same certificate to the
bit (the same lower bound, the same count of renewals, the incumbent kept), and a
renewal's bound must be what a full evaluation at the stale point gives.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from mechanisms.allocation._block_solver import BlockSolution, solve_at_eta
from mechanisms.allocation._eta_search import solve_allocation
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range import _certify, _stale_search
from mechanisms.allocation._range._certify import (
    StaleNodes,
    certify_range,
    effective_problem,
)
from mechanisms.allocation._reduced_newton import value_and_gradient
from mechanisms.payments._resolve._local_resolve import stale_nodes
from tests.mechanisms.test_incremental_resolve import CFG, instance


def raised_case(
    prob: Problem, i: int, factor: float
) -> tuple[Problem, BlockSolution, StaleNodes, float, float, float]:
    """``Ψ_i`` scaled by ``factor``; the re-solve's incumbent (a fixed-``η`` solve at
    the cold optimum's ``η``), the base's stale nodes and the range."""
    base = solve_allocation(prob)
    assert base.certified
    stale = stale_nodes(prob, base)
    assert isinstance(stale, StaleNodes)
    psi = prob.psi.copy()
    psi[i] *= factor
    raised = dataclasses.replace(prob, psi=psi)
    eff, lam_conv = effective_problem(raised)
    assert lam_conv is not None
    cold = solve_allocation(raised)
    best = solve_at_eta(eff, cold.eta, w0=cold.w, a0=cold.weights)
    grid = base.profile.grid
    return eff, best, stale, lam_conv, float(grid[0]), float(grid[-1])


CFG5 = CFG.with_(gamma=5.0, lam=0.1, mu=5.0, sigma=5.0, k=5.0, n_grid=24)
CASES = [  # (seed, m, seller, factor, config)
    (0, 12, 3, 4.0, CFG),
    (1, 12, 5, 1.01, CFG),
    (3, 12, 7, 8.0, CFG),
    (0, 40, 3, 1.02, CFG),
    (1, 40, 5, 1.1, CFG),
    (2, 80, 7, 1.3, CFG),
    (0, 40, 3, 1.02, CFG5),
    (1, 40, 5, 1.1, CFG5),
]


def test_compiled_stale_search_is_the_python_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same ``(best, lower, n)`` to the bit, compiled or not, over raises from
    1 % to 8×; the compiled search finishes some of them itself, renewing stale
    nodes, and hands back the others (a renewed end that needs a solve, a
    bisection). With the one-seller renewals of a payment job, the same to
    rounding."""
    codes: list[int] = []
    real = _stale_search.stale_search

    def spy(*args: object) -> tuple[int, float, int]:
        out = real(*args)  # type: ignore[arg-type]
        codes.append(out[0])
        return out

    monkeypatch.setattr(_certify, "stale_search", spy)
    renewed_done = 0
    for seed, m, i, factor, cfg in CASES:
        prob = instance(seed, m, capped=False, cfg=cfg)
        eff, best, stale, lam_conv, lo, hi = raised_case(prob, i, factor)
        for rtol in (_certify.RANGE_RTOL, 1e-4):  # the default target, a loose one
            out = {}
            for compiled in (True, False):
                found, lower, n = certify_range(
                    eff, best, lo, hi, nodes=stale, lam_conv=lam_conv, rtol=rtol,
                    compiled=compiled,
                )  # fmt: skip
                out[compiled] = (found.search_value, found.eta, lower, n)
            assert out[True] == out[False], (seed, m, i, factor, rtol)
            if codes[-1] == _stale_search.STALE_DONE:
                renewed_done += out[True][3]
            # a payment job's renewals from the one-seller summaries: the same
            # certificate to rounding
            found, lower, n = certify_range(
                eff, best, lo, hi, nodes=stale, lam_conv=lam_conv, rtol=rtol,
                one_seller=(i, float(prob.psi[i])),
            )  # fmt: skip
            assert (found.search_value, found.eta, n) == (
                *out[False][:2],
                out[False][3],
            )
            assert lower == pytest.approx(out[False][2], rel=1e-12, abs=1e-12)
    assert len(codes) == 4 * len(CASES)  # the compiled search ran for every case
    assert set(codes) == {_stale_search.STALE_DONE, _stale_search.STALE_HANDBACK}
    assert renewed_done >= 10  # finished by the kernel, renewals included


def test_a_hand_back_runs_the_python_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the compiled search hands back, the certificate is the Python loop's."""
    eff, best, stale, lam_conv, lo, hi = raised_case(
        instance(3, 12, capped=False), 7, 8.0
    )
    ref = certify_range(
        eff, best, lo, hi, nodes=stale, lam_conv=lam_conv, compiled=False
    )
    monkeypatch.setattr(
        _certify,
        "stale_search",
        lambda *a: (_stale_search.STALE_HANDBACK, -math.inf, 0),
    )
    got = certify_range(eff, best, lo, hi, nodes=stale, lam_conv=lam_conv)
    assert (got[0].search_value, got[1], got[2]) == (ref[0].search_value, *ref[1:])


def test_renewal_bound_is_the_strong_convexity_bound_at_the_stale_point() -> None:
    """``F(w) − ‖∇F(w)‖²/(2(λ − λ_conv))`` at a stale ``w`` with the raised costs, from
    a full evaluation there (product ``Xw``, loss pass, cold a-step), and never below
    the stale bound."""
    eff, _, stale, lam_conv, lo, hi = raised_case(instance(5, 30, capped=False), 2, 3.0)
    modulus = eff.cfg.lam - lam_conv
    cfg = eff.cfg
    keys = np.array(sorted(e for e in stale if lo <= e <= hi))
    data = stale.renewal_arrays(eff, keys)
    assert data is not None
    B, W, A0, S0, L, DL, *_ = data
    raised_some = 0
    for j, e in enumerate(keys.tolist()):
        ok, bound, _, _ = _stale_search.renewal_bound(
            eff.X, eff.psi, eff.eps_max, cfg.k / eff.m, cfg.gamma * e, e, cfg.mu,
            cfg.lam, cfg.sigma, W[j], A0[j], S0[j], L[j], DL[j], modulus, B[j],
        )  # fmt: skip
        assert ok
        value, g, _ = value_and_gradient(eff, e, W[j], None)
        expect = value - float(g @ g) / (2.0 * modulus)
        assert bound >= B[j]
        if expect > B[j]:
            raised_some += 1
            assert bound == pytest.approx(expect, rel=1e-12, abs=1e-14)
        else:
            assert bound == B[j]
    assert raised_some >= 1
    # a renewal never lowers a node's bound: a stale bound above the evaluation's
    # stands
    j = 0
    e = float(keys[j])
    value, g, _ = value_and_gradient(eff, e, W[j], None)
    above = value - float(g @ g) / (2.0 * modulus) + 1.0
    ok, bound, _, _ = _stale_search.renewal_bound(
        eff.X, eff.psi, eff.eps_max, cfg.k / eff.m, cfg.gamma * e, e, cfg.mu,
        cfg.lam, cfg.sigma, W[j], A0[j], S0[j], L[j], DL[j], modulus, above,
    )  # fmt: skip
    assert ok
    assert bound == above


def test_nearest_node_is_the_first_minimiser_of_the_distance() -> None:
    """:meth:`StaleNodes.nearest` is ``min(nodes, key=|e − η|)`` (the first in
    insertion order on a tie), at the nodes, between them, outside them and at exact
    midpoints; the sorted keys follow insertions."""
    from mechanisms.allocation._range._certify import Node

    rng = np.random.default_rng(5)
    for _ in range(30):
        keys = rng.choice(np.arange(1.0, 40.0), size=rng.integers(1, 12), replace=False)
        keys = [float(k) for k in rng.permutation(keys)]
        nodes = StaleNodes({k: Node(0.0, np.zeros(1), np.zeros(1)) for k in keys})
        probes = [*keys, 0.0, 50.0, *(k + 0.5 for k in keys), *rng.uniform(0, 45, 20)]
        for eta in probes:
            assert nodes.nearest(eta) == min(nodes, key=lambda e: abs(e - eta))
        nodes[45.0] = Node(0.0, np.zeros(1), np.zeros(1))
        assert nodes.nearest(44.0) == 45.0


def test_node_floor_is_the_least_bound_of_the_others() -> None:
    from mechanisms.payments._resolve._local_resolve import _node_floors

    rng = np.random.default_rng(6)
    for n in (1, 2, 3, 7):
        for _ in range(20):
            bounds = tuple(float(b) for b in rng.integers(0, 4, n))  # with ties
            floors = _node_floors(bounds)
            assert len(floors) == n
            for j in range(n):
                others = [b for k, b in enumerate(bounds) if k != j]
                assert floors[j] == (min(others) if others else math.inf)


def test_eta_bounds_are_remembered_only_for_the_same_caps() -> None:
    """The range is kept across derived problems (the records memo) while ``ε^max``
    is the same array and ``k``, ``L`` and the floor ratio are the same; another
    ``ε^max`` array or ``k`` recomputes it, whatever the memo holds."""
    from mechanisms.allocation._eta_search import _eta_bounds, eta_bounds

    prob = instance(30, 40, True)
    first = eta_bounds(prob)
    derived = prob.with_seller_psi(0, float(prob.psi[0]) * 2.0)
    assert derived.records_memo is prob.records_memo
    assert eta_bounds(derived) == first
    tight = np.linspace(1e-3, 0.1, prob.m)  # the caps' sum reaches 1 inside m·L
    other = dataclasses.replace(prob, eps_max=tight, given_eps_max=tight)
    assert other.records_memo is prob.records_memo
    second = eta_bounds(other)
    assert second == _eta_bounds(other) != first
    for cfg in (
        other.cfg.with_(k=other.cfg.k * 0.5),
        other.cfg.with_(eps_floor_ratio=0.5),
    ):
        changed = dataclasses.replace(other, cfg=cfg)
        assert eta_bounds(changed) == _eta_bounds(changed) != second
    assert eta_bounds(prob) == first


@pytest.mark.parametrize(("seed", "m", "capped"), [(5, 30, False), (2, 80, False)])
def test_one_seller_renewal_is_the_renewal(seed: int, m: int, capped: bool) -> None:
    """:func:`_stale_search.renewal_bound_one` (a payment job's renewal, ``Ψ`` the
    base's but at one seller) gives :func:`_stale_search.renewal_bound`'s bound to
    rounding, at every stale node, for raises that keep the seller free and raises
    that take its weight to 0 or bring another seller in there; small raises come
    from the summary where the node has one, some larger ones with the seller out
    or another in, the rest fall back."""
    prob = instance(seed, m, capped=capped)
    base = solve_allocation(prob)
    assert base.certified
    stale = stale_nodes(prob, base)
    assert isinstance(stale, StaleNodes)
    eff, lam_conv = effective_problem(prob)
    assert lam_conv is not None
    modulus = eff.cfg.lam - lam_conv
    cfg = eff.cfg
    keys = np.array(sorted(stale))
    data = stale.renewal_arrays(eff, keys)
    assert data is not None
    _, W, A0, S0, L, DL, status, fs, ps = data
    rng = np.random.default_rng(seed)
    calls = small = small_hits = 0
    for i in np.flatnonzero(base.epsilon > 0)[:6]:
        i = int(i)
        for factor in (1.0 + 1e-6, 1.01, 1.3, 3.0, 30.0):
            before = fs[:, _stale_search._HITS].sum()
            psi = eff.psi.copy()
            psi[i] *= factor
            for j in rng.permutation(keys.size)[:8]:
                e = float(keys[j])
                args = (
                    eff.X, psi, eff.eps_max, cfg.k / eff.m, cfg.gamma * e, e, cfg.mu,
                    cfg.lam, cfg.sigma, W[j], A0[j], S0[j], L[j], DL[j], modulus,
                    -np.inf,
                )  # fmt: skip
                ok, full, _, _ = _stale_search.renewal_bound(*args)
                ok1, one, _, _ = _stale_search.renewal_bound_one(
                    *args, i, float(eff.psi[i]), status[j], fs[j], ps[j]
                )
                calls += 1
                small += factor <= 1.01 and fs[j, _stale_search._USABLE] == 1.0
                assert ok1 == ok
                if ok:
                    assert one == pytest.approx(full, rel=1e-12, abs=1e-13)
            if factor <= 1.01:
                small_hits += fs[:, _stale_search._HITS].sum() - before
    # a small raise keeps the classes, where the node has a closed form (free
    # sellers, equal caps: not at the ends of the range, where every weight sits
    # at 0 or its cap)
    assert small_hits >= 0.95 * small
    hits = fs[:, _stale_search._HITS].sum()
    assert hits < calls  # some raises change a class there: the full renewal
    assert fs[:, _stale_search._OUT_HITS].sum() >= 1  # and some take i's weight to 0
    assert fs[:, _stale_search._ENTER_HITS].sum() >= 1  # or bring a seller in
