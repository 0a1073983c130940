"""The tuning code scores allocations through a pluggable release (spec §3, §4.3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from market.datasets import make_synthetic
from mechanisms import Allocation, MechanismConfig, UniformPrior, allocate
from mechanisms.tuning import released_validation_error, select_hyperparameters
from mechanisms.tuning._validation_error import logistic_release

PRIOR = UniformPrior(0.1, 0.5)
CFG = MechanismConfig(gamma=0.05, lam=1e-2, mu=1.0, sigma=300.0, k=4, eps_avg_max=20)


class _Constant:
    """A "model" predicting one label everywhere."""

    def __init__(self, label: float) -> None:
        self.label = label

    def predict(self, X: Any) -> np.ndarray:
        return np.full(np.asarray(X).shape[0], self.label)


@pytest.fixture
def instance(rng: np.random.Generator) -> tuple[Any, np.ndarray, np.ndarray]:
    train = make_synthetic(40, 3, cost_low=0.1, cost_high=0.5, random_state=rng)
    val = make_synthetic(200, 3, random_state=rng)
    y_val = np.where(val.X @ train.w_true >= 0, 1.0, -1.0)
    return train, val.X, y_val


def test_default_release_is_the_objective_perturbation_release(instance) -> None:
    tr, Xv, yv = instance
    alloc = allocate(tr.X, tr.y, tr.costs, PRIOR, CFG)
    default = released_validation_error(
        tr.X, tr.y, alloc, Xv, yv, n_draws=3, random_state=5
    )
    explicit = released_validation_error(
        tr.X, tr.y, alloc, Xv, yv, n_draws=3, random_state=5, release=logistic_release
    )
    assert default == explicit


def test_a_custom_release_is_called_with_the_allocation_and_one_generator(
    instance,
) -> None:
    tr, Xv, yv = instance
    alloc = allocate(tr.X, tr.y, tr.costs, PRIOR, CFG)
    calls: list[tuple[Allocation, np.random.Generator]] = []

    def release(
        X: np.ndarray, y: np.ndarray, allocation: Allocation, rng: np.random.Generator
    ) -> _Constant:
        assert X.shape == tr.X.shape
        assert y.shape == tr.y.shape
        calls.append((allocation, rng))
        return _Constant(1.0)

    err = released_validation_error(
        tr.X, tr.y, alloc, Xv, yv, n_draws=4, random_state=0, release=release
    )
    assert err == pytest.approx(float(np.mean(yv != 1.0)))
    assert len(calls) == 4
    assert all(a is alloc for a, _ in calls)
    assert len({id(r) for _, r in calls}) == 1


def test_selection_scores_with_the_given_release(instance) -> None:
    tr, Xv, yv = instance
    sel = select_hyperparameters(
        tr.X, tr.y, tr.costs, PRIOR, CFG, X_val=Xv, y_val=yv,
        grid={"mu": [0.3, 3.0]}, n_draws=2, random_state=1,
        release=lambda X, y, allocation, rng: _Constant(-1.0),
    )  # fmt: skip
    assert {row.validation_error for row in sel.rows} == {float(np.mean(yv != -1.0))}
