"""The floating-point-safe Laplace release (snapping mechanism) and its uniform.

Statistical assertions reject a correct sampler with probability at most ``ALPHA``
(Clopper–Pearson / normal tails), so the false-positive rate is negligible for any seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.stats import beta as beta_dist

from learners._noise import (
    SNAP_FP_TERM,
    full_precision_uniform,
    snapped_laplace,
    snapping_parameters,
)

ALPHA = 1e-6
DRAWS = 200_000


# ---- the full-precision uniform ----


def test_full_precision_uniform_is_uniform_with_full_low_bits(
    rng: np.random.Generator,
) -> None:
    """``U*`` is uniform on (0, 1) and, unlike ``rng.random()`` (a multiple of
    ``2^{−53}``), small values carry bits below ``2^{−53}``: the property that keeps
    ``ln U*`` from missing values near the tails [Mir12]."""
    u = full_precision_uniform(DRAWS, rng=rng)
    assert np.all((u > 0) & (u < 1))
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    small = u[u < 2.0**-8]
    assert small.size > 100
    off_grid = np.mean(np.ldexp(small, 53) % 1.0 != 0.0)
    assert off_grid > 0.99
    textbook = rng.random(DRAWS)
    assert np.all(np.ldexp(textbook, 53) % 1.0 == 0.0)  # what the old sampler had


def test_full_precision_uniform_binade_probabilities(rng: np.random.Generator) -> None:
    """``P(U* < 2^{−k}) = 2^{−k}`` (the exponent is a fair-bit leading-zero count)."""
    u = full_precision_uniform(DRAWS, rng=rng)
    for k in (1, 3, 6, 10):
        hits = int(np.sum(u < 2.0**-k))
        assert stats.binomtest(hits, DRAWS, 2.0**-k).pvalue > ALPHA


class _ZeroFirstWord:
    """A generator whose first 53-bit exponent word is 0 and whose next one is
    ``2^52`` (one leading zero): the path taken with probability ``2^{−53}``."""

    def __init__(self) -> None:
        self.gen, self.calls = np.random.default_rng(0), 0

    def integers(self, low: int, high: int, *, size: int, dtype: type) -> np.ndarray:
        self.calls += 1
        out = self.gen.integers(low, high, size=size, dtype=dtype)
        if self.calls == 1:
            out[0] = 0
        elif self.calls == 2:
            out[:] = 1 << 52
        return out


def test_full_precision_uniform_continues_past_53_zero_bits() -> None:
    """53 zero bits then a one after one more zero: ``k = 54``, so
    ``U* ∈ [2^{−54}, 2^{−53})`` (below anything ``rng.random()`` can return but 0)."""
    u = full_precision_uniform(4, rng=_ZeroFirstWord())  # type: ignore[arg-type]
    assert 2.0**-54 <= u[0] < 2.0**-53
    assert np.all(u[1:] >= 2.0**-53)


def test_full_precision_uniform_seed_reproduces_and_entropy_differs() -> None:
    a = full_precision_uniform((3, 4), rng=np.random.default_rng(5))
    b = full_precision_uniform((3, 4), rng=np.random.default_rng(5))
    c = full_precision_uniform((3, 4), rng=np.random.default_rng())
    assert a.shape == (3, 4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


# ---- the accounting ----


@settings(max_examples=200, deadline=None)
@given(
    delta=st.floats(1e-6, 1e6),
    eps=st.floats(1e-6, 1e4),
    centre=st.floats(-1e6, 1e6),
)
def test_snapping_guarantee_never_exceeds_the_stated_epsilon(
    delta: float, eps: float, centre: float
) -> None:
    """[Mir12] Theorem 1 (``ε' = (1 + ρB)/λ`` for sensitivity 1, ``λ < B < 2^{46}λ``)
    with the chosen constants: ``ε' ≤ ε``, the theorem's range holds, ``Λ`` is the
    smallest power of two ``≥ λ``, and the noise scale is the textbook ``Δ/ε`` up to
    the float slack, a relative ``2^{−44}·(1 + magnitude/Δ + 42/ε)``."""
    mag = abs(centre) + delta / 2.0
    p = snapping_parameters(
        np.array([delta]), np.array([eps]), half_range=np.array([delta / 2.0]),
        magnitude=np.array([mag]),
    )  # fmt: skip
    lam, grid, bound = float(p.lam[0]), float(p.grid[0]), float(p.bound[0])
    recomputed = (1.0 + SNAP_FP_TERM * bound) / lam
    assert recomputed <= eps
    assert float(p.guaranteed_epsilon[0]) <= eps
    assert lam < bound < 2.0**46 * lam
    assert grid >= lam > grid / 2.0
    assert math.log2(grid) == int(math.log2(grid))
    assert float(p.unit[0]) >= delta
    slack = 2.0**-44 * (1.0 + mag / delta + 42.0 / eps)
    assert delta / eps <= float(p.unit[0]) * lam <= delta / eps * (1.0 + slack)


def test_snapping_refuses_budgets_outside_the_theorem() -> None:
    for eps in (0.0, 1e-13, np.inf, np.nan):
        with pytest.raises(ValueError, match="epsilon"):
            snapping_parameters(
                np.array([1.0]), np.array([eps]), half_range=np.array([0.5]),
                magnitude=np.array([1.0]),
            )  # fmt: skip


# ---- the release ----


def _release_coins(seed: int, n: int) -> np.ndarray:
    """The shift coins ``V`` of :func:`snapped_laplace` (drawn first)."""
    return np.random.default_rng(seed).random(n)


def test_snapped_reports_lie_on_the_shifted_grid_within_the_clamp() -> None:
    """Every report is ``c + Δ_eff·(kΛ + σ)`` with an integer ``k``, ``|kΛ| ≤ B``: the
    released value carries no low bits of the input beyond the public shift."""
    n, seed = 50_000, 17
    rng = np.random.default_rng(seed)
    values = rng.uniform(-0.3, 0.45, n)
    eps = rng.uniform(0.1, 8.0, n)
    z = snapped_laplace(
        values, low=-0.3, high=0.45, epsilon=eps, rng=np.random.default_rng(seed)
    )
    p = snapping_parameters(
        np.full(n, 0.75), eps, half_range=np.full(n, 0.375),
        magnitude=np.full(n, 0.075 + 0.375),
    )  # fmt: skip
    sigma = _release_coins(seed, n) * p.grid
    k = ((z - 0.075) / p.unit - sigma) / p.grid
    assert np.max(np.abs(k - np.rint(k))) < 1e-6
    assert np.all(np.abs(np.rint(k) * p.grid) <= p.bound)


@pytest.mark.parametrize("value", [-0.3, 0.0, 0.2, 0.45, 5.0])
def test_snapped_reports_are_unbiased_for_the_projection(
    value: float, rng: np.random.Generator
) -> None:
    """``E z = Π(value)`` (the random shift averages the rounding out) and
    ``Var z = Δ_eff²(2λ² + Λ²/12)``."""
    eps = 1.3
    z = snapped_laplace(
        np.full(DRAWS, value), low=-0.3, high=0.45, epsilon=eps, rng=rng
    )
    p = snapping_parameters(
        np.array([0.75]), np.array([eps]), half_range=np.array([0.375]),
        magnitude=np.array([0.45]),
    )  # fmt: skip
    var = float(p.unit[0] ** 2 * (2 * p.lam[0] ** 2 + p.grid[0] ** 2 / 12))
    target = min(max(value, -0.3), 0.45)
    zstat = (z.mean() - target) / math.sqrt(var / DRAWS)
    assert abs(zstat) < stats.norm.isf(ALPHA / 2)
    assert z.var() == pytest.approx(var, rel=0.03)


def test_snapped_release_seed_reproduces_and_entropy_differs() -> None:
    v = np.linspace(-1, 1, 20)
    a = snapped_laplace(
        v, low=-1.0, high=1.0, epsilon=1.0, rng=np.random.default_rng(3)
    )
    b = snapped_laplace(
        v, low=-1.0, high=1.0, epsilon=1.0, rng=np.random.default_rng(3)
    )
    c = snapped_laplace(v, low=-1.0, high=1.0, epsilon=1.0, rng=np.random.default_rng())
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


# ---- empirical audit: lower bound on ε from the worst pair of inputs ----

Release = Callable[[np.ndarray, float, np.random.Generator], np.ndarray]


def _honest(v: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    return snapped_laplace(v, low=-1.0, high=1.0, epsilon=eps, rng=rng)


def _twin(v: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Claims ε, randomizes at 2ε (a planted calibration bug)."""
    return snapped_laplace(v, low=-1.0, high=1.0, epsilon=2.0 * eps, rng=rng)


def _cp(k: int, n: int, a: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta_dist.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(1 - a, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(
    release: Release, eps: float, rng: np.random.Generator
) -> float:
    """``max_t log(P_low(z > t | 1)/P_high(z > t | −1))`` over thresholds at the upper
    end of the range (where the Laplace tail ratio is ``e^ε``), with Clopper–Pearson
    bounds at level ``ALPHA`` split over the events (Bonferroni)."""
    hi_in = release(np.full(DRAWS, 1.0), eps, rng)
    lo_in = release(np.full(DRAWS, -1.0), eps, rng)
    thresholds = [1.0 + j * 0.5 / eps for j in range(4)]
    a = ALPHA / (2 * len(thresholds))
    best = -math.inf
    for t in thresholds:
        k1, k0 = int(np.sum(hi_in > t)), int(np.sum(lo_in > t))
        lo, _ = _cp(k1, DRAWS, a)
        _, hi = _cp(k0, DRAWS, a)
        if lo > 0:
            best = max(best, math.log(lo / hi))
    return best


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_snapped_release_passes_the_audit_and_its_broken_twin_fails(
    eps: float, rng: np.random.Generator
) -> None:
    honest = epsilon_lower_bound(_honest, eps, rng)
    broken = epsilon_lower_bound(_twin, eps, rng)
    assert honest <= eps
    assert honest > 0.85 * eps  # tight enough to mean something
    assert broken > eps


# ---- the floating-point attack that the snapped release closes ----


def _textbook(
    value: float, scale: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    """The release the learners used before: ``value + scale·rng.laplace()``."""
    return value + scale * rng.laplace(0.0, 1.0, n)


def _consistent_with(z: np.ndarray, x: float, scale: float) -> np.ndarray:
    """Mironov's test [Mir12]: could ``z`` be ``x + scale·L`` for a Laplace draw ``L``
    that numpy can produce? numpy draws ``U = k·2^{−53}`` and returns
    ``log(2U)`` (``U < 1/2``) or ``−log(2 − 2U)``; invert, round ``k``, recompute."""
    d = (z - x) / scale
    out = np.zeros(z.shape, dtype=bool)
    with np.errstate(all="ignore"):
        for u in (np.exp(d) / 2.0, 1.0 - np.exp(-d) / 2.0):
            k0 = np.rint(u * 2.0**53)
            for dk in (-2, -1, 0, 1, 2):
                uc = (k0 + dk) / 2.0**53
                lap = np.where(uc >= 0.5, -np.log(2.0 - uc - uc), np.log(uc + uc))
                out |= (x + scale * lap == z) & (uc > 0) & (uc < 1)
    return out


def test_the_textbook_release_fails_the_floating_point_audit(
    rng: np.random.Generator,
) -> None:
    """The planted twin of this section: textbook Laplace at a claimed ε = 1
    (sensitivity 1, scale 1). Most of its outputs from input 0 are *impossible* from
    input 1 (their low bits give the input away), so the event "z is inconsistent with
    input 1" has probability ≈ 0.8 under 0 and ≈ 0 under 1: the audit's lower bound
    on ε is far above 1. The snapped release's outputs are grid points that every input
    reaches (``test_snapped_reports_lie_on_the_shifted_grid_within_the_clamp``), and its
    audit stays below ε (above)."""
    n = 50_000
    from_0 = _textbook(0.0, 1.0, n, rng)
    from_1 = _textbook(1.0, 1.0, n, rng)
    k0 = int(np.sum(~_consistent_with(from_0, 1.0, 1.0)))
    k1 = int(np.sum(~_consistent_with(from_1, 1.0, 1.0)))
    lo, _ = _cp(k0, n, ALPHA / 2)
    _, hi = _cp(k1, n, ALPHA / 2)
    assert math.log(lo / hi) > 3.0  # claimed ε = 1


def test_snapped_release_keeps_the_broadcast_shape() -> None:
    """Scalars, empty arrays and matrices; ``ε = ∞`` entries are the projection."""
    rng = np.random.default_rng(0)
    assert snapped_laplace(0.2, low=0.0, high=1.0, epsilon=1.0, rng=rng).shape == ()
    assert (
        snapped_laplace(np.array([]), low=0.0, high=1.0, epsilon=1.0, rng=rng).size == 0
    )
    z = snapped_laplace(np.full((2, 3), 7.0), low=0.0, high=1.0, epsilon=1.0, rng=rng)
    assert z.shape == (2, 3)
    mixed = snapped_laplace(
        [0.2, 7.0], low=0.0, high=1.0, epsilon=[np.inf, 1.0], rng=rng
    )
    assert mixed[0] == 0.2
    assert np.isfinite(mixed[1])
