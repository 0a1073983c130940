"""Choosing γ for a budget (spec mechanism.md §4.3; reliability T-MD-5)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms import audit_gamma_choice, myerson_payments
from mechanisms.payments._executors import SerialExecutor
from mechanisms.payments._payments import fits_budget, round_up, to_minor_units
from mechanisms.tuning._gamma_for_budget import GammaPoint, _choose, choose_gamma
from tests.mechanisms.test_payments_instances import Instance, toy_instance

SERIAL = SerialExecutor()
money = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
units = st.sampled_from([0.01, 0.05, 1.0, "0.01", "0.001"])


def toy() -> Instance:
    ins = toy_instance()
    return dataclasses.replace(ins, cfg=ins.cfg.with_(mu=1.0, sigma=0.1))


@pytest.fixture(scope="module")
def path():
    """One grid evaluation of the toy: γ ∈ {0.1, 1, 10} (budget large)."""
    ins = toy()
    return choose_gamma(
        ins.X,
        ins.y,
        ins.costs,
        ins.prior,
        ins.cfg,
        budget=1e9,
        X_val=ins.X,
        y_val=ins.y,
        gamma_range=(0.1, 10.0),
        n_gamma=3,
        n_refine=0,
        n_draws=2,
        exact="all",
        executor=SERIAL,
        random_state=0,
    )


@given(st.lists(money, min_size=0, max_size=30), units)
def test_round_up_never_rounds_down(payments: list[float], unit) -> None:
    r = round_up(payments, unit)
    n = to_minor_units(payments, unit)
    np.testing.assert_allclose(r, n * float(unit))
    # The rule, exactly: (n − 1)·unit < D(t) ≤ n·unit for the shortest decimal D(t),
    # and the float paid is never below the binary value.
    from decimal import Decimal

    u = Decimal(str(unit))
    for t, k, paid in zip(payments, n, r, strict=True):
        assert Decimal(int(k) - 1) * u < Decimal(repr(t)) <= Decimal(int(k)) * u
        assert paid >= t


@given(st.lists(money, min_size=0, max_size=30), money, units)
def test_fits_budget_is_exact_in_minor_units(payments, budget, unit) -> None:
    from decimal import Decimal

    u = Decimal(str(unit))
    paid = sum(Decimal(int(k)) * u for k in to_minor_units(payments, unit))
    assert fits_budget(payments, budget, unit) == (
        paid <= Decimal(repr(budget)) // u * u
    )


def _point(g: float, total: float, err: float, budget: float, unit=0.01) -> GammaPoint:
    pays = np.array([total])
    return GammaPoint(
        g,
        total,
        float(round_up(pays, unit).sum()),
        total,
        err,
        fits_budget(pays, budget, unit),
        None,  # type: ignore[arg-type]
    )


@settings(max_examples=200)
@given(
    st.lists(st.tuples(money, st.floats(0, 1)), min_size=2, max_size=12),
    money,
)
def test_choice_never_exceeds_budget(pts, budget) -> None:
    # Totals in any order along γ (payments need not be monotone in γ).
    points = [_point(10.0**j, t, e, budget) for j, (t, e) in enumerate(pts)]
    points = [dataclasses.replace(p, payments=_FakePay()) for p in points]
    out = _choose(points, budget, 0.01)
    afford = [p for p in points if p.affordable]
    if out.status == "ok":
        assert out.total_payment <= budget
        assert out.validation_error == min(p.validation_error for p in afford)
    else:
        assert not afford
        assert out.total_payment == min(p.total_paid for p in points)
    n_up = sum(b[1] > a[1] for a, b in zip(out.path[:-1], out.path[1:], strict=True))
    assert len(out.non_monotone) == n_up


@dataclasses.dataclass
class _FakePay:
    payments: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(1))
    allocation: None = None

    def paid(self, unit: float | str) -> np.ndarray:
        return round_up(self.payments, unit)


def test_path_uses_myerson_totals_decreasing_in_gamma(path) -> None:
    totals = [t for _, t, _, _ in path.path]
    expected = [e for _, _, _, e in path.path]
    assert totals == sorted(totals, reverse=True)
    assert path.non_monotone == []
    assert totals != pytest.approx(expected, rel=1e-3)  # Myerson, not Ψ·u(ε)
    for p in path.points:
        assert p.total == pytest.approx(float(p.payments.payments.sum()))


@pytest.mark.parametrize("where", [0.0, 0.5, 1.5])
def test_choose_gamma_respects_random_budgets(path, rng, where: float) -> None:
    totals = sorted(p.total_paid for p in path.points)  # as paid: rounded up
    if where == 0.0:
        budget = float(rng.uniform(0, totals[0] * 0.99))
    elif where == 0.5:
        budget = float(rng.uniform(totals[0] * 1.01, totals[1] * 0.99))
    else:
        budget = float(totals[-1] * rng.uniform(1.01, 2.0))
    ins = toy()
    out = choose_gamma(
        ins.X,
        ins.y,
        ins.costs,
        ins.prior,
        ins.cfg,
        budget=budget,
        X_val=ins.X,
        y_val=ins.y,
        gamma_range=(0.1, 10.0),
        n_gamma=3,
        n_refine=1 if where == 0.5 else 0,
        n_draws=2,
        exact="all",
        executor=SERIAL,
        random_state=0,
    )
    if where == 0.0:
        assert out.status == "nothing_affordable"
        assert out.gamma is None
        assert out.payments is None
        assert out.total_payment > budget
    else:
        assert out.status == "ok"
        assert out.payments is not None
        assert float(out.payments.sum()) <= budget
        assert out.total_payment <= budget
        assert fits_budget(out.payments, budget, 0.01)
    if where == 0.5:  # refinement evaluated a γ between the two grid points
        assert len(out.path) == 4


def test_bad_arguments_are_named() -> None:
    ins = toy()
    kw = {"X_val": ins.X, "y_val": ins.y, "executor": SERIAL}
    with pytest.raises(ValueError, match="budget"):
        choose_gamma(ins.X, ins.y, ins.costs, ins.prior, ins.cfg, budget=-1.0, **kw)
    with pytest.raises(ValueError, match="gamma_range"):
        choose_gamma(
            ins.X,
            ins.y,
            ins.costs,
            ins.prior,
            ins.cfg,
            budget=1.0,
            gamma_range=(1.0, 0.5),
            **kw,
        )
    with pytest.raises(ValueError, match="unit"):
        round_up([1.0], 0.0)


def test_gamma_choice_regret_is_measured_at_the_true_cost(path) -> None:
    """Spec §5: γ re-chosen from the reports breaks exact IC; the audit measures it.

    Where a misreport leaves the chosen γ unchanged, the rule is the frozen one, so
    the gain must be within the frozen rule's tolerance, and it must equal the gain
    computed independently with :func:`myerson_payments` at that γ.
    """
    ins = toy()
    kw = {
        "gamma_range": (0.1, 10.0),
        "n_gamma": 3,
        "n_refine": 1,
        "n_draws": 2,
        "unit": "0.000000001",
        "executor": SERIAL,
    }
    # The fixture's path: the same toy, γ grid and draws with a budget that binds nowhere.
    totals = sorted(t for _, t, _, _ in path.path)
    budget = 0.5 * (totals[0] + totals[1])
    rep = audit_gamma_choice(
        ins.X,
        ins.y,
        ins.costs,
        ins.prior,
        ins.cfg,
        budget=budget,
        X_val=ins.X,
        y_val=ins.y,
        sellers=[0, 1],
        misreports=(0.5, 1.5),
        **kw,
    )
    assert rep.gamma is not None
    assert len(rep.deviations) == 4
    assert rep.regret_max == max(0.0, *(g for *_, g in rep.deviations))
    same = [d for d in rep.deviations if d[2] == rep.gamma]
    assert same, "some misreport keeps the truthful γ"
    cfg = ins.cfg.with_(gamma=rep.gamma)
    truth = myerson_payments(ins.X, ins.y, ins.costs, ins.prior, cfg, executor=SERIAL)
    for i, r, _, gain in same:
        reports = ins.costs.copy()
        reports[i] = r
        dev = myerson_payments(ins.X, ins.y, reports, ins.prior, cfg, executor=SERIAL)
        u_dev = dev.payments[i] - ins.costs[i] * dev.epsilon[i]
        u_true = truth.payments[i] - ins.costs[i] * truth.epsilon[i]
        assert gain == pytest.approx(u_dev - u_true, abs=1e-8)
        assert gain <= 1e-3 * rep.max_payment
    assert rep.to_dict()["gamma_moved"] == rep.gamma_moved
