"""Record validation and scaling with public bounds (never with data statistics)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from market.errors import InvalidInputError
from market.offers.records import scale_records

FEATURES = [
    {"name": "a", "low": -5.0, "high": 15.0},
    {"name": "b", "low": 0.0, "high": 1.0},
    {"name": "c", "low": 100.0, "high": 300.0},
]
LOW = np.array([f["low"] for f in FEATURES])
HIGH = np.array([f["high"] for f in FEATURES])


def _scale(xs: list[list[float]], **kw: object) -> np.ndarray:
    records = [{"x": x, "y": 1.0} for x in xs]
    X, _ = scale_records(records, features=FEATURES, task="classification", **kw)  # type: ignore[arg-type]
    return X


unit = st.floats(min_value=0.0, max_value=1.0)
points = st.lists(unit, min_size=3, max_size=3).map(
    lambda u: list(LOW + np.array(u) * (HIGH - LOW))
)


def test_corners_and_midpoint_map_to_plus_minus_one_over_root_d() -> None:
    X = _scale([list(LOW), list(HIGH), list((LOW + HIGH) / 2)])
    d = len(FEATURES)
    np.testing.assert_allclose(X[0], -np.ones(d) / math.sqrt(d), atol=1e-15)
    np.testing.assert_allclose(X[1], np.ones(d) / math.sqrt(d), atol=1e-15)
    np.testing.assert_allclose(X[2], np.zeros(d), atol=1e-15)


@given(x=points)
def test_in_bounds_records_have_norm_at_most_one(x: list[float]) -> None:
    assert np.linalg.norm(_scale([x])[0]) <= 1.0 + 1e-12


@given(a=points, b=points, t=unit)
def test_scaling_is_affine(a: list[float], b: list[float], t: float) -> None:
    # Clip only the last-ulp rounding of the convex combination back into the bounds.
    mix = list(np.clip(t * np.array(a) + (1 - t) * np.array(b), LOW, HIGH))
    Xa, Xb, Xm = _scale([a, b, mix])
    np.testing.assert_allclose(Xm, t * Xa + (1 - t) * Xb, atol=1e-12)


@given(x=points, others=st.lists(points, min_size=1, max_size=5))
def test_a_record_scales_the_same_whatever_else_is_in_the_batch(
    x: list[float], others: list[list[float]]
) -> None:
    """No statistic of the data (min, max, mean, norm) enters the scaling."""
    np.testing.assert_array_equal(_scale([x])[0], _scale([*others, x])[-1])


def test_first_bad_record_and_feature_are_named() -> None:
    good = list((LOW + HIGH) / 2)
    bad = [good, good, [good[0], 2.0, good[2]], [good[0], good[1], 1e9]]
    with pytest.raises(InvalidInputError) as info:
        _scale(bad)
    assert info.value.field == "records[2].x[1]"
    assert "'b'" in info.value.message
    with pytest.raises(InvalidInputError) as info:
        _scale([good, [math.nan, 0.5, 200.0]])
    assert info.value.field == "records[1].x[0]"


def test_clip_mode_clips_before_scaling() -> None:
    X = _scale([[-100.0, 2.0, 200.0]], out_of_bounds="clip")
    np.testing.assert_allclose(
        X[0], np.array([-1.0, 1.0, 0.0]) / math.sqrt(3), atol=1e-15
    )


def test_regression_targets_use_public_target_bounds() -> None:
    records = [{"x": [0.0, 0.5, 200.0], "y": y} for y in (10.0, 20.0, 15.0)]
    _, y = scale_records(
        records, features=FEATURES, task="regression", target={"low": 10, "high": 20}
    )
    np.testing.assert_allclose(y, [-1.0, 1.0, 0.0], atol=1e-15)
    with pytest.raises(InvalidInputError, match=r"records\[0\]\.y"):
        scale_records(
            [{"x": [0.0, 0.5, 200.0], "y": 21.0}],
            features=FEATURES,
            task="regression",
            target={"low": 10, "high": 20},
        )


def test_missable_features_keep_null_as_missing_through_scaling() -> None:
    from market.offers.records import from_json, to_json

    features = [dict(f) for f in FEATURES]
    features[1]["missable"] = True
    records = [{"x": [5.0, None, 200.0], "y": 1.0}, {"x": [5.0, 0.5, 200.0], "y": -1.0}]
    X, y = scale_records(records, features=features, task="classification")
    assert np.isnan(X[0, 1])
    # the other entries scale exactly as in a complete record
    np.testing.assert_array_equal(X[0, [0, 2]], X[1, [0, 2]])
    stored = to_json(X, y)
    assert stored[0]["x"][1] is None
    X_back, _ = from_json(stored, d=3)
    np.testing.assert_array_equal(np.isnan(X_back), np.isnan(X))
    np.testing.assert_array_equal(X_back[~np.isnan(X)], X[~np.isnan(X)])


def test_null_in_a_feature_that_is_not_missable_is_refused() -> None:
    features = [dict(f) for f in FEATURES]
    features[1]["missable"] = True
    records = [
        {"x": [5.0, None, 200.0], "y": 1.0},
        {"x": [5.0, 0.5, None], "y": 1.0},
    ]
    with pytest.raises(InvalidInputError) as err:
        scale_records(records, features=features, task="classification")
    assert err.value.field == "records[1].x[2]"
    assert "'c' is not missable" in str(err.value)
    with pytest.raises(InvalidInputError) as err:
        _scale([[float("nan"), 0.5, 200.0]])
    assert err.value.field == "records[0].x[0]"
