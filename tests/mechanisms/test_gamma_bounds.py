"""γ for a budget from costs and public data, at a bounded cost (spec mechanism.md §4.3,
§4.4, §5).

- The payment identity's bounds ``c_i u(ε_i) ≤ t_i ≤ c̄ u(ε_i)`` hold against exact
  Myerson payments.
- No release inside ``choose_gamma``, ``select_hyperparameters`` or ``tradeoff_curve``
  is given a private record: every row a release sees is a validation row.
- The bounded search makes at most ``max_exact`` payment computations and, with enough
  of them, returns exactly the choice of the exhaustive search (exact payments at every
  point) on the same grid.
- A chosen γ that leaves the budget unspent says why.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from market.datasets import make_synthetic
from mechanisms import MechanismConfig, UniformPrior, allocate, myerson_payments
from mechanisms.money import to_minor_units
from mechanisms.payments._executors import SerialExecutor
from mechanisms.tuning import _gamma_for_budget as gfb
from mechanisms.tuning import (
    choose_gamma,
    public_validation_error,
    select_hyperparameters,
    tradeoff_curve,
)
from mechanisms.tuning._gamma_for_budget import payment_bounds
from mechanisms.tuning._validation_error import logistic_release

SERIAL = SerialExecutor()
PRIOR = UniformPrior(0.1, 0.5)
CFG = MechanismConfig(gamma=0.05, lam=1e-2, mu=1.0, sigma=300.0, k=4, eps_avg_max=20)


@pytest.fixture
def market(rng: np.random.Generator) -> tuple[Any, np.ndarray, np.ndarray]:
    train = make_synthetic(24, 3, cost_low=0.1, cost_high=0.5, random_state=rng)
    val = make_synthetic(60, 3, random_state=rng)
    y_val = np.where(val.X @ train.w_true >= 0, 1.0, -1.0)
    return train, val.X, y_val


def test_payment_identity_bounds_hold_against_exact_payments(market) -> None:
    tr, _, _ = market
    for gamma in (0.01, 1.0):
        cfg = CFG.with_(gamma=gamma)
        alloc = allocate(tr.X, tr.y, tr.costs, PRIOR, cfg)
        pay = myerson_payments(
            tr.X, tr.y, tr.costs, PRIOR, cfg, executor=SERIAL, base=alloc
        )
        low, high = payment_bounds(alloc, tr.costs, PRIOR)
        # hand-written: u(ε) = ε, c̄ = 0.5 (the prior's top)
        eps = np.asarray(alloc.epsilon_total)
        np.testing.assert_allclose(low, tr.costs * eps)
        np.testing.assert_allclose(high, 0.5 * eps)
        tol = 1e-6 * max(1.0, float(pay.payments.max()))
        assert np.all(pay.payments >= low - tol)
        assert np.all(pay.payments <= high + tol)
        assert pay.total > low.sum() + tol  # not trivially equal to the lower bound


def _private_rows_seen(calls: list[np.ndarray], X_private: np.ndarray) -> int:
    """How many release calls saw at least one private row."""
    rows = {tuple(r) for r in np.round(X_private, 12)}
    return sum(any(tuple(r) in rows for r in np.round(X, 12)) for X in calls)


def test_no_release_sees_a_private_record(market) -> None:
    """Every array a release is fitted on consists of validation rows (a spy on the
    release); the old search fitted ``n_draws`` releases per γ on the sellers' rows."""
    tr, Xv, yv = market
    calls: list[np.ndarray] = []

    def spy(X: np.ndarray, y: np.ndarray, allocation: Any, rng: Any) -> Any:
        calls.append(np.array(X, copy=True))
        assert X.shape[0] == tr.X.shape[0]  # one proxy row per seller
        return logistic_release(X, y, allocation, rng)

    common = {"X_val": Xv, "y_val": yv, "n_draws": 2, "release": spy}
    choose_gamma(
        tr.X, tr.y, tr.costs, PRIOR, CFG, budget=1e6, gamma_range=(0.01, 1.0),
        n_gamma=3, n_refine=0, executor=SERIAL, random_state=0, **common,
    )  # fmt: skip
    select_hyperparameters(
        tr.X, tr.y, tr.costs, PRIOR, CFG, grid={"mu": [0.3, 3.0]}, random_state=0,
        **common,
    )  # fmt: skip
    tradeoff_curve(
        tr.X, tr.y, tr.costs, PRIOR, CFG, gammas=[0.1, 1.0], grid={},
        myerson=False, random_state=0, **common,
    )  # fmt: skip
    assert len(calls) >= 2 * (3 + 2 + 2)
    assert _private_rows_seen(calls, tr.X) == 0
    val_rows = {tuple(r) for r in np.round(Xv, 12)}
    for X in calls:
        assert all(tuple(r) in val_rows for r in np.round(X, 12))


