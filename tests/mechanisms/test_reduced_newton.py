"""Newton on the reduced objective ``F(w) = min_a G(w, a, η)``
(:mod:`mechanisms.allocation._reduced_newton`).

The exact ``∇²F`` (the fused, row-gathering Gram product with the a-sensitivity term)
is checked against central differences of ``∇F`` — with and without a free set, across
several Gram blocks, and where ``∇²F`` is indefinite — and the compiled Cholesky solve
against LAPACK's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from numba.core import types

from mechanisms import MechanismConfig
from mechanisms.allocation import _reduced_newton as rn
from mechanisms.allocation._problem import Problem

CFG = MechanismConfig(gamma=1.0, lam=1e-2, mu=10.0, sigma=100.0, k=4.0)


def _problem(m: int, d: int, seed: int, *, eps_max: float = np.inf) -> Problem:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d)) / np.sqrt(d)
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=m) > 0, 1.0, -1.0)
    psi = rng.uniform(0.0, 2e-3, m)
    return Problem(X=X, y=y, psi=psi, eps_max=np.full(m, eps_max), cfg=CFG)


def _fd_hessian(prob: Problem, eta: float, w: np.ndarray, p: rn._Point) -> np.ndarray:
    caps = prob.caps(eta)
    step = 1e-6
    cols = []
    for j in range(w.size):
        e = np.zeros(w.size)
        e[j] = step
        gp = rn._gradient(prob, eta, rn._evaluate(prob, eta, w + e, p.state, caps))
        gm = rn._gradient(prob, eta, rn._evaluate(prob, eta, w - e, p.state, caps))
        cols.append((gp - gm) / (2 * step))
    return np.array(cols).T


@pytest.mark.parametrize(
    ("m", "seed", "eta", "eps_max"),
    [
        (300, 0, 3.0, np.inf),  # one Gram block
        # several blocks, a ragged last one
        (3 * rn.gram_block_rows(10**9, 8) + 17, 1, 3.0, np.inf),
        (2000, 2, 50.0, np.inf),  # most weights at their caps
        (2000, 3, 3.0, 2e-3),  # caps ε_max/η below k/m
    ],
)
def test_hessian_matches_differences_of_the_gradient(
    m: int, seed: int, eta: float, eps_max: float
) -> None:
    prob = _problem(m, 8, seed, eps_max=eps_max)
    caps = prob.caps(eta)
    w = np.random.default_rng(seed + 10).normal(size=8)
    p = rn._evaluate(prob, eta, w, None, caps, np.full(m, 1.0 / m))
    assert p.state is not None
    v = p.state.A - p.state.s * p.r
    assert np.count_nonzero((v > 0) & (v < caps)) > 0  # the free-set term is exercised
    H = rn._hessian(prob, eta, p, caps)
    np.testing.assert_allclose(H, H.T, rtol=0, atol=1e-12 * np.abs(H).max())
    fd = _fd_hessian(prob, eta, w, p)
    assert np.abs(H - fd).max() <= 1e-5 * np.abs(H).max()


def test_hessian_differs_from_the_w_block_alone() -> None:
    """The a-sensitivity term is present: dropping it (the plain weighted Gram matrix
    ``Σ a_i ℓ''_i x_i x_iᵀ + λI``) misses the differences of ``∇F``."""
    prob = _problem(2000, 6, 4)
    eta = 3.0
    caps = prob.caps(eta)
    w = np.random.default_rng(5).normal(size=6)
    p = rn._evaluate(prob, eta, w, None, caps, np.full(2000, 1.0 / 2000))
    assert p.d2 is not None
    Hw = (prob.X * (p.a * p.d2)[:, None]).T @ prob.X + CFG.lam * np.eye(6)
    H = rn._hessian(prob, eta, p, caps)
    fd = _fd_hessian(prob, eta, w, p)
    assert np.abs(H - fd).max() < 0.01 * np.abs(Hw - fd).max()


def test_cholesky_solve_agrees_with_lapack_and_refuses_indefinite() -> None:
    rng = np.random.default_rng(0)
    for d in (1, 5, 30):
        B = rng.normal(size=(d, d))
        H = B @ B.T + 0.1 * np.eye(d)
        g = rng.normal(size=d)
        ok, x = rn._cholesky_solve(H, g)
        assert ok
        np.testing.assert_allclose(x, np.linalg.solve(H, g), rtol=1e-9, atol=1e-12)
    H = np.diag([1.0, 2.0, -1e-3])
    assert not rn._cholesky_solve(H, np.ones(3))[0]
    assert not rn._cholesky_solve(np.full((2, 2), np.nan), np.ones(2))[0]
    assert rn._newton_step(H, np.ones(3)) is None


def test_newton_converges_to_a_stationary_point() -> None:
    prob = _problem(5000, 10, 6)
    eta = 3.0
    w, a, state, _, converged, value, losses, gradient = rn.newton_reduced(
        prob, eta, w0=np.zeros(10), state=None, gtol=1e-9, max_iter=200,
        a0=np.full(5000, 1.0 / 5000),
    )  # fmt: skip
    assert converged
    caps = prob.caps(eta)
    p = rn._evaluate(prob, eta, w, state, caps)
    g = rn._gradient(prob, eta, p)
    assert np.linalg.norm(g) <= 1e-9 * (1 + np.linalg.norm(w))
    np.testing.assert_allclose(p.value, value, rtol=1e-12)
    np.testing.assert_allclose(losses, prob.loss.value(prob.X @ w, prob.y), rtol=1e-13)
    # the gradient returned is ∇F at the returned w, as X recomputes it
    a_star = np.asarray(p.a)
    direct = (
        prob.X.T @ (a_star * prob.loss.derivative(prob.X @ w, prob.y))
        + prob.cfg.lam * w
    )
    np.testing.assert_allclose(gradient, direct, rtol=1e-6, atol=1e-12)
    assert abs(a.sum() - 1.0) < 1e-9
    assert np.all(a <= caps + 1e-15)


def _read_only_arrays(kernel: object) -> list[int]:
    """Positions of read-only array arguments in ``kernel``'s compiled signatures."""
    return [
        j
        for sig in kernel.signatures  # type: ignore[attr-defined]
        for j, t in enumerate(sig)
        if isinstance(t, types.Array) and not t.mutable
    ]


