"""Hyperparameter selection on validation data and the trade-off curve (spec §4.3)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from market.datasets import SyntheticData, make_synthetic
from mechanisms import MechanismConfig, UniformPrior
from mechanisms.allocation import allocate
from mechanisms.tuning import (
    TradeoffPoint,
    myerson_total_fn,
    public_validation_error,
    select_hyperparameters,
    tradeoff_curve,
)
from mechanisms.tuning._hyperparameters import default_grid, expected_payment

LOW, HIGH = 0.1, 0.5
PRIOR = UniformPrior(LOW, HIGH)
CFG = MechanismConfig(gamma=0.05, lam=1e-2, mu=1.0, sigma=300.0, k=4, eps_avg_max=20)
GRID = {"lam": [1e-3, 1e-2], "mu": [0.3, 3.0], "sigma": [30.0, 300.0]}


def _instance(
    rng: np.random.Generator, m: int = 60
) -> tuple[SyntheticData, np.ndarray, np.ndarray]:
    train = make_synthetic(
        m, 3, cost_low=LOW, cost_high=HIGH, label_noise=0.05, random_state=rng
    )
    val = make_synthetic(300, 3, random_state=rng)
    y_val = np.where(val.X @ train.w_true >= 0, 1.0, -1.0)  # the same separator
    return train, val.X, y_val


def _hand_expected_payment(costs: np.ndarray, eps: np.ndarray) -> float:
    """``Σ Ψ_i ε_i`` with the uniform prior's ``Ψ(c) = 2c − p`` written out."""
    return float(np.sum((2.0 * costs - LOW) * eps))


def test_selection_picks_the_brute_force_minimum(rng: np.random.Generator) -> None:
    tr, Xv, yv = _instance(rng)
    sel = select_hyperparameters(
        tr.X, tr.y, tr.costs, PRIOR, CFG, X_val=Xv, y_val=yv, grid=GRID,
        n_draws=5, random_state=11,
    )  # fmt: skip
    scores = {}
    for lam, mu, sigma in itertools.product(GRID["lam"], GRID["mu"], GRID["sigma"]):
        cfg = CFG.with_(lam=lam, mu=mu, sigma=sigma)
        alloc = allocate(tr.X, tr.y, tr.costs, PRIOR, cfg)
        err = public_validation_error(alloc, Xv, yv, n_draws=5, random_state=11)
        pay = _hand_expected_payment(tr.costs, np.asarray(alloc.weights) * alloc.eta)
        scores[(lam, mu, sigma)] = err + CFG.gamma * pay
    best = min(scores, key=lambda k: scores[k])
    assert (sel.cfg.lam, sel.cfg.mu, sel.cfg.sigma) == best
    assert sel.best.score == pytest.approx(scores[best], rel=1e-9)
    assert len(sel.rows) == 8
    for row in sel.rows:
        assert row.score == pytest.approx(
            scores[(row.lam, row.mu, row.sigma)], rel=1e-9
        )
    assert sel.payment_kind == "expected"
    assert sel.cfg.gamma == CFG.gamma


def test_payment_fn_replaces_the_expected_payment_in_the_score(
    rng: np.random.Generator,
) -> None:
    """A payment ``10⁴/σ`` makes the largest ``σ`` win: at ``γ = 0.05`` the scores
    payment parts differ by more than 1, more than any two error rates can."""
    tr, Xv, yv = _instance(rng, m=40)
    calls: list[float] = []

    def pay(X: Any, y: Any, costs: Any, prior: Any, cfg: Any, alloc: Any) -> float:
        calls.append(cfg.sigma)
        return 1e4 / cfg.sigma

    grid = {"sigma": [100.0, 300.0, 1000.0]}
    sel = select_hyperparameters(
        tr.X, tr.y, tr.costs, PRIOR, CFG, X_val=Xv, y_val=yv,
        grid=grid, n_draws=2, random_state=3, payment_fn=pay,
    )  # fmt: skip
    assert calls == grid["sigma"]
    assert sel.cfg.sigma == 1000.0
    assert sel.payment_kind == "payment_fn"
    for row in sel.rows:
        assert row.total_payment == pytest.approx(1e4 / row.sigma)
        assert row.score == pytest.approx(row.validation_error + 0.05 * 1e4 / row.sigma)


def test_tradeoff_payments_fall_and_error_rises_with_gamma(
    rng: np.random.Generator,
) -> None:
    """Expected payment: for the exact minimiser of ``F + γP``, ``P`` is
    non-increasing in ``γ`` (swap the optimality inequalities of two ``γ``), so it is
    checked at 1e-6 relative. Error: each point averages 100 noise draws, so its
    standard error is at most 0.5/√100 = 0.05; the expected gap between ``γ = 10⁻²``
    (ε_avg ≈ 6) and ``γ = 10²`` (ε_avg ≈ 0.06, a nearly random direction, error → 0.5)
    is ≥ 0.25 on this instance, i.e. > 3.5 standard errors of the difference: the test
    fails spuriously with probability < 1e-3 (normal approximation)."""
    tr, Xv, yv = _instance(rng)
    gammas = [1e-2, 1e-1, 1.0, 10.0, 1e2]
    pay_pts = tradeoff_curve(
        tr.X, tr.y, tr.costs, PRIOR, CFG, gammas=gammas, X_val=Xv, y_val=yv,
        grid={}, n_draws=1, random_state=rng, myerson=False,
    )  # fmt: skip
    pays = [p.expected_payment for p in pay_pts]
    assert all(b <= a * (1 + 1e-6) for a, b in itertools.pairwise(pays))
    assert pays[-1] < 0.05 * pays[0]
    assert all(p.total_payment is None for p in pay_pts)
    ends = tradeoff_curve(
        tr.X, tr.y, tr.costs, PRIOR, CFG, gammas=[1e-2, 1e2], X_val=Xv, y_val=yv,
        grid={}, n_draws=100, random_state=rng, myerson=False,
    )  # fmt: skip
    assert ends[1].validation_error > ends[0].validation_error


