"""The objective-perturbation noise: ``‖b‖ ~ Gamma(d, 1)``, direction uniform.

Every statistical assertion rejects a correct sampler with probability at most
``ALPHA = 1e-6`` (KS and chi-square tail probabilities), so the suite's false-positive
rate is negligible for any seed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from learners._noise import sample_gamma_direction_noise

ALPHA = 1e-6
N_DRAWS = 4000
Sampler = Callable[..., np.ndarray]


def _draws(sampler: Sampler, d: int, rng: np.random.Generator) -> np.ndarray:
    return np.array([sampler(d, rng=rng) for _ in range(N_DRAWS)])


def _norm_pvalue(B: np.ndarray) -> float:
    d = B.shape[1]
    return float(stats.kstest(np.linalg.norm(B, axis=1), stats.gamma(a=d).cdf).pvalue)


def _direction_ok(B: np.ndarray, rng: np.random.Generator) -> bool:
    """Uniform on S^{d−1}: mean direction ≈ 0 and projections ~ the sphere marginal."""
    n, d = B.shape
    U = B / np.linalg.norm(B, axis=1)[:, None]
    # Each coordinate of a uniform direction has mean 0 and variance 1/d, and the
    # coordinates are uncorrelated: n·d·‖mean‖² is asymptotically χ²_d.
    mean_stat = n * d * float(U.mean(axis=0) @ U.mean(axis=0))
    if mean_stat > stats.chi2.ppf(1 - ALPHA, d):
        return False
    v = rng.normal(size=d)
    t = U @ (v / np.linalg.norm(v))
    if d == 1:  # ±1 with probability 1/2 each
        return stats.binomtest(int((t > 0).sum()), n).pvalue > ALPHA
    # (u·v + 1)/2 ~ Beta((d−1)/2, (d−1)/2) for u uniform on the sphere.
    marginal = stats.beta((d - 1) / 2, (d - 1) / 2)
    return stats.kstest((t + 1) / 2, marginal.cdf).pvalue > ALPHA


@pytest.mark.parametrize("d", [1, 2, 5, 20])
def test_norm_is_gamma_d_and_direction_uniform(
    d: int, rng: np.random.Generator
) -> None:
    B = _draws(sample_gamma_direction_noise, d, rng)
    assert B.shape == (N_DRAWS, d)
    assert _norm_pvalue(B) > ALPHA
    assert _direction_ok(B, rng)


def _exponential_radius(d: int, *, rng: np.random.Generator) -> np.ndarray:
    g = rng.standard_normal(d)
    return rng.exponential() * g / np.linalg.norm(g)


def _orthant_direction(d: int, *, rng: np.random.Generator) -> np.ndarray:
    g = np.abs(rng.standard_normal(d))
    return rng.gamma(d) * g / np.linalg.norm(g)


@pytest.mark.parametrize("d", [2, 5])
def test_planted_bug_twins_are_caught(d: int, rng: np.random.Generator) -> None:
    """The checks above must reject plausible wrong samplers."""
    assert _norm_pvalue(_draws(_exponential_radius, d, rng)) <= ALPHA
    B = _draws(_orthant_direction, d, rng)
    assert _norm_pvalue(B) > ALPHA  # right radius ...
    assert not _direction_ok(B, rng)  # ... wrong direction


def test_same_seed_same_draw_and_fresh_entropy_differs() -> None:
    b1 = sample_gamma_direction_noise(7, rng=np.random.default_rng(123))
    b2 = sample_gamma_direction_noise(7, rng=np.random.default_rng(123))
    np.testing.assert_array_equal(b1, b2)
    c1 = sample_gamma_direction_noise(7, rng=np.random.default_rng())
    c2 = sample_gamma_direction_noise(7, rng=np.random.default_rng())
    assert not np.array_equal(c1, c2)
    # Successive draws from one generator differ too.
    gen = np.random.default_rng(5)
    assert not np.array_equal(
        sample_gamma_direction_noise(3, rng=gen),
        sample_gamma_direction_noise(3, rng=gen),
    )


@pytest.mark.parametrize("d", [0, -2, 2.5, True, "3"])
def test_bad_dimension_is_refused(d: object) -> None:
    with pytest.raises(ValueError, match="d must be a positive integer"):
        sample_gamma_direction_noise(d, rng=np.random.default_rng(0))  # type: ignore[arg-type]


def test_rng_must_be_a_generator() -> None:
    with pytest.raises(ValueError, match="rng"):
        sample_gamma_direction_noise(3, rng=np.random.RandomState(0))  # type: ignore[arg-type]
