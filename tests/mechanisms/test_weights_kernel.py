"""The compiled a-step's equal-cap path returns the general kernel's results bit for bit
(issue 16).

``weights_kernel`` sends equal caps (every ``h_i = c``, the large allocations, where
every cap is k/m) to ``_weights_eq``: no cap array, the capped sums as folds of ``c``,
the fixed point detected by the class counts, and the passes over the *support* (the
records that can be non-zero, rebuilt when ``(A, s)`` leaves it). Payment re-solves
compare against base solves, so its ``(ok, A, s)`` must equal the general kernel's
(``_weights_general``: every record in every pass) exactly — from warm starts near and
far (the support is rebuilt; the re-centring stalls into ``θ``) and cold; likewise
``range_value_kernel``'s value and ``Ψᵀa``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from mechanisms.allocation import _weights_kernel as wk
from mechanisms.allocation._weights_step import solve_weights

FloatArray = np.ndarray


def _problem(
    rng: np.random.Generator, m: int, k: float, ties: bool
) -> tuple[FloatArray, FloatArray]:
    r = rng.normal(size=m) + rng.uniform(-0.5, 0.5)
    if ties:  # many equal r_i: whole groups change class at once
        r = np.round(r, 2)
    return r, np.full(m, k / m)


def _starts(rng: np.random.Generator, A: float, s: float) -> list[tuple[float, float]]:
    """Warm starts at, near and far from the solution ``(A, s)``, and cold."""
    out = [(A, s), (0.0, 0.0), (10.0 * abs(A) + 1.0, s), (A, 30.0 * s), (-A, s)]
    for _ in range(4):
        out.append(
            (A * (1.0 + rng.normal(0.0, 0.05)), s * math.exp(rng.normal(0, 0.3)))
        )
    return out


@pytest.mark.parametrize("mu", [0.05, 1.0, 30.0])
@pytest.mark.parametrize(
    ("m", "k"),  # (infinite caps: the kernel fails, slowly, in both paths)
    [
        (40, 1.5),
        (40, 4.0),
        (40, np.inf),
        (5000, 1.5),
        (5000, 4.0),
        (40000, 1.5),
        (40000, 4.0),
    ],
)
def test_equal_caps_match_the_general_kernel_exactly(
    m: int, mu: float, k: float
) -> None:
    rng = np.random.default_rng(m + int(100 * mu))
    n_ok = 0
    for ties in (False, True):
        r, h = _problem(rng, m, k, ties)
        state = solve_weights(r, h, mu)[1]
        assert state is not None
        A, s = state.A, state.s
        for A0, s0 in _starts(rng, A, s):
            got = wk.weights_kernel(r, h, mu, A0, s0)
            want = wk._weights_general(r, h, mu, A0, s0)
            assert got == want, (ties, A0, s0)
            n_ok += got[0]
    if math.isfinite(k):  # (no finite kernel solve without caps: NumPy's fallback)
        assert n_ok >= 8  # the comparisons are of solved problems, not of failures


@pytest.mark.parametrize("m", [300, 3000])
@pytest.mark.parametrize("mu", [0.1, 0.5, 2.0])
def test_active_set_step_matches_from_far_scales(m: int, mu: float) -> None:
    """The active-set iteration from ``(θ(s₀), s₀)`` with ``s₀`` up to 10³ times off
    (as after a cold bisection): the capped count overshoots and comes back, so the
    kept fold of the capped sums must restart; same ``(ok, A, s)`` as over all
    records."""
    rng = np.random.default_rng(m + int(10 * mu))
    n_ok = 0
    for r in (rng.lognormal(0.0, 1.5, m), rng.normal(size=m)):
        for k in (1.2, 3.0, 10.0):
            h = np.full(m, k / m)
            state = solve_weights(r, h, mu)[1]
            assert state is not None
            for s0 in state.s * 10.0 ** np.linspace(-3.0, 3.0, 13):
                A0 = wk._theta(s0, r, h)
                want = wk._active_set(r, h, mu, A0, s0)
                got = wk._active_set_eq(r, k / m, mu, A0, s0, np.empty(m), 0, np.nan)
                assert got[:3] == want, (k, s0)
                n_ok += want[0]
    assert n_ok >= 8


@njit(cache=False)
def _recentre_30(
    A: float, s: float, r: FloatArray, h: FloatArray
) -> tuple[bool, float, int]:
    """The re-centring Newton as before the stall exit: all 30 passes unless found
    (converged: ``|Σ a − 1| ≤ 1e-14``, or a Newton step below ``A``'s rounding)."""
    lo = -np.inf
    hi = np.inf
    for k in range(30):
        tot = 0.0
        n_mid = 0
        for i in range(r.size):
            v = A - s * r[i]
            tot += min(max(v, 0.0), h[i])
            n_mid += (v > 0.0) & (v < h[i])
        f = tot - 1.0
        if abs(f) <= 1e-14:
            return True, A, k + 1
        if n_mid > 0 and abs(f / n_mid) <= 4e-16 * abs(A):
            return True, A - f / n_mid, k + 1  # the step is below A's rounding
        if f > 0.0:
            hi = min(hi, A)
        else:
            lo = max(lo, A)
        step = A - f / n_mid if n_mid > 0 else np.nan
        if not (lo < step < hi):
            if not (np.isfinite(lo) and np.isfinite(hi)):
                return False, A, k + 1
            step = 0.5 * (lo + hi)
        elif abs(step - A) <= 4e-16 * abs(A):
            return True, step, k + 1
        A = step
    return False, A, 30


def test_recentring_stall_exit_returns_what_the_30_passes_return() -> None:
    """All weights free and the ``r_i`` equal or of two values: the sequential sum's
    rounding keeps ``|Σ a − 1|`` above 1e-14, the bracket closes on adjacent floats
    and ``A`` stops moving; the stall exit must give the 30 passes' ``(False, A)``,
    and agree with them where they converge."""
    rng = np.random.default_rng(7)
    m = 200000
    stalled = converged = 0
    for r in (np.full(m, 0.7), rng.choice([0.7, 0.71], m), 0.7 + 1e-9 * rng.random(m)):
        for s in (1e-4, 1.5e-8, 0.3):
            A0 = (1.0 + s * r.sum()) / m * (1.0 + 1e-6)
            c = 2.0 / m + 0.02 * s
            found, A, passes = _recentre_30(A0, s, r, np.full(m, c))
            stalled += passes == 30
            converged += found
            assert wk._recentre(A0, s, r, np.full(m, c)) == (found, A)
            sup = np.empty(m)
            assert wk._recentre_eq(A0, s, r, c, sup, 0, np.nan)[:2] == (found, A)
    assert stalled >= 3  # both outcomes were compared
    assert converged >= 3


def _value_reference(
    ell: FloatArray,
    psi: FloatArray,
    q: float,
    eta: float,
    kcap: float,
    eps_max: FloatArray,
    mu: float,
    const: float,
    A0: float,
    s0: float,
) -> tuple[bool, float, float, float, float]:
    r = ell + q * psi
    h = np.minimum(kcap, eps_max / eta)
    ok, A, s = wk._weights_general(r, h, mu, A0, s0)
    if not ok:
        return False, 0.0, 0.0, 0.0, 0.0
    lin = sq = pa = tot = 0.0
    for ri, hi, pi in zip(r.tolist(), h.tolist(), psi.tolist(), strict=True):
        v = min(max(A - s * ri, 0.0), hi)
        lin += v * ri
        sq += v * v
        pa += v * pi
        tot += v
    if s > 0.0:  # the Lagrangian: + τ(1 − Σa), τ = A/s
        lin += (A / s) * (1.0 - tot)
    return True, const + lin + mu * math.sqrt(sq), A, s, pa


@pytest.mark.parametrize("m", [60, 20000])
def test_range_value_kernel_matches_the_general_kernel_exactly(m: int) -> None:
    rng = np.random.default_rng(m)
    ell = rng.normal(size=m)
    psi = rng.uniform(0.5, 3.0, m)
    kcap = 3.0 / m
    n_equal = 0
    for binding in (False, True):
        eps_max = rng.uniform(1.0, 2.0, m)
        if binding:
            eps_max[rng.random(m) < 0.05] = 1e-3 / m  # a few ε^max bind
        for q, eta in ((0.3, 0.7), (1.0, 2.0), (2.5, 5.0)):
            assert wk._caps_all_kcap(kcap, eps_max, eta) == (not binding)
            n_equal += not binding
            args = (ell, psi, q, eta, kcap, eps_max, 1.0, 0.25)
            ok, _, A, s, _ = _value_reference(*args, 0.0, 0.0)
            assert ok
            for A0, s0 in _starts(rng, A, s):
                got = wk.range_value_kernel(*args, A0, s0)
                assert got == _value_reference(*args, A0, s0), (binding, q, A0, s0)
    assert n_equal == 3


def test_all_kcap_decision_matches_the_record_by_record_test() -> None:
    rng = np.random.default_rng(3)
    eps = rng.uniform(1.0, 2.0, 1001)
    cases = []
    for eta in (0.5, 2.0, 1.0 / 0.3, -1.0, np.inf, np.nan):  # (η = 0 raises)
        for kcap in (0.5, 0.3, 1.0 / 3.0, 0.0, -1.0):
            cases.append((kcap, eps, eta))
    tight = eps.copy()
    tight[500] = 0.3 * 2.0  # ε/η == kcap exactly at η = 2, kcap = 0.3
    cases += [(0.3, tight, 2.0), (0.31, tight, 2.0)]
    with_nan = eps.copy()
    with_nan[17] = np.nan
    cases += [(0.5, with_nan, 1.0), (0.5, with_nan, 4.0)]
    for kcap, e, eta in cases:
        with np.errstate(invalid="ignore"):
            ratios = (e / eta).tolist()
        want = kcap > 0.0 and all(min(kcap, x) == kcap for x in ratios)
        assert wk._caps_all_kcap(kcap, e, eta) == want, (kcap, eta)


def test_equal_cap_is_found_only_when_every_cap_is_the_same_positive_value() -> None:
    h = np.full(10001, 2e-6)
    assert wk._equal_cap(h) == 2e-6
    for i, x in ((10000, 1e-6), (4097, np.nan), (0, 0.0), (5, 2e-6 * (1 + 1e-15))):
        g = h.copy()
        g[i] = x
        assert math.isnan(wk._equal_cap(g)), (i, x)
    assert math.isnan(wk._equal_cap(np.zeros(3)))
    assert math.isnan(wk._equal_cap(np.empty(0)))


@pytest.mark.parametrize("equal", [True, False])
def test_small_mu_with_nearly_equal_r_is_solved_by_the_kernel(equal: bool) -> None:
    """``μ`` tiny and ``r`` nearly constant (a near-zero model: every loss ≈ ln 2):
    ``s = ‖a‖/μ`` is ~10³ and the free-set variance ``V`` must be resolved far below
    ``μ² ≈ 6e-10``; the one-pass ``Σr² − (Σr)²/n`` lost it to cancellation
    (``Σr² ≈ 190``) and sent every such a-step to the NumPy solver."""
    rng = np.random.default_rng(3)
    m, mu = 399, 2.5e-5
    r = np.log(2.0) + 1e-8 * rng.normal(size=m)
    h = np.full(m, 15.9) if equal else rng.uniform(10.0, 20.0, size=m)
    ok, A, s = wk.weights_kernel(r, h, mu, 0.0, 0.0)
    assert ok
    a = np.clip(A - s * r, 0.0, h)
    assert abs(a.sum() - 1.0) <= 1e-9
    assert abs(np.linalg.norm(a) - mu * s) <= 1e-9 * max(1.0, mu * s)
    ref, _ = solve_weights(r, h, mu)
    np.testing.assert_allclose(a, ref, rtol=0, atol=1e-9)
    ok2, A2, s2 = wk.weights_kernel(r + 1e-9, h, mu, A, s)  # warm
    assert ok2
    assert abs(np.clip(A2 - s2 * (r + 1e-9), 0.0, h).sum() - 1.0) <= 1e-9


@pytest.mark.parametrize("equal", [True, False])
def test_large_multipliers_are_accepted_to_their_rounding(equal: bool) -> None:
    """``μ`` tiny and large ``r`` (a heavily penalised model): ``s ≈ 1/μ ≈ 4·10⁴`` and
    ``A ≈ s·r ≈ 2·10⁷``, so each weight ``A − s r_i`` carries a rounding of ~1e-9 and
    a fixed 1e-9 test on ``Σ a`` refused the exact active set (then the NumPy solver
    bisected for minutes at m = 10⁵, to the same answer)."""
    rng = np.random.default_rng(4)
    m, mu = 2000, 2.5e-5
    r = 580.0 + 20.0 * rng.random(m)
    r[:3] = [575.0, 575.0 + 2e-5, 575.0 + 3e-5]  # free weights at the top
    h = np.full(m, 15.9) if equal else rng.uniform(10.0, 20.0, size=m)
    ok, A, s = wk.weights_kernel(r, h, mu, 0.0, 0.0)
    assert ok
    assert A > 1e7
    a = np.clip(A - s * r, 0.0, h)
    assert np.count_nonzero(a) >= 2  # free weights, not a vertex
    assert abs(a.sum() - 1.0) <= 1e-8
    ref, _ = solve_weights(r, h, mu)
    np.testing.assert_allclose(a, ref, rtol=0, atol=1e-8)


def test_an_overflowed_cost_goes_to_the_numpy_a_step() -> None:
    """``γηΨ_i`` overflows to ``∞`` when a payment sweep runs far up an unbounded
    prior: the kernels report not-ok (they raised ``ZeroDivisionError`` inside numba),
    and the NumPy a-step gives that seller only what the caps force on it."""
    ell = np.array([0.69314364, 0.69314204, 0.69314211, 0.69314215])
    psi = np.array([7.05603687e298, 0.333216316, 0.150444881, 1.93427572])
    q, eta, kcap, mu = 12022685080.988436, 68683.77024160657, 0.3127394200851256, 2.4e-6
    got = wk.range_value_kernel(
        ell, psi, q, eta, kcap, np.full(4, np.inf), mu, 0.0, 0.0, 0.0
    )
    assert got[0] is False
    with np.errstate(over="ignore"):
        r = ell + q * psi
    assert not np.isfinite(r[0])
    assert wk.weights_kernel(r, np.full(4, kcap), mu, 0.0, 0.0)[0] is False
    a, _ = solve_weights(r, np.full(4, kcap), mu)
    assert a.sum() == pytest.approx(1.0, abs=1e-15)
    assert np.all(a[1:] == kcap)  # the three finite sellers fill their caps
    assert a[0] == pytest.approx(1.0 - 3 * kcap)  # the rest is forced on seller 0


@pytest.mark.parametrize("equal", [True, False])
@pytest.mark.parametrize("warm", [True, False])
def test_a_vertex_is_solved_by_the_kernel(equal: bool, warm: bool) -> None:
    """``1/h`` a whole number of sellers (``k = 4``, ``m`` a multiple of 4) and a wide
    spread of ``r`` (a large ``η``): the optimum puts the cheapest ``1/h`` sellers at
    their caps and no weight is free. The kernel refused that vertex (no free weight
    to solve for), so every such a-step, and every strict re-solve, left the compiled
    path. It must return the NumPy solver's vertex, with multipliers that reproduce it
    through ``clip(A − s r, 0, h)``."""
    rng = np.random.default_rng(11)
    m, mu = 2000, 0.1
    r = np.log(2.0) + 3000.0 * rng.uniform(-1.0, 1.0, size=m)
    h = np.full(m, 4.0 / m)
    if not equal:  # unequal caps summing to 1 over the cheapest 400 sellers
        order = np.argsort(r)
        h = np.full(m, 0.01)
        h[order[:400]] = np.linspace(0.5, 1.5, 400) / 400.0
        h[order[:400]] /= h[order[:400]].sum()
    ref, state = solve_weights(r, h, mu)
    assert state is not None
    at_cap = np.isclose(ref, h, rtol=1e-12, atol=0.0)
    assert np.all((ref == 0.0) | at_cap)  # the reference is a vertex
    A0, s0 = (state.A * 1.001, state.s * 0.9) if warm else (0.0, 0.0)
    ok, A, s = wk.weights_kernel(r, h, mu, A0, s0)
    assert ok
    a = np.clip(A - s * r, 0.0, h)
    np.testing.assert_array_equal(a > 0.0, ref > 0.0)
    np.testing.assert_allclose(a, ref, rtol=1e-12, atol=0.0)
    assert np.all((a == 0.0) | (a == h))  # the vertex itself, no weight in between
    assert abs(np.linalg.norm(a) - mu * s) <= 1e-12
    # a vertex whose cap sum misses 1 is not one: the kernel must not claim it
    r2 = r.copy()
    r2[np.argsort(r)[400]] = r[np.argsort(r)[399]]  # a tie across the vertex edge
    ok2, A2, s2 = wk.weights_kernel(r2, h, mu, 0.0, 0.0)
    if ok2:
        a2 = np.clip(A2 - s2 * r2, 0.0, h)
        ref2, _ = solve_weights(r2, h, mu)
        np.testing.assert_allclose(a2, ref2, rtol=0, atol=1e-9)


@pytest.mark.parametrize("binding", [False, True])
def test_range_value_restores_the_sum_when_huge_multipliers_cancel(
    binding: bool,
) -> None:
    """A tiny ``μ`` against a huge ``γηΨ`` (``γ ≈ 3·10⁴``, ``η ≈ 2.5·10⁶``): 50 sellers
    at their caps, one free, ``A ≈ 4·10¹¹``, so ``A − s r_i`` of the free weight is off
    by ~1e-5 and the raw weights miss ``Σ a = 1`` by more than ``SUM_RTOL``. The active
    set is exact (the kernel's own test accepts it): the value is the one of the NumPy
    a-step, whose weights restore the sum, and no fallback is needed."""
    rng = np.random.default_rng(11)
    m, mu, kcap = 399, 5.14e-6, 7.965 / 399
    ell = rng.uniform(0.01, 2.0, m)
    psi = rng.uniform(1e-4, 1e-3, m)
    q, eta = 7.1e10, 2.49e6
    eps_max = np.full(m, np.inf)
    if binding:
        eps_max[rng.random(m) < 0.1] = 0.5 * kcap * eta  # caps k/(2m) for some
    const = 0.25
    ok, value, A, s, pa = wk.range_value_kernel(
        ell, psi, q, eta, kcap, eps_max, mu, const, 0.0, 0.0
    )
    assert ok
    r = ell + q * psi
    caps = np.minimum(kcap, eps_max / eta)
    raw = np.clip(A - s * r, 0.0, caps)
    assert abs(raw.sum() - 1.0) > wk.SUM_RTOL  # the case this is about
    a, state = solve_weights(r, caps, mu)
    assert state is not None
    want = const + float(a @ r) + mu * float(np.linalg.norm(a))
    want += (state.A / state.s) * (1.0 - float(a.sum()))
    assert value == pytest.approx(want, rel=1e-12)
    assert pa == pytest.approx(float(psi @ a), rel=1e-9)


def _root_by_breakpoints(p: FloatArray, h: FloatArray) -> float:
    """The root of ``F(θ) = Σ clip(θ − p_i, 0, h_i) − 1`` from the sorted breakpoints
    ``p_i`` and ``p_i + h_i`` (``F`` is linear between them), each ``F`` summed
    exactly (``math.fsum``)."""

    def F(t: float) -> float:
        return math.fsum(np.clip(t - p, 0.0, h).tolist()) - 1.0

    b = np.unique(np.concatenate([p, p + h]))
    fb = np.array([F(float(t)) for t in b])
    k = int(np.searchsorted(fb, 0.0))  # F non-decreasing: the first b with F ≥ 0
    assert 0 < k < b.size
    lo, hi = float(b[k - 1]), float(b[k])
    return lo + (hi - lo) * (-fb[k - 1]) / (fb[k] - fb[k - 1])


def _staircase(
    rng: np.random.Generator, m: int, c: float, gap: float = 3.0
) -> FloatArray:
    """Costs whose ``r_i`` lie ``gap`` to ``3·gap`` caps ``c`` apart: at most ``θ`` no
    weight is free and ``F`` is a staircase (a large ``m`` at a small ``μ``). Some
    come in pairs closer than ``c`` (two records change class on one piece) and
    three are tied."""
    r = np.cumsum(rng.uniform(gap, 3.0 * gap, m)) * c + 1000.0
    pair = rng.random(m) < 0.2
    r[1:][pair[1:]] = r[:-1][pair[1:]] + c * rng.uniform(0.0, 0.5, int(pair[1:].sum()))
    r[rng.choice(m, 3, replace=False)] = r[rng.integers(m)]
    return rng.permutation(r)


def test_theta_takes_the_next_event_where_no_weight_is_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``θ`` of the capped simplex where the ``s r_i`` are far apart compared with the
    caps: the bracketed Newton has no slope at almost every ``θ``. The next-event
    and chord steps must land on the root (against the breakpoints), the equal-cap
    kernel on the general one's ``θ`` bit for bit, and the passes must fall against
    halving alone (both steps disabled: the last record used to be located by ~20
    halvings of a bracket of width ~``c``) and against the event step alone (the
    chord replaces the halvings far from the root)."""
    rng = np.random.default_rng(5)
    modes = ("halving", "event", "both")
    passes = dict.fromkeys(modes, 0)
    n_event = 0
    counted = {"n": 0}
    clip_sums = wk._clip_sums_eq
    next_event = wk._next_event_eq

    def clip_sums_counted(*a: object) -> object:
        counted["n"] += 1
        return clip_sums(*a)

    def next_event_counted(*a: object) -> float:
        counted["n"] += 1
        return float(next_event(*a))

    for trial in range(12):
        m = int(rng.choice([50, 400, 3000]))
        k = float(rng.uniform(1.05, 0.4 * m))
        c = k / m
        r = _staircase(rng, m, c, gap=float(rng.choice([3.0, 30.0, 300.0])))
        if trial % 4 == 3:  # heavy-tailed gaps: a chord far from the staircase
            r = rng.permutation(1000.0 + np.cumsum(rng.lognormal(0.0, 2.0, m)) * c)
        s = float(rng.choice([1.0, 0.5, 3.0]))
        want = _root_by_breakpoints(s * r, np.full(m, c))
        theta = wk._theta(s, r, np.full(m, c))
        assert abs(theta - want) <= 1e-12 * abs(want), (trial, theta, want)
        a = np.clip(theta - s * r, 0.0, c)
        slack = 1e-12 + 4.0 * 2.3e-16 * m * abs(theta)  # the weights' rounding
        assert abs(math.fsum(a.tolist()) - 1.0) <= slack
        got = wk._theta_eq(s, r, c, np.empty(m), 0, np.nan)[0]
        assert got == theta  # the compiled equal-cap kernel: same θ
        for mode in modes:
            with monkeypatch.context() as mp:  # (the compiled kernels are typed)
                mp.setattr(wk, "_clip_sums_eq", clip_sums_counted)
                mp.setattr(wk, "_next_event_eq", next_event_counted)
                if mode == "halving":
                    mp.setattr(wk, "_event_step", lambda *a: np.nan)
                if mode != "both":
                    mp.setattr(wk, "_secant_step", lambda *a: np.nan)
                counted["n"] = 0
                got = wk._theta_eq.py_func(s, r, c, np.empty(m), 0, np.nan)[0]
                passes[mode] += counted["n"]
            if mode == "both":
                assert got == theta
            else:  # the same root to the rounding of its sum
                assert abs(got - theta) <= 1e-12 * abs(theta)
        n_event += bool(np.any((a > 0.0) & (a < c)))
    assert n_event >= 10  # the roots are in a piece (a partly filled record)
    assert passes["event"] <= 0.7 * passes["halving"], passes
    assert passes["both"] <= 0.7 * passes["event"], passes


def test_theta_with_unequal_caps_takes_the_next_event() -> None:
    """The general kernel's event and chord steps (caps differ: the next record's
    own cap decides whether its piece holds the root) against the breakpoints."""
    rng = np.random.default_rng(8)
    for trial in range(12):
        m = int(rng.choice([50, 400, 3000]))
        h = rng.uniform(0.2, 1.8, m) * float(rng.uniform(1.05, 0.4 * m)) / m
        r = _staircase(rng, m, float(h.min()))
        want = _root_by_breakpoints(r, h)
        theta = wk._theta(1.0, r, h)
        assert abs(theta - want) <= 1e-12 * abs(want), (trial, theta, want)


def test_next_event_and_its_step() -> None:
    """``_next_event``: the least ``s r_i ≥ θ`` below the root, the greatest
    ``s r_i + h_i`` over the capped records above it (ties: the smallest cap), and
    the equal-cap version's ``e`` over a support that holds, or does not hold, the
    next zero record; ``_event_step``: ``e − f`` only for ``|f| < h_e`` clear of the
    cap sum's rounding and inside the bracket."""
    r = np.array([5.0, 1.0, 3.0, 3.0, 7.0, 0.0])
    h = np.array([0.5, 0.25, 0.5, 0.25, 0.5, 0.5])
    assert wk._next_event(2.0, -0.3, 1.0, r, h) == (3.0, 0.25)  # the tie: cap 0.25
    assert wk._next_event(5.0, -0.3, 1.0, r, h) == (5.0, 0.5)  # v = 0: still zero
    assert wk._next_event(4.0, 0.2, 1.0, r, h) == (3.5, 0.5)  # 3 + 0.5 > 1 + 0.25
    assert wk._next_event(3.5, 0.2, 1.0, r, h) == (3.5, 0.5)  # v = h: still capped
    assert wk._next_event(8.0, -0.1, 1.0, r, h) == (np.inf, 0.0)
    assert wk._next_event(0.1, 0.1, 1.0, r, h) == (-np.inf, 0.0)
    c = 0.5
    for R in (np.nan, 4.0, 6.0):  # no support; the next zero record off it; on it
        sup = np.empty(r.size)
        _, _, _, n, R2 = wk._clip_sums_eq(2.5, 1.0, r, c, sup, 0, R)
        if not math.isnan(R):
            n, R2 = int(np.sum(r < R)), R
            sup[:n] = r[r < R]
        assert wk._next_event_eq(2.5, -0.1, 1.0, r, c, sup, n, R2) == 3.0
        assert wk._next_event_eq(2.5, 0.1, 1.0, r, c, sup, n, R2) == 1.5
        assert wk._next_event_eq(3.0, -0.1, 1.0, r, c, sup, n, R2) == 3.0  # v = 0
        assert wk._next_event_eq(3.5, 0.1, 1.0, r, c, sup, n, R2) == 3.5  # v = c
        assert wk._next_event_eq(3.2, -0.1, 1.0, r, c, sup, n, R2) == 5.0
    assert wk._event_step(-0.1, 3.0, 0.25, 2.0, 4.0, 3) == 3.1
    assert wk._event_step(0.1, 3.5, 0.5, 3.0, 4.0, 3) == 3.4
    assert math.isnan(wk._event_step(-0.25, 3.0, 0.25, 2.0, 4.0, 3))  # |f| = h_e
    assert math.isnan(wk._event_step(-0.25 * (1 - 1e-16), 3.0, 0.25, 2.0, 4.0, 3))
    assert math.isnan(wk._event_step(-0.1, 3.0, 0.25, 2.0, 3.05, 3))  # off bracket


