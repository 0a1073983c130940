"""Property test of the money promises over random instances (``docs/money-and-settings.md``):
every prior family (including densities that vanish at the support's edge), random
settings in the accepted ranges (``SETTING_RANGES``), reports at the edges, budgets
tight and loose. Promised: every seller's utility in whole units paid is ``≥ 0``,
``Σ paid ≤ budget`` in whole units whenever the budget check passes, and no exception.

The default run draws ``N_FAST`` instances (about a minute: extreme settings such as
``λ = 10⁵`` take up to 40 s an instance); the ``slow`` variant 10⁴. Settings are the
linear utility's (the power utility's allocations are not certified, so a market
refuses to pay for them: ``tests/api/test_promises_api.py``).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from mechanisms import (
    BetaPrior,
    CostPrior,
    EmpiricalPrior,
    ExponentialPrior,
    GaussianMixturePrior,
    LogNormalPrior,
    MechanismConfig,
    TruncatedNormalPrior,
    UniformPrior,
    choose_gamma,
    myerson_payments,
)
from mechanisms.config import SETTING_RANGES
from mechanisms.money import fits_budget, to_minor
from mechanisms.payments._executors import SerialExecutor

SERIAL = SerialExecutor()
UNIT = "0.01"
N_FAST = 60
N_FULL = 10_000
CHOOSE_EVERY = 30  # every so many instances also choose γ for a tight budget


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def random_prior(rng: np.random.Generator) -> CostPrior:
    """One of the seven families with random parameters (Beta with ``b > 1`` has a
    density vanishing at its top: ``Ψ(high) = ∞``)."""
    family = int(rng.integers(7))
    low = float(rng.choice([0.0, _log_uniform(rng, 1e-4, 0.5)]))
    width = _log_uniform(rng, 1e-3, 10.0)
    if family == 0:
        return UniformPrior(low, low + width)
    if family == 1:
        return ExponentialPrior(_log_uniform(rng, 0.1, 100.0))
    if family == 2:
        mean = low + width * rng.uniform(-0.5, 1.5)
        return TruncatedNormalPrior(
            mean, width * rng.uniform(0.05, 2.0), low, low + width
        )
    if family == 3:
        return BetaPrior(rng.uniform(0.5, 5.0), rng.uniform(0.5, 5.0), low, low + width)
    if family == 4:
        return LogNormalPrior(rng.uniform(-3.0, 1.0), rng.uniform(0.1, 1.5))
    if family == 5:
        k = int(rng.integers(1, 4))
        w = rng.dirichlet(np.ones(k))
        means = low + width * rng.uniform(0.1, 0.9, k)
        stds = width * rng.uniform(0.05, 0.5, k)
        return GaussianMixturePrior(
            tuple(float(v) for v in w),
            tuple(float(v) for v in means),
            tuple(float(v) for v in stds),
            low,
            low + width,
        )
    bids = low + width * rng.uniform(0.0, 1.0, int(rng.integers(5, 40)))
    return EmpiricalPrior(
        tuple(float(b) for b in bids), width * rng.uniform(0.02, 0.3), low, low + width
    )


def random_config(rng: np.random.Generator, prior: CostPrior) -> MechanismConfig:
    """Settings drawn log-uniformly over the accepted ranges (``0`` with some
    probability where ``0`` is allowed; ``γ = 0`` only on a bounded support)."""

    def draw(name: str, p_zero: float = 0.0) -> float:
        lo, hi = SETTING_RANGES[name]
        if lo == 0.0:
            if rng.random() < p_zero:
                return 0.0
            lo = hi * 1e-12
        return _log_uniform(rng, lo, hi)

    bounded = math.isfinite(float(prior.high))
    return MechanismConfig(
        gamma=draw("gamma", 0.1 if bounded else 0.0),
        lam=draw("lam"),
        mu=draw("mu", 0.2),
        sigma=draw("sigma", 0.2),
        k=draw("k"),
        eps_avg_max=draw("eps_avg_max"),
        mode=str(rng.choice(["default", "strict"])),  # type: ignore[arg-type]
        n_grid=8,
    )


def random_instance(rng: np.random.Generator) -> dict[str, Any]:
    m = int(rng.integers(2, 7))
    X = rng.normal(size=(m, 2))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ rng.normal(size=2) + 0.3 * rng.normal(size=m) >= 0, 1.0, -1.0)
    if np.unique(y).size < 2:
        y[0] = -y[0]
    prior = random_prior(rng)
    costs = np.asarray(prior.sample(m, rng=rng), dtype=float)
    if math.isfinite(float(prior.high)) and rng.random() < 0.25:
        costs[int(rng.integers(m))] = float(prior.high)  # a report at the edge
    if rng.random() < 0.25:
        costs[int(rng.integers(m))] = float(prior.low)
    return {
        "X": X,
        "y": y,
        "costs": costs,
        "prior": prior,
        "cfg": random_config(rng, prior),
    }


def check_instance(ins: dict[str, Any], rng: np.random.Generator) -> dict[str, float]:
    """Pay one instance and check the promises; returns what was measured."""
    pay = myerson_payments(
        ins["X"], ins["y"], ins["costs"], ins["prior"], ins["cfg"], executor=SERIAL
    )
    n = pay.units(UNIT)
    eps = pay.epsilon
    u = eps if ins["cfg"].u == "linear" else eps ** ins["cfg"].p
    owed = ins["costs"] * u
    # IR in whole units, exactly: n_i·unit ≥ c_i·u(ε_i) (decimal of the float).
    utility = [
        Decimal(int(k)) * Decimal(UNIT) - Decimal(float(o))
        for k, o in zip(n, owed, strict=True)
    ]
    assert min(utility) >= 0, (ins, n, owed)
    assert ((n >= 1) == (eps > 0)).all()
    total = int(n.sum())
    for budget_units in (max(total - int(rng.integers(0, 3)), 0), 2 * total + 1):
        budget = budget_units / 100
        fits = fits_budget(
            pay.payments,
            budget,
            UNIT,
            privacy_costs=pay.privacy_costs,
            epsilon=pay.epsilon,
        )
        assert fits == (total <= to_minor(budget, UNIT))
        if fits:
            assert Decimal(total) * Decimal(UNIT) <= Decimal(repr(budget))
    # The float Myerson payment itself meets IR up to its stated tolerance.
    shortfall = float(np.max(np.maximum(owed - pay.payments, 0.0) / (1.0 + owed)))
    return {"min_utility": float(min(utility)), "float_shortfall": shortfall}


def check_choice(ins: dict[str, Any], rng: np.random.Generator) -> None:
    """``choose_gamma`` with a tight budget: what it pays fits in whole units."""
    kw = {
        "budget": 1e9,
        "X_val": ins["X"],
        "y_val": ins["y"],
        "gamma_range": (1e-2, 1e2),
        "n_gamma": 3,
        "n_refine": 1,
        "n_draws": 1,
        "executor": SERIAL,
        "random_state": 0,
    }
    loose = choose_gamma(
        ins["X"], ins["y"], ins["costs"], ins["prior"], ins["cfg"], **kw
    )
    paid = sorted(p.total_paid for p in loose.points if math.isfinite(p.total_paid))
    if not paid:  # no candidate's payments were computed
        return
    budget = float(paid[len(paid) // 2]) + float(rng.uniform(0.0, 0.02))
    out = choose_gamma(
        ins["X"],
        ins["y"],
        ins["costs"],
        ins["prior"],
        ins["cfg"],
        **(kw | {"budget": budget}),
    )
    if out.status == "ok":
        assert out.payments is not None
        units = sum(round(float(v) * 100) for v in out.payments)
        assert units <= to_minor(budget, UNIT)
        assert Decimal(units) * Decimal(UNIT) <= Decimal(repr(budget))


def run(n: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    worst = {"min_utility": math.inf, "float_shortfall": 0.0}
    for j in range(n):
        ins = random_instance(rng)
        got = check_instance(ins, rng)
        worst["min_utility"] = min(worst["min_utility"], got["min_utility"])
        worst["float_shortfall"] = max(worst["float_shortfall"], got["float_shortfall"])
        if j % CHOOSE_EVERY == 0:
            check_choice(ins, rng)
    return worst


def test_money_promises_on_random_instances(rng: np.random.Generator) -> None:
    worst = run(N_FAST, int(rng.integers(2**31)))
    assert worst["min_utility"] >= 0
    # The float payments meet IR before rounding to within the payments' rtol.
    assert worst["float_shortfall"] <= 1e-5


@pytest.mark.slow
def test_money_promises_on_ten_thousand_instances(rng: np.random.Generator) -> None:
    worst = run(N_FULL, int(rng.integers(2**31)))
    assert worst["min_utility"] >= 0
    assert worst["float_shortfall"] <= 1e-5
