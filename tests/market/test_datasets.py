"""Wisconsin loader with public bounds, splits and the Appendix B generator."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
import sklearn.datasets
from sklearn.datasets import load_breast_cancer

from market.datasets import (
    WBC_FEATURE_BOUNDS,
    correlate_costs,
    load_wisconsin,
    make_synthetic,
    scale_with_bounds,
    train_val_test_split,
)


def _published_ranges() -> np.ndarray:
    """Min/Max of each feature as printed in the data set's description table."""
    rows = re.findall(
        r"^[a-z ()]+:\s+([0-9.]+)\s+([0-9.]+)\s*$", load_breast_cancer().DESCR, re.M
    )
    return np.array(rows, dtype=float)


def test_bounds_are_constants_covering_published_ranges_and_data() -> None:
    b = np.array(WBC_FEATURE_BOUNDS)
    pub = _published_ranges()
    assert b.shape == pub.shape == (30, 2)
    assert (b[:, 0] <= pub[:, 0]).all()
    assert (b[:, 1] >= pub[:, 1]).all()
    data = load_breast_cancer().data
    assert (data >= b[:, 0]).all()
    assert (data <= b[:, 1]).all()


def test_scaling_never_uses_data_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing the other records (here: all but the first, shrunk 10×) leaves the
    first record's scaled value unchanged: the scale is not a statistic of the data."""
    X, _ = load_wisconsin()
    real = load_breast_cancer()
    fake = real.data.copy()
    fake[1:] *= 0.1
    monkeypatch.setattr(
        sklearn.datasets,
        "load_breast_cancer",
        lambda: SimpleNamespace(data=fake, target=real.target),
    )
    X2, _ = load_wisconsin()
    np.testing.assert_array_equal(X2[0], X[0])
    assert not np.allclose(X2[1:], X[1:])


def test_wisconsin_rows_in_unit_ball_with_intercept_and_pm1_labels() -> None:
    X, y = load_wisconsin()
    assert X.shape == (569, 31)
    assert (np.linalg.norm(X, axis=1) <= 1.0 + 1e-12).all()
    np.testing.assert_allclose(X[:, -1], 1.0 / np.sqrt(31))
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert int((y == -1).sum()) == 212  # malignant count of the published data
    # Hand check of one coordinate: mean radius of record 0 is 17.99 in [6, 30].
    assert X[0, 0] == pytest.approx((2 * (17.99 - 6) / 24 - 1) / np.sqrt(31))
    X30, _ = load_wisconsin(intercept=False)
    assert X30.shape == (569, 30)


def test_scale_with_bounds_clips_to_the_bounds_and_checks_input() -> None:
    Z = scale_with_bounds([[5.0, -3.0]], [[0.0, 1.0], [-1.0, 1.0]], intercept=False)
    np.testing.assert_allclose(Z, [[1 / np.sqrt(2), -1 / np.sqrt(2)]])
    with pytest.raises(ValueError, match=r"bounds\[1\]"):
        scale_with_bounds([[0.0, 0.0]], [[0.0, 1.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match="bounds"):
        scale_with_bounds([[0.0, 0.0]], [[0.0, 1.0]])
    with pytest.raises(ValueError, match="X"):
        scale_with_bounds([[np.nan, 0.0]], [[0.0, 1.0], [0.0, 1.0]])


def test_split_is_deterministic_disjoint_and_complete() -> None:
    X, y = load_wisconsin()
    s1 = train_val_test_split(X, y, random_state=7)
    s2 = train_val_test_split(X, y, random_state=7)
    s3 = train_val_test_split(X, y, random_state=8)
    np.testing.assert_array_equal(s1.X_train, s2.X_train)
    np.testing.assert_array_equal(s1.y_test, s2.y_test)
    assert not np.array_equal(s1.train_index, s3.train_index)
    assert (len(s1.y_train), len(s1.y_val), len(s1.y_test)) == (399, 85, 85)
    np.testing.assert_array_equal(s1.X_train, X[s1.train_index])
    rows = {tuple(r) for r in np.vstack([s1.X_train, s1.X_val, s1.X_test])}
    assert len(rows) == len({tuple(r) for r in X})
    with pytest.raises(ValueError, match="val_fraction"):
        train_val_test_split(X, y, val_fraction=0.0)
    with pytest.raises(ValueError, match="y"):
        train_val_test_split(X, y[:-1])


def test_synthetic_matches_appendix_b(rng: np.random.Generator) -> None:
    data = make_synthetic(2000, 5, cost_low=0.1, cost_high=0.3, random_state=rng)
    assert (np.linalg.norm(data.X, axis=1) <= 1.0 + 1e-12).all()
    # Noise-free labels: the separator through the origin classifies every record.
    np.testing.assert_array_equal(data.y, np.where(data.X @ data.w_true >= 0, 1, -1))
    assert data.costs.min() >= 0.1
    assert data.costs.max() <= 0.3
    # Uniform mean 0.2, sd 0.2/√12; the bound 6 sd/√m fails with probability < 1e-8.
    assert abs(data.costs.mean() - 0.2) < 6 * 0.2 / np.sqrt(12 * 2000)
    # Zero-mean Gaussian: each coordinate's mean within 6 standard errors (p < 1e-8).
    se = 0.5 / np.sqrt(5) / np.sqrt(2000)
    assert (np.abs(data.X.mean(axis=0)) < 6 * se).all()
    noisy = make_synthetic(4000, 3, label_noise=0.2, random_state=rng)
    flipped = np.mean(noisy.y != np.where(noisy.X @ noisy.w_true >= 0, 1, -1))
    assert abs(flipped - 0.2) < 6 * np.sqrt(0.2 * 0.8 / 4000)


def test_correlate_costs_pairs_sorted_costs_with_sorted_feature(
    rng: np.random.Generator,
) -> None:
    X = rng.standard_normal((50, 3))
    c = rng.uniform(size=50)
    out = correlate_costs(X, c, feature=1)
    np.testing.assert_array_equal(np.sort(out), np.sort(c))
    # Same ordering: the Spearman correlation of feature 1 and the costs is exactly 1.
    order = np.argsort(X[:, 1])
    assert (np.diff(out[order]) >= 0).all()
    with pytest.raises(ValueError, match="feature"):
        correlate_costs(X, c, feature=3)
