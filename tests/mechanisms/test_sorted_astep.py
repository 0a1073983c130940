"""The strict a-step in O(log m) from sorted virtual costs, and the signatures and kink
estimates the strict re-solver reads from it (spec ``mechanism.md`` §4.2, §5).

:mod:`mechanisms.payments._resolve._sorted_astep` answers the a-step of a strict
re-solve from the sorted base ``Ψ`` and double-double prefix sums, with one seller's
``Ψ_i`` changed. Its multipliers are checked here against the problem itself — the
weights ``clip(A − s r, 0, h)`` computed record by record must satisfy ``Σ a = 1``
and ``‖a‖ = μ s`` — and its value, ``Ψᵀa`` and ``a_i`` against the O(m) kernel, on
random settings including vertices (no free weight) and tiny ``μ`` (huge
multipliers).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mechanisms import MechanismConfig, UniformPrior
from mechanisms.payments._payments import payment_job
from mechanisms.payments._resolve import _sorted_astep as sa
from mechanisms.payments._resolve._range_resolve import bound_status
from mechanisms.payments._resolve._strict_kernel import _evaluate
from mechanisms.payments._resolve._strict_resolve import strict_resolver


def _sorted(psi: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    order = np.argsort(psi, kind="stable")
    ps = np.ascontiguousarray(psi[order])
    rank = np.empty(psi.size, dtype=np.int64)
    rank[order] = np.arange(psi.size)
    ref = float(ps[psi.size // 2])
    return ps, sa.prefix_sums(ps, ref), ref, rank


def _draws(n: int, seed: int) -> list[dict[str, float | int | np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n):
        m = int(rng.choice([3, 40, 399, 2000, 8000]))
        k = float(rng.choice([1.5, 4.0, 4.3, 20.0]))
        k = min(k, m / 2.0)
        psi = 2.0 * rng.uniform(0, 1, m) - 1.0 if t % 2 else rng.exponential(1.0, m)
        i = int(rng.integers(m))
        out.append(
            {
                "psi": psi,
                "k": k,
                "gamma": 10 ** rng.uniform(-3, 2),
                "mu": 10 ** rng.uniform(-4, 1),
                "eta": 10 ** rng.uniform(-1, 4),
                "i": i,
                "psi_i": float(psi[i] * rng.uniform(0.5, 3.0) + 0.1 * rng.normal()),
            }
        )
    return out


@pytest.mark.parametrize("seed", range(3))
def test_sorted_a_step_solves_the_a_step_and_matches_the_record_by_record_one(
    seed: int,
) -> None:
    c, sigma = math.log(2.0), 1.0
    n_vertex = 0
    for d in _draws(60, seed):
        psi = np.asarray(d["psi"])
        m, i, psi_i = psi.size, int(d["i"]), float(d["psi_i"])
        gamma, mu, eta = float(d["gamma"]), float(d["mu"]), float(d["eta"])
        h = float(d["k"]) / m
        hh, r = np.full(m, h), np.empty(m)
        ok0, v0, _pa0, A0, s0, ai0, _held0 = _evaluate(
            psi, i, psi_i, eta, c, gamma, mu, sigma, h, hh, r, 0.0, 0.0
        )
        assert ok0
        ps, P, ref, rank = _sorted(psi)
        # warm from a nearby point, as every re-solve is
        ok, v, _pa, A, s, ai, held = sa.sorted_value(
            ps, P, ref, int(rank[i]), psi_i, eta, c, gamma, mu, sigma, h,
            A0 * (1 + 1e-3), s0 * (1 - 1e-3),
        )  # fmt: skip
        assert ok
        # the problem itself, record by record, at the returned multipliers
        psi_new = psi.copy()
        psi_new[i] = psi_i
        rr = c + (gamma * eta) * psi_new
        a = np.clip(A - s * rr, 0.0, h)
        slack = 1e-9 + 4 * 2.2e-16 * m * (3 * abs(A) + 2 * h)
        assert abs(a.sum() - 1.0) <= slack
        assert abs(np.linalg.norm(a) - mu * s) <= 1e-9 * max(1.0, mu * s) + slack
        n_vertex += int(np.all((a == 0.0) | (a == h)))
        # and the O(m) kernel's value, Ψᵀa and a_i (both round differently when the
        # multipliers are huge: the weights carry ~u·|A| each)
        scale = 1.0 + abs(v0) + 1e-15 * m * abs(A) * gamma * eta * np.abs(psi).max()
        assert abs(v - v0) <= 1e-9 * scale
        assert abs(ai - ai0) <= 1e-9 * h + 1e-15 * abs(A)
        assert abs(ai - a[i]) <= 1e-12 * max(1.0, abs(A))
        # the capped sellers' cap multipliers Σ (A − s r_j − h)/s
        ref_held = float(np.sum(np.maximum(A - s * rr - h, 0.0)[A - s * rr >= h])) / s
        assert abs(held - ref_held) <= 1e-9 * (1.0 + ref_held) + 1e-12 * abs(A) * m / s
    assert n_vertex >= 3  # the draws reach vertices (no free weight)


def test_the_sorted_a_step_declines_without_a_warm_start() -> None:
    psi = np.linspace(-1.0, 1.0, 50)
    ps, P, ref, _rank = _sorted(psi)
    ok, *_ = sa.sorted_value(
        ps, P, ref, 3, 0.1, 2.0, math.log(2.0), 1.0, 0.1, 1.0, 4 / 50, 0.0, 0.0
    )
    assert ok is False


def _strict_job(m: int, k: float, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (m, 5))
    X /= np.linalg.norm(X, axis=1, keepdims=True).max()
    y = np.where(rng.random(m) < 0.5, 1.0, -1.0)
    costs = rng.uniform(0.0, 1.0, m)
    cfg = MechanismConfig(
        gamma=1.0, lam=0.01, mu=0.1, sigma=1.0, k=k, eps_avg_max=5, mode="strict"
    )
    return payment_job(X, y, costs, UniformPrior(0.0, 1.0), cfg, None), costs


def test_strict_resolver_applies_when_caps_make_a_vertex() -> None:
    """``k = 4`` and ``m`` a multiple of 4 (the market's defaults): at large ``η``
    the a-step's optimum is the cheapest ``m/4`` sellers at their caps with no free
    weight. The compiled a-step used to refuse that vertex, so the strict re-solver
    never applied to such markets and every re-solve ran the full search."""
    job, _ = _strict_job(400, 4.0)
    res = strict_resolver(job.prob, job.base)
    assert res is not None
    i = int(np.flatnonzero(job.base.epsilon > 0)[0])
    lean = res.solve(i, float(job.prob.psi[i]) + 0.05)
    assert lean is not None


def test_compact_signatures_compare_as_the_byte_signatures() -> None:
    """Two re-solves have equal compact signatures exactly when every seller's
    status (``bound_status`` of the whole ``a``) is the same."""
    job, _ = _strict_job(400, 4.0, seed=1)
    res = strict_resolver(job.prob, job.base)
    assert res is not None
    winners = np.flatnonzero(job.base.epsilon > 0)
    rng = np.random.default_rng(5)
    for i in rng.choice(winners, 4, replace=False):
        i = int(i)
        base_psi = float(job.prob.psi[i])
        leans = [res.solve(i, base_psi + d) for d in np.linspace(0.0, 0.6, 25)]
        leans = [x for x in leans if x is not None]
        assert len(leans) >= 20
        full = [bound_status(res.weights(x), job.prob.caps(x.eta)) for x in leans]
        compact = [res.signature(x) for x in leans]
        for a in range(len(leans)):
            for b in range(len(leans)):
                assert (full[a] == full[b]) == (compact[a] == compact[b])
        # the own status read from a compact signature is the seller's own byte
        for x, f in zip(leans, full, strict=True):
            assert res.own_status(res.signature(x), i) == f[i]


def test_kink_guess_finds_where_the_status_changes() -> None:
    """The kink estimate from one side's margin lands where the active set changes:
    for brackets holding exactly one status change, located by bisecting the
    signatures to 1e-12 of the bracket, the change lies within 5 % of the bracket
    from the estimate (a secant on the smooth side is
    second-order accurate; a plain midpoint is off by up to 50 %)."""
    from mechanisms.payments._resolve._seller_curve import SellerCurve

    job, costs = _strict_job(400, 4.0, seed=2)
    checked = 0
    for i in np.flatnonzero(job.base.epsilon > 0)[:6]:
        i = int(i)
        curve = SellerCurve(job.prob, job.base, job.prior, i, float(costs[i]))
        top = float(costs[i]) + 0.3
        for x in np.linspace(float(costs[i]), top, 30)[1:]:
            curve.epsilon(float(x))
        pts = sorted(curve.lean)
        for x0, x1 in itertools.pairwise(pts):
            c0 = np.frombuffer(curve.signature(x0), dtype=np.int64)
            c1 = np.frombuffer(curve.signature(x1), dtype=np.int64)
            one = abs(c0[0] - c1[0]) + abs(c0[0] + c0[1] - c1[0] - c1[1])
            if one + int(c0[2] != c1[2]) != 1:
                continue  # not exactly one status change in the bracket
            z = curve.kink_guess(x0, x1)
            if z is None:
                continue
            lo, hi = x0, x1  # bisect to the first change after x0
            while hi - lo > 1e-12 * (x1 - x0):
                mid = 0.5 * (lo + hi)
                if curve.signature(mid) == curve.signature(x0):
                    lo = mid
                else:
                    hi = mid
            assert abs(z - lo) <= 0.05 * (x1 - x0)
            checked += 1
    assert checked >= 3
