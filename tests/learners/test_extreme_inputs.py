"""Extreme finite inputs against every learner's randomizers and releases.

The rule (``docs/privacy-numerics.md``): a non-finite intermediate value (an overflowing
Gram matrix, ``∞ − ∞``) is mapped to a fixed public value before the noise, or the input
is refused at validation with a message that names the input and nothing about a
record. So whatever finite records a user holds (``±1e300``, ``1e−300``, mixed), each
message lies in its randomizer's output space (finite, within its norm or alphabet), a
release is finite, and a refusal reads the same whichever record caused it.

The first regression is the one measured by an outside audit: a user of
``uldp_sparse_linear`` whose records are near ``1e160`` overflowed its local Gram
matrix, and the Laplace report released ``NaN`` with probability 1 (the two-round fit
raised ``LinAlgError``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from learners._noise import snapping_parameters
from learners.hetero_dp_logistic import HeteroDPLogisticRegression
from learners.ldp_missing import LDPMissingLogisticRegression, private_sampling
from learners.ldp_missing._constants import sampling_radius
from learners.ldp_missing._sgd import private_sgd
from learners.onebit_quantile import OneBitQuantileRegression
from learners.onebit_quantile._randomizers import (
    bit_flip,
    bit_flip_probability,
    randomize_private_x,
)
from learners.secure_vertical import SecureVerticalLogisticRegression
from learners.uldp_sparse import ULDPSparseLinearRegression, independent_design
from learners.uldp_sparse._local import gram, local_ols
from learners.uldp_sparse._mean import uldp_mean
from learners.uldp_sparse._randomizers import bin_randomizer, laplace_randomizer

EXTREMES = [1e300, -1e300, 1e-300, -1e-300, 1e160, -1e160, 1.7e308, 0.0]
FINITE = st.one_of(st.sampled_from(EXTREMES), st.floats(-10, 10))
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
ANY_VALUE = st.one_of(FINITE, NON_FINITE)
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# ---- uldp_sparse_linear ----


@SETTINGS
@given(
    values=st.lists(ANY_VALUE, min_size=1, max_size=30),
    eps=st.floats(0.05, 20.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_uldp_randomizers_stay_in_their_output_space(
    values: list[float], eps: float, seed: int
) -> None:
    """Bins: ``±1``. Laplace: finite, within ``Δ_eff·(B + Λ)`` of the midpoint (the
    snapped release's clamp), for any input including ``NaN``/``±∞`` intermediates."""
    v = np.asarray(values)
    n = v.size
    rng = np.random.default_rng(seed)
    e = np.full(n, eps)
    bits = bin_randomizer(
        v, bound=1.0, n_bins=8, row=np.arange(n) % 8, epsilon=e, rng=rng
    )
    assert set(np.unique(bits).tolist()) <= {-1, 1}
    low, high = np.full(n, -0.3), np.full(n, 0.45)
    z = laplace_randomizer(v, low=low, high=high, epsilon=e, rng=rng)
    p = snapping_parameters(
        np.full(n, 0.75), e, half_range=np.full(n, 0.375), magnitude=np.full(n, 0.45)
    )
    assert np.isfinite(z).all()
    assert np.all(np.abs(z - 0.075) <= p.unit * (p.bound + p.grid) * (1 + 1e-12))


@SETTINGS
@given(scale=st.sampled_from([1e160, 1e200, 1e300, 1e-300]), seed=st.integers(0, 99))
def test_uldp_local_statistics_of_a_huge_user_are_public_zeros(
    scale: float, seed: int
) -> None:
    """A user whose Gram matrix overflows computes ``θ̂_i = 0`` (the public value);
    a tiny user's statistics stay finite; nobody's ``θ̂`` is ``NaN``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((40, 3))
    y = rng.standard_normal(40)
    user = np.repeat(np.arange(4), 10)
    X[user == 2] *= scale
    G, b, m = gram(X, y, user, np.arange(4))
    theta = local_ols(G, b)
    assert np.isfinite(G).all()
    assert np.isfinite(b).all()
    assert np.isfinite(theta).all()
    if scale > 1e150:
        np.testing.assert_array_equal(theta[2], 0.0)
    np.testing.assert_array_equal(m, 10.0)


@SETTINGS
@given(
    rows=st.lists(st.lists(FINITE, min_size=3, max_size=3), min_size=8, max_size=40),
    seed=st.integers(0, 2**32 - 1),
)
def test_uldp_mean_of_extreme_rows_is_finite(
    rows: list[list[float]], seed: int
) -> None:
    """ULDPMean's public rotation can overflow a user's vector (``∞ − ∞``); the
    reports, and so the estimate, stay finite."""
    V = np.asarray(rows)
    g = np.random.default_rng(seed)
    res = uldp_mean(
        V, np.full(V.shape[0], 1.0), bound=1.0, n_bins=8, rng_public=g, rng_private=g
    )
    assert np.isfinite(res.mean).all()


@pytest.mark.parametrize("algorithm", ["two_round", "multi_round"])
@pytest.mark.parametrize("scale", [1e160, 1e300])
def test_uldp_fit_with_a_huge_user_is_finite(algorithm: str, scale: float) -> None:
    """The audit's case: one user with finite records near ``1e160`` (validation
    passes). The two-round fit used to raise ``LinAlgError``, the multi-round one to
    release ``NaN`` coefficients."""
    rng = np.random.default_rng(4)
    des = independent_design(300, 20, 16, rng=rng)
    X = des.X.copy()
    X[des.groups == des.groups[0]] *= scale
    est = ULDPSparseLinearRegression(
        algorithm=algorithm, sparsity=4, batch_size=64, random_state=1
    )
    est.fit(X, des.y, sample_epsilon=2.0, groups=des.groups)
    assert est.algorithm_ == algorithm
    assert np.isfinite(est.coef_).all()
    assert math.isfinite(est.intercept_)


@pytest.mark.parametrize("selector", ["post_lasso", "screening_signed"])
def test_uldp_selectors_with_a_huge_user_run(selector: str) -> None:
    rng = np.random.default_rng(5)
    des = independent_design(200, 10, 16, rng=rng)
    X = des.X.copy()
    X[des.groups == des.groups[3]] *= 1e300
    est = ULDPSparseLinearRegression(selector=selector, sparsity=4, random_state=2)
    est.fit(X, des.y, sample_epsilon=2.0, groups=des.groups)
    assert np.isfinite(est.coef_).all()


# ---- ldp_missing_logistic ----


@SETTINGS
@given(
    rows=st.lists(st.lists(FINITE, min_size=3, max_size=3), min_size=1, max_size=20),
    eps=st.floats(0.05, 20.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_ldp_missing_randomizer_reports_lie_on_the_sphere(
    rows: list[list[float]], eps: float, seed: int
) -> None:
    """Every report has norm exactly ``B = G·C_ε·κ_d`` for any finite input."""
    V = np.asarray(rows)
    Z = private_sampling(V, bound=1.0, epsilon=eps, rng=seed)
    B = float(sampling_radius(1.0, 3, np.asarray([eps]))[0])
    assert np.isfinite(Z).all()
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), B, rtol=1e-12)


@SETTINGS
@given(scale=st.sampled_from([1e160, 1e300, 1e-300]), seed=st.integers(0, 99))
def test_ldp_missing_compiled_pass_reports_lie_on_the_sphere(
    scale: float, seed: int
) -> None:
    """The compiled SGD pass (library use: features beyond the public bound) keeps
    every report on its sphere and the iterate finite."""
    rng = np.random.default_rng(seed)
    n, d = 60, 3
    X = rng.uniform(-1, 1, (n, d)) * scale
    y = (rng.random(n) < 0.5).astype(float)
    eps = np.full(n, 1.0)
    res = private_sgd(
        X, y, np.ones(n), bound=2.0, epsilon=eps, ball=3.0, gamma=0.1, record=True,
        rng=rng,
    )  # fmt: skip
    assert res.reports is not None
    assert np.isfinite(res.coef).all()
    np.testing.assert_allclose(
        np.linalg.norm(res.reports, axis=1), sampling_radius(2.0, d, eps), rtol=1e-12
    )


def _message(exc: pytest.ExceptionInfo[ValueError]) -> str:
    return str(exc.value)


def test_ldp_missing_refusal_names_no_row_and_no_norm() -> None:
    """Two data sets with a different row out of range, by very different norms, get
    the same message (the old one named the row and printed its norm)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (30, 2))
    y = np.where(rng.random(30) < 0.5, -1, 1)
    messages = []
    for row, value in ((3, 5.0), (17, 1e300)):
        Xb = X.copy()
        Xb[row] = [value, -value]
        with pytest.raises(ValueError, match="x_norm_bound") as exc:
            LDPMissingLogisticRegression(random_state=0).fit(
                Xb, y, sample_epsilon=np.ones(30)
            )
        messages.append(_message(exc))
    assert messages[0] == messages[1]
    assert "17" not in messages[1]
    assert "row 3" not in messages[0]


