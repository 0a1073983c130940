"""The private sampling randomizer ``Q_ps`` (spec ``ldp-logistic-missing-data.md`` §3,
validation V-A1): exact radius, unbiasedness within 4 standard errors, the hemisphere
probabilities that make it exactly ε-LDP, the constants, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners.ldp_missing import (
    apply_private_sampling,
    c_epsilon,
    draw_sampling_noise,
    kappa,
    pi_epsilon,
    private_sampling,
    private_sgd,
    sampling_radius,
)

G = math.sqrt(2.0)


def _unit_sphere_mean_abs(d: int) -> float:
    """``E|u₁|`` for ``u`` uniform on ``S^{d−1}``, by quadrature of the marginal density
    ``∝ (1 − t²)^{(d−3)/2}`` (independent of the Gamma-function formula of κ_d)."""
    if d == 1:
        return 1.0
    t = np.linspace(-1.0, 1.0, 400_001)[1:-1]
    dens = (1.0 - t**2) ** ((d - 3) / 2.0)
    return float(np.trapezoid(np.abs(t) * dens, t) / np.trapezoid(dens, t))


def test_constants_match_the_spec() -> None:
    """V-A1 (f) and the radius table of §3."""
    assert kappa(1) == pytest.approx(1.0, rel=1e-12)
    assert kappa(2) == pytest.approx(math.pi / 2, rel=1e-12)
    assert kappa(3) == pytest.approx(2.0, rel=1e-12)
    assert kappa(4) == pytest.approx(3 * math.pi / 4, rel=1e-12)
    assert kappa(5) == pytest.approx(8 / 3, rel=1e-12)
    assert kappa(10) == pytest.approx(3.8656, abs=1e-4)
    for d in (2, 3, 6, 10):
        assert kappa(d) == pytest.approx(1 / _unit_sphere_mean_abs(d), rel=2e-3)
    radii = sampling_radius(G, 2, [0.1, 1.0, 10.0, 0.05, 0.5, 5.0])
    np.testing.assert_allclose(
        radii, [44.466, 4.8071, 2.2216, 88.876, 9.0701, 2.2516], atol=6e-4
    )
    eps = np.array([0.1, 1.0, 10.0])
    np.testing.assert_allclose(
        c_epsilon(eps), (np.exp(eps) + 1) / (np.exp(eps) - 1), rtol=1e-12
    )
    np.testing.assert_allclose(
        pi_epsilon(eps), np.exp(eps) / (np.exp(eps) + 1), rtol=1e-12
    )


@pytest.mark.parametrize("d", [1, 2, 3, 10])
@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_reports_have_radius_b_and_are_unbiased(
    d: int, eps: float, rng: np.random.Generator
) -> None:
    """V-A1 (a), (b): ``‖Z‖ = B`` for every draw; mean of 4·10⁵ within 4 s.e. of ``v``."""
    n = 400_000
    v = np.zeros(d)
    v[0] = 0.7
    Z = private_sampling(np.tile(v, (n, 1)), bound=G, epsilon=eps, rng=rng)
    B = float(sampling_radius(G, d, eps))
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), B, rtol=1e-12)
    se = Z.std(axis=0) / math.sqrt(n)
    assert np.all(np.abs(Z.mean(axis=0) - v) <= 4 * se)


def test_one_dimension_is_randomized_response(rng: np.random.Generator) -> None:
    """V-A1 (e): for ``d = 1`` the outputs are exactly ``±G·C_ε``, with
    ``P(+) = 1/2 + v(e^ε − 1)/(2G(e^ε + 1))``."""
    eps, v, n = 1.0, 0.9, 200_000
    Z = private_sampling(np.full((n, 1), v), bound=G, epsilon=eps, rng=rng)
    level = G * float(c_epsilon(eps))
    np.testing.assert_allclose(np.abs(Z), level, rtol=1e-12)
    p = 0.5 + v * (math.exp(eps) - 1) / (2 * G * (math.exp(eps) + 1))
    assert abs(np.mean(Z > 0) - p) <= 4 * math.sqrt(p * (1 - p) / n)


def _hemisphere_rate(v: np.ndarray, w: np.ndarray, eps: float, n: int, rng) -> float:  # type: ignore[no-untyped-def]
    Z = private_sampling(np.tile(v, (n, 1)), bound=G, epsilon=eps, rng=rng)
    return float(np.mean(Z @ w > 0))


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_hemisphere_probabilities_are_tight(
    eps: float, rng: np.random.Generator
) -> None:
    """V-A1 (c), (d): ``P(⟨Z, w⟩ > 0)`` is ``π_ε`` at ``v = Gw``, ``1 − π_ε`` at
    ``v = −Gw``, 1/2 at ``v = 0`` (where the mean is 0), and inside
    ``[1 − π_ε, π_ε]`` for other inputs."""
    d, n = 3, 200_000
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    pi = float(pi_epsilon(eps))
    band = 4 * math.sqrt(0.25 / n)
    assert abs(_hemisphere_rate(G * w, w, eps, n, rng) - pi) <= band
    assert abs(_hemisphere_rate(-G * w, w, eps, n, rng) - (1 - pi)) <= band
    Z0 = private_sampling(np.zeros((n, d)), bound=G, epsilon=eps, rng=rng)
    assert abs(np.mean(Z0 @ w > 0) - 0.5) <= band
    se0 = Z0.std(axis=0) / math.sqrt(n)
    assert np.all(np.abs(Z0.mean(axis=0)) <= 4 * se0)
    for _ in range(4):
        v = rng.standard_normal(d)
        v *= rng.uniform(0, G) / np.linalg.norm(v)
        rate = _hemisphere_rate(v, w, eps, n, rng)
        assert 1 - pi - band <= rate <= pi + band


def test_bad_input_is_a_value_error_naming_the_parameter() -> None:
    V = np.zeros((3, 2))
    for eps in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="epsilon"):
            private_sampling(V, bound=G, epsilon=eps, rng=0)
    with pytest.raises(ValueError, match=r"epsilon\[1\]"):
        private_sampling(V, bound=G, epsilon=[1.0, 0.0, 1.0], rng=0)
    with pytest.raises(ValueError, match="bound"):
        private_sampling(V, bound=0.0, epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="V must be finite"):
        private_sampling([[np.nan, 0.0]], bound=G, epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="d must be"):
        kappa(0)


@pytest.mark.parametrize("scale", [2.0, 1e300])
def test_input_guard_projects_and_returns_only_reports(
    scale: float, rng: np.random.Generator
) -> None:
    """An input above ``G`` (even one whose norm overflows) is projected onto the sphere
    of radius ``G``; the randomizer returns the reports and nothing else (no count of
    projected inputs, which would be a statistic of raw records)."""
    n, d = 1000, 3
    V = np.zeros((n, d))
    V[:, 0] = scale * G
    V[:, 1] = scale * G / 3
    noise = draw_sampling_noise(n, d, rng=rng)
    B, pi = sampling_radius(G, d, 1.0), pi_epsilon(1.0)
    Z = apply_private_sampling(V, bound=G, radius=B, pi=pi, noise=noise)
    on_sphere = V / np.linalg.norm(V / scale, axis=1)[:, None] / scale * G
    Z_proj = apply_private_sampling(on_sphere, bound=G, radius=B, pi=pi, noise=noise)
    assert isinstance(Z, np.ndarray)
    np.testing.assert_array_equal(Z, Z_proj)


def test_compiled_sgd_reports_equal_the_vectorised_randomizer(
    rng: np.random.Generator,
) -> None:
    """The SGD pass randomizes each round's input exactly as
    :func:`apply_private_sampling` does with the same noise (same ``ε_i``)."""
    n, d = 500, 4
    X = rng.uniform(-1, 1, (n, d)) / 2
    X[:, 0] = 1.0
    y = (rng.random(n) < 0.5).astype(float)
    w = np.where(rng.random(n) < 0.3, 0.0, 1.0)
    eps = rng.uniform(0.2, 5.0, n)
    seed = int(rng.integers(2**32))
    res = private_sgd(
        X, y, w, bound=2.0, epsilon=eps, ball=3.0, gamma=0.1, record=True,
        rng=np.random.default_rng(seed),
    )  # fmt: skip
    gen = np.random.default_rng(seed)
    order = gen.permutation(n)
    noise = draw_sampling_noise(n, d, rng=gen)
    np.testing.assert_array_equal(order, res.order)
    assert res.inputs is not None
    assert res.reports is not None
    Z = apply_private_sampling(
        res.inputs[order],
        bound=2.0,
        radius=sampling_radius(2.0, d, eps[order]),
        pi=pi_epsilon(eps[order]),
        noise=noise,
    )
    np.testing.assert_allclose(res.reports[order], Z, rtol=1e-13, atol=1e-13)
    assert np.all(res.inputs[w == 0] == 0.0)  # dummies