def test_tradeoff_points_report_total_payment_and_map_to_dicts(
    rng: np.random.Generator,
) -> None:
    tr, Xv, yv = _instance(rng, m=30)
    seen: list[tuple[int, int]] = []
    pts = tradeoff_curve(
        tr.X, tr.y, tr.costs, PRIOR, CFG, gammas=[0.1, 1.0], X_val=Xv, y_val=yv,
        grid={"mu": [0.3, 3.0]}, n_draws=2, random_state=5,
        payment_fn=lambda X, y, c, p, cfg, alloc: 2.0 * expected_payment(alloc),
        progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    for p in pts:
        assert isinstance(p, TradeoffPoint)
        assert p.total_payment == pytest.approx(2.0 * p.expected_payment)
        d = dict(p)
        assert {
            "gamma",
            "validation_error",
            "total_payment",
            "expected_payment",
        } <= set(d)
        assert d["mu"] == p.cfg.mu
        assert d["gamma"] == p.cfg.gamma


def test_default_grid_brackets_the_config_and_bad_input_is_named() -> None:
    g = default_grid(CFG)
    assert g["lam"] == pytest.approx([1e-3, 1e-2, 1e-1])
    assert default_grid(CFG.with_(mu=0.0))["mu"] == [0.0]
    X = np.array([[0.5, 0.0], [-0.5, 0.0]])
    y = np.array([1.0, -1.0])
    c = np.array([0.2, 0.3])
    kw: dict[str, Any] = {"X_val": X, "y_val": y, "n_draws": 1, "random_state": 0}
    with pytest.raises(ValueError, match="grid"):
        select_hyperparameters(X, y, c, PRIOR, CFG, grid={"gamma": [1.0]}, **kw)
    with pytest.raises(ValueError, match="grid"):
        select_hyperparameters(X, y, c, PRIOR, CFG, grid={"mu": []}, **kw)
    with pytest.raises(ValueError, match="lam"):
        select_hyperparameters(X, y, c, PRIOR, CFG, grid={"lam": [-1.0]}, **kw)
    with pytest.raises(ValueError, match="gammas"):
        tradeoff_curve(X, y, c, PRIOR, CFG, gammas=[], myerson=False, **kw)
    with pytest.raises(ValueError, match="gammas"):
        tradeoff_curve(X, y, c, PRIOR, CFG, gammas=[-1.0], myerson=False, **kw)


@pytest.mark.slow
def test_myerson_total_fn_reports_the_myerson_total(rng: np.random.Generator) -> None:
    """With :func:`myerson_total_fn` the point's ``total_payment`` is
    ``myerson_payments``'s total for the chosen configuration, and individually rational:
    ``Σ t_i ≥ Σ c_i ε_i^total``."""
    from concurrent.futures import ThreadPoolExecutor

    from mechanisms import myerson_payments

    tr, Xv, yv = _instance(rng, m=8)
    with ThreadPoolExecutor(1) as ex:
        (pt,) = tradeoff_curve(
            tr.X, tr.y, tr.costs, PRIOR, CFG, gammas=[CFG.gamma], X_val=Xv, y_val=yv,
            grid={}, n_draws=2, random_state=1, payment_fn=myerson_total_fn(executor=ex),
        )  # fmt: skip
        ref = myerson_payments(tr.X, tr.y, tr.costs, PRIOR, pt.cfg, executor=ex)
    alloc = allocate(tr.X, tr.y, tr.costs, PRIOR, pt.cfg)
    assert pt.total_payment == pytest.approx(ref.total, rel=1e-6)
    assert pt.total_payment >= float(tr.costs @ alloc.epsilon_total) * (1 - 1e-6)


def test_default_total_payment_calls_myerson_total_at_the_chosen_point(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``myerson=True`` (the default): ``total_payment`` comes from
    ``payments.myerson_total`` with the chosen configuration, the caps and the chosen
    allocation as the base (stubbed here; the real total is checked in the slow test)."""
    import mechanisms.tuning._hyperparameters as selection

    tr, Xv, yv = _instance(rng, m=20)
    caps = np.full(20, 50.0)
    seen: list[tuple[Any, ...]] = []

    def stub(X: Any, y: Any, costs: Any, prior: Any, cfg: Any, eps_max: Any, **kw: Any):
        seen.append((cfg, eps_max, kw["base"]))
        return 123.0

    monkeypatch.setattr(selection, "myerson_total", stub)
    (pt,) = tradeoff_curve(
        tr.X, tr.y, tr.costs, PRIOR, CFG, gammas=[0.1], X_val=Xv, y_val=yv,
        grid={"mu": [0.3, 3.0]}, n_draws=2, random_state=2, eps_max=caps,
    )  # fmt: skip
    assert pt.total_payment == 123.0
    ((cfg, eps_max, base),) = seen
    assert cfg == pt.cfg
    assert eps_max is caps
    np.testing.assert_allclose(base.weights, allocate(
        tr.X, tr.y, tr.costs, PRIOR, pt.cfg, caps).weights, atol=1e-8)  # fmt: skip