def test_read_only_starts_and_scenario_costs_reach_the_kernels_writable() -> None:
    """A result's weights (a payment re-solve's start) and the public scenarios' virtual
    costs are read-only arrays. numba specialises a kernel on each argument's
    writability, so passing them as they are compiled the solver a second time in each
    process, at a first order's first payment (seconds). The solver copies them
    (``d`` and ``m`` floats): the kernels only ever see a writable Ψ and ``w``."""
    from mechanisms import allocate, myerson_payments
    from mechanisms.allocation._range._candidate_range import scenario_virtual_costs
    from mechanisms.priors import UniformPrior

    prob = _problem(400, 5, 11)
    w0 = np.zeros(5)
    w0.flags.writeable = False
    psi = prob.psi.copy()
    psi.flags.writeable = False
    prob = dataclasses.replace(prob, psi=psi, given_psi=None)
    sol = rn.newton_reduced(
        prob, 3.0, w0=w0, state=None, gtol=1e-9, max_iter=50,
        a0=np.full(400, 1.0 / 400),
    )  # fmt: skip
    # the payment re-solve's entry: a compiled solve and η polish from a result's w
    from mechanisms.allocation._eta_search import eta_bounds, solve_and_polish

    bounds = eta_bounds(prob)
    assert bounds is not None
    assert sol.state is not None
    w_start, a_start = sol.w.copy(), sol.a.copy()
    w_start.flags.writeable = a_start.flags.writeable = False
    solve_and_polish(
        prob, 3.0, w0=w_start, a0=a_start, state=sol.state, lo=bounds[0], hi=bounds[1]
    )
    rng = np.random.default_rng(12)
    X = rng.normal(size=(60, 4)) / 4.0
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=60) > 0, 1.0, -1.0)
    costs = rng.uniform(0.0, 1.0, 60)
    prior = UniformPrior(0.0, 1.0)
    assert not scenario_virtual_costs(prior, 60).flags.writeable  # the table is shared
    base = allocate(X, y, costs, prior, CFG)
    assert not base.w.flags.writeable
    myerson_payments(X, y, costs, prior, CFG, sellers=[0, 1], base=base)
    # Ψ and w's positions (the records may be read-only: an Instance freezes them,
    # consistently along its path)
    for kernel, at in ((rn._newton_kernel, {2, 10}), (rn._logistic_point, {3, 8})):
        assert kernel.signatures  # type: ignore[attr-defined]
        assert at.isdisjoint(_read_only_arrays(kernel))


