"""Myerson ironing (spec ``mechanism.md`` §2) against independent references.

The ironed interval ``[a, b]`` and the ironed value ``K`` are computed here without the
hull: ``H(F(c)) = c·F(c)``, so the tangent chord of ``H`` satisfies ``Ψ(a) = Ψ(b) = K``
and ``K·(F(b) − F(a)) = b·F(b) − a·F(a)``; ``F`` and ``f`` come from ``scipy.stats``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from mechanisms.priors import (
    BetaPrior,
    EmpiricalPrior,
    ExponentialPrior,
    GaussianMixturePrior,
    LogNormalPrior,
    TruncatedNormalPrior,
    UniformPrior,
)
from mechanisms.priors._ironing import IronedPrior, lower_convex_hull

W, M, S = (0.5, 0.5), (0.2, 0.7), (0.02, 0.02)


def _ref_cdf_pdf(c: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """The two-bump mixture on [0, 1] from scipy.stats.norm."""
    c = np.asarray(c, dtype=float)
    mass = sum(
        0.5 * (stats.norm.cdf(1, m, s) - stats.norm.cdf(0, m, s))
        for m, s in zip(M, S, strict=True)
    )
    cdf = sum(
        0.5 * (stats.norm.cdf(c, m, s) - stats.norm.cdf(0, m, s))
        for m, s in zip(M, S, strict=True)
    )
    pdf = sum(0.5 * stats.norm.pdf(c, m, s) for m, s in zip(M, S, strict=True))
    return cdf / mass, pdf / mass


def _ref_psi(c: float) -> float:
    cdf, pdf = _ref_cdf_pdf(c)
    return float(c + cdf / pdf)


def _tangent_chord() -> tuple[float, float, float]:
    """Solve Ψ(a) = Ψ(b) = K, K(F(b) − F(a)) = bF(b) − aF(a) for the two-bump prior."""

    def equations(x: np.ndarray) -> list[float]:
        a, b = x
        fa, fb = float(_ref_cdf_pdf(a)[0]), float(_ref_cdf_pdf(b)[0])
        k = (b * fb - a * fa) / (fb - fa)
        return [_ref_psi(a) - k, _ref_psi(b) - k]

    sol = optimize.root(equations, [0.25, 0.73], tol=1e-13)
    assert sol.success
    a, b = sol.x
    fa, fb = float(_ref_cdf_pdf(a)[0]), float(_ref_cdf_pdf(b)[0])
    return float(a), float(b), (b * fb - a * fa) / (fb - fa)


@pytest.fixture(scope="module")
def bumps() -> GaussianMixturePrior:
    return GaussianMixturePrior(W, M, S, 0.0, 1.0)


@pytest.fixture(scope="module")
def ironed(bumps: GaussianMixturePrior) -> IronedPrior:
    return IronedPrior(bumps)


# ------------------------------------------------------------------ the hull
def _brute_force_lower_hull(x: np.ndarray, y: np.ndarray) -> list[int]:
    """i is a vertex iff no chord (j, k), j < i < k, passes below or through it."""
    out = []
    for i in range(x.size):
        covered = any(
            y[j] + (y[k] - y[j]) * (x[i] - x[j]) / (x[k] - x[j]) <= y[i]
            for j, k in itertools.product(range(i), range(i + 1, x.size))
        )
        if not covered:
            out.append(i)
    return out


def test_lower_hull_matches_brute_force(rng: np.random.Generator) -> None:
    for _ in range(20):
        x = np.sort(rng.choice(np.arange(100), size=25, replace=False)).astype(float)
        y = rng.normal(size=25).round(2)
        assert lower_convex_hull(x, y).tolist() == _brute_force_lower_hull(x, y)


def test_lower_hull_drops_collinear_points_and_validates() -> None:
    x = np.arange(5.0)
    assert lower_convex_hull(x, 2 * x).tolist() == [0, 4]
    assert lower_convex_hull(x, (x - 2) ** 2).tolist() == [0, 1, 2, 3, 4]
    assert lower_convex_hull(x, -((x - 2) ** 2)).tolist() == [0, 4]
    with pytest.raises(ValueError, match="increasing"):
        lower_convex_hull([0.0, 0.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="same"):
        lower_convex_hull([0.0, 1.0], [1.0])


# ----------------------------------------------------------- two narrow bumps
def test_bumps_irregular_and_ironed_regular(
    bumps: GaussianMixturePrior, ironed: IronedPrior
) -> None:
    assert not bumps.check_regularity().regular
    report = ironed.check_regularity()
    assert report.regular
    assert report.worst_decrease == 0.0
    c = np.concatenate([np.linspace(0, 1, 20001), bumps.ppf(np.linspace(0, 1, 5001))])
    psi_bar = ironed.virtual_cost(np.sort(c))
    assert np.all(np.diff(psi_bar) >= 0)


def test_ironed_interval_and_value_match_tangent_chord(ironed: IronedPrior) -> None:
    a, b, k = _tangent_chord()
    assert len(ironed.ironed_intervals) == 1
    lo, hi = ironed.ironed_intervals[0]
    assert lo == pytest.approx(a, abs=2e-3)
    assert hi == pytest.approx(b, abs=2e-3)
    inside = np.linspace(a + 3e-3, b - 3e-3, 201)
    np.testing.assert_allclose(ironed.virtual_cost(inside), k, rtol=1e-6)
    eps = 1e-9 * (hi - lo)
    whole = np.concatenate([[lo + eps], np.linspace(lo, hi, 1001)[1:-1], [hi - eps]])
    assert np.ptp(ironed.virtual_cost(whole)) == 0.0  # exactly constant on (lo, hi)
    np.testing.assert_allclose(ironed.virtual_cost_derivative(inside), 0.0, atol=0)


def test_ironed_equals_psi_away_from_the_interval(
    bumps: GaussianMixturePrior, ironed: IronedPrior
) -> None:
    a, b, _ = _tangent_chord()
    outside = np.concatenate(
        [np.linspace(0.0, a - 3e-3, 200), np.linspace(b + 3e-3, 0.85, 200)]
    )
    expected = np.array([_ref_psi(c) for c in outside[1:]])
    np.testing.assert_allclose(ironed.virtual_cost(outside[1:]), expected, rtol=1e-10)
    assert ironed.virtual_cost(0.0) == 0.0
    h = 1e-7
    mid = np.array([0.1, 0.2, 0.75, 0.8])
    fd = (bumps.virtual_cost(mid + h) - bumps.virtual_cost(mid - h)) / (2 * h)
    np.testing.assert_allclose(ironed.virtual_cost_derivative(mid), fd, rtol=1e-5)


def test_ironing_preserves_the_expected_virtual_cost(ironed: IronedPrior) -> None:
    """∫ Ψ̄ dF = ∫ Ψ dF = [c·F(c)]_low^high = 1·1 − 0 (hull endpoints agree)."""
    a, b, _ = _tangent_chord()

    def integrand(c: float) -> float:
        return ironed.virtual_cost(c) * float(_ref_cdf_pdf(c)[1])

    total, _ = integrate.quad(integrand, 0.0, 1.0, points=[a, b, 0.2, 0.7], limit=400)
    assert total == pytest.approx(1.0, abs=1e-7)
    # Per interval too: K·(F(b) − F(a)) = ∫_a^b Ψ dF (quadrature of the base Ψ).
    part, _ = integrate.quad(
        lambda c: _ref_psi(c) * float(_ref_cdf_pdf(c)[1]), a, b, limit=400
    )
    fa, fb = float(_ref_cdf_pdf(a)[0]), float(_ref_cdf_pdf(b)[0])
    assert ironed.virtual_cost((a + b) / 2) * (fb - fa) == pytest.approx(part, rel=1e-6)


def test_delegation_and_equality(
    bumps: GaussianMixturePrior, ironed: IronedPrior
) -> None:
    c = np.linspace(0.0, 1.0, 11)
    np.testing.assert_array_equal(ironed.cdf(c), bumps.cdf(c))
    np.testing.assert_array_equal(ironed.pdf(c), bumps.pdf(c))
    np.testing.assert_array_equal(ironed.ppf([0.1, 0.5]), bumps.ppf([0.1, 0.5]))
    assert (ironed.low, ironed.high) == (0.0, 1.0)
    assert ironed == IronedPrior(bumps)
    assert hash(ironed) == hash(IronedPrior(bumps))
    with pytest.raises(ValueError, match=r"c\[0\]"):
        ironed.virtual_cost([1.5])


# ------------------------------------------------------ irregular at the top
def test_beta_below_one_is_ironed_up_to_the_top() -> None:
    """Beta(2, 0.5) on [0.1, 0.6]: the ironed interval is [a, high] with
    Ψ(a) = K = (high − a·F(a))/(1 − F(a)) (H(1) = high), solved with scipy.stats.beta."""
    prior = BetaPrior(2.0, 0.5, 0.1, 0.6)
    ref = stats.beta(2.0, 0.5, loc=0.1, scale=0.5)

    def tangency(a: float) -> float:
        return a + ref.cdf(a) / ref.pdf(a) - (0.6 - a * ref.cdf(a)) / (1 - ref.cdf(a))

    a = optimize.brentq(tangency, 0.3, 0.5999, xtol=1e-14)
    k = (0.6 - a * ref.cdf(a)) / (1 - ref.cdf(a))
    ironed = IronedPrior(prior)
    ((lo, hi),) = ironed.ironed_intervals
    assert lo == pytest.approx(a, abs=1e-3)
    assert hi == 0.6
    top = np.linspace(a + 2e-3, 0.6, 50)
    np.testing.assert_allclose(ironed.virtual_cost(top), k, rtol=1e-6)
    low_part = np.linspace(0.101, a - 2e-3, 50)
    np.testing.assert_allclose(
        ironed.virtual_cost(low_part),
        low_part + ref.cdf(low_part) / ref.pdf(low_part),
        rtol=1e-10,
    )


# ------------------------------------------------------------ regular priors
@pytest.mark.parametrize(
    "prior",
    [
        UniformPrior(0.1, 0.6),
        ExponentialPrior(3.0),
        TruncatedNormalPrior(0.3, 0.1, 0.05, 0.9),
        BetaPrior(2.5, 3.5, 0.1, 0.6),
        BetaPrior(2.0, 3.0, 0.0, 1.0),  # Ψ(high) = inf
        LogNormalPrior(-1.0, 0.5),
    ],
    ids=lambda p: p.family + str(getattr(p, "beta", "")),
)
def test_ironing_a_regular_prior_changes_nothing(prior) -> None:
    ironed = IronedPrior(prior)
    assert ironed.ironed_intervals == ()
    assert ironed.check_regularity().regular
    grid = prior.regularity_grid(n_points=999)
    np.testing.assert_allclose(
        ironed.virtual_cost(grid), prior.virtual_cost(grid), rtol=1e-12
    )
    if not math.isfinite(prior.high):  # beyond the last node: base Ψ
        far = prior.ppf(1 - 1e-12)
        assert ironed.virtual_cost(far) == prior.virtual_cost(far)


def test_unbounded_irregular_mixture() -> None:
    prior = GaussianMixturePrior((0.7, 0.3), (1.0, 3.0), (0.1, 0.1))
    assert math.isinf(prior.high)
    assert not prior.check_regularity().regular
    ironed = IronedPrior(prior)
    assert ironed.check_regularity().regular
    assert len(ironed.ironed_intervals) == 1
    far = np.array([3.7, 4.0])  # beyond F^{-1}(1 − 1e-9): the base Ψ, increasing there
    np.testing.assert_array_equal(ironed.virtual_cost(far), prior.virtual_cost(far))


def test_empirical_bimodal_history_ironed(rng: np.random.Generator) -> None:
    bids = np.concatenate([rng.normal(0.2, 0.02, 60), rng.normal(0.6, 0.02, 60)])
    prior = EmpiricalPrior.from_bids(bids)
    ironed = IronedPrior(prior, n_points=1001)
    assert ironed.check_regularity().regular
    assert len(ironed.ironed_intervals) >= 1
    total, _ = integrate.quad(
        lambda c: ironed.virtual_cost(c) * prior.pdf(c),
        0.0,
        prior.high,
        limit=400,
        points=[x for iv in ironed.ironed_intervals for x in iv],
    )
    assert total == pytest.approx(prior.high, rel=1e-6)  # = high·F(high) − 0


def test_validation() -> None:
    with pytest.raises(ValueError, match="n_points"):
        IronedPrior(UniformPrior(0.1, 0.6), n_points=3)
    with pytest.raises(ValueError, match="base"):
        IronedPrior("uniform")  # type: ignore[arg-type]


def test_gap_where_psi_overflows() -> None:
    """Between two very narrow bumps f underflows, so Ψ = inf there: still irregular
    (a fall from inf), and the ironed Ψ̄ is finite, constant across the gap and regular."""
    prior = GaussianMixturePrior((0.5, 0.5), (0.2, 0.8), (0.005, 0.005), 0.0, 1.0)
    assert prior.virtual_cost(0.5) == math.inf
    report = prior.check_regularity()
    assert not report.regular
    assert report.worst_decrease == math.inf
    ironed = IronedPrior(prior)
    assert ironed.check_regularity().regular
    ((lo, hi),) = ironed.ironed_intervals
    assert lo < 0.3
    assert hi > 0.7
    gap = ironed.virtual_cost(np.linspace(0.3, 0.7, 41))
    assert np.all(np.isfinite(gap))
    assert np.ptp(gap) == 0.0
    # K·(F(hi) − F(lo)) = hi·F(hi) − lo·F(lo), with F from scipy.stats.norm.
    cdf = [
        sum(
            0.5 * (stats.norm.cdf(x, m, 0.005) - stats.norm.cdf(0, m, 0.005))
            for m in (0.2, 0.8)
        )
        for x in (lo, hi)
    ]
    k = (hi * cdf[1] - lo * cdf[0]) / (cdf[1] - cdf[0])
    assert gap[0] == pytest.approx(k, rel=1e-9)
