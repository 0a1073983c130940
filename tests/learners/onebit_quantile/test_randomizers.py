"""The users' side: bit flip and one-shot reports (spec §1, V-B1, V-B12)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners.onebit_quantile import (
    bit_flip,
    bit_flip_probability,
    randomize_private_x,
    randomize_public_x,
    split_budget,
)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.5])
def test_bit_flip_probabilities_at_the_interval_points(eps: float) -> None:
    """V-B1 (a): ``q(c_l) = 1/(1 + e^ε)``, ``q(m) = 1/2``, ``q(c_u) = e^ε/(1 + e^ε)``,
    and the largest ratio over inputs of either output's probability is ``e^ε``."""
    low, high = -2.0, 3.0
    q = bit_flip_probability([low, 0.5, high], epsilon=eps, low=low, high=high)
    np.testing.assert_allclose(
        q,
        [1 / (1 + math.exp(eps)), 0.5, math.exp(eps) / (1 + math.exp(eps))],
        rtol=0,
        atol=1e-15,
    )
    grid = bit_flip_probability(
        np.linspace(low - 1, high + 1, 401), epsilon=eps, low=low, high=high
    )
    for p in (grid, 1.0 - grid):
        assert p.max() / p.min() == pytest.approx(math.exp(eps), rel=1e-12)


@pytest.mark.parametrize("v", [-2.0, 0.1, 3.0])
def test_bit_flip_is_unbiased_after_debiasing(
    v: float, rng: np.random.Generator
) -> None:
    """V-B1 (b): ``mean(m + W C_ε (z − 1/2))`` over 10⁶ draws within 4 SE of ``v``."""
    eps, low, high, n = 1.0, -2.0, 3.0, 10**6
    z = bit_flip(np.full(n, v), epsilon=eps, low=low, high=high, rng=rng)
    C = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    W, m = high - low, (high + low) / 2
    est = m + W * C * (z - 0.5)
    q = float(bit_flip_probability(v, epsilon=eps, low=low, high=high))
    se = W * C * math.sqrt(q * (1 - q) / n)
    assert abs(est.mean() - v) <= 4 * se


def test_values_outside_the_interval_behave_as_clipped() -> None:
    """V-B1 (c): raw values beyond ``[c_l, c_u]``, ±∞ included, are valid input and
    give exactly the draws of the clipped value."""
    low, high = -1.0, 1.0
    raw = np.array([-np.inf, -7.0, -1.0, 0.3, 1.0, 12.0, np.inf])
    clipped = np.clip(raw, low, high)
    np.testing.assert_array_equal(
        bit_flip_probability(raw, epsilon=2.0, low=low, high=high),
        bit_flip_probability(clipped, epsilon=2.0, low=low, high=high),
    )
    a = bit_flip(
        np.repeat(raw, 1000),
        epsilon=2.0,
        low=low,
        high=high,
        rng=np.random.default_rng(3),
    )
    b = bit_flip(
        np.repeat(clipped, 1000),
        epsilon=2.0,
        low=low,
        high=high,
        rng=np.random.default_rng(3),
    )
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("eps", [0.0, -1.0, np.nan, np.inf])
def test_randomizer_refuses_a_budget_that_is_not_positive_and_finite(
    eps: float,
) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        bit_flip_probability([0.0], epsilon=eps, low=-1.0, high=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        bit_flip(
            [0.0, 0.0],
            epsilon=[1.0, eps],
            low=-1.0,
            high=1.0,
            rng=np.random.default_rng(0),
        )


@pytest.mark.parametrize(
    ("low", "high"), [(1.0, -1.0), (2.0, 2.0), (-np.inf, 1.0), (0.0, np.nan)]
)
def test_randomizer_refuses_an_empty_reversed_or_infinite_interval(
    low: float, high: float
) -> None:
    with pytest.raises(ValueError, match="interval"):
        bit_flip_probability([0.0], epsilon=1.0, low=low, high=high)


def test_randomizer_refuses_nan() -> None:
    with pytest.raises(ValueError, match="NaN"):
        bit_flip_probability([np.nan], epsilon=1.0, low=-1.0, high=1.0)


def test_public_x_report_is_one_bit_per_user_at_its_budget(
    rng: np.random.Generator,
) -> None:
    """V-B12, public X: exactly one bit per participating user, drawn at ``ε_i``;
    users with ``ε_i = 0`` send nothing."""
    n = 50
    X = rng.uniform(-1, 1, (n, 2))
    eps = rng.uniform(0.1, 3.0, n)
    eps[:5] = 0.0
    rep = randomize_public_x(
        X, rng.standard_normal(n), epsilon=eps, low=-1, high=1, rng=rng
    )
    assert rep.z.shape == (45,)
    assert set(np.unique(rep.z)) <= {0, 1}
    np.testing.assert_array_equal(rep.epsilon, eps[5:])
    np.testing.assert_array_equal(rep.X, X[5:])


def test_private_x_report_has_k_plus_one_bits_summing_to_the_budget(
    rng: np.random.Generator,
) -> None:
    """V-B12, private X: ``k + 1`` bits whose budgets add up to ``ε_i``; a public column
    (the intercept) is carried, not randomized, and costs nothing."""
    n, k = 40, 3
    X = rng.uniform(-1, 1, (n, k))
    eps = rng.uniform(0.5, 4.0, n)
    ones = np.ones((n, 1))
    rep = randomize_private_x(
        X,
        ones,
        rng.standard_normal(n),
        epsilon=eps,
        low=-2,
        high=2,
        bounds=(-np.ones(k), np.ones(k)),
        split=None,
        rng=rng,
    )
    assert rep.z_x.shape == (n, k)
    assert rep.z_y.shape == (n,)
    assert set(np.unique(rep.z_x)) <= {-1, 1}
    assert rep.bit_epsilon.shape == (n, k + 1)
    np.testing.assert_allclose(rep.bit_epsilon.sum(axis=1), eps, rtol=1e-14)
    np.testing.assert_allclose(
        rep.bit_epsilon, np.repeat(eps[:, None] / (k + 1), k + 1, axis=1)
    )
    np.testing.assert_array_equal(rep.X_public, ones)


def test_budget_split_must_be_public_fractions_summing_to_one() -> None:
    out = split_budget([2.0], n_private=2, split=[0.5, 0.25, 0.25])
    np.testing.assert_allclose(out, [[1.0, 0.5, 0.5]])
    for bad in ([0.5, 0.5], [0.5, 0.5, 0.5], [1.0, 0.0, 0.0]):
        with pytest.raises(ValueError, match="budget_split"):
            split_budget([1.0], n_private=2, split=bad)