def test_caps_sum_decision_matches_the_summed_caps() -> None:
    """``caps_exceed_one`` decides ``Σ h > 1 + 1e-12`` as the index-order sum does,
    from ``m·c`` where every cap is ``c`` and by the sum where ``m·c`` is within
    rounding of the line (equal caps from every side of it, and unequal caps)."""
    rng = np.random.default_rng(5)
    limit = 1.0 + 1e-12
    cases = []
    for m in (1, 2, 3, 7, 10, 399, 10_000):
        target = limit / m
        for c in (target, 1.0 / m, 2.0 / m, 0.5 / m, 1e-300, 1e300):
            for k in range(-3, 4):  # a few ulps either side of the line
                ck = c
                for _ in range(abs(k)):
                    ck = float(np.nextafter(ck, np.inf if k > 0 else -np.inf))
                cases.append(np.full(m, ck))
        cases.append(rng.uniform(0.5, 1.5, m) / m)  # unequal caps near the line
    for h in cases:
        want = _sequential_sum(h) > limit
        assert wk.caps_exceed_one(h, wk._equal_cap(h)) == want


def _sequential_sum(h: np.ndarray) -> float:
    total = 0.0
    for v in h.tolist():
        total += v
    return total


@pytest.mark.parametrize("mu", [2e-6, 0.1, 2.0])
def test_counted_clip_gives_the_restored_weights(mu: float) -> None:
    """The equal-cap kernel's last sums stand for :func:`restore_sum`'s own count:
    ``clip_weights_counted`` returns the weights ``_clip_weights`` returns, to the
    bit, from warm and cold starts and at a small ``μ`` (where the sum misses 1 and
    the restoring shift is not 0); where the sums are unknown it is that function."""
    rng = np.random.default_rng(int(1e6 * mu))
    n_counted = 0
    for m in (50, 2000):
        for ties in (False, True):
            r, h = _problem(rng, m, 4.0, ties)
            state = solve_weights(r, h, mu)[1]
            assert state is not None
            for A0, s0 in _starts(rng, state.A, state.s):
                ok, A, s, tot, n_free = wk.weights_kernel_sums(
                    r, h, wk._equal_cap(h), mu, A0, s0
                )
                if not ok:
                    continue
                want = wk._clip_weights(A, s, r, h)
                got = wk.clip_weights_counted(A, s, r, h, tot, n_free)
                assert np.array_equal(got, want), (m, ties, A0, s0)
                assert np.array_equal(
                    wk.clip_weights_counted(A, s, r, h, np.nan, -1), want
                )
                n_counted += n_free >= 0
    assert n_counted >= 8
