"""Losses: finite differences, independent closed forms, the bounds the proofs use."""

from __future__ import annotations

import numpy as np
import pytest

from learners.losses import (
    LogisticLoss,
    PinballLoss,
    SquaredLoss,
    make_loss,
    weighted_gradient,
    weighted_hessian,
    weighted_hessian_diagonal,
    weighted_hessian_vector,
    weighted_risk,
)

STEP = 1e-6
LOSSES = [LogisticLoss(), SquaredLoss(), PinballLoss(quantile=0.3, smoothing=0.05)]


def _labels(loss: object, rng: np.random.Generator, n: int) -> np.ndarray:
    if isinstance(loss, LogisticLoss):
        return np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return rng.normal(size=n)


def _away_from_kinks(loss: object, z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mask of points where ℓ'' is continuous within the finite-difference step."""
    if isinstance(loss, PinballLoss):
        return np.abs(np.abs(y - z) - loss.smoothing) > 10 * STEP
    return np.ones(z.shape, dtype=bool)


@pytest.mark.parametrize("loss", LOSSES, ids=lambda loss: loss.name)
def test_derivative_and_curvature_match_finite_differences(
    loss: object, rng: np.random.Generator
) -> None:
    z = rng.normal(scale=2.0, size=400)
    y = _labels(loss, rng, 400)
    fd1 = (loss.value(z + STEP, y) - loss.value(z - STEP, y)) / (2 * STEP)
    np.testing.assert_allclose(loss.derivative(z, y), fd1, rtol=1e-6, atol=1e-7)
    fd2 = (loss.derivative(z + STEP, y) - loss.derivative(z - STEP, y)) / (2 * STEP)
    ok = _away_from_kinks(loss, z, y)
    np.testing.assert_allclose(loss.curvature(z, y)[ok], fd2[ok], rtol=1e-5, atol=1e-6)


def test_logistic_matches_closed_form_and_curvature_at_most_quarter(
    rng: np.random.Generator,
) -> None:
    z = rng.normal(scale=3.0, size=500)
    y = np.where(rng.random(500) < 0.5, -1.0, 1.0)
    loss = LogisticLoss()
    np.testing.assert_allclose(loss.value(z, y), np.log1p(np.exp(-y * z)), rtol=1e-12)
    p = 1.0 / (1.0 + np.exp(-z))
    np.testing.assert_allclose(loss.curvature(z, y), p * (1 - p), rtol=1e-10)
    grid = np.linspace(-50, 50, 100_001)
    assert loss.curvature(grid, np.ones_like(grid)).max() <= 0.25
    assert loss.curvature(np.zeros(1), np.ones(1))[0] == pytest.approx(0.25)
    # |ℓ'| ≤ 1: the gradient-sensitivity half of the privacy proof.
    assert np.abs(loss.derivative(grid, np.ones_like(grid))).max() <= 1.0
    # No overflow for large margins.
    big = np.array([-800.0, 800.0])
    assert np.all(np.isfinite(loss.value(big, np.ones(2))))


@pytest.mark.parametrize("quantile", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("smoothing", [1e-3, 0.2])
def test_smoothed_pinball_within_quarter_h_and_convex(
    quantile: float, smoothing: float
) -> None:
    loss = PinballLoss(quantile=quantile, smoothing=smoothing)
    y = np.zeros(20_001)
    z = np.linspace(-3, 3, y.size)
    r = y - z
    exact = r * (quantile - (r < 0))
    gap = loss.value(z, y) - exact
    assert gap.min() >= -1e-15
    assert gap.max() <= smoothing / 4 + 1e-15
    assert gap.max() >= smoothing / 4 - 1e-6  # the bound is attained at r = 0
    assert np.all(np.diff(loss.derivative(z, y)) >= -1e-12)  # ℓ' non-decreasing
    assert np.all(loss.curvature(z, y) >= 0)
    v = loss.value(z, y)
    assert np.all(v[1:-1] <= 0.5 * (v[:-2] + v[2:]) + 1e-12)  # midpoint convexity


def test_squared_loss_closed_form(rng: np.random.Generator) -> None:
    z, y = rng.normal(size=50), rng.normal(size=50)
    loss = SquaredLoss()
    np.testing.assert_allclose(loss.value(z, y), 0.5 * (y - z) ** 2)
    np.testing.assert_allclose(loss.curvature(z, y), 1.0)


@pytest.mark.parametrize("loss", LOSSES, ids=lambda loss: loss.name)
def test_weighted_derivatives_match_numerical_differentiation(
    loss: object, rng: np.random.Generator
) -> None:
    n, d = 60, 5
    X = rng.normal(size=(n, d)) / 3
    y = _labels(loss, rng, n)
    a = rng.dirichlet(np.ones(n))
    w, v = rng.normal(size=d), rng.normal(size=d)
    eye = np.eye(d)
    fd_grad = np.array(
        [
            (
                weighted_risk(loss, w + STEP * e, X, y, a)
                - weighted_risk(loss, w - STEP * e, X, y, a)
            )
            / (2 * STEP)
            for e in eye
        ]
    )
    np.testing.assert_allclose(
        weighted_gradient(loss, w, X, y, a), fd_grad, rtol=1e-5, atol=1e-8
    )
    fd_hess = np.column_stack(
        [
            (
                weighted_gradient(loss, w + STEP * e, X, y, a)
                - weighted_gradient(loss, w - STEP * e, X, y, a)
            )
            / (2 * STEP)
            for e in eye
        ]
    )
    if not isinstance(
        loss, PinballLoss
    ):  # pinball ℓ'' jumps; FD across a jump is meaningless
        np.testing.assert_allclose(
            weighted_hessian(loss, w, X, y, a), fd_hess, rtol=1e-5, atol=1e-8
        )
    H = weighted_hessian(loss, w, X, y, a)
    np.testing.assert_allclose(H, H.T)
    np.testing.assert_allclose(
        weighted_hessian_diagonal(loss, w, X, y, a), np.diag(H), rtol=1e-12
    )
    np.testing.assert_allclose(
        weighted_hessian_vector(loss, w, X, y, a, v), H @ v, rtol=1e-10, atol=1e-14
    )


def test_make_loss_names_and_bad_name() -> None:
    assert isinstance(make_loss("logistic"), LogisticLoss)
    assert isinstance(make_loss("squared"), SquaredLoss)
    pin = make_loss("pinball", quantile=0.2, smoothing=0.01)
    assert isinstance(pin, PinballLoss)
    assert (pin.quantile, pin.smoothing) == (0.2, 0.01)
    with pytest.raises(ValueError, match="loss"):
        make_loss("hinge")
