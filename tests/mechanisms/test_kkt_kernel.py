"""The compiled a- and η-block conditions equal a NumPy transcription of them.

:func:`mechanisms.allocation._eta_search._block_conditions` runs one compiled pass
(:mod:`mechanisms.allocation._kkt_kernel`). :func:`_numpy_conditions` below states the
same conditions in array form, independently; both must give the same residuals and
profile slope, for the linear and the power utility, on weights built to hit every
class: free, at zero, at the ``k/m`` cap, held by ``ε_i^max``, at the kink where both
caps bind, pinned at a zero cap, and with no free weight at all.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from learners.losses import LogisticLoss
from mechanisms import MechanismConfig
from mechanisms.allocation._block_solver import BlockSolution, solve_at_eta
from mechanisms.allocation._eta_polish import caps_at
from mechanisms.allocation._eta_search import (
    A_ZERO,
    EPS_CAP_RTOL,
    _block_conditions,
    profile_slope,
)
from mechanisms.allocation._kkt_kernel import (
    FEW_ULPS,
    eta_cap_limit,
    eta_cap_top,
    median,
)
from mechanisms.allocation._logistic_kernel import logistic_value_slope
from mechanisms.allocation._problem import Problem


def _case(
    seed: int, free: bool, mode: str, capped: bool = True
) -> tuple[Problem, Problem, BlockSolution]:
    rng = np.random.default_rng(seed)
    m, d = int(rng.integers(40, 200)), 3
    X = rng.normal(size=(m, d))
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    psi = rng.uniform(0.1, 3.0, m)
    k, eta = 5.0, float(rng.uniform(0.5, 2.0))
    kcap = k / m
    eps_max = np.full(m, np.inf)
    held = rng.choice(m, m // 5, replace=False)
    eps_max[held] = rng.uniform(0.2, 0.9, held.size) * kcap * eta  # binding caps
    eps_max[held[:3]] = kcap * eta * (1.0 + 1e-12)  # the kink: both caps bind
    eps_max[held[3]] = 0.0  # pinned at a zero cap
    if not capped:  # no ε cap holds anyone: the kernel reads the residual in one pass
        eps_max[:] = np.inf
    cfg = MechanismConfig(
        gamma=float(rng.uniform(0.1, 2.0)), lam=0.1, mu=float(rng.uniform(0.1, 3.0)),
        sigma=float(10 ** rng.uniform(-1.0, 3.0)), k=k, mode=mode,
    )  # fmt: skip
    caps = np.minimum(kcap, eps_max / eta)
    a = np.where(rng.random(m) < 0.4, 0.0, caps)  # at zero or at a cap
    if free:
        inner = rng.choice(np.flatnonzero(caps > 0), 7, replace=False)
        a[inner] = caps[inner] * rng.uniform(0.2, 0.8, inner.size)
    if capped:
        a[held[3]] = 0.0
    w = rng.normal(size=d)
    sol = BlockSolution(eta, w, a, 0.0, 1.0, 1, True, None)
    linear = Problem(X, y, psi, eps_max, cfg)
    power = Problem(X, y, psi, eps_max, cfg.with_(u="power", u_power=1.0))
    return linear, power, sol


@pytest.mark.parametrize("capped", [True, False])
@pytest.mark.parametrize("mode", ["default", "strict"])
@pytest.mark.parametrize("free", [True, False])
@pytest.mark.parametrize("seed", range(8))
def test_compiled_block_conditions_equal_numpy(
    seed: int, free: bool, mode: str, capped: bool
) -> None:
    linear, power, sol = _case(seed, free, mode, capped)
    power15 = dataclasses.replace(power, cfg=power.cfg.with_(u_power=1.5))
    for prob in (linear, power, power15):
        got = _block_conditions(prob, sol, None)
        ref = _numpy_conditions(prob, sol, None)
        assert got[0] == pytest.approx(ref[0], rel=1e-12)
        assert got[1] == pytest.approx(ref[1], rel=1e-10, abs=1e-14)
        assert got[2] == pytest.approx(ref[2], rel=1e-10, abs=1e-12)
        assert ref[1] > 1e-3  # weights not at an optimum: the residual is exercised
        losses = LogisticLoss().value(prob.X @ sol.w, prob.y)
        got_m = _block_conditions(prob, sol, losses)
        ref_m = _numpy_conditions(prob, sol, losses)
        assert got_m[1] == pytest.approx(ref_m[1], rel=1e-10, abs=1e-14)
        assert got_m[2] == pytest.approx(ref_m[2], rel=1e-10, abs=1e-12)


def _numpy_conditions(
    prob: Problem, sol: BlockSolution, model_losses: np.ndarray | None
) -> tuple[float, float, float]:
    """``(‖∇_w G‖, relative a-residual, dP/dη)`` in array form (the reference)."""
    cfg, loss = prob.cfg, LogisticLoss()
    w, a, eta = sol.w, sol.a, sol.eta
    if model_losses is not None:
        gw = np.zeros(1)
        losses = model_losses
    else:
        z = prob.X @ w
        gw = prob.X.T @ (a * loss.derivative(z, prob.y)) + cfg.lam * w
        losses = loss.value(z, prob.y)
        if cfg.mode == "strict":
            losses = np.full(prob.m, prob.strict_loss_value)
    norm_a = float(np.linalg.norm(a))
    p = 1.0 if cfg.u == "linear" else cfg.u_power
    upsi = prob.psi * (p * (eta * a) ** (p - 1.0))
    g = losses + cfg.gamma * eta * upsi + (cfg.mu * a / norm_a if norm_a > 0 else 0.0)
    caps = prob.caps(eta)
    pinned = caps <= 0.0
    at_zero = (a <= A_ZERO) & ~pinned
    at_cap = (a >= caps * (1.0 - 1e-9)) & ~pinned
    kcap = cfg.k / prob.m
    eps_cap = prob.eps_max / eta
    at_cap |= (a >= caps * (1.0 - EPS_CAP_RTOL)) & (eps_cap < kcap) & ~pinned & ~at_zero
    free = ~at_zero & ~at_cap & ~pinned
    dG = -cfg.sigma / eta**2 + cfg.gamma * float(a @ upsi)
    kink = at_cap & (np.abs(eps_cap - kcap) <= 1e-9 * kcap)
    eps_held = at_cap & (eps_cap < kcap) & ~kink
    if free.any():
        tau = float(np.median(g[free]))
    else:
        lo_t = float(g[at_cap].max()) if at_cap.any() else -np.inf
        hi_t = float(g[at_zero].min()) if at_zero.any() else np.inf
        tau = lo_t if np.isfinite(lo_t) else hi_t
        held_a = float(a[eps_held].sum())
        if held_a > 0 and np.isfinite(lo_t):
            tau0 = (float((g[eps_held] * a[eps_held]).sum()) - dG * eta) / held_a
            tau = float(np.clip(tau0, lo_t, hi_t))
    viol = np.zeros_like(g)
    viol[free] = np.abs(g[free] - tau)
    viol[at_zero] = np.maximum(tau - g[at_zero], 0.0)
    viol[at_cap] = np.maximum(g[at_cap] - tau, 0.0)
    r_a = float(viol.max()) / (1.0 + abs(tau))
    dG += float(((tau - g[eps_held]) * a[eps_held]).sum()) / eta
    if kink.any():
        share = float((np.maximum(tau - g[kink], 0.0) * a[kink]).sum()) / eta
        dG = min(max(0.0, dG), dG + share)
    return float(np.linalg.norm(gw)), r_a, dG


def test_logistic_value_and_derivative_equal_the_loss() -> None:
    rng = np.random.default_rng(0)
    z = np.concatenate([rng.normal(scale=5.0, size=500), [0.0, 40.0, -40.0, 800.0]])
    y = np.where(rng.random(z.size) < 0.5, -1.0, 1.0)
    value, deriv = logistic_value_slope(z, y)
    loss = LogisticLoss()
    np.testing.assert_allclose(value, loss.value(z, y), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(deriv, loss.derivative(z, y), rtol=1e-14, atol=1e-300)


def test_profile_slope_from_the_solvers_losses() -> None:
    """The η polish's ``dP/dη`` uses the losses the Newton solver kept with its
    solution (no pass over ``X``): the same slope and a-residual as from ``X w``."""
    linear, _, sol = _case(3, True, "default")
    solved = solve_at_eta(linear, sol.eta, w0=sol.w, a0=sol.a)
    assert solved.losses is not None
    full = _block_conditions(linear, solved, None)
    lean = _block_conditions(linear, solved, None, with_gradient=False)
    assert lean[0] == 0.0
    assert lean[1] == pytest.approx(full[1], rel=1e-9, abs=1e-14)
    assert lean[2] == pytest.approx(full[2], rel=1e-9, abs=1e-12)
    assert profile_slope(linear, solved) == lean[2]


def test_block_conditions_from_the_solvers_gradient() -> None:
    """The KKT check takes ``∇_w G`` from the Newton solver's final ``∇F(w)`` (the
    envelope theorem) where it kept one: the same residuals as from ``X``."""
    linear, _, sol = _case(5, True, "default")
    solved = solve_at_eta(linear, sol.eta, w0=sol.w, a0=sol.a, tol=1e-3)
    assert solved.gradient is not None
    recomputed = dataclasses.replace(solved, gradient=None, losses=None)
    got = _block_conditions(linear, solved, None)
    ref = _block_conditions(linear, recomputed, None)
    assert ref[0] > 0.0  # a loose tolerance: the gradient is not zero
    assert got[0] == pytest.approx(ref[0], rel=1e-8, abs=1e-13)
    assert got[1] == pytest.approx(ref[1], rel=1e-9, abs=1e-14)
    assert got[2] == pytest.approx(ref[2], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_residual_of_free_weights_from_either_extreme(seed: int) -> None:
    """Every weight free and no ε cap: the residual is the larger of the distances
    from the median to the largest and to the smallest ``g_i``, whichever side it
    falls on (the compiled pass reads it from the extremes)."""
    linear, _, sol = _case(seed, True, "default", capped=False)
    m = linear.m
    kcap = linear.cfg.k / m
    a = np.full(m, 0.5 * min(kcap, 1.0 / m))
    a[: m // 2] *= 1.5  # free, inside (0, k/m), not summing to 1: a residual
    losses = np.random.default_rng(seed).normal(size=m)
    losses[seed % m] = -50.0 if seed % 2 else 50.0  # one far extreme, either side
    inner = dataclasses.replace(sol, a=a)
    got = _block_conditions(linear, inner, losses)
    ref = _numpy_conditions(linear, inner, losses)
    assert got[1] == pytest.approx(ref[1], rel=1e-12)
    assert got[2] == pytest.approx(ref[2], rel=1e-12, abs=1e-12)
    assert ref[1] > 1.0  # the far extreme sets it


def _ulp_values(
    rng: np.random.Generator, start: float, span: int, n: int
) -> np.ndarray:
    """``n`` draws from the ``span + 1`` consecutive floats from ``start`` up."""
    grid = [start]
    for _ in range(span):
        grid.append(float(np.nextafter(grid[-1], np.inf)))
    return rng.choice(np.array(grid), size=n)


@pytest.mark.parametrize("seed", range(4))
def test_median_of_values_a_few_ulps_apart_is_numpys(seed: int) -> None:
    """The a-block residual's ``τ`` where the free ``g_i`` differ by a few ulps (an
    optimum's): counted ranks give NumPy's median to the bit, for odd and even
    counts, negative values, values around ±0, spans up to and beyond the counted
    one, and with a stray value or a NaN among them (the selection then)."""
    rng = np.random.default_rng(seed)
    starts = [83.94612514, -1.5, 0.0, -0.0, -2e-323, 1e-300, 2.0**-30]
    for trial in range(400):
        n = int(rng.integers(1, 40))
        x = _ulp_values(rng, starts[trial % len(starts)], int(rng.integers(0, 12)), n)
        if trial % 9 == 0:
            x[rng.integers(n)] = rng.normal()  # a spread beyond a few ulps
        if trial % 23 == 0 and n > 1:
            x[rng.integers(n)] = np.nan
        finite = x[~np.isnan(x)]
        lo, hi = float(finite.min()), float(finite.max())
        padded = np.concatenate([x, rng.normal(size=3)])  # read only x[:n]
        got = median(padded, n, lo, hi)
        want = float(np.median(x))
        if np.isnan(want):
            # NumPy's median propagates a NaN; the compiled selection, like the
            # kernel's before, orders it as it falls (either is a non-number or a value)
            continue
        assert got == want or (got == 0.0 and want == 0.0), (x, got, want)


def test_median_counts_ranks_only_within_a_few_ulps() -> None:
    """The counted path covers a span of ``FEW_ULPS`` floats and no more."""
    rng = np.random.default_rng(7)
    for span in (0, 1, FEW_ULPS, FEW_ULPS + 1, 40):
        x = _ulp_values(rng, 1.0, span, 101)
        x[:2] = [1.0, x.max()]
        assert median(x, x.size, float(x.min()), float(x.max())) == np.median(x)


def test_eta_cap_top_and_caps_from_the_extremes_equal_the_quotients() -> None:
    """``eta_cap_top`` is ``min(hi, eta_cap_limit)`` and ``caps_at`` is
    ``min(k/m, ε^max/η)`` to the bit, where the extremes settle them (no finite
    cap, caps far above the line) and where they do not (a cap at or just below the
    line, zero weights and caps, a NaN)."""
    rng = np.random.default_rng(11)
    for trial in range(300):
        m = int(rng.integers(1, 30))
        a = rng.dirichlet(np.ones(m)) * (rng.random(m) < 0.8)
        eps = rng.uniform(0.1, 3.0, m) * 10.0 ** rng.integers(-3, 3)
        kind = trial % 6
        if kind == 0:
            eps[:] = np.inf
        elif kind == 1:
            eps[rng.integers(m)] = 0.0
        elif kind == 2:
            a[:] = 0.0
        elif kind == 3:
            eps[rng.integers(m)] = np.nan
        hi = float(10.0 ** rng.uniform(-2, 2))
        if kind == 4 and np.any(a > 0):  # the line itself: min ε/a exactly hi
            j = int(np.flatnonzero(a > 0)[0])
            hi = float(eps[j] / a[j])
        want = min(hi, eta_cap_limit(eps, a))
        got = eta_cap_top(eps, a, hi)
        assert got == want or (np.isnan(got) and np.isnan(want)), (trial, got, want)
        kcap, eta = float(rng.uniform(0.01, 0.5)), float(10.0 ** rng.uniform(-2, 2))
        if kind == 5:  # the least ε^max right at the line
            eps[rng.integers(m)] = kcap * eta
        with np.errstate(invalid="ignore"):
            ref = np.minimum(kcap, eps / eta)
            ref = np.where(np.isnan(eps), kcap, ref)  # Python's min(k, NaN) is k
        np.testing.assert_array_equal(caps_at(kcap, eps, eta), ref)
