"""Cost priors and virtual costs (spec ``mechanism.md`` §2) against independent references.

References: closed forms worked by hand, ``scipy.stats`` frozen distributions, tail
asymptotics, ``mpmath`` (when installed) and central finite differences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from mechanisms.priors import (
    BetaPrior,
    CostPrior,
    EmpiricalPrior,
    ExponentialPrior,
    GaussianMixturePrior,
    IronedPrior,
    LogNormalPrior,
    TruncatedNormalPrior,
    UniformPrior,
    check_usable,
    ensure_regular,
    prior_from_dict,
    virtual_costs,
)

# (prior, the same law as a frozen scipy.stats distribution, interior test costs)
FAMILIES = [
    (
        UniformPrior(0.1, 0.6),
        stats.uniform(loc=0.1, scale=0.5),
        np.linspace(0.11, 0.59, 9),
    ),
    (ExponentialPrior(3.0), stats.expon(scale=1 / 3.0), np.linspace(0.01, 4.0, 9)),
    (
        TruncatedNormalPrior(0.3, 0.1, 0.05, 0.9),
        stats.truncnorm(-2.5, 6.0, loc=0.3, scale=0.1),
        np.linspace(0.06, 0.85, 9),
    ),
    (
        BetaPrior(2.5, 3.5, 0.1, 0.6),
        stats.beta(2.5, 3.5, loc=0.1, scale=0.5),
        np.linspace(0.11, 0.59, 9),
    ),
    (
        LogNormalPrior(-1.0, 0.5),
        stats.lognorm(0.5, scale=math.exp(-1.0)),
        np.linspace(0.05, 2.0, 9),
    ),
]
IDS = ["uniform", "exponential", "truncated_normal", "beta", "lognormal"]


# ------------------------------------------------------------------ closed forms
def test_uniform_virtual_cost_is_2c_minus_low() -> None:
    prior = UniformPrior(0.1, 0.6)
    c = np.array([0.1, 0.2, 0.35, 0.6])
    np.testing.assert_allclose(prior.virtual_cost(c), 2 * c - 0.1, rtol=0, atol=1e-15)
    np.testing.assert_allclose(prior.virtual_cost_derivative(c), 2.0)


def test_uniform_one_report_is_the_array_value_to_the_bit() -> None:
    """One float inside the support takes scalar arithmetic: the same value to the bit
    as the array form at that cost (a payment's re-solves read it), a Python float;
    outside the support it is refused as the array form refuses it."""
    prior = UniformPrior(1e-4, 5e-4)
    c = np.random.default_rng(3).uniform(1e-4, 5e-4, 20_000)
    c[:2] = [1e-4, 5e-4]
    one = np.array([prior.virtual_cost(float(x)) for x in c])
    np.testing.assert_array_equal(one, prior.virtual_cost(c))
    assert type(prior.virtual_cost(float(c[5]))) is float
    assert prior.virtual_cost_derivative(float(c[5])) == 2.0
    with pytest.raises(ValueError, match="c"):
        prior.virtual_cost(6e-4)
    with pytest.raises(ValueError, match="c"):
        prior.virtual_cost_derivative(-1.0)


def test_uniform_paper_interval() -> None:
    # "U[e^-4, 5e^-4]" read as [0.0183, 0.0005] is reversed: rejected, naming high.
    with pytest.raises(ValueError, match="high"):
        UniformPrior(math.exp(-4), 5e-4)
    with pytest.raises(ValueError, match="high"):
        UniformPrior(0.3, 0.3)
    # Read as [e^-4, 5·e^-4] it is a sane interval and Ψ(c) = 2c − e^-4.
    prior = UniformPrior(math.exp(-4), 5 * math.exp(-4))
    c = np.array([0.02, 0.05, 0.09])
    np.testing.assert_allclose(prior.virtual_cost(c), 2 * c - math.exp(-4), rtol=1e-14)


def test_scalar_in_scalar_out_array_in_array_out() -> None:
    prior = ExponentialPrior(2.0)
    assert isinstance(prior.virtual_cost(0.5), float)
    assert isinstance(prior.cdf(0.5), float)
    out = prior.virtual_cost([[0.1, 0.2], [0.3, 0.4]])
    assert isinstance(out, np.ndarray)
    assert out.shape == (2, 2)
    assert out.dtype == np.float64


def test_exponential_closed_form_and_small_cost_stability() -> None:
    r = 2.5
    prior = ExponentialPrior(r)
    c = np.array([0.0, 0.1, 1.0, 5.0])
    np.testing.assert_allclose(
        prior.virtual_cost(c), c + (np.exp(r * c) - 1) / r, rtol=1e-13
    )
    np.testing.assert_allclose(
        prior.virtual_cost_derivative(c), 1 + np.exp(r * c), rtol=1e-13
    )
    # At c = 1e-12, (e^{rc} − 1)/r = c(1 + rc/2 + ...): exp(rc) − 1 would lose ~4 digits.
    tiny = 1e-12
    assert prior.virtual_cost(tiny) == pytest.approx(
        2 * tiny + r * tiny**2 / 2, rel=1e-14
    )


@pytest.mark.parametrize(("prior", "ref", "c"), FAMILIES, ids=IDS)
def test_ratio_matches_scipy(
    prior: CostPrior, ref: stats.rv_continuous, c: np.ndarray
) -> None:
    """Ψ(c) − c equals F/f computed from the scipy.stats distribution."""
    np.testing.assert_allclose(
        prior.virtual_cost(c) - c, ref.cdf(c) / ref.pdf(c), rtol=1e-9
    )
    np.testing.assert_allclose(prior.cdf(c), ref.cdf(c), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(prior.pdf(c), ref.pdf(c), rtol=1e-12)
    q = np.array([0.0, 0.01, 0.3, 0.5, 0.9, 0.999])
    np.testing.assert_allclose(prior.ppf(q), ref.ppf(q), rtol=1e-9)


@pytest.mark.parametrize(("prior", "ref", "c"), FAMILIES, ids=IDS)
def test_cdf_pdf_outside_support(
    prior: CostPrior, ref: stats.rv_continuous, c: np.ndarray
) -> None:
    below = prior.low - 1.0
    assert prior.cdf(below) == 0.0
    assert prior.pdf(below) == 0.0
    if math.isfinite(prior.high):
        assert prior.cdf(prior.high + 1.0) == 1.0
        assert prior.pdf(prior.high + 1.0) == 0.0


@pytest.mark.parametrize(("prior", "ref", "c"), FAMILIES, ids=IDS)
def test_standard_families_are_regular(
    prior: CostPrior, ref: stats.rv_continuous, c: np.ndarray
) -> None:
    report = prior.check_regularity()
    assert report.regular
    assert report.worst_decrease == 0.0


@pytest.mark.parametrize(("prior", "ref", "c"), FAMILIES, ids=IDS)
def test_derivative_matches_finite_differences(
    prior: CostPrior, ref: stats.rv_continuous, c: np.ndarray
) -> None:
    h = 1e-6 * (c[-1] - c[0])
    fd = (prior.virtual_cost(c + h) - prior.virtual_cost(c - h)) / (2 * h)
    np.testing.assert_allclose(prior.virtual_cost_derivative(c), fd, rtol=1e-6)


def test_derivative_at_the_bottom_of_the_support() -> None:
    """Limits worked by hand: Beta Ψ'(low) = 1 + 1/α; log-normal Ψ'(0) = 1."""
    beta = BetaPrior(3.0, 2.0, 0.1, 0.6)
    assert beta.virtual_cost_derivative(0.1) == pytest.approx(1 + 1 / 3.0)
    h = 1e-7
    assert (beta.virtual_cost(0.1 + h) - 0.1) / h == pytest.approx(
        1 + 1 / 3.0, rel=1e-5
    )
    assert LogNormalPrior(0.0, 1.0).virtual_cost_derivative(0.0) == 1.0


def test_beta_with_beta_below_one_is_irregular() -> None:
    """Density → ∞ at the top, so F/f → 0 there and Ψ(high) = high < Ψ(interior)."""
    prior = BetaPrior(2.0, 0.5, 0.1, 0.6)
    assert prior.virtual_cost(0.6) == pytest.approx(0.6)
    report = prior.check_regularity()
    assert not report.regular
    assert report.worst_decrease > 0
    assert 0.1 < report.at < 0.6


# -------------------------------------------------------------------- tails
def test_truncated_normal_top_of_support_is_finite() -> None:
    """mean 0, std 1 on [0, 30]: Ψ(30) = 30 + (Φ(30) − Φ(0))/φ(30) = 30 + 0.5·√(2π)·e^{450}."""
    prior = TruncatedNormalPrior(0.0, 1.0, 0.0, 30.0)
    expected = 30 + 0.5 * math.sqrt(2 * math.pi) * math.exp(450.0)
    assert prior.virtual_cost(30.0) == pytest.approx(expected, rel=1e-10)


def test_truncated_normal_far_lower_tail() -> None:
    """mean 50, std 1, low 0, c = 1: F and f underflow; F/f = R(−49) − R(−50)φ(−50)/φ(−49),
    R = Φ/φ, with R(z) = (1/|z|)(1 − z⁻² + 3z⁻⁴ − 15z⁻⁶ + …) and the second term ~e^{−49.5}."""
    prior = TruncatedNormalPrior(50.0, 1.0, 0.0, 80.0)
    z = 49.0
    mills = (1 - z**-2 + 3 * z**-4 - 15 * z**-6 + 105 * z**-8) / z
    assert prior.virtual_cost(1.0) - 1.0 == pytest.approx(mills, rel=1e-11)


def test_truncated_normal_overflowing_top_is_rejected() -> None:
    with pytest.raises(ValueError, match="high"):
        TruncatedNormalPrior(0.0, 1.0, 0.0, 60.0)


def test_beta_underflowing_cdf_matches_mpmath() -> None:
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    a, b = 1000.0, 2.0
    prior = BetaPrior(a, b, 0.0, 1.0)
    for x in (0.3, 0.6, 0.9):  # I_x(1000, 2) < 1e-308 at the first two
        xm = mpmath.mpf(x)
        dens = xm ** (a - 1) * (1 - xm) ** (b - 1) / mpmath.beta(a, b)
        ratio = mpmath.betainc(a, b, 0, xm, regularized=True) / dens
        assert prior.virtual_cost(x) - x == pytest.approx(float(ratio), rel=1e-10)


def test_beta_with_beta_above_one_is_infinite_at_the_top() -> None:
    prior = BetaPrior(2.0, 3.0, 0.0, 1.0)
    assert prior.virtual_cost(1.0) == math.inf
    assert math.isfinite(prior.virtual_cost(1.0 - 1e-9))


def test_lognormal_upper_tail() -> None:
    """t = 10: F/f = σ c Φ(t)/φ(t) with Φ(10) = 1 − 7.6e-24 ≈ 1."""
    prior = LogNormalPrior(0.0, 0.5)
    c = math.exp(5.0)  # t = 10
    expected = 0.5 * c * math.sqrt(2 * math.pi) * math.exp(50.0)
    assert prior.virtual_cost(c) - c == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------- mixture / empirical
def _mixture_reference(
    c: np.ndarray, w, m, s, low, high
) -> tuple[np.ndarray, np.ndarray]:
    w = np.asarray(w) / np.sum(w)
    comps = [stats.norm(mj, sj) for mj, sj in zip(m, s, strict=True)]
    mass = sum(wj * (d.cdf(high) - d.cdf(low)) for wj, d in zip(w, comps, strict=True))
    pdf = sum(wj * d.pdf(c) for wj, d in zip(w, comps, strict=True)) / mass
    cdf = (
        sum(wj * (d.cdf(c) - d.cdf(low)) for wj, d in zip(w, comps, strict=True)) / mass
    )
    return cdf, pdf


def test_gaussian_mixture_matches_scipy_norm() -> None:
    w, m, s = (0.3, 0.7), (0.2, 0.6), (0.05, 0.1)
    prior = GaussianMixturePrior(w, m, s, 0.0, 1.0)
    c = np.linspace(0.01, 0.99, 11)
    cdf, pdf = _mixture_reference(c, w, m, s, 0.0, 1.0)
    np.testing.assert_allclose(prior.cdf(c), cdf, rtol=1e-12)
    np.testing.assert_allclose(prior.pdf(c), pdf, rtol=1e-12)
    np.testing.assert_allclose(prior.virtual_cost(c), c + cdf / pdf, rtol=1e-11)
    h = 1e-7
    fd = (prior.virtual_cost(c + h) - prior.virtual_cost(c - h)) / (2 * h)
    np.testing.assert_allclose(prior.virtual_cost_derivative(c), fd, rtol=1e-5)


def test_two_bump_mixture_is_irregular_and_ppf_inverts() -> None:
    prior = GaussianMixturePrior((0.5, 0.5), (0.2, 0.7), (0.02, 0.02), 0.0, 1.0)
    report = prior.check_regularity()
    assert not report.regular
    assert (
        0.2 < report.at < 0.7
    )  # Ψ = c + F/f peaks in the gap, falls into the 2nd bump
    q = np.linspace(0.0, 1.0, 101)
    x = prior.ppf(q)
    assert np.all(np.diff(x) >= 0)
    ref = _mixture_reference(x, (0.5, 0.5), (0.2, 0.7), (0.02, 0.02), 0.0, 1.0)[0]
    np.testing.assert_allclose(ref, q, atol=1e-12)


def test_empirical_prior_defaults_and_normalisation(rng: np.random.Generator) -> None:
    bids = rng.uniform(0.1, 0.6, size=200)
    prior = EmpiricalPrior.from_bids(bids)
    assert prior.low == 0.0
    assert prior.high == pytest.approx(bids.max() * 1.1)
    iqr = np.percentile(bids, 75) - np.percentile(bids, 25)
    silverman = 0.9 * min(bids.std(ddof=1), iqr / 1.34) * 200 ** (-0.2)
    assert prior.bandwidth == pytest.approx(silverman)
    total, _ = integrate.quad(prior.pdf, prior.low, prior.high, limit=200)
    assert total == pytest.approx(1.0, abs=1e-9)
    for c in (0.05, 0.3, 0.55):
        part, _ = integrate.quad(prior.pdf, prior.low, c, limit=200)
        assert prior.cdf(c) == pytest.approx(part, abs=1e-9)
    # Reflection at the ends: f'(low) = f'(high) = 0.
    h = 1e-6
    assert (
        abs(prior.pdf(h) - prior.pdf(0.0)) / h < 1e-3 * prior.pdf(0.0) / prior.bandwidth
    )


def test_empirical_prior_equals_reflected_kde_by_hand() -> None:
    bids = np.array([0.2, 0.25, 0.5])
    prior = EmpiricalPrior.from_bids(bids, bandwidth=0.05, low=0.0, high=0.7)
    c = np.linspace(0.0, 0.7, 15)
    centres = np.concatenate([bids, -bids, 1.4 - bids])
    raw = stats.norm.pdf(c[:, None], centres, 0.05).sum(axis=1)
    mass = (
        stats.norm.cdf(0.7, centres, 0.05) - stats.norm.cdf(0.0, centres, 0.05)
    ).sum()
    np.testing.assert_allclose(prior.pdf(c), raw / mass, rtol=1e-12)


def test_empirical_bimodal_bids_are_irregular(rng: np.random.Generator) -> None:
    bids = np.concatenate([rng.normal(0.2, 0.02, 60), rng.normal(0.6, 0.02, 60)])
    assert not EmpiricalPrior.from_bids(bids).check_regularity().regular


def test_empirical_prior_bad_bids() -> None:
    with pytest.raises(ValueError, match=r"bids\[1\]"):
        EmpiricalPrior.from_bids([0.1, -0.2, 0.3])
    with pytest.raises(ValueError, match=r"bids\[2\]"):
        EmpiricalPrior.from_bids([0.1, 0.2, math.nan])
    with pytest.raises(ValueError, match=r"bids\[0\]"):
        EmpiricalPrior.from_bids([0.9, 0.2], high=0.5)
    with pytest.raises(ValueError, match="bids"):
        EmpiricalPrior.from_bids([])
    with pytest.raises(ValueError, match="bandwidth"):
        EmpiricalPrior.from_bids([0.1, 0.2], bandwidth=0.0)


# ------------------------------------------------------------ validate_costs
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (math.nan, "not finite"),
        (math.inf, "not finite"),
        (-0.1, "negative"),
        (0.7, "above"),
    ],
)
def test_validate_costs_names_parameter_and_index(value: float, reason: str) -> None:
    prior = UniformPrior(0.0, 0.6)
    costs = [0.1, 0.2, value, 0.3, value]
    with pytest.raises(ValueError, match=rf"bids\[2\].*{reason}"):
        prior.validate_costs(costs, name="bids")
    with pytest.raises(ValueError, match=r"costs\[2\]"):
        prior.validate_costs(costs)


def test_validate_costs_below_support_and_tolerance() -> None:
    prior = UniformPrior(0.1, 0.6)
    with pytest.raises(ValueError, match=r"costs\[1\].*below"):
        prior.validate_costs([0.2, 0.05])
    out = prior.validate_costs([0.1 * (1 - 1e-13), 0.6 * (1 + 1e-13), 0.3])
    np.testing.assert_array_equal(out, [0.1, 0.6, 0.3])
    with pytest.raises(ValueError, match=r"c\[0\]"):
        prior.virtual_cost([0.7])


def test_support_must_start_at_a_nonnegative_finite_value() -> None:
    with pytest.raises(ValueError, match="low"):
        UniformPrior(-0.1, 0.5)
    with pytest.raises(ValueError, match="low"):
        TruncatedNormalPrior(0.0, 1.0, -math.inf, 1.0)
    with pytest.raises(ValueError, match="high"):
        UniformPrior(0.0, math.inf)
    with pytest.raises(ValueError, match="rate"):
        ExponentialPrior(-1.0)
    with pytest.raises(ValueError, match="std"):
        TruncatedNormalPrior(0.3, 0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="alpha"):
        BetaPrior(0.0, 1.0)
    with pytest.raises(ValueError, match="sigma_log"):
        LogNormalPrior(0.0, -1.0)


# ----------------------------------------------------- per-seller virtual costs
def test_virtual_costs_per_seller_priors() -> None:
    """Hand values: U[0.1, 0.6] → 2c − 0.1; Exp(2) → c + (e^{2c} − 1)/2."""
    uniform, expo = UniformPrior(0.1, 0.6), ExponentialPrior(2.0)
    costs = [0.2, 0.5, 0.3, 1.0]
    out = virtual_costs(costs, [uniform, expo, uniform, expo])
    expected = [0.3, 0.5 + (math.e - 1) / 2, 0.5, 1.0 + (math.e**2 - 1) / 2]
    np.testing.assert_allclose(out, expected, rtol=1e-14)
    np.testing.assert_allclose(
        virtual_costs(costs[:1] * 3, uniform), [0.3] * 3, rtol=1e-14
    )


def test_virtual_costs_errors_name_the_seller() -> None:
    uniform = UniformPrior(0.1, 0.6)
    with pytest.raises(ValueError, match=r"bids\[2\] = 0\.7 is above"):
        virtual_costs([0.2, 0.3, 0.7], [uniform] * 3, name="bids")
    with pytest.raises(ValueError, match=r"costs\[1\] = nan"):
        virtual_costs([0.2, math.nan], uniform)
    with pytest.raises(ValueError, match="priors"):
        virtual_costs([0.2, 0.3], [uniform])
    with pytest.raises(ValueError, match=r"priors\[1\]"):
        virtual_costs([0.2, 0.3], [uniform, "uniform"])  # type: ignore[list-item]


def test_ensure_regular() -> None:
    regular = UniformPrior(0.1, 0.6)
    assert ensure_regular(regular) is regular
    irregular = BetaPrior(2.0, 0.5, 0.1, 0.6)
    fixed = ensure_regular(irregular)
    assert isinstance(fixed, IronedPrior)
    assert fixed.base is irregular
    assert fixed.check_regularity().regular


# -------------------------------------------------------------------- sample
def test_sample_is_seeded_and_follows_the_prior() -> None:
    prior = ExponentialPrior(2.0)
    a, b = prior.sample(2000, rng=7), prior.sample(2000, rng=7)
    np.testing.assert_array_equal(a, b)
    # KS against scipy's exponential; fixed seed, so deterministic (1e-3 false-positive rate
    # over random seeds).
    assert stats.kstest(a, stats.expon(scale=0.5).cdf).pvalue > 1e-3
    with pytest.raises(ValueError, match="n"):
        prior.sample(-1)


def test_mixture_sample_follows_the_reference(rng: np.random.Generator) -> None:
    w, m, s = (0.5, 0.5), (0.2, 0.7), (0.03, 0.03)
    prior = GaussianMixturePrior(w, m, s, 0.0, 1.0)
    draws = prior.sample(2000, rng=rng)
    ref_cdf = lambda x: _mixture_reference(np.asarray(x), w, m, s, 0.0, 1.0)[0]  # noqa: E731
    assert stats.kstest(draws, ref_cdf).pvalue > 1e-3  # 1e-3 false-positive rate


# --------------------------------------------------------------- dict codec
ROUND_TRIP = [
    UniformPrior(0.1, 0.6),
    ExponentialPrior(3.0),
    TruncatedNormalPrior(0.3, 0.1, 0.0, 1.0),
    TruncatedNormalPrior(0.3, 0.1),
    BetaPrior(2.0, 3.0, 0.1, 0.6),
    LogNormalPrior(-1.0, 0.5),
    GaussianMixturePrior((1.0, 2.0), (0.2, 0.6), (0.05, 0.05), 0.0, 1.0),
    EmpiricalPrior.from_bids([0.1, 0.2, 0.4], bandwidth=0.05),
    IronedPrior(BetaPrior(2.0, 0.5, 0.1, 0.6), n_points=257),
]


@pytest.mark.parametrize("prior", ROUND_TRIP, ids=lambda p: p.family)
def test_dict_round_trip(prior: CostPrior) -> None:
    d = prior.to_dict()
    assert set(d) == {"family", "params"}
    back = prior_from_dict(d)
    assert type(back) is type(prior)
    assert back.to_dict() == d
    c = np.linspace(prior.low, min(prior.high, prior.low + 1.0), 7)[1:-1]
    np.testing.assert_array_equal(back.virtual_cost(c), prior.virtual_cost(c))


def test_api_dicts() -> None:
    prior = prior_from_dict({"family": "uniform", "params": {"low": 0.1, "high": 0.6}})
    assert prior == UniformPrior(0.1, 0.6)
    prior = prior_from_dict({"family": "exponential", "params": {"rate": 2}})
    assert prior == ExponentialPrior(2.0)
    emp = prior_from_dict({"family": "empirical", "params": {"bids": [0.1, 0.3, 0.2]}})
    assert emp.high == pytest.approx(0.33)


@pytest.mark.parametrize(
    ("d", "match"),
    [
        ({"family": "gamma", "params": {}}, "family"),
        ({"params": {"rate": 1.0}}, "family"),
        ({"family": "exponential", "params": {}}, "rate"),
        ({"family": "truncated_normal", "params": {"mean": 0.3}}, "std"),
        ({"family": "uniform", "params": {"low": 0.1, "hi": 0.6}}, "high"),
        ({"family": "exponential", "params": {"rate": 1.0, "scale": 2.0}}, "scale"),
        ({"family": "exponential", "params": {"rate": -1.0}}, "rate"),
        ({"family": "exponential", "params": {"rate": "fast"}}, "rate"),
        ({"family": "beta", "params": {"alpha": 1.0, "beta": 0.0}}, "beta"),
        ({"family": "uniform", "params": [0.1, 0.6]}, "params"),
        ("uniform", "prior"),
        ({"family": ["uniform"], "params": {}}, "family"),
        (
            {
                "family": "gaussian_mixture",
                "params": {"weights": [1], "means": ["a"], "stds": [1]},
            },
            "means",
        ),
        (
            {
                "family": "gaussian_mixture",
                "params": {"weights": [1, 1], "means": [0.2], "stds": [1]},
            },
            "means",
        ),
        (
            {
                "family": "gaussian_mixture",
                "params": {"weights": [1], "means": [0.2], "stds": [-1]},
            },
            "stds",
        ),
        ({"family": "empirical", "params": {"bids": ["x"]}}, "bids"),
        ({"family": "ironed", "params": {"base": "uniform"}}, "base"),
        (
            {
                "family": "ironed",
                "params": {
                    "base": {"family": "exponential", "params": {"rate": 1}},
                    "n_points": 2,
                },
            },
            "n_points",
        ),
    ],
)
def test_bad_dicts_name_the_problem(d: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        prior_from_dict(d)  # type: ignore[arg-type]


# ---------------------------------------------------------------- properties
@settings(max_examples=60, deadline=None)
@given(
    low=st.floats(0.0, 10.0),
    width=st.floats(1e-3, 10.0),
    fractions=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=20),
)
def test_uniform_psi_monotone_and_above_cost(
    low: float, width: float, fractions: list[float]
) -> None:
    prior = UniformPrior(low, low + width)
    c = np.sort(low + width * np.asarray(fractions))
    c = np.clip(c, prior.low, prior.high)
    psi = prior.virtual_cost(c)
    assert np.all(np.diff(psi) >= 0)
    assert np.all(psi >= c)


@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(1e-3, 1e3),
    scaled=st.lists(st.floats(0.0, 50.0), min_size=2, max_size=20),
)
def test_exponential_psi_monotone_and_above_cost(
    rate: float, scaled: list[float]
) -> None:
    prior = ExponentialPrior(rate)
    c = np.sort(np.asarray(scaled)) / rate
    psi = prior.virtual_cost(c)
    assert np.all(np.diff(psi) >= 0)
    assert np.all(psi >= c)


@pytest.mark.parametrize(("prior", "_law", "_costs"), FAMILIES)
def test_standard_families_are_usable(
    prior: CostPrior, _law: object, _costs: object
) -> None:
    check_usable(prior)  # no error


@pytest.mark.parametrize(
    "prior",
    # each parameter in a sane range, the density underflows to 0 (or overflows)
    # inside the support
    [BetaPrior(1000.0, 0.01), BetaPrior(0.01, 0.01)],
)
def test_check_usable_refuses_priors_the_mechanism_cannot_compute_with(
    prior: CostPrior,
) -> None:
    with pytest.raises(ValueError, match=r"density f\(c\) .* is not usable"):
        check_usable(prior)


@pytest.mark.parametrize(
    "prior",
    [
        UniformPrior(1e-4, 5e-4),
        BetaPrior(2.0, 5.0, 0.0, 1.0),
        TruncatedNormalPrior(1.0, 0.5, 0.0, 3.0),
        ExponentialPrior(2.0),
    ],
)
def test_one_float_virtual_cost_is_the_validated_one(prior: CostPrior) -> None:
    """The one-float path of ``virtual_cost`` (no validation pass) equals the array
    path bit for bit inside the support, ends included, and raises as it does
    outside (an infinite cost too, where the support is unbounded)."""
    top = prior.high if math.isfinite(prior.high) else prior.low + 10.0
    for s in [*np.linspace(prior.low, top, 57), prior.low, top]:
        assert prior.contains(float(s))
        assert prior.virtual_cost(float(s)) == prior.virtual_cost(np.array([s]))[0]
    for bad in (prior.low - 1.0, prior.high + 1.0, math.inf, math.nan):
        assert not prior.contains(bad)
        with pytest.raises(ValueError, match="c\\[0\\]"):
            prior.virtual_cost(bad)
