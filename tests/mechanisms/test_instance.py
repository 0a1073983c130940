"""The typed instance and the two call forms of ``allocate`` / ``myerson_payments``."""

from __future__ import annotations

import dataclasses
import doctest

import numpy as np
import pytest

import mechanisms.instance
from mechanisms import (
    Instance,
    MechanismConfig,
    UniformPrior,
    allocate,
    myerson_payments,
)
from mechanisms.payments import SerialExecutor
from tests.mechanisms.test_payments_instances import small_instance

PRIOR = UniformPrior(0.0, 1.0)


def _arrays(m: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = np.linspace(-0.5, 0.5, 2 * m).reshape(m, 2)
    y = np.where(np.arange(m) % 2 == 0, 1.0, -1.0)
    return X, y, np.linspace(0.1, 0.9, m)


def test_docstring_example_runs() -> None:
    result = doctest.testmod(mechanisms.instance)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"X": np.ones((4, 2))}, r"X row 0 has norm"),
        ({"X": np.zeros((1, 2))}, r"X must have at least 2 rows"),
        ({"y": np.array([1.0, np.nan, 1.0, 1.0])}, r"y has a NaN .* index 1"),
        ({"y": np.ones(3)}, r"y must have shape \(4,\)"),
        ({"costs": np.array([0.1, 0.2, 1.5, 0.3])}, r"costs\[2\]"),
        ({"prior": "uniform"}, r"prior must be a CostPrior, got str"),
        ({"eps_max": np.array([1.0, -1.0, 1.0, 1.0])}, r"eps_max\[1\]"),
        ({"eps_max": np.zeros(4)}, r"eps_max: every seller's cap is 0"),
    ],
)
def test_bad_input_is_a_value_error_naming_the_parameter(
    change: dict[str, object], match: str
) -> None:
    X, y, costs = _arrays()
    kwargs: dict[str, object] = {"X": X, "y": y, "costs": costs, "prior": PRIOR}
    with pytest.raises(ValueError, match=match):
        Instance(**(kwargs | change))  # type: ignore[arg-type]


def test_instance_is_frozen_and_holds_read_only_copies() -> None:
    X, y, costs = _arrays()
    inst = Instance(X, y.tolist(), costs, PRIOR, eps_max=[np.inf, 1.0, 1.0, 1.0])
    X[0, 0] = 0.3
    assert inst.X[0, 0] == -0.5
    assert inst.y.dtype == np.float64
    assert inst.eps_max is not None
    with pytest.raises(ValueError, match="read-only"):
        inst.costs[0] = 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        inst.costs = costs  # type: ignore[misc]
    assert Instance(X, y, costs, PRIOR).eps_max is None


def test_labels_are_checked_against_the_loss_when_allocating() -> None:
    X, _, costs = _arrays()
    inst = Instance(X, np.array([0.0, 1.0, 0.0, 1.0]), costs, PRIOR)
    with pytest.raises(ValueError, match=r"y must be -1 or \+1"):
        allocate(inst, MechanismConfig())


def test_allocate_gives_the_same_allocation_in_both_forms(
    rng: np.random.Generator,
) -> None:
    t = small_instance(rng)
    caps = np.full(t.costs.size, 5.0)
    old = allocate(t.X, t.y, t.costs, t.prior, t.cfg, caps)
    inst = Instance(t.X, t.y, t.costs, t.prior, caps)
    for new in (allocate(inst, t.cfg), allocate(instance=inst, cfg=t.cfg)):
        np.testing.assert_array_equal(new.weights, old.weights)
        assert new.eta == old.eta
        assert new.status == old.status


def test_myerson_payments_are_the_same_in_both_forms(rng: np.random.Generator) -> None:
    t = small_instance(rng)
    inst = Instance(t.X, t.y, t.costs, t.prior)
    ex = SerialExecutor()
    old = myerson_payments(t.X, t.y, t.costs, t.prior, t.cfg, None, [0, 1], ex)
    new = myerson_payments(inst, t.cfg, sellers=[0, 1], executor=ex)
    np.testing.assert_array_equal(new.payments, old.payments)
    np.testing.assert_array_equal(new.computed, old.computed)


def test_the_instance_form_keeps_its_options_keyword_only(
    rng: np.random.Generator,
) -> None:
    t = small_instance(rng)
    inst = Instance(t.X, t.y, t.costs, t.prior)
    with pytest.raises(TypeError):
        myerson_payments(inst, t.cfg, [0, 1])  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        allocate(inst, t.cfg, None)  # type: ignore[call-overload]
