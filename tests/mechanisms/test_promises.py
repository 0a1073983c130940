"""Promises to the cent (money rule, priors with an infinite virtual cost at the edge,
settings ranges, certificates): one regression test per item, each failing on the
code before the fix (``docs/money-and-settings.md``)."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from mechanisms import (
    BetaPrior,
    ExponentialPrior,
    GaussianMixturePrior,
    LogNormalPrior,
    MechanismConfig,
    UniformPrior,
    allocate,
    audit_incentives,
    audit_monotonicity,
    choose_gamma,
    myerson_payments,
)
from mechanisms.allocation._problem import Problem
from mechanisms.config import SETTING_RANGES
from mechanisms.money import fits_budget, payment_units, to_minor, total_units
from mechanisms.payments._executors import SerialExecutor
from mechanisms.payments._payments import never_excluded
from tests.mechanisms.test_payments_instances import small_instance

SERIAL = SerialExecutor()
EDGE = BetaPrior(2.0, 3.0, 0.1, 1.1)  # density 0 at the top: Ψ(1.1) = ∞


def _data(rng: np.random.Generator, m: int) -> tuple[np.ndarray, np.ndarray]:
    X = rng.normal(size=(m, 2))
    X /= 1.2 * np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ np.ones(2) + 0.3 * rng.normal(size=m) >= 0, 1.0, -1.0)
    return X, y


# --- 1. money: payments round up; IR holds in the units paid -----------------------


def test_a_seller_giving_privacy_is_paid_at_least_its_cost_in_whole_units() -> None:
    # Floors used to pay 0.00 for 0.004 and 0.29 for a cost of 0.2995.
    n = payment_units(
        [0.004, 0.2995, 0.0, 0.0],
        "0.01",
        privacy_costs=[0.003, 0.2995, 0.0, 0.0],
        epsilon=[0.5, 1.0, 1e-9, 0.0],
    )
    assert n.tolist() == [1, 30, 1, 0]
    # The IR floor wins over a payment that fell a hair below it numerically.
    assert payment_units([0.0299999], "0.01", privacy_costs=[0.0300001]).tolist() == [4]


def test_units_paid_on_a_real_instance_meet_ir_exactly(
    rng: np.random.Generator,
) -> None:
    ins = small_instance(rng, m=6)
    costs = ins.costs * 1e-3  # small costs: payments of a fraction of a cent
    pay = myerson_payments(ins.X, ins.y, costs, ins.prior, ins.cfg, executor=SERIAL)
    n = pay.units("0.01")
    won = pay.epsilon > 0
    assert won.any()
    assert (n[won] >= 1).all()
    assert (n[~won] == 0).all()
    for k, c, e in zip(n, costs, pay.epsilon, strict=True):
        # n·unit ≥ c·u(ε) exactly (decimal of the float c·ε; u linear here).
        assert Decimal(int(k)) * Decimal("0.01") >= Decimal(float(c * e))
    assert (pay.paid("0.01") >= pay.payments).all()


def test_budget_is_a_cap_rounded_down_and_payments_fit_in_units() -> None:
    assert to_minor(0.299, "0.01") == 29
    # Three sellers owed 0.101 each are paid 0.11 each: 33 units, not 30.
    assert int(payment_units([0.101] * 3, "0.01").sum()) == 33


# --- 2. priors: an infinite virtual cost at the support's edge ----------------------


def test_report_at_the_top_of_a_vanishing_density_gets_no_privacy(
    rng: np.random.Generator,
) -> None:
    X, y = _data(rng, 6)
    costs = rng.uniform(0.15, 0.6, 6)
    costs[0] = EDGE.high
    assert math.isinf(float(EDGE.virtual_cost(np.array([EDGE.high]))[0]))
    cfg = MechanismConfig(gamma=1.0, lam=1e-2, mu=1.0, sigma=1.0, k=2.0, n_grid=12)
    alloc = allocate(X, y, costs, EDGE, cfg)  # ZeroDivisionError before
    assert alloc.certified
    assert alloc.epsilon_total[0] == 0.0
    assert alloc.epsilon_total.sum() > 0
    pay = myerson_payments(X, y, costs, EDGE, cfg, executor=SERIAL)
    assert pay.payments[0] == 0.0
    assert np.isfinite(pay.payments).all()
    assert pay.rule_certified


def test_payment_sweeps_and_audits_reach_the_top_of_the_support(
    rng: np.random.Generator,
) -> None:
    X, y = _data(rng, 5)
    costs = rng.uniform(0.15, 0.5, 5)  # all inside: the sweeps evaluate Ψ(1.1) = ∞
    cfg = MechanismConfig(gamma=1.0, lam=1e-2, mu=1.0, sigma=1.0, k=2.0, n_grid=12)
    audit = audit_incentives(X, y, costs, EDGE, cfg, executor=SERIAL)
    assert audit.ir_min_utility >= 0.0
    assert audit.ic_regret_max <= 1e-4 * max(1.0, audit.max_payment)
    mono = audit_monotonicity(X, y, costs, EDGE, cfg, n_points=6, executor=SERIAL)
    assert mono.max_violation <= 1e-6


def test_problem_keeps_the_given_virtual_costs_for_resolves() -> None:
    cfg = MechanismConfig()
    X, y = np.eye(3), np.array([1.0, -1.0, 1.0])
    prob = Problem(X, y, np.array([0.5, math.inf, 1.0]), np.full(3, np.inf), cfg)
    assert np.isfinite(prob.psi).all()
    assert prob.eps_max[1] == 0.0
    # Seller 1 misreporting into the support gets its own cap back; seller 0 at ∞
    # is pinned.
    back = prob.with_seller_psi(1, 0.7)
    assert np.isinf(back.eps_max).all()
    out = prob.with_seller_psi(0, math.inf)
    assert out.eps_max[0] == 0.0
    assert out.eps_max[1] == 0.0


def test_a_resolve_problem_is_the_problem_of_its_virtual_costs() -> None:
    """``with_seller_psi`` skips the validation pass where nothing needs deriving
    (finite virtual costs before and after); it gives the problem a fresh
    construction gives, and still derives (or refuses) where something does."""
    cfg = MechanismConfig()
    X, y = np.eye(3), np.array([1.0, -1.0, 1.0])
    eps_max = np.array([np.inf, 2.0, np.inf])
    prob = Problem(X, y, np.array([0.5, 0.2, 1.0]), eps_max, cfg)
    for i, psi_i in ((1, 0.7), (0, 3.0), (2, math.inf)):
        got = prob.with_seller_psi(i, psi_i)
        psi = np.array([0.5, 0.2, 1.0])
        psi[i] = psi_i
        fresh = Problem(X, y, psi, eps_max, cfg)
        for name in ("psi", "eps_max", "given_psi", "given_eps_max"):
            np.testing.assert_array_equal(getattr(got, name), getattr(fresh, name))
    assert prob.with_seller_psi(2, math.inf).eps_max[2] == 0.0
    with pytest.raises(ValueError, match="seller 1"):
        prob.with_seller_psi(1, math.nan)


# --- 3. settings: the ranges the numerics can run -----------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [("lam", 5e-324), ("eps_avg_max", 1e-300), ("u_power", 8.67), ("gamma", 1e308)],
)
def test_settings_outside_the_numerics_ranges_are_refused_by_name(
    name: str, value: float
) -> None:
    with pytest.raises(ValueError, match=name):
        MechanismConfig(**{name: value})  # type: ignore[arg-type]


def test_settings_at_the_edges_of_the_ranges_allocate(rng: np.random.Generator) -> None:
    X, y = _data(rng, 5)
    costs = rng.uniform(0.15, 0.6, 5)
    for name in ("lam", "eps_avg_max"):
        for value in SETTING_RANGES[name]:
            alloc = allocate(X, y, costs, EDGE, MechanismConfig(**{name: value}))
            assert alloc.success, (name, value, alloc.message)
            assert np.isfinite(alloc.epsilon_total).all()


# --- 4. certificates ----------------------------------------------------------------


def test_a_seller_capped_at_zero_does_not_make_the_optimum_inaccurate(
    rng: np.random.Generator,
) -> None:
    # The a-block KKT residual counted a zero-capped seller as both at 0 and at its
    # cap and reported "optimal_inaccurate" for a certified optimum.
    X, y = _data(rng, 6)
    costs = rng.uniform(0.15, 0.6, 6)
    costs[2] = 1.05  # an expensive seller (Ψ = 42), pinned at a cap of 0
    caps = np.full(6, np.inf)
    caps[2] = 0.0
    cfg = MechanismConfig(gamma=1.0, lam=1e-2, mu=1.0, sigma=1.0, k=2.0, n_grid=12)
    alloc = allocate(X, y, costs, EDGE, cfg, caps)
    assert str(alloc.status) == "optimal", alloc.message
    assert alloc.kkt.a <= 1e-6
    assert alloc.epsilon_total[2] == 0.0


def test_an_amount_beyond_the_ledger_is_a_named_value_error() -> None:
    """A threshold payment can exceed what 64 bits count in cents (a seller never
    excluded on an unbounded prior); that is a ``ValueError`` naming the amount, not an
    ``OverflowError`` from NumPy."""
    with pytest.raises(ValueError, match=r"3e\+300 at index 1 is beyond"):
        payment_units([1.0, 3e300], "0.01")
    assert to_minor(1e15, "0.01") == 10**17


def test_an_amount_beyond_the_ledger_fits_no_budget() -> None:
    """The budget check sums whole units exactly: a payment beyond the ledger's range
    does not fit any budget the ledger holds (it is not an error, and int64 sums do
    not wrap around to a small total)."""
    big = [4e17, 4e17, 4e17]  # each 4e19 cents > 2^63; three of them wrap in int64
    assert not fits_budget(big, 9e16, "0.01")
    assert total_units(big, "0.01") == 3 * 4 * 10**19
    assert fits_budget([1.0, 2.0], 3.0, "0.01")
    assert not fits_budget([1.0, 2.001], 3.0, "0.01")


def test_choose_gamma_counts_amounts_beyond_the_ledger_as_unaffordable() -> None:
    """``choose_gamma``'s money rule meets upper bounds ``c̄·u(ε_i)`` far beyond the
    ledger (a wide prior, a large ``ε``); the market's rule raises on those, the
    budget comparison must not."""
    from mechanisms.money import to_minor_units
    from mechanisms.tuning._gamma_for_budget import _Money

    money = _Money(lambda p: to_minor_units(p, "0.01"), "0.01", cap=10**6)
    assert money.minor(np.array([1e20, 1.0]), epsilon=[1.0, 1.0]) > money.cap
    assert money.minor(np.array([1.0, 0.0]), epsilon=[1.0, 1.0]) == 101
    assert money.minor(np.array([1.0]), floor=[1e19]) > money.cap


@pytest.mark.parametrize(
    ("m", "k", "eps_max", "forced"),
    [
        (3, 1.0, None, [0, 1, 2]),  # a_i <= 1/3 on three sellers: all forced
        (3, 1.4, None, [0, 1, 2]),  # two others hold at most 2.8/3 < 1
        (3, 1.5, None, []),  # k = m/(m-1): the two others can hold all the weight
        (4, 1.4, [np.inf, 0.0, np.inf, np.inf], [0, 2, 3]),  # one capped at zero
        (4, 4.0, [np.inf, 0.0, 0.0, 0.0], [0]),  # the only seller with a cap
    ],
)
def test_a_seller_never_excluded_on_an_unbounded_prior_is_refused_up_front(
    rng: np.random.Generator,
    m: int,
    k: float,
    eps_max: list[float] | None,
    forced: list[int],
) -> None:
    """A seller the caps force weight onto has ``ε_i(s) ≥ δ > 0`` at every report, so
    its threshold payment over an unbounded support is infinite: refused before any
    sweep (the sweep ran to ``Ψ ~ 1e300`` and ended beyond int64 cents)."""
    X, y = _data(rng, m)
    costs = np.linspace(0.5, 1.5, m)
    cfg = MechanismConfig(k=k, n_grid=8)
    caps = np.full(m, np.inf) if eps_max is None else np.array(eps_max)
    prob = Problem(X, y, costs, caps, cfg)
    assert never_excluded(prob).tolist() == forced
    prior = ExponentialPrior(1.0)
    if forced:
        with pytest.raises(ValueError, match=r"cfg\.k: .*infinite"):
            myerson_payments(X, y, costs, prior, cfg, eps_max, executor=SERIAL)
    # A bounded support pays the same market (the integral stops at its top).
    bounded = UniformPrior(0.0, 2.0)
    pay = myerson_payments(X, y, costs, bounded, cfg, eps_max, executor=SERIAL)
    assert np.all(np.isfinite(pay.payments))
    for i in forced:
        assert pay.epsilon[i] > 0


def test_a_far_secant_step_of_the_eta_polish_is_clipped_without_overflow() -> None:
    """Found by the property test (λ ≈ 2.8e5, σ ≈ 1.6e-6): a secant step in ``log η``
    far beyond the range made ``exp`` overflow (a ``RuntimeWarning``, an error under
    the suite's warning filter) before it was clipped to ``η_hi``."""
    X = np.array(
        [[0.7239460115040955, -0.689856631791934], [-0.5008020659659583, 0.2640185246093325],
         [-0.42974154909354273, 0.7267760303373157], [0.11753000676408018, 0.9930693316732901],
         [-0.5778513258165408, -0.8161420496776685]]
    )  # fmt: skip
    y = np.array([1.0, -1.0, -1.0, -1.0, -1.0])
    costs = np.array([0.20007747568483886, 0.48264924709469226, 1.000428073059001,
                      1.8072015758377349, 2.4541513299871958])  # fmt: skip
    prior = LogNormalPrior(-0.9993346885333789, 1.3811472828485718)
    cfg = MechanismConfig(
        gamma=0.0038420295803240573, lam=282195.9090021018, mu=0.004321433006835944,
        sigma=1.6168458619602505e-06, k=618.8864511103222,
        eps_avg_max=0.31066352689129056, n_grid=8,
    )  # fmt: skip
    pay = myerson_payments(X, y, costs, prior, cfg, executor=SERIAL)
    assert np.all(np.isfinite(pay.payments))
    assert np.all(pay.payments >= costs * pay.epsilon * (1 - 1e-5))


def test_choosing_gamma_on_public_proxies_does_not_warn_about_privacy() -> None:
    """Found by the property test (λ ≈ 3.7e-7, three proxy rows): the proxy release
    behind a validation error stopped short of its gradient tolerance and warned that
    "the privacy proof assumes the exact minimiser". A proxy is fitted on public rows
    and claims no privacy, so ``choose_gamma`` runs without that warning (the
    suite turns warnings into errors)."""
    X = np.array(
        [[-0.5095829452074491, 0.8604215373604392], [-0.6778752687393742, -0.7351769311067378],
         [-0.9918337150293663, 0.12753776590110688]]
    )  # fmt: skip
    y = np.array([1.0, -1.0, -1.0])
    costs = np.array([0.0, 0.001942948819655182, 0.002463284661084175])
    prior = GaussianMixturePrior(
        (1.0,), (0.002509547089019346,), (0.0009021429283604106,), 0.0,
        0.0034374362709746896,
    )  # fmt: skip
    cfg = MechanismConfig(
        gamma=47.239170437892284, lam=3.703319646251241e-07, mu=0.0, sigma=0.0,
        k=9.692980911487815, eps_avg_max=0.00013378738097964053, n_grid=8,
    )  # fmt: skip
    out = choose_gamma(
        X, y, costs, prior, cfg, budget=1e9, X_val=X, y_val=y, gamma_range=(1e-2, 1e2),
        n_gamma=3, n_refine=1, n_draws=1, executor=SERIAL, random_state=0,
    )  # fmt: skip
    assert out.status == "ok"