def _python_loop_only(*args: object) -> tuple[object, ...]:
    """A stand-in for ``_newton_kernel`` that hands every iteration to the Python
    loop at once (its point, unbounded radius, iteration 0)."""
    w, z, losses, dl, d2, r, a, A, s, value = args[10:20]
    return (rn.NEWTON_HANDOFF, 0, np.inf, w, z, losses, dl, d2, r, a, A, s, value,
            np.zeros(0))  # fmt: skip


def _count_hessians(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    orig = rn._hessian

    def counted(*args: object) -> np.ndarray:
        calls[0] += 1
        return orig(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(rn, "_hessian", counted)
    return calls


def test_indefinite_start_reaches_the_minimiser_with_few_hessians(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From ``w = 0`` with a small ``μ`` (``∇²F`` indefinite there: the a-sensitivity
    dominates) the first trust radius is a gradient step. Internal doubling reaches the
    minimiser's scale on that iteration's model, so fewer Hessians are needed than
    with one doubling per iteration, and the minimiser is the same one. (Counted on
    the Python loop, whose iterations the compiled one repeats to the bit:
    :func:`test_compiled_newton_iterates_equal_the_python_loop`.)"""
    from market.datasets import load_wisconsin

    X, y = load_wisconsin()
    m = X.shape[0]
    cfg = MechanismConfig(gamma=0.1, lam=1e-2, mu=1.0, sigma=1e4, k=5.0)
    prob = Problem(X=X, y=y, psi=np.zeros(m), eps_max=np.full(m, np.inf), cfg=cfg)
    eta = 10.0 * m
    caps = prob.caps(eta)
    a0 = np.full(m, 1.0 / m)
    p0 = rn._evaluate(prob, eta, np.zeros(X.shape[1]), None, caps, a0)
    assert np.linalg.eigvalsh(rn._hessian(prob, eta, p0, caps))[0] < 0.0
    kw = {
        "w0": np.zeros(X.shape[1]),
        "state": None,
        "gtol": 1e-9,
        "max_iter": 100,
        "a0": a0,
    }
    compiled = rn.newton_reduced(prob, eta, **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(rn, "_newton_kernel", _python_loop_only)
    calls = _count_hessians(monkeypatch)
    fast = rn.newton_reduced(prob, eta, **kw)  # type: ignore[arg-type]
    # the compiled loop takes the same trust-region and doubling steps
    np.testing.assert_array_equal(compiled.w, fast.w)
    assert compiled.iterations == fast.iterations
    n_fast = calls[0]
    monkeypatch.setattr(rn, "MAX_DOUBLINGS", 0)
    calls[0] = 0
    plain = rn.newton_reduced(prob, eta, **kw)  # type: ignore[arg-type]
    n_plain = calls[0]
    assert fast.converged
    assert plain.converged
    assert n_fast < n_plain
    np.testing.assert_allclose(
        fast.w, plain.w, rtol=0, atol=1e-6 * np.linalg.norm(plain.w)
    )
    assert fast.value <= plain.value + 1e-12 * abs(plain.value)


def test_trust_region_step_solves_the_trust_region_subproblem() -> None:
    """The compiled step meets the Moré–Sorensen conditions of
    ``min gᵀs + ½sᵀHs, ‖s‖ ≤ Δ``: ``(H + νI)s = −g`` with ``H + νI ⪰ 0``, ``ν ≥ 0``
    and ``ν(Δ − ‖s‖) = 0``, on definite, indefinite and hard-case instances, and no
    point of the ball sampled at random has a lower model value."""
    rng = np.random.default_rng(5)
    kinds = {"interior": 0, "boundary": 0, "hard": 0}
    for t in range(600):
        d = int(rng.integers(1, 25))
        M = rng.normal(size=(d, d))
        H = M @ M.T + 0.1 * np.eye(d) if t % 3 == 0 else M + M.T
        e, V = np.linalg.eigh(H)
        g = rng.normal(size=d) * 10.0 ** rng.uniform(-4, 2)
        hard = t % 5 == 0 and d > 1 and e[0] < 0.0
        if hard:  # g ⟂ the lowest eigenvector, small: ‖s(ν)‖ < Δ as ν ↓ −e₁
            g = V[:, 1:] @ rng.normal(size=d - 1) * 1e-3
        radius = 10.0 ** rng.uniform(-3, 2)
        s, boundary = rn._trust_region_step(e, V, g, radius)
        norm = np.linalg.norm(s)
        assert norm <= radius * (1 + 1e-9)
        scale = 1.0 + np.abs(e).max()
        nu = 0.0 if not boundary else -float(s @ (H @ s + g)) / norm**2
        assert nu >= -1e-8 * scale
        assert e[0] + nu >= -1e-7 * scale  # H + νI ⪰ 0
        res = (H + nu * np.eye(d)) @ s + g
        assert np.linalg.norm(res) <= 1e-7 * (np.linalg.norm(g) + scale * norm)
        if boundary:
            assert norm == pytest.approx(radius, rel=1e-6), (t, hard, e[0])
        model = float(g @ s + 0.5 * s @ H @ s)
        for _ in range(20):
            u = rng.normal(size=d)
            u *= radius * rng.uniform() ** (1 / d) / np.linalg.norm(u)
            assert model <= float(g @ u + 0.5 * u @ H @ u) + 1e-9 * (1 + abs(model))
        kinds[
            "hard" if hard and boundary else "boundary" if boundary else "interior"
        ] += 1
    assert min(kinds.values()) >= 20, kinds


def test_a_fixed_eta_solve_stops_at_max_iter_with_a_descent() -> None:
    """``solve_at_eta(max_iter=k)`` (the candidate models' cap) returns the k-th
    iterate, marked not converged, never above the start's value; uncapped it runs on
    to the tolerance."""
    from mechanisms.allocation._block_solver import solve_at_eta

    prob = _problem(400, 6, 11)
    prob = Problem(prob.X, prob.y, prob.psi, prob.eps_max, CFG.with_(mu=1e-3, lam=1e-4))
    eta = 3.0
    caps = prob.caps(eta)
    w0 = np.zeros(6)
    a0 = np.minimum(np.full(prob.m, 1.0 / prob.m), caps)
    full = solve_at_eta(prob, eta, w0=w0, a0=a0)
    assert full.converged
    assert full.iterations > 3
    capped = solve_at_eta(prob, eta, w0=w0, a0=a0, max_iter=3)
    assert capped.iterations == 3
    assert not capped.converged
    start = rn._evaluate(prob, eta, w0, None, caps, a0).value
    assert full.search_value <= capped.search_value <= start


def test_mu_zero_solve_is_optimal_in_each_block() -> None:
    """With ``μ = 0`` (default mode) the fixed-η solve is the trust-region method on
    the piecewise-smooth ``F``: it must end where the LP fill at its losses gives
    its weights and ``w`` is the weighted ridge fit for those weights (both block
    conditions), with the weights on their caps."""
    from learners._newton import minimize_ridge_risk
    from mechanisms.allocation._block_solver import solve_at_eta
    from mechanisms.allocation._weights_step import fill_smallest

    for seed, k in ((0, 40.0), (1, 120.0), (2, 3.0)):
        base = _problem(400, 6, seed)
        prob = Problem(
            X=base.X, y=base.y, psi=base.psi, eps_max=base.eps_max,
            cfg=CFG.with_(mu=0.0, k=k, lam=1e-3),
        )  # fmt: skip
        eta = 2.0
        caps = prob.caps(eta)
        sol = solve_at_eta(
            prob, eta, w0=np.zeros(6), a0=np.full(400, 1.0 / 400), tol=1e-10
        )
        assert sol.converged
        r = prob.loss.value(prob.X @ sol.w, prob.y) + prob.cfg.gamma * eta * prob.psi
        np.testing.assert_array_equal(sol.a, fill_smallest(r, caps))
        fit = minimize_ridge_risk(prob.loss, prob.X, prob.y, sol.a, prob.cfg.lam)
        np.testing.assert_allclose(sol.w, fit.w, rtol=0, atol=1e-7)
        assert np.all(sol.a <= caps)
        assert sol.a.sum() == pytest.approx(1.0, abs=1e-12)


def test_factored_trust_region_step_agrees_with_the_eigendecomposition() -> None:
    """The step from factorisations of ``H + νI`` is the eigendecomposition's step
    (a model value no higher, to 1e-9; the step to 1e-5 relative — both stop at
    ``|‖s‖ − Δ| ≤ 1e-10 Δ``, which near ``ν = −λ_min`` leaves the direction less
    determined — and the same boundary flag) wherever it succeeds, succeeds on all but
    a few non-hard instances, and declines (never returns a wrong step) in the hard
    case, where the eigendecomposition's step takes over."""
    rng = np.random.default_rng(8)
    declined = {"hard": 0, "other": 0}
    counts = {"hard": 0, "other": 0}
    for t in range(1500):
        d = int(rng.integers(1, 32))
        M = rng.normal(size=(d, d))
        H = M @ M.T + 0.1 * np.eye(d) if t % 3 == 0 else M + M.T
        H *= 10.0 ** rng.uniform(-3, 3)
        e, V = np.linalg.eigh(H)
        g = rng.normal(size=d) * 10.0 ** rng.uniform(-4, 2)
        hard = t % 7 == 0 and d > 1 and e[0] < 0.0
        if hard:
            g = V[:, 1:] @ rng.normal(size=d - 1) * 1e-3
        radius = 10.0 ** rng.uniform(-3, 2)
        kind = "hard" if hard else "other"
        counts[kind] += 1
        ok, boundary, s = rn._trust_region_factored(H, g, radius)
        want, want_boundary = rn._trust_region_step(e, V, g, radius)
        if not ok:
            declined[kind] += 1
            continue
        assert boundary == want_boundary
        assert np.linalg.norm(s - want) <= 1e-5 * np.linalg.norm(want)
        assert np.linalg.norm(s) <= radius * (1 + 1e-9)
        model, best = _model_value(g, H, s), _model_value(g, H, want)
        assert model <= best + 1e-9 * (1 + abs(best))
    assert declined["other"] <= 0.05 * counts["other"], declined
    assert counts["hard"] >= 50


def _model_value(g: np.ndarray, H: np.ndarray, s: np.ndarray) -> float:
    return float(g @ s + 0.5 * s @ H @ s)


def test_model_steps_fall_back_to_the_eigendecomposition_in_the_hard_case() -> None:
    """``_Model.step`` returns the eigendecomposition's step where the
    factorisations decline (hard case) and diagonalises at most once."""
    H = np.diag([-1.0, 2.0, 3.0])
    g = np.array([0.0, 1e-3, -1e-3])  # ⟂ the lowest eigenvector
    model = rn._Model(H, g)
    s, boundary = model.step(2.0)
    assert boundary
    assert np.linalg.norm(s) == pytest.approx(2.0, rel=1e-9)
    e, V = np.linalg.eigh(H)
    want, _ = rn._trust_region_step(e, V, g, 2.0)
    np.testing.assert_allclose(s, want, rtol=1e-12, atol=1e-15)
    assert model.eig is not None


@pytest.mark.parametrize(
    ("m", "seed", "lam", "mu", "eta"),
    [
        (300, 0, 1e-2, 10.0, 3.0),  # a free set, positive definite throughout
        (400, 1, 1e-4, 1.0, 3.0),  # small λ: indefinite steps hand off to Python
        # several Gram blocks, caps
        (3 * rn.gram_block_rows(10**9, 8) + 5, 2, 1e-2, 10.0, 50.0),
        (500, 3, 1.0, 1e-3, 3.0),  # a tiny μ: nearly a linear programme
    ],
)
def test_compiled_newton_iterates_equal_the_python_loop(
    m: int,
    seed: int,
    lam: float,
    mu: float,
    eta: float,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled iterations (``_newton_kernel``) are the Python loop's operations
    in the same order — Newton steps, trust-region steps on indefinite Hessians,
    internal doubling: with the kernel handing every iteration to the loop instead,
    the solver returns the same point, value, gradient and iteration count, to the
    bit, from several starts."""
    prob = _problem(m, 8, seed)
    prob = Problem(prob.X, prob.y, prob.psi, prob.eps_max, CFG.with_(lam=lam, mu=mu))
    rng = np.random.default_rng(seed)
    starts = [np.zeros(8), rng.normal(size=8), 3.0 * rng.normal(size=8)]
    a0 = np.full(m, 1.0 / m)

    def solve() -> list[rn.NewtonSolution]:
        return [
            rn.newton_reduced(
                prob, eta, w0=w0, state=None, gtol=1e-9, max_iter=100, a0=a0
            )
            for w0 in starts
        ]

    compiled = solve()
    monkeypatch.setattr(rn, "_newton_kernel", _python_loop_only)
    loop = solve()
    for c, p in zip(compiled, loop, strict=True):
        assert c.iterations == p.iterations
        assert c.converged == p.converged
        assert c.value == p.value
        np.testing.assert_array_equal(c.w, p.w)
        np.testing.assert_array_equal(c.a, p.a)
        np.testing.assert_array_equal(c.gradient, p.gradient)
    assert any(c.converged for c in compiled)


def _raised_resolve(
    seed: int,
) -> tuple[Problem, float, rn.NewtonSolution, np.ndarray, dict[str, object]]:
    """A payment re-solve's setting: a base solved at its virtual costs, then one
    seller's ``Ψ_i`` raised and the solve restarted from the base's ``w``; with the
    base's own Hessian (what a payment job freezes)."""
    m, eta = 2000, 3.0
    prob = _problem(m, 8, seed)
    base = rn.newton_reduced(
        prob, eta, w0=np.zeros(8), state=None, gtol=1e-10, max_iter=100,
        a0=np.full(m, 1.0 / m),
    )  # fmt: skip
    assert base.converged
    i = int(np.argmax(base.a))
    raised = prob.with_seller_psi(i, 20.0 * float(prob.psi[i]) + 1e-2)
    H0 = rn.hessian_at(prob, eta, base.w, base.a)
    kw: dict[str, object] = {
        "w0": base.w, "state": base.state, "gtol": 1e-9, "max_iter": 100,
    }  # fmt: skip
    return raised, eta, base, H0, kw


@pytest.mark.parametrize("seed", [0, 1])
def test_a_frozen_base_hessian_replaces_the_first_gram_product(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the base's ``w`` with one ``Ψ_i`` raised, chord steps on the base's
    Hessian reach the exact-Hessian solve's minimiser (to the tolerance) without
    forming ``∇²F`` at all, in at most one iteration more; the compiled iterations
    take the Python loop's steps to the bit with it too."""
    raised, eta, base, H0, kw = _raised_resolve(seed)
    exact = rn.newton_reduced(raised, eta, **kw)  # type: ignore[arg-type]
    frozen = rn.newton_reduced(raised, eta, hessian0=H0, **kw)  # type: ignore[arg-type]
    assert exact.converged
    assert frozen.converged
    assert exact.iterations >= 1  # the start is not already a minimiser
    assert np.abs(exact.w - base.w).max() > 1e-6  # and the minimiser moved
    # both stop at the gradient tolerance: F is strongly convex here, so the two
    # points are within (‖∇F₁‖ + ‖∇F₂‖)/λ_min(∇²F) of each other
    H = rn.hessian_at(raised, eta, exact.w, exact.a)
    lam_min = float(np.linalg.eigvalsh(H)[0])
    assert lam_min > 0.0
    gap = (np.linalg.norm(exact.gradient) + np.linalg.norm(frozen.gradient)) / lam_min
    assert np.linalg.norm(frozen.w - exact.w) <= 1.01 * gap
    assert gap < 1e-5 * np.linalg.norm(exact.w)
    assert frozen.iterations <= exact.iterations + 1
    # the Python loop: the same steps as the compiled kernel, and no Hessian
    monkeypatch.setattr(rn, "_newton_kernel", _python_loop_only)
    calls = _count_hessians(monkeypatch)
    loop = rn.newton_reduced(raised, eta, hessian0=H0, **kw)  # type: ignore[arg-type]
    assert calls[0] == 0
    rn.newton_reduced(raised, eta, **kw)  # type: ignore[arg-type]
    assert calls[0] == exact.iterations
    assert loop.iterations == frozen.iterations
    assert loop.value == frozen.value
    np.testing.assert_array_equal(loop.w, frozen.w)
    np.testing.assert_array_equal(loop.gradient, frozen.gradient)


@pytest.mark.parametrize("scale", [-1.0, 1e-4])
def test_a_poor_frozen_hessian_leaves_the_solve_as_without_it(scale: float) -> None:
    """A frozen Hessian that is not positive definite (no step) or whose step
    overshoots (``F``'s actual decrease far from the predicted: rejected) leaves the
    solve exactly as without one: the same iterates to the bit."""
    raised, eta, _, H0, kw = _raised_resolve(2)
    poor = scale * np.eye(H0.shape[0]) * np.abs(np.diag(H0)).max()
    exact = rn.newton_reduced(raised, eta, **kw)  # type: ignore[arg-type]
    out = rn.newton_reduced(raised, eta, hessian0=poor, **kw)  # type: ignore[arg-type]
    assert out.converged
    assert out.iterations == exact.iterations
    assert out.value == exact.value
    np.testing.assert_array_equal(out.w, exact.w)


@pytest.mark.parametrize("eta", [0.3, 20.0])
def test_value_and_gradient_from_losses_equals_the_full_evaluation(eta: float) -> None:
    """A renewal from stored losses (no ``Xw``, no loss pass) gives the value,
    gradient and multipliers of a full evaluation to the bit, at other virtual costs
    than the point was solved for (a payment re-solve's); with a state the compiled
    a-step declines (forced caps) it falls back to the full evaluation."""
    prob = _problem(60, 8, 3)
    sol = rn.newton_reduced(prob, eta, w0=np.zeros(8), state=None, gtol=1e-9,
                            max_iter=100, a0=np.full(60, 1.0 / 60))  # fmt: skip
    losses, dl = rn.loss_pass(prob, sol.w)
    raised = prob.with_seller_psi(int(np.argmax(sol.a)), 5e-3)
    for p in (prob, raised):
        full = rn.value_and_gradient(p, eta, sol.w, sol.state)
        fast = rn.value_and_gradient_from_losses(p, eta, sol.w, sol.state, losses, dl)
        assert fast[0] == full[0]
        np.testing.assert_array_equal(fast[1], full[1])
        assert fast[2] is not None
        assert full[2] is not None
        assert (fast[2].A, fast[2].s) == (full[2].A, full[2].s)
    assert rn.value_and_gradient(raised, eta, sol.w, sol.state)[0] > sol.value
    # other losses than the point's give another value: the losses are used
    wrong = rn.value_and_gradient_from_losses(
        raised, eta, sol.w, sol.state, losses + 1e-3, dl
    )
    assert wrong[0] != rn.value_and_gradient(raised, eta, sol.w, sol.state)[0]
    # caps that force every weight (Σ h = 1): the kernel declines, the full path runs
    forced = Problem(prob.X, prob.y, prob.psi, prob.eps_max, CFG.with_(k=1.0))
    full = rn.value_and_gradient(forced, eta, sol.w, sol.state)
    fast = rn.value_and_gradient_from_losses(forced, eta, sol.w, sol.state, losses, dl)
    assert fast[0] == full[0]
    np.testing.assert_array_equal(fast[1], full[1])


def test_a_solve_from_the_last_solution_reuses_its_losses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next solve from the point the last one returned (the η polish's, a
    re-solve's at other virtual costs) takes ``Xw`` and the losses from it: no loss
    pass at the start, and the same solution, to the bit, as with nothing kept. Other
    labels or another ``w`` are not served from it."""
    prob = _problem(80, 6, 5)
    first = rn.newton_reduced(prob, 1.0, w0=np.zeros(6), state=None, gtol=1e-9,
                              max_iter=100, a0=np.full(80, 1.0 / 80))  # fmt: skip
    raised = prob.with_seller_psi(int(np.argmax(first.a)), 4e-3)
    passes: list[int] = []
    real = rn._logistic_point

    def counted(*args: object) -> object:
        passes.append(1)
        return real(*args)

    monkeypatch.setattr(rn, "_logistic_point", counted)

    def again() -> rn.NewtonSolution:
        return rn.newton_reduced(
            raised, 1.7, w0=first.w, state=first.state, gtol=1e-9, max_iter=100
        )

    rn._remember_losses(prob, rn._evaluate(prob, 1.0, first.w, first.state,
                                           prob.caps(1.0)))  # fmt: skip
    kept = again()
    assert kept.iterations > 0
    assert passes == []  # the start's (trial points run in the compiled loop)
    rn._LAST_LOSSES[0] = None
    passes.clear()
    fresh = again()
    assert len(passes) == 1
    assert kept.value == fresh.value
    np.testing.assert_array_equal(kept.w, fresh.w)
    np.testing.assert_array_equal(kept.gradient, fresh.gradient)
    # the memo holds the last solve's own point; other labels, another w: a miss
    assert rn._known_losses(raised, fresh.w) is not None
    flipped = Problem(prob.X, -prob.y, prob.psi, prob.eps_max, prob.cfg)
    assert rn._known_losses(flipped, fresh.w) is None
    assert rn._known_losses(raised, fresh.w + 1e-12) is None


@pytest.mark.parametrize("d", [1, 8, 20, 31, 100, 1000])
def test_gram_blocks_stay_near_the_cache_budget(d: int) -> None:
    """A block of the Hessian's Gram product holds ``rows·(2d + 3)`` floats: within
    the byte budget unless that would leave fewer than ``GRAM_BLOCK_MIN`` rows, never
    more than ``GRAM_BLOCK_MAX`` rows or the records themselves."""
    rows = rn.gram_block_rows(10**9, d)
    assert rn.GRAM_BLOCK_MIN <= rows <= rn.GRAM_BLOCK_MAX
    assert rows == rn.GRAM_BLOCK_MIN or 8 * rows * (2 * d + 3) <= rn.GRAM_BLOCK_BYTES
    above = 8 * (rows + 1) * (2 * d + 3) > rn.GRAM_BLOCK_BYTES
    assert rows == rn.GRAM_BLOCK_MAX or above
    assert rn.gram_block_rows(500, d) == 500
