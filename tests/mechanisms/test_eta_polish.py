"""The compiled ``η`` polish takes the Python loop's steps, to the bit.

:func:`mechanisms.allocation._eta_search._polish` runs
:func:`mechanisms.allocation._eta_polish.polish_kernel` where it applies (logistic loss,
``μ > 0``, no noise term) and its own loop otherwise or where the kernel hands back.
"""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import MechanismConfig
from mechanisms.allocation import _eta_polish, _eta_search
from mechanisms.allocation._block_solver import BlockSolution, solve_at_eta
from mechanisms.allocation._eta_search import _polish, eta_bounds, solve_allocation
from mechanisms.allocation._logistic_kernel import logistic_pass
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range._certify import effective_problem
from mechanisms.allocation._reduced_newton import hessian_at

CFG = MechanismConfig(
    gamma=1.0, lam=1e-2, mu=1.0, sigma=1.0, k=2.0, n_grid=12, certify="raise_lambda"
)


def instance(seed: int, m: int, cfg: MechanismConfig, capped: bool = False) -> Problem:
    rng = np.random.default_rng(seed)
    d = 3
    X = rng.normal(size=(m, d))
    X /= 1.2 * np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ np.ones(d) + 0.3 * rng.normal(size=m) >= 0, 1.0, -1.0)
    psi = 2.0 * rng.uniform(0.02, 0.6, size=m)
    eps_max = np.full(m, np.inf)
    if capped:  # binding ε^max caps: the η-step stops at min ε_i^max/a_i
        eps_max[: m // 2] = rng.uniform(0.002, 0.02, size=m // 2)
    return Problem(X, y, psi, eps_max, cfg)


def key(sol: BlockSolution) -> tuple[object, ...]:
    return (
        sol.eta, sol.search_value, sol.w.tobytes(), sol.a.tobytes(), sol.iterations,
        sol.converged,
    )  # fmt: skip


CONFIGS = [
    CFG,
    CFG.with_(gamma=5.0, lam=0.1, mu=5.0, sigma=5.0, k=5.0),
    CFG.with_(gamma=50.0, mu=30.0, sigma=0.05, k=20.0),
]


def starts(prob: Problem) -> list[tuple[BlockSolution, float, float]]:
    """Points the polish starts from: the solved optimum's ``η`` moved by factors
    up to 3, each a fixed-``η`` solve (as the search's best point is)."""
    eff, _ = effective_problem(prob)
    base = solve_allocation(eff)
    bounds = eta_bounds(eff)
    assert bounds is not None
    lo, hi = bounds
    out = []
    for f in (1.0, 1.001, 0.9, 1.5, 0.33, 3.0):
        eta = float(np.clip(base.eta * f, lo, hi))
        out.append((solve_at_eta(eff, eta, w0=base.w, a0=base.weights), lo, hi))
    return out


def base_hessian(prob: Problem) -> np.ndarray:
    """``∇²F`` at the solved optimum (a payment job's frozen Hessian)."""
    eff, _ = effective_problem(prob)
    base = solve_allocation(eff)
    return hessian_at(eff, base.eta, base.w, base.weights)


@pytest.mark.parametrize("frozen", [False, True])
def test_compiled_polish_is_the_python_loop(
    frozen: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same point (``η``, value, ``w`` and ``a`` to the bit, iterations,
    convergence) from starts near and far from the optimum, with and without binding
    ``ε^max`` caps, with and without chord steps on a frozen Hessian; the kernel
    itself takes the steps in most of them."""
    steps: list[int] = []
    real = _eta_polish.polish_kernel

    def spy(*args: object) -> tuple[object, ...]:
        out = real(*args)  # type: ignore[arg-type]
        steps.append(int(out[1]) if out[0] == _eta_polish.POLISH_DONE else -1)
        return out

    monkeypatch.setattr(_eta_search, "polish_kernel", spy)
    n = moved = 0
    for j, cfg in enumerate(CONFIGS):
        for capped in (False, True):
            prob = instance(j, 40, cfg, capped)
            eff, _ = effective_problem(prob)
            H0 = base_hessian(prob) if frozen else None
            for start, lo, hi in starts(prob):
                steps.clear()
                got = _polish(eff, start, lo, hi, hessian0=H0)
                moved += bool(steps) and steps[0] > 0
                with monkeypatch.context() as mp:
                    mp.setattr(_eta_search, "_compiled_polish", lambda *a: None)
                    ref = _polish(eff, start, lo, hi, hessian0=H0)
                assert key(got) == key(ref), (j, capped, start.eta)
                n += 1
    assert moved >= n // 2  # the kernel took the steps itself


def test_a_hand_back_runs_the_python_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    prob = instance(1, 30, CONFIGS[1])
    eff, _ = effective_problem(prob)
    start, lo, hi = starts(prob)[3]
    with monkeypatch.context() as mp:
        mp.setattr(_eta_search, "_compiled_polish", lambda *a: None)
        ref = _polish(eff, start, lo, hi)

    def hand_back(*args: object) -> tuple[object, ...]:
        return (_eta_polish.POLISH_HANDBACK, 0, 0.0, *([None] * 10))

    monkeypatch.setattr(_eta_search, "polish_kernel", hand_back)
    assert key(_polish(eff, start, lo, hi)) == key(ref)


def test_psi_dot_is_numpys_product() -> None:
    """The kernel's ``Ψᵀa`` is NumPy's ``psi @ a`` to the bit (both BLAS ``ddot``), so
    the η-step agrees across the two loops."""
    rng = np.random.default_rng(0)
    for n in (1, 7, 31, 399, 4096, 10_001):
        for _ in range(20):
            psi, a = rng.random(n), rng.random(n)
            assert _eta_polish.psi_dot(psi, a) == float(psi @ a)


@pytest.mark.parametrize("frozen", [False, True])
def test_solve_and_polish_is_the_solve_then_the_polish(
    frozen: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One compiled call for a payment re-solve's first fixed-``η`` solve (from a new
    ``w``, the a-step warm from given multipliers) and its polish: the point the two
    Python calls give, to the bit, with and without chord steps on a frozen Hessian
    (which then change the iterates: the frozen Hessian is used)."""
    done = []
    real = _eta_polish.solve_and_polish_kernel

    def spy(*args: object) -> tuple[object, ...]:
        out = real(*args)  # type: ignore[arg-type]
        done.append(out[0] == _eta_polish.POLISH_DONE)
        return out

    monkeypatch.setattr(_eta_search, "solve_and_polish_kernel", spy)
    n = differ = 0
    for j, cfg in enumerate(CONFIGS):
        for capped in (False, True):
            prob = instance(j, 40, cfg, capped)
            eff, _ = effective_problem(prob)
            H0 = base_hessian(prob) if frozen else None
            for start, lo, hi in starts(prob):
                w0 = start.w * 1.01  # a new point: its margins are computed afresh
                got = _eta_search.solve_and_polish(
                    eff, start.eta, w0=w0, a0=start.a, state=start.state, lo=lo, hi=hi,
                    hessian0=H0,
                )  # fmt: skip
                first = solve_at_eta(
                    eff, start.eta, w0=w0, a0=start.a, state=start.state, hessian0=H0
                )
                with monkeypatch.context() as mp:
                    mp.setattr(_eta_search, "_compiled_polish", lambda *a: None)
                    ref = _polish(eff, first, lo, hi, hessian0=H0)
                assert key(got) == key(ref), (j, capped, start.eta)
                if frozen:
                    exact = _eta_search.solve_and_polish(
                        eff, start.eta, w0=w0, a0=start.a, state=start.state, lo=lo,
                        hi=hi,
                    )  # fmt: skip
                    differ += key(exact) != key(got)
                n += 1
    assert len(done) == n * (2 if frozen else 1)
    assert sum(done) >= n // 2
    assert not frozen or differ >= n // 2


def test_solve_and_polish_from_given_losses_is_the_same_solve() -> None:
    """Given ``(Xw₀, ℓ, ℓ', ℓ'')`` at the start (a payment re-solve from the base's
    ``w``), the compiled solve skips that pass and returns the same point to the
    bit, at virtual costs other than those the losses were formed with; other losses
    give another point (they are used)."""
    n = 0
    for j, cfg in enumerate(CONFIGS):
        prob = instance(j, 40, cfg)
        eff, _ = effective_problem(prob)
        for start, lo, hi in starts(prob)[:3]:
            w0 = start.w * 1.01
            z = eff.X @ w0
            losses, dl, d2, _ = logistic_pass(z, eff.y, 0.0, eff.psi)
            raised = eff.with_seller_psi(int(np.argmax(start.a)), 3.0)
            kw: dict[str, object] = {
                "w0": w0, "a0": start.a, "state": start.state, "lo": lo, "hi": hi,
            }  # fmt: skip
            polish = _eta_search.solve_and_polish
            ref = polish(raised, start.eta, **kw)  # type: ignore[arg-type]
            given = (z, losses, dl, d2)
            got = polish(raised, start.eta, losses0=given, **kw)  # type: ignore[arg-type]
            assert key(got) == key(ref)
            # other losses give another first solve (a range of one point: no
            # polish step, whose solves recompute the losses, follows it)
            pin = {**kw, "lo": start.eta, "hi": start.eta}
            one = polish(raised, start.eta, **pin)  # type: ignore[arg-type]
            other = (z, losses * 1.5, dl, d2)
            off = polish(raised, start.eta, losses0=other, **pin)  # type: ignore[arg-type]
            assert key(off) != key(one)
            n += 1
    assert n == 3 * len(CONFIGS)


def test_the_kernels_block_conditions_are_the_python_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled re-solve returns the a-block residual and profile slope at its
    point; they are what :func:`_eta_search._block_conditions` computes there afresh
    (to the bit, capped and uncapped), and the KKT check reads them instead of
    passing over the weights again."""
    outs: list[tuple[object, ...]] = []
    real = _eta_polish.solve_and_polish_kernel

    def spy(*args: object) -> tuple[object, ...]:
        out = real(*args)  # type: ignore[arg-type]
        outs.append(out)
        return out

    monkeypatch.setattr(_eta_search, "solve_and_polish_kernel", spy)
    # the module's one-entry cache, this test's own (it writes to it below)
    monkeypatch.setattr(_eta_search, "_LAST_CONDITIONS", [None])
    n = 0
    for j, cfg in enumerate(CONFIGS):
        for capped in (False, True):
            prob = instance(j, 40, cfg, capped)
            eff, _ = effective_problem(prob)
            for start, lo, hi in starts(prob):
                outs.clear()
                _eta_search.solve_and_polish(
                    eff, start.eta, w0=start.w * 1.01, a0=start.a, state=start.state,
                    lo=lo, hi=hi,
                )  # fmt: skip
                out = outs[0]
                sol = _eta_search._kernel_solution(out[:13])
                if sol is None:
                    continue
                _eta_search._LAST_CONDITIONS[0] = None
                fresh = _eta_search._block_conditions(eff, sol, None)
                assert (fresh[1], fresh[2]) == (out[13], out[14]), (j, capped)
                # the cached pair is read back, with the solver's gradient
                assert _eta_search._block_conditions(eff, sol, None) == fresh
                n += 1
    assert n >= 10
    # a wrong cached pair would be read: the cache is what the KKT check uses
    prob = instance(0, 40, CFG)
    eff, _ = effective_problem(prob)
    start, lo, hi = starts(prob)[0]
    outs.clear()
    _eta_search.solve_and_polish(
        eff, start.eta, w0=start.w * 1.01, a0=start.a, state=start.state, lo=lo, hi=hi
    )
    sol = _eta_search._kernel_solution(outs[0][:13])
    assert sol is not None
    assert sol.losses is not None
    _eta_search._LAST_CONDITIONS[0] = (eff, sol, sol.losses, 0.5, -7.0)
    assert _eta_search._block_conditions(eff, sol, None)[1:] == (0.5, -7.0)
