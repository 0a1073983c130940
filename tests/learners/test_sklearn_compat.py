"""scikit-learn conventions: the generic checks that apply, targeted tests for the rest.

``fit`` needs rows with ``‖x_i‖₂ ≤ 1``, labels in ``{−1, +1}`` and a per-record
privacy argument (``sample_epsilon`` or ``weights`` with ``eta``); the generic checks'
data satisfies none of these, so every check that fits is an expected failure (each
with its reason below) and the same conventions are tested on valid data afterwards.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from learners import HeteroDPLogisticRegression

_NEEDS_VALID_FIT = (
    "check data has rows with ‖x‖₂ > 1 (refused: privacy proof), and fit needs ±1 "
    "labels and sample_epsilon or weights"
)
EXPECTED_FAILED = dict.fromkeys(
    (
        "check_fit_score_takes_y",
        "check_estimators_overwrite_params",
        "check_dont_overwrite_parameters",
        "check_estimators_fit_returns_self",
        "check_readonly_memmap_input",
        "check_n_features_in_after_fitting",
        "check_estimators_dtypes",
        "check_dtype_object",
        "check_estimators_nan_inf",
        "check_estimators_pickle",
        "check_f_contiguous_array_estimator",
        "check_classifier_data_not_an_array",
        "check_classifiers_classes",
        "check_classifiers_train",
        "check_supervised_y_2d",
        "check_decision_proba_consistency",
        "check_dict_unchanged",
        "check_fit_idempotent",
        "check_fit_check_is_fitted",
        "check_n_features_in",
        "check_fit2d_predict1d",
        "check_pipeline_consistency",
        "check_methods_sample_order_invariance",
        "check_methods_subset_invariance",
    ),
    _NEEDS_VALID_FIT,
) | {
    "check_positive_only_tag_during_fit": "negative entries are fine, but the check's "
    "rows have ‖x‖₂ > 1, which fit refuses (privacy proof)",
    "check_classifiers_one_label": "one-class ±1 data is a valid logistic fit; the "
    "check's rows have ‖x‖₂ > 1 and no privacy argument, so fit raises a different error",
    "check_classifiers_regression_target": "continuous y is refused, but the row-norm "
    "error comes first; the label message is 'labels must be -1 or +1', not sklearn's "
    "'Unknown label type'",
    "check_classifier_not_supporting_multiclass": "multiclass y is refused (labels must "
    "be ±1), but the check's rows have ‖x‖₂ > 1 so the norm error comes first",
    "check_fit2d_1sample": "a single sample is a valid fit; the message the check expects "
    "is pre-empted by the row-norm error",
    "check_fit2d_1feature": "one feature is a valid fit; the check's rows have ‖x‖₂ > 1",
}


def _expected_failed(estimator: object) -> dict[str, str]:
    return EXPECTED_FAILED


@parametrize_with_checks(
    [HeteroDPLogisticRegression(eta=1e6, random_state=0)],
    expected_failed_checks=_expected_failed,
)
def test_sklearn_generic_checks(estimator: object, check: object) -> None:
    check(estimator)


# --- the same conventions on valid data --------------------------------------------------


def _valid(rng: np.random.Generator, n: int = 60, d: int = 3):
    X = rng.uniform(-1, 1, size=(n, d)) / np.sqrt(d)
    y = np.where(X.sum(axis=1) > 0, 1, -1)
    return X, y, np.full(n, 1.0 / n)


def test_get_set_params_and_clone_round_trip() -> None:
    est = HeteroDPLogisticRegression(
        lam=0.3, eta=2.0, fit_intercept=True, gtol=1e-9, random_state=4
    )
    params = est.get_params()
    assert params == {
        "lam": 0.3,
        "eta": 2.0,
        "fit_intercept": True,
        "guarantee": "conditional_on_allocation",
        "gtol": 1e-9,
        "random_state": 4,
    }
    twin = clone(est)
    assert twin is not est
    assert twin.get_params() == params
    assert est.set_params(lam=0.5) is est
    assert est.lam == 0.5
    # Constructor stores, validation happens in fit.
    odd = HeteroDPLogisticRegression(lam=-1.0)
    assert odd.lam == -1.0


def test_fit_returns_self_does_not_touch_params_and_is_idempotent(
    rng: np.random.Generator,
) -> None:
    X, y, a = _valid(rng)
    est = HeteroDPLogisticRegression(eta=5.0, random_state=3)
    before = copy.deepcopy(est.get_params())
    X0, y0, a0 = X.copy(), y.copy(), a.copy()
    assert est.fit(X, y, weights=a) is est
    assert est.get_params() == before
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(a, a0)
    first = est.coef_.copy()
    np.testing.assert_array_equal(est.fit(X, y, weights=a).coef_, first)


def test_pickle_round_trip_and_readonly_inputs(rng: np.random.Generator) -> None:
    X, y, a = _valid(rng)
    X.flags.writeable = False
    a.flags.writeable = False
    est = HeteroDPLogisticRegression(eta=5.0, random_state=3, fit_intercept=True).fit(
        X, y, weights=a
    )
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))
    assert back.privacy_report_ == est.privacy_report_


def test_not_fitted_and_feature_count_checked(rng: np.random.Generator) -> None:
    X, y, a = _valid(rng)
    est = HeteroDPLogisticRegression(eta=5.0, random_state=3)
    for method in (est.predict, est.predict_proba, est.decision_function):
        with pytest.raises(NotFittedError):
            method(X)
    est.fit(X, y, weights=a)
    assert est.n_features_in_ == 3
    with pytest.raises(ValueError, match="3 features"):
        est.predict(np.zeros((2, 4)))


def test_list_inputs_and_one_sample_one_feature(rng: np.random.Generator) -> None:
    X, y, _ = _valid(rng, n=5, d=1)
    est = HeteroDPLogisticRegression(random_state=0)
    est.fit(X.tolist(), y.tolist(), sample_epsilon=[1.0] * 5)
    assert est.predict(X).dtype.kind == "i"
    one = HeteroDPLogisticRegression(random_state=0).fit(
        [[0.5]], [1], sample_epsilon=[1e9]
    )
    assert one.predict([[0.5]]).tolist() == [1]


def test_predictions_are_row_wise(rng: np.random.Generator) -> None:
    X, y, a = _valid(rng)
    est = HeteroDPLogisticRegression(eta=5.0, random_state=3).fit(X, y, weights=a)
    perm = rng.permutation(len(y))
    for method in (est.decision_function, est.predict_proba, est.predict):
        full = method(X)
        np.testing.assert_allclose(method(X[perm]), full[perm], rtol=1e-12)
        np.testing.assert_allclose(method(X[:7]), full[:7], rtol=1e-12)