def test_public_error_scores_on_the_half_it_did_not_fit(market) -> None:
    """Cross-fitting: a release that memorises its training rows (predicts the label
    of the nearest training row) is scored only on rows it did not see, so its error
    is that of 1-nearest-neighbour, not 0."""
    tr, Xv, yv = market
    alloc = allocate(tr.X, tr.y, tr.costs, PRIOR, CFG)

    class Memo:
        def __init__(self, X: np.ndarray, y: np.ndarray) -> None:
            self.X, self.y = X, y

        def predict(self, Z: np.ndarray) -> np.ndarray:
            d = ((Z[:, None, :] - self.X[None, :, :]) ** 2).sum(-1)
            hit = d.min(axis=1) < 1e-24
            assert not hit.any(), "a scored row was among the fitted rows"
            return self.y[d.argmin(axis=1)]

    err = public_validation_error(
        alloc, Xv, yv, n_draws=4, random_state=1,
        release=lambda X, y, a, rng: Memo(X, y),
    )  # fmt: skip
    assert 0.0 < err < 0.5


def _count_payments(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    seen: list[float] = []
    real = gfb.myerson_payments

    def counting(*args: Any, **kw: Any) -> Any:
        if kw.get("sellers") is None:  # full computations (not the sample's)
            seen.append(float(args[4].gamma))
        return real(*args, **kw)

    monkeypatch.setattr(gfb, "myerson_payments", counting)
    return seen


BOUNDED_KW = {
    "gamma_range": (0.003, 3.0), "n_gamma": 5, "n_refine": 0, "n_draws": 3,
    "executor": SERIAL, "random_state": 4,
}  # fmt: skip


@pytest.fixture(scope="module")
def exhaustive() -> tuple[Any, np.ndarray, np.ndarray, Any]:
    """A market and the exhaustive search on it: exact payments at every γ."""
    rng = np.random.default_rng(2024)
    tr = make_synthetic(24, 3, cost_low=0.1, cost_high=0.5, random_state=rng)
    val = make_synthetic(60, 3, random_state=rng)
    yv = np.where(val.X @ tr.w_true >= 0, 1.0, -1.0)
    full = choose_gamma(
        tr.X, tr.y, tr.costs, PRIOR, CFG, budget=1e9, exact="all",
        X_val=val.X, y_val=yv, **BOUNDED_KW,
    )  # fmt: skip
    return tr, val.X, yv, full


@pytest.mark.parametrize(
    "budget_share",
    [
        0.05,
        pytest.param(0.3, marks=pytest.mark.slow),
        pytest.param(0.9, marks=pytest.mark.slow),
    ],
)
def test_bounded_search_matches_the_exhaustive_one(
    exhaustive, monkeypatch: pytest.MonkeyPatch, budget_share: float
) -> None:
    """The exhaustive choice, written out: the affordable point (floor to cents,
    summed) of least validation error, then least paid, then least γ."""
    tr, Xv, yv, full = exhaustive
    totals = [p.total for p in full.points]
    lo, hi = min(totals), max(totals)
    budget = round(lo + 0.01 + budget_share * (hi - lo), 2)
    fits = [
        p
        for p in full.points
        if int(p.payments.units(0.01).sum()) <= round(budget * 100)
    ]
    want = min(fits, key=lambda p: (p.validation_error, p.total_paid, p.gamma))
    kw = {"X_val": Xv, "y_val": yv, **BOUNDED_KW}
    seen = _count_payments(monkeypatch)
    wide = choose_gamma(
        tr.X, tr.y, tr.costs, PRIOR, CFG, budget=budget, max_exact=5, **kw
    )
    assert (wide.status, wide.gamma) == ("ok", want.gamma)
    assert len(seen) == wide.n_exact <= 5
    seen.clear()
    tight = choose_gamma(tr.X, tr.y, tr.costs, PRIOR, CFG, budget=budget, **kw)
    assert len(seen) == tight.n_exact <= 2
    assert tight.status == "ok"
    assert tight.payment_result is not None
    paid = int(tight.payment_result.units(0.01).sum())
    assert paid <= round(budget * 100)
    assert tight.total_payment == pytest.approx(paid / 100)
    assert tight.validation_error >= want.validation_error
    # the bounds' verdicts agree with the exact totals
    exact = {p.gamma: p for p in full.points}
    for p in tight.points:
        q = exact[p.gamma]
        if p.decided != "maybe":
            assert (p.decided == "yes") == (q.total_paid <= budget + 1e-9)


def test_the_money_rule_is_the_callers(market) -> None:
    """``minor_units`` decides affordability: a rule that charges one extra unit per
    seller makes a budget that exactly fits the floor rule unaffordable."""
    tr, Xv, yv = market
    kw = {
        "X_val": Xv, "y_val": yv, "gamma_range": (0.1, 1.0), "n_gamma": 2,
        "n_refine": 0, "n_draws": 1, "executor": SERIAL, "random_state": 0,
        "exact": "all",
    }  # fmt: skip
    ref = choose_gamma(tr.X, tr.y, tr.costs, PRIOR, CFG, budget=1e9, **kw)
    cheapest = min(p.total_paid for p in ref.points)
    floor = choose_gamma(tr.X, tr.y, tr.costs, PRIOR, CFG, budget=cheapest, **kw)
    assert floor.status == "ok"
    up = choose_gamma(
        tr.X, tr.y, tr.costs, PRIOR, CFG, budget=cheapest,
        minor_units=lambda p: to_minor_units(p, 0.01) + (np.asarray(p) > 0),
        **kw,
    )  # fmt: skip
    assert up.status == "nothing_affordable"


@pytest.mark.parametrize(
    ("settings", "caps", "reason"),
    [
        ({"eps_avg_max": 0.5}, None, "too_few_sellers"),
        ({"eps_avg_max": 20.0}, 0.05, "seller_caps"),
    ],
)
def test_an_unspent_budget_says_why(
    market, settings: dict[str, float], caps: float | None, reason: str
) -> None:
    tr, Xv, yv = market
    cfg = CFG.with_(**settings)
    eps_max = None if caps is None else np.full(tr.X.shape[0], caps)
    out = choose_gamma(
        tr.X, tr.y, tr.costs, PRIOR, cfg, budget=1000.0, X_val=Xv, y_val=yv,
        eps_max=eps_max, gamma_range=(1e-3, 1.0), n_gamma=3, n_refine=0,
        n_draws=2, executor=SERIAL, random_state=0,
    )  # fmt: skip
    assert out.status == "ok"
    assert out.total_payment < 100.0
    if out.reason == "no_gain":  # a smaller γ was as accurate: it also hits the cap
        pytest.fail(f"expected {reason}, got {out.note}")
    assert out.reason == reason, out.note
    assert out.note is not None
    assert "1000.00 budget" in out.note
