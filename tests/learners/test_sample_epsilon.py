"""Every orderable learner reads ``sample_epsilon`` the same way
(:func:`learners._validation.check_sample_epsilon`): a scalar is the same ε for every
record, strings are refused with the parameter's name; and the LDP missing-data
learner refuses the degenerate fits (no budget, no complete record)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from learners import (
    HeteroDPLogisticRegression,
    LDPMissingLogisticRegression,
    OneBitQuantileRegression,
    SecureVerticalLogisticRegression,
    ULDPSparseLinearRegression,
)
from learners._validation import check_sample_epsilon

N = 120


def _classification(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(-0.5, 0.5, (N, 2))
    y = np.where(X @ [1.0, -1.0] + 0.3 * rng.standard_normal(N) > 0, 1.0, -1.0)
    return X, y


def _hetero(rng: np.random.Generator, eps: Any) -> np.ndarray:
    X, y = _classification(rng)
    est = HeteroDPLogisticRegression(lam=0.1, random_state=0)
    return np.asarray(est.fit(X, y, sample_epsilon=eps).coef_)


def _ldp_missing(rng: np.random.Generator, eps: Any) -> np.ndarray:
    X, y = _classification(rng)
    X[::4, 1] = np.nan
    est = LDPMissingLogisticRegression(random_state=0)
    return np.asarray(est.fit(X, y, sample_epsilon=eps).coef_)


def _onebit(rng: np.random.Generator, eps: Any) -> np.ndarray:
    X = rng.uniform(-1, 1, (N, 1))
    y = 0.5 + X[:, 0] + 0.3 * rng.standard_normal(N)
    est = OneBitQuantileRegression(alpha=0.5, interval=[-2, 3], random_state=0)
    return np.asarray(est.fit(X, y, sample_epsilon=eps).coef_)


def _uldp(rng: np.random.Generator, eps: Any) -> np.ndarray:
    X = rng.standard_normal((N, 8))
    y = X[:, 0] * 0.5 + rng.standard_normal(N)
    groups = np.repeat(np.arange(N // 6), 6)
    est = ULDPSparseLinearRegression(sparsity=2, random_state=0)
    return np.asarray(est.fit(X, y, sample_epsilon=eps, groups=groups).coef_)


def _vertical(rng: np.random.Generator, eps: Any) -> np.ndarray:
    X, y = _classification(rng)
    est = SecureVerticalLogisticRegression(lam=0.1, random_state=0)
    return np.asarray(est.fit([X[:, :1], X[:, 1:]], y, sample_epsilon=eps).coef_)


FITS: dict[str, Callable[[np.random.Generator, Any], np.ndarray]] = {
    "hetero_dp_logistic": _hetero,
    "ldp_missing_logistic": _ldp_missing,
    "onebit_quantile": _onebit,
    "uldp_sparse_linear": _uldp,
    "secure_vertical_logistic": _vertical,
}


@pytest.mark.parametrize("name", sorted(FITS))
def test_scalar_sample_epsilon_is_the_same_epsilon_for_every_record(
    name: str,
) -> None:
    fit = FITS[name]
    scalar = fit(np.random.default_rng(7), 1.5)
    vector = fit(np.random.default_rng(7), np.full(N, 1.5))
    np.testing.assert_array_equal(scalar, vector)


@pytest.mark.parametrize("name", sorted(FITS))
@pytest.mark.parametrize("bad", [["1.5"] * N, "1.5", [None] * N])
def test_sample_epsilon_that_is_not_numbers_names_the_parameter(
    name: str, bad: Any
) -> None:
    with pytest.raises(ValueError, match="sample_epsilon must be numbers"):
        FITS[name](np.random.default_rng(7), bad)


def test_check_sample_epsilon_shapes_and_values() -> None:
    assert check_sample_epsilon(np.float32(2), n_samples=2).tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match=r"sample_epsilon must have shape \(3,\)"):
        check_sample_epsilon([1.0, 2.0], n_samples=3)
    with pytest.raises(ValueError, match=r"sample_epsilon\[1\]"):
        check_sample_epsilon([1.0, -2.0], n_samples=2)
    with pytest.raises(ValueError, match="party_epsilon: every ε is 0"):
        check_sample_epsilon(
            0.0, n_samples=2, name="party_epsilon", require_positive=True
        )


def test_ldp_missing_refuses_an_all_zero_budget() -> None:
    X, y = _classification(np.random.default_rng(3))
    with pytest.raises(ValueError, match="sample_epsilon: every ε is 0"):
        LDPMissingLogisticRegression(random_state=0).fit(X, y, sample_epsilon=0.0)


@pytest.mark.parametrize("algorithm", ["two_phase", "dummy"])
def test_ldp_missing_refuses_when_no_record_is_complete(algorithm: str) -> None:
    """With no complete record every report is a dummy (spec §5–§6): refuse rather
    than return a model fitted on noise alone."""
    X, y = _classification(np.random.default_rng(3))
    est = LDPMissingLogisticRegression(algorithm=algorithm, random_state=0)
    every_cell = np.full_like(X, np.nan)
    one_cell_each = X.copy()
    one_cell_each[np.arange(N), np.arange(N) % 2] = np.nan
    for missing in (every_cell, one_cell_each):
        with pytest.raises(ValueError, match="X: no record with sample_epsilon > 0"):
            est.fit(missing, y, sample_epsilon=1.0)
    # complete records only among those with ε = 0: still nothing to fit
    eps = np.where(np.isnan(one_cell_each).any(axis=1), 1.0, 0.0)
    one_cell_each[:3] = X[:3]
    eps[:3] = 0.0
    with pytest.raises(ValueError, match="X: no record with sample_epsilon > 0"):
        est.fit(one_cell_each, y, sample_epsilon=eps)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eps[:3] = 1.0  # three complete records with a budget: a legitimate fit
        est.fit(one_cell_each, y, sample_epsilon=eps)
