"""The paper's experiment (spec ``ldp-logistic-missing-data.md`` §10 V-A4, V-A5, V-A7 b,
and the issue's §9 check): 10 trials per cell at n = 10⁵, ``x ~ U[−1, 1]``,
``β* = (0, 1)``, γ = 0.1, R_β = √2, R_α = 4, ε₁ = ε₂ = ε/2. All ``slow``.

The bands are the spec's, set from an independent implementation's calibration;
Tables 1 and 3 of the paper are not asserted (spec §8.2).
"""

from __future__ import annotations

import math
import zlib
from functools import cache

import numpy as np
import pytest

from learners.ldp_missing import run_trials
from tests.conftest import SEED

pytestmark = pytest.mark.slow

N, TRIALS = 100_000, 10
BETA = (0.0, 1.0)


@cache
def cell(
    convention: str,
    alpha: tuple[float, float],
    eps: float | tuple[float, float],
    method: str,
    alpha_radius: float = 4.0,
    gamma: float = 0.1,
    trials: int = TRIALS,
) -> dict[str, np.ndarray]:
    """Risks, errors and ``α̂`` of ``TRIALS`` fits (``eps`` a pair: half the users at
    each budget)."""
    key = repr((convention, alpha, eps, method, alpha_radius, gamma, trials)).encode()
    rng = np.random.default_rng([SEED, zlib.crc32(key)])
    if isinstance(eps, tuple):
        budget = np.where(np.arange(N) < N // 2, eps[0], eps[1])
    else:
        budget = np.full(N, eps)
    opts = {"alpha_radius": alpha_radius} if method == "two_phase" else {}
    runs = run_trials(
        method,  # type: ignore[arg-type]
        trials=trials,
        n=N,
        beta=BETA,
        alpha=alpha,
        alpha_parametrizes=convention,  # type: ignore[arg-type]
        epsilon=budget,
        rng=rng,
        gamma=gamma,
        **opts,
    )
    risks = [t.risk for t in runs]
    errs = [t.err for t in runs]
    alphas = [t.alpha for t in runs if t.alpha is not None]
    return {"risk": np.array(risks), "err": np.array(errs), "alpha": np.array(alphas)}


def mean_risk(*key: object) -> float:
    return float(cell(*key)["risk"].mean())  # type: ignore[arg-type]


def test_strong_dependence_large_epsilon_two_phase_wins() -> None:
    """V-A4.1: flipped (0, 3), ε = 10: TP risk < 0.01, DS risk in [0.025, 0.07],
    TP err < DS err − 0.3."""
    tp = cell("observed", (0.0, 3.0), 10.0, "two_phase")
    ds = cell("observed", (0.0, 3.0), 10.0, "dummy")
    assert tp["risk"].mean() < 0.01
    assert 0.025 <= ds["risk"].mean() <= 0.07
    assert tp["err"].mean() < ds["err"].mean() - 0.3


def test_strong_dependence_moderate_epsilon() -> None:
    """V-A4.2: flipped (0, 3), ε = 1: TP risk < DS risk."""
    assert mean_risk("observed", (0.0, 3.0), 1.0, "two_phase") < mean_risk(
        "observed", (0.0, 3.0), 1.0, "dummy"
    )


@pytest.mark.parametrize("alpha", [(1.0, 1.0), (0.0, 3.0)])
def test_small_epsilon_no_significant_difference(alpha: tuple[float, float]) -> None:
    """V-A4.3: ε = 0.1: |mean DS − mean TP| risk < the larger sd."""
    tp = cell("observed", alpha, 0.1, "two_phase")["risk"]
    ds = cell("observed", alpha, 0.1, "dummy")["risk"]
    assert abs(ds.mean() - tp.mean()) < max(ds.std(), tp.std())


def test_weak_dependence_both_small() -> None:
    """V-A4.4: flipped (1, 1), ε = 10: both < 0.01; DS in [0.002, 0.008] (its bias
    floor is 0.0040)."""
    ds = mean_risk("observed", (1.0, 1.0), 10.0, "dummy")
    assert mean_risk("observed", (1.0, 1.0), 10.0, "two_phase") < 0.01
    assert 0.002 <= ds <= 0.008


@pytest.mark.parametrize(
    ("alpha", "limit"), [((1.0, 1.0), 0.0748), ((0.0, 3.0), 0.2385)]
)
def test_sign_as_written_dummy_reaches_its_biased_limit(
    alpha: tuple[float, float], limit: float
) -> None:
    """V-A4.5: as written, ε = 10: DS risk within 30 % of V-A3's population excess
    risk, and TP risk < DS risk."""
    ds = mean_risk("missing", alpha, 10.0, "dummy")
    assert abs(ds - limit) <= 0.3 * limit
    assert mean_risk("missing", alpha, 10.0, "two_phase") < ds


@pytest.mark.parametrize("convention", ["missing", "observed"])
@pytest.mark.parametrize("alpha", [(1.0, 1.0), (0.0, 3.0)])
def test_two_phase_improves_with_epsilon(
    convention: str, alpha: tuple[float, float]
) -> None:
    """V-A4.6: TP risk at ε = 10 < at ε = 0.1 in all four cells; DS too at flipped
    (1, 1). Under the sign as written TP's risks have sd 0.03–0.07 per trial and the
    gap is ≈ 0.03, so those cells take 30 trials (10 fail for some seeds)."""
    trials = 30 if convention == "missing" else TRIALS
    tp = ("two_phase", 4.0, 0.1, trials)
    assert mean_risk(convention, alpha, 10.0, *tp) < mean_risk(
        convention, alpha, 0.1, *tp
    )
    if convention == "observed" and alpha == (1.0, 1.0):
        assert mean_risk(convention, alpha, 10.0, "dummy") < mean_risk(
            convention, alpha, 0.1, "dummy"
        )


def test_alpha_radius_must_cover_the_missingness_model() -> None:
    """V-A5: flipped (0, 3), ε = 10: with R_α = 4, mean α̂ within 0.2 of (0, −3) and TP
    risk < 0.005; with R_α = √2, ‖α̂‖ ≤ √2 and the risk is larger."""
    wide = cell("observed", (0.0, 3.0), 10.0, "two_phase")
    narrow = cell("observed", (0.0, 3.0), 10.0, "two_phase", math.sqrt(2))
    np.testing.assert_allclose(wide["alpha"].mean(axis=0), (0.0, -3.0), atol=0.2)
    assert wide["risk"].mean() < 0.005
    assert np.linalg.norm(narrow["alpha"], axis=1).max() <= math.sqrt(2) + 1e-12
    assert narrow["risk"].mean() > wide["risk"].mean()


def test_heterogeneous_budgets_beat_the_weaker_budget() -> None:
    """V-A7 b and the issue's §9 check: flipped (0, 3), half the users at ε = 1 and
    half at ε = 10 with per-user steps: mean TP risk below all-at-1 and above
    all-at-10 (calibrated 0.0036 vs 0.017 / 0.0016)."""
    mixed = mean_risk("observed", (0.0, 3.0), (1.0, 10.0), "two_phase")
    assert mixed < mean_risk("observed", (0.0, 3.0), 1.0, "two_phase")
    assert mixed > mean_risk("observed", (0.0, 3.0), 10.0, "two_phase")


def test_larger_gamma_is_noisier_informational() -> None:
    """V-A4.7 (informational in the spec; asserted loosely): γ = 1 does not beat
    γ = 0.1 by much at flipped (0, 3), ε = 10."""
    g1 = mean_risk("observed", (0.0, 3.0), 10.0, "two_phase", 4.0, 1.0)
    g01 = mean_risk("observed", (0.0, 3.0), 10.0, "two_phase")
    assert g1 > 0.5 * g01
