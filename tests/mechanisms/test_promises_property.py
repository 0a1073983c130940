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

import logging
import math
import time
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
from mechanisms.money import MAX_UNITS, fits_budget, to_minor
from mechanisms.payments._executors import SerialExecutor

LOG = logging.getLogger(__name__)
SERIAL = SerialExecutor()
UNIT = "0.01"
N_FAST = 60
N_FULL = 10_000
N_CHUNKS = 4
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


def payment_is_infinite(ins: dict[str, Any]) -> bool:
    """Whether the caps ``a_i ≤ k/m`` force weight on a seller whose cost is infinite,
    so that the mechanism refuses to pay (``docs/money-and-settings.md``; no lifetime
    caps here): every seller over an unbounded support when ``(m − 1)·k/m < 1`` (its
    threshold payment is infinite), or the sellers reporting where ``Ψ = ∞`` when the
    others cannot hold all the weight and ``γ > 0`` (every allocation costs ``∞``)."""
    m, k = len(ins["costs"]), float(ins["cfg"].k)
    if not math.isfinite(float(ins["prior"].high)):
        return (m - 1) * k < m
    psi = np.asarray(ins["prior"].virtual_cost(ins["costs"]), dtype=float)
    n_top = int(np.isinf(psi).sum())  # with γ = 0 an infinite Ψ costs nothing
    return n_top > 0 and ins["cfg"].gamma > 0 and (m - n_top) * k < m


def check_instance(ins: dict[str, Any], rng: np.random.Generator) -> dict[str, float]:
    """Pay one instance and check the promises; returns what was measured.

    Two outcomes other than payment are documented refusals, each predicted here
    independently of the code under test: an infinite payment (refused up front with
    a ``ValueError`` naming ``cfg.k``) and a payment beyond what the ledger counts in
    cents (it fits no budget, and paying it is a ``ValueError`` naming the amount).
    """
    args = (ins["X"], ins["y"], ins["costs"], ins["prior"], ins["cfg"])
    if payment_is_infinite(ins):
        with pytest.raises(ValueError, match=r"cfg\.k: .*infinite"):
            myerson_payments(*args, executor=SERIAL)
        return {"refused_infinite": 1.0}
    pay = myerson_payments(*args, executor=SERIAL)
    eps = pay.epsilon
    u = eps if ins["cfg"].u == "linear" else eps ** ins["cfg"].p
    owed = ins["costs"] * u
    # The float Myerson payment itself meets IR up to its stated tolerance.
    shortfall = float(np.max(np.maximum(owed - pay.payments, 0.0) / (1.0 + owed)))
    owed_units = [
        math.ceil(Decimal(repr(float(v))) / Decimal(UNIT))
        for v in np.maximum(pay.payments, owed)
    ]
    if max(owed_units) > MAX_UNITS:
        with pytest.raises(ValueError, match="beyond what the ledger can count"):
            pay.units(UNIT)
        assert not fits_budget(pay.payments, 1e16, UNIT, epsilon=eps)
        return {"beyond_ledger": 1.0, "float_shortfall": shortfall}
    n = pay.units(UNIT)
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
    """Check ``n`` instances drawn from ``seed``; the worst of what was measured, the
    counts of each outcome and the slowest instance's seconds. Every instance runs: a
    failed assertion or an exception is collected, and all of them fail the test at
    the end."""
    rng = np.random.default_rng(seed)
    failures: list[str] = []
    worst = {
        "min_utility": math.inf,
        "float_shortfall": 0.0,
        "paid": 0.0,
        "refused_infinite": 0.0,
        "beyond_ledger": 0.0,
        "slowest_seconds": 0.0,
    }
    for j in range(n):
        ins = random_instance(rng)
        t0 = time.perf_counter()
        try:
            got = check_instance(ins, rng)
            if j % CHOOSE_EVERY == 0 and "refused_infinite" not in got:
                check_choice(ins, rng)
        except (Exception, pytest.fail.Exception) as exc:  # every failure, not the first
            failures.append(f"seed {seed}, instance {j}: {type(exc).__name__}: {exc}")
            continue
        if "min_utility" in got:
            worst["paid"] += 1
            worst["min_utility"] = min(worst["min_utility"], got["min_utility"])
        for outcome in ("refused_infinite", "beyond_ledger"):
            worst[outcome] += got.get(outcome, 0.0)
        worst["float_shortfall"] = max(
            worst["float_shortfall"], got.get("float_shortfall", 0.0)
        )
        worst["slowest_seconds"] = max(
            worst["slowest_seconds"], time.perf_counter() - t0
        )
    LOG.info("seed %d, %d instances: %s", seed, n, worst)
    assert not failures, "\n".join(failures)[:20_000]
    return worst


def test_money_promises_on_random_instances(rng: np.random.Generator) -> None:
    worst = run(N_FAST, int(rng.integers(2**31)))
    assert worst["min_utility"] >= 0
    # The float payments meet IR before rounding to within the payments' rtol.
    assert worst["float_shortfall"] <= 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(N_CHUNKS))
def test_money_promises_on_ten_thousand_instances(
    rng: np.random.Generator, chunk: int
) -> None:
    """``N_FULL`` instances in ``N_CHUNKS`` chunks of their own seeds, so that two
    processes can share them (node ids ``…_instances[0]`` to ``[3]``)."""
    seeds = rng.integers(2**31, size=N_CHUNKS + 1)[1:]  # [0] is the fast test's
    worst = run(N_FULL // N_CHUNKS, int(seeds[chunk]))
    assert worst["paid"] > 0
    assert worst["min_utility"] >= 0
    assert worst["float_shortfall"] <= 1e-5
