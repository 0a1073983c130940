"""The α-quantile working model and ``Ψ`` in closed form (spec §2.3, V-B2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners.onebit_quantile import QuantileWorkingModel, bit_flip, sample_ald_noise
from tests.learners.onebit_quantile.designs import paper_psi

MODEL = QuantileWorkingModel(alpha=0.3, sigma=1.0, low=-2.0, high=3.0)
THETA = np.array([-4.0, -2.0, -1.0, 0.0, 1.5, 3.0, 5.0])


@pytest.mark.parametrize(
    ("eps", "what", "table"),
    [
        (0.5, "psi", [0.4263, 0.4663, 0.4958, 0.5275, 0.5712, 0.6021, 0.6174]),
        (2.5, "psi", [0.2446, 0.3834, 0.4855, 0.5953, 0.7467, 0.8536, 0.9068]),
        (
            2.5,
            "psi_prime",
            [0.05063, 0.09226, 0.10861, 0.10882, 0.08954, 0.04936, 0.01217],
        ),
    ],
)
def test_closed_form_matches_the_spec_table(
    eps: float, what: str, table: list[float]
) -> None:
    """V-B2: the closed-form table (α = 0.3, σ = 1, [c_l, c_u] = [−2, 3])."""
    values = getattr(MODEL, what)(THETA, epsilon=eps)
    decimals = 4 if what == "psi" else 5
    np.testing.assert_array_equal(np.round(values, decimals), table)


def test_psi_agrees_with_monte_carlo(rng: np.random.Generator) -> None:
    """V-B2: 2·10⁶ draws of ALD + truncation + bit flip agree within 4 SE."""
    n, eps = 2 * 10**6, 2.5
    for theta in (-2.5, 0.0, 1.5, 3.5):
        y = MODEL.sample(np.full(n, theta), rng=rng)
        z = bit_flip(y, epsilon=eps, low=MODEL.low, high=MODEL.high, rng=rng)
        psi = float(MODEL.psi(theta, epsilon=eps))
        assert abs(z.mean() - psi) <= 4 * math.sqrt(psi * (1 - psi) / n)


def test_derivatives_match_central_differences() -> None:
    """V-B2: ``Ψ'`` and ``Ψ''`` match central finite differences to 1e-6."""
    theta = np.linspace(-8.0, 9.0, 1701)
    h = 1e-5
    for eps in (0.5, 2.5, 10.0):
        fd1 = (
            MODEL.psi(theta + h, epsilon=eps) - MODEL.psi(theta - h, epsilon=eps)
        ) / (2 * h)
        np.testing.assert_allclose(
            MODEL.psi_prime(theta, epsilon=eps), fd1, rtol=0, atol=1e-6
        )
        fd2 = (
            MODEL.psi_prime(theta + h, epsilon=eps)
            - MODEL.psi_prime(theta - h, epsilon=eps)
        ) / (2 * h)
        np.testing.assert_allclose(
            MODEL.psi_second(theta, epsilon=eps), fd2, rtol=0, atol=1e-6
        )


@pytest.mark.parametrize("edge", [-2.0, 3.0])
def test_psi_and_derivatives_are_continuous_at_the_interval_ends(edge: float) -> None:
    for fn in (MODEL.psi, MODEL.psi_prime, MODEL.psi_second):
        left, right = fn(np.array([edge - 1e-10, edge + 1e-10]), epsilon=2.5)
        assert left == pytest.approx(right, abs=1e-9)


def test_limits_monotonicity_and_lemma_2_bounds() -> None:
    """``Ψ(∓∞) = 1/(1 + e^ε), e^ε/(1 + e^ε)`` (0.07586 / 0.92414 at ε = 2.5), strictly
    increasing, ``0 < Ψ' ≤ 1/(W C_ε)``, ``|Ψ''| ≤ α(1 − α)/(σ W C_ε)``; no overflow
    however far ``θ`` is (a warning would be an error here)."""
    eps = 2.5
    far = MODEL.psi(np.array([-1e300, -1e6, 1e6, 1e300]), epsilon=eps)
    np.testing.assert_array_equal(
        np.round(far, 5), [0.07586, 0.07586, 0.92414, 0.92414]
    )
    theta = np.linspace(-30, 30, 6001)
    psi = MODEL.psi(theta, epsilon=eps)
    d1 = MODEL.psi_prime(theta, epsilon=eps)
    d2 = MODEL.psi_second(theta, epsilon=eps)
    C = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    assert np.all(np.diff(psi) > 0)
    assert np.all(d1 > 0)
    assert np.all(d1 <= 1 / (MODEL.width * C) + 1e-15)
    assert np.all(np.abs(d2) <= 0.3 * 0.7 / (MODEL.width * C) + 1e-15)


def test_ald_sampler_has_its_quantile_at_theta(rng: np.random.Generator) -> None:
    w = sample_ald_noise(10**6, alpha=0.3, rng=rng)
    assert abs((w <= 0).mean() - 0.3) <= 4 * math.sqrt(0.3 * 0.7 / 10**6)
    np.testing.assert_allclose(MODEL.cdf(0.7, 0.7), 0.3)


def test_paper_interior_and_lower_cases_agree_its_upper_case_does_not() -> None:
    """Regression test for the paper's defect 5 (spec §4): App. C.3's printed
    ``θ ≥ c_u`` form has the wrong sign in its last exponent; the interior and
    ``θ ≤ c_l`` forms agree with ours to 1e-12, and so does the corrected upper form."""
    kw = {"alpha": 0.3, "sigma": 1.0, "low": -2.0, "high": 3.0}
    for eps in (0.5, 2.5):
        ours = MODEL.psi(THETA_DENSE, epsilon=eps)
        printed = paper_psi(THETA_DENSE, epsilon=eps, **kw)
        fixed = paper_psi(THETA_DENSE, epsilon=eps, printed_upper=False, **kw)
        not_upper = THETA_DENSE < 3.0
        np.testing.assert_allclose(
            printed[not_upper], ours[not_upper], rtol=0, atol=1e-12
        )
        np.testing.assert_allclose(fixed, ours, rtol=0, atol=1e-12)
        above = THETA_DENSE > 3.0
        assert np.all(np.abs(printed[above] - ours[above]) > 1e-3)


THETA_DENSE = np.linspace(-8.0, 9.0, 341)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.0}, "alpha"),
        ({"sigma": 0.0}, "scale"),
        ({"low": 3.0, "high": -2.0}, "interval"),
        ({"low": 1.0, "high": 1.0}, "interval"),
    ],
)
def test_bad_model_parameters_are_refused(kwargs: dict[str, float], name: str) -> None:
    base = {"alpha": 0.3, "sigma": 1.0, "low": -2.0, "high": 3.0}
    with pytest.raises(ValueError, match=name):
        QuantileWorkingModel(**{**base, **kwargs})