# ---- onebit_quantile ----


@SETTINGS
@given(
    values=st.lists(FINITE, min_size=1, max_size=30),
    eps=st.floats(0.05, 20.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_onebit_bits_are_bits_for_extreme_values(
    values: list[float], eps: float, seed: int
) -> None:
    v = np.asarray(values)
    rng = np.random.default_rng(seed)
    z = bit_flip(v, epsilon=np.full(v.size, eps), low=-2.0, high=3.0, rng=rng)
    assert set(np.unique(z).tolist()) <= {0, 1}
    for low, high in ((-2.0, 3.0), (-1.7e308, 1.7e308), (1e-300, 2e-300)):
        q = bit_flip_probability(v, epsilon=np.full(v.size, eps), low=low, high=high)
        assert np.all(q >= 1.0 / (1.0 + math.exp(eps)) * (1 - 1e-12))
        assert np.all(q <= math.exp(eps) / (1.0 + math.exp(eps)) * (1 + 1e-12))
    X = np.column_stack([v, v[::-1]])
    rep = randomize_private_x(
        X, np.ones((v.size, 1)), v, epsilon=np.full(v.size, eps), low=-1.0, high=1.0,
        bounds=(np.array([-1.0, -1.0]), np.array([1.0, 1.0])), split=None, rng=rng,
    )  # fmt: skip
    assert set(np.unique(rep.z_x).tolist()) <= {-1, 1}
    assert set(np.unique(rep.z_y).tolist()) <= {0, 1}


@pytest.mark.parametrize("value", [1e300, -1e300, 1e-300])
def test_onebit_fit_on_extreme_responses_is_finite(value: float) -> None:
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (400, 1))
    y = X[:, 0] + rng.normal(0, 0.3, 400)
    y[::7] = value
    est = OneBitQuantileRegression(alpha=0.5, interval=(-3.0, 3.0), random_state=0)
    est.fit(X, y, sample_epsilon=np.full(400, 2.0))
    assert np.isfinite(est.coef_).all()


# ---- hetero_dp_logistic ----


@pytest.mark.parametrize("value", [1e300, -1e300, 1e160])
def test_hetero_refuses_huge_rows_with_one_message(value: float) -> None:
    rng = np.random.default_rng(2)
    X = rng.uniform(-0.4, 0.4, (20, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    messages = []
    for row in (1, 13):
        Xb = X.copy()
        Xb[row] = [value, value]
        with pytest.raises(ValueError, match="norm <= 1") as exc:
            HeteroDPLogisticRegression(random_state=0).fit(
                Xb, y, sample_epsilon=np.ones(20)
            )
        messages.append(_message(exc))
    assert messages[0] == messages[1]


def test_hetero_fit_on_tiny_rows_is_finite() -> None:
    rng = np.random.default_rng(3)
    X = rng.uniform(-0.4, 0.4, (20, 2))
    X[::3] = 1e-300
    y = np.where(rng.random(20) < 0.5, 1, -1)
    est = HeteroDPLogisticRegression(random_state=0).fit(
        X, y, sample_epsilon=np.ones(20)
    )
    assert np.isfinite(est.coef_).all()


# ---- secure_vertical_logistic (its DP release) ----


@pytest.mark.parametrize("value", [1e300, -1e300, 1e160, 1e-300])
def test_secure_vertical_dp_fit_with_extreme_records_is_finite(value: float) -> None:
    """DP mode clips each party's block to its radius; a block whose norm overflows
    is the public zero block, so the moments and β stay finite."""
    rng = np.random.default_rng(6)
    n = 200
    blocks = [rng.standard_normal((n, 2)) for _ in range(3)]
    y = (rng.random(n) < 0.5).astype(float)
    blocks[1][5] = [value, value]
    blocks[2][:40] = np.nan  # missing blocks: the DP imputation moments are released
    est = SecureVerticalLogisticRegression(lam=0.05, random_state=0)
    est.fit(blocks, y, party_epsilon=[2.0, 2.0, 2.0])
    assert np.isfinite(est.coef_).all()
    assert math.isfinite(est.intercept_)


# ---- fitted attributes: releases and public facts only ----

ALLOWED: dict[type, set[str]] = {
    LDPMissingLogisticRegression: {
        "coef_", "intercept_", "classes_", "alpha_", "p_min_", "privacy_report_",
        "n_features_in_",
    },
    HeteroDPLogisticRegression: {
        "coef_", "intercept_", "classes_", "privacy_report_", "lam_effective_",
        "n_features_in_",
    },
}  # fmt: skip


def _fit(cls: type) -> Any:
    rng = np.random.default_rng(7)
    X = rng.uniform(-0.5, 0.5, (60, 2))
    y = np.where(X[:, 0] + rng.normal(0, 0.2, 60) > 0, 1, -1)
    return cls(random_state=0).fit(X, y, sample_epsilon=np.ones(60))


@pytest.mark.parametrize("cls", list(ALLOWED))
def test_fitted_attributes_are_releases_or_public(cls: type) -> None:
    """Every fitted attribute is a DP output, post-processing of one, or public (no
    count of projected inputs, no achieved solver norm, no record norm)."""
    est = _fit(cls)
    fitted = {a for a in vars(est) if a.endswith("_") and not a.startswith("_")}
    assert fitted <= ALLOWED[cls]


def test_secure_vertical_refusals_name_no_record() -> None:
    """Partly missing blocks and orphan labels are refused with one message whichever
    record is at fault (missingness and labels are part of the records)."""
    rng = np.random.default_rng(8)
    messages: dict[str, list[str]] = {"partial": [], "orphan": []}
    for row in (2, 11):
        blocks = [rng.standard_normal((20, 2)) for _ in range(2)]
        blocks[1][row, 0] = np.nan
        y = (rng.random(20) < 0.5).astype(float)
        with pytest.raises(ValueError, match="partly missing") as exc:
            SecureVerticalLogisticRegression(lam=0.05).fit(blocks, y)
        messages["partial"].append(_message(exc))
        blocks[1][row, 0] = 0.0
        blocks[0][row] = np.nan  # the label holder lacks the record, y has a label
        with pytest.raises(ValueError, match="label holder") as exc:
            SecureVerticalLogisticRegression(lam=0.05).fit(blocks, y)
        messages["orphan"].append(_message(exc))
    for pair in messages.values():
        assert pair[0] == pair[1]
