"""The a-step (spec §4.2): exact minimiser of ``⟨r, a⟩ + μ‖a‖₂`` on the capped simplex.

Checked against a generic convex solve (cvxpy/CLARABEL) and against the capped-simplex
KKT conditions with a multiplier computed independently (``capped_simplex_kkt``).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from mechanisms.allocation._weights_step import (
    FILL_KERNEL_MAX_M,
    fill_smallest,
    project_capped_simplex,
    solve_weights,
    state_from_weights,
)
from tests.mechanisms.conftest import capped_simplex_kkt


def _cvx_weights(
    r: np.ndarray, caps: np.ndarray, mu: float
) -> tuple[float, np.ndarray]:
    a = cp.Variable(r.size, nonneg=True)
    prob = cp.Problem(
        cp.Minimize(r @ a + mu * cp.norm(a, 2)), [cp.sum(a) == 1, a <= caps]
    )
    prob.solve(solver=cp.CLARABEL)
    return float(prob.value), np.asarray(a.value)


def _f(r: np.ndarray, a: np.ndarray, mu: float) -> float:
    return float(r @ a + mu * np.linalg.norm(a))


def _grad(r: np.ndarray, a: np.ndarray, mu: float) -> np.ndarray:
    return r + mu * a / np.linalg.norm(a)


CASES = [
    # (m, mu, cap kind)
    (7, 0.05, "uniform"),
    (40, 0.3, "uniform"),
    (40, 3.0, "uniform"),
    (40, 0.3, "hetero"),
    (200, 1.0, "hetero"),
    (200, 0.01, "none"),
    (25, 100.0, "hetero"),
]


def _caps(rng: np.random.Generator, m: int, kind: str) -> np.ndarray:
    if kind == "none":
        return np.full(m, np.inf)
    if kind == "uniform":
        return np.full(m, 3.0 / m)
    caps = rng.uniform(0.0, 4.0 / m, m)
    caps[rng.random(m) < 0.2] = 0.0  # sellers with ε_max = 0
    caps *= max(1.0, 1.3 / caps.sum())  # keep Σ h ≥ 1.3
    return caps


@pytest.mark.parametrize(("m", "mu", "kind"), CASES)
def test_matches_cvxpy_and_kkt(rng: np.random.Generator, m: int, mu: float, kind: str):
    r = rng.normal(size=m) + rng.exponential(size=m)
    caps = _caps(rng, m, kind)
    a, _ = solve_weights(r, caps, mu)
    f_cvx, a_cvx = _cvx_weights(r, np.minimum(caps, 1.0), mu)
    f = _f(r, a, mu)
    # never worse than the generic solver beyond its tolerance; matches it closely
    assert f <= f_cvx + 1e-7 * (1 + abs(f_cvx))
    assert abs(f - f_cvx) <= 1e-6 * (1 + abs(f_cvx))
    # μ > 0 makes the problem strictly convex on the simplex: same minimiser
    assert np.abs(a - a_cvx).max() <= 1e-4
    assert capped_simplex_kkt(a, _grad(r, a, mu), caps) <= 1e-9


def test_mu_zero_is_the_lp_fill(rng: np.random.Generator):
    m = 30
    r = rng.normal(size=m)
    caps = _caps(rng, m, "hetero")
    a, state = solve_weights(r, caps, 0.0)
    assert state is None
    f_cvx, _ = _cvx_weights(r, caps, 0.0)
    assert abs(float(r @ a) - f_cvx) <= 1e-7 * (1 + abs(f_cvx))
    # LP KKT: one threshold τ separates full (r ≤ τ), partial (= τ) and empty sellers
    assert capped_simplex_kkt(a, r, caps) <= 1e-12
    assert np.array_equal(fill_smallest(r, caps), a)


def test_warm_start_gives_the_cold_solution(rng: np.random.Generator):
    m, mu = 120, 0.5
    caps = np.full(m, 4.0 / m)
    r = rng.normal(size=m)
    _, state = solve_weights(r, caps, mu)
    r2 = r + 0.05 * rng.normal(size=m)
    cold, _ = solve_weights(r2, caps, mu)
    warm, _ = solve_weights(r2, caps, mu, warm=state)
    np.testing.assert_allclose(warm, cold, atol=1e-12)


@pytest.mark.parametrize("shift", [0.0, 0.05, 3.0])
def test_state_guessed_from_nearby_weights_gives_the_cold_solution(
    rng: np.random.Generator, shift: float
):
    # The guess only seeds the exact active-set step: any guess, good (small shift)
    # or poor (large shift), must end at the unique minimiser.
    m, mu = 150, 0.4
    caps = np.full(m, 3.0 / m)
    r = rng.normal(size=m)
    a_near, _ = solve_weights(r, caps, mu)
    r2 = r + shift * rng.normal(size=m)
    state = state_from_weights(a_near, r2, caps, mu)
    assert state is not None
    assert state.s == pytest.approx(np.linalg.norm(a_near) / mu)
    cold, _ = solve_weights(r2, caps, mu)
    warm, _ = solve_weights(r2, caps, mu, warm=state)
    np.testing.assert_allclose(warm, cold, atol=1e-12)
    assert state_from_weights(np.zeros(m), r2, caps, mu) is None
    assert state_from_weights(a_near, r2, caps, 0.0) is None


def test_caps_that_force_the_weights():
    caps = np.array([0.5, 0.25, 0.25, 0.0])
    a, _ = solve_weights(np.array([3.0, 1.0, 2.0, -5.0]), caps, 0.7)
    np.testing.assert_allclose(a, caps)


def test_vertex_solution_with_ties_and_large_gaps():
    # Two sellers far cheaper than the rest: with caps 1/2 the optimum is the vertex
    # a = (1/2, 1/2, 0, ...), where no weight is strictly between 0 and its cap.
    r = np.array([0.0, 0.0, 10.0, 10.0, 10.0])
    caps = np.full(5, 0.5)
    a, _ = solve_weights(r, caps, 0.1)
    np.testing.assert_allclose(a, [0.5, 0.5, 0, 0, 0], atol=1e-12)
    assert capped_simplex_kkt(a, _grad(r, a, 0.1), caps) <= 1e-12


@pytest.mark.parametrize("interior", [False, True])
def test_projection_matches_cvxpy(rng: np.random.Generator, interior: bool):
    """``interior``: ``v`` near the uniform weights, so the projection is a shift of
    ``v`` strictly inside the caps (the O(m) path, no sort)."""
    for m in (1, 5, 60):
        v = rng.normal(size=m) * 2
        caps = np.maximum(rng.uniform(0, 3.0 / m, m), 1.2 / m)
        if interior:
            v = (1.0 + 0.1 * rng.uniform(-1, 1, m)) / m + 0.05 / m
        a, theta = project_capped_simplex(v, caps)
        x = cp.Variable(m)
        prob = cp.Problem(
            cp.Minimize(cp.sum_squares(x - v)), [cp.sum(x) == 1, x >= 0, x <= caps]
        )
        prob.solve(solver=cp.CLARABEL)
        # never farther from v than the generic solver (whose own KKT residual was
        # ~1e-4 at some seeds), and exactly KKT: a − v = θ-shift on the free set
        assert float(np.sum((a - v) ** 2)) <= prob.value + 1e-7 * (1 + prob.value)
        assert capped_simplex_kkt(a, a - v, caps) <= 1e-12
        np.testing.assert_allclose(a, np.clip(v + theta, 0, caps), atol=1e-12)
        assert abs(a.sum() - 1) <= 1e-12


def test_lp_fill_breaks_ties_by_index_and_needs_no_full_sort() -> None:
    """The LP fill orders only the sellers that can take weight (a partition, then a
    stable sort of those and every tie at the cut): the same weights as filling in
    the order of a full stable sort, ties by index, including ties at the cut, caps
    of several sizes, an unbounded cap and an infinite ``r``."""
    rng = np.random.default_rng(12)
    for t in range(406):
        # the compiled fill up to FILL_KERNEL_MAX_M sellers, NumPy's above
        m = int(rng.integers(2, 400)) if t < 400 else FILL_KERNEL_MAX_M + 1 + 97 * t % 900
        r = rng.choice([0.1, 0.2, 0.3], m) if t % 2 else rng.normal(size=m)
        r[rng.integers(m)] = np.inf
        caps = rng.uniform(0.0, 4.0 / m, m) if t % 3 else np.full(m, 1.5 / m)
        if t % 5 == 0:
            caps[rng.integers(m)] = np.inf
        order = sorted(range(m), key=lambda i: (r[i], i))
        want = np.zeros(m)
        left = 1.0
        for i in order:
            want[i] = min(caps[i], max(left, 0.0))
            left -= caps[i]
        got = fill_smallest(r, caps)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        if caps.sum() >= 1.0:
            assert got.sum() == pytest.approx(1.0, abs=1e-12)


def test_lp_fill_with_a_nan_cost_orders_it_last() -> None:
    """A NaN ``r_i`` (never produced by finite inputs) is ordered last, as NumPy's
    sort does, by the NumPy path the compiled fill hands it to."""
    r = np.array([0.3, np.nan, 0.1, 0.2])
    caps = np.full(4, 0.4)
    np.testing.assert_allclose(fill_smallest(r, caps), [0.2, 0.0, 0.4, 0.4], atol=1e-15)
