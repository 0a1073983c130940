"""``LDPMissingLogisticRegression``: the issue's contract (registry entry, ``NaN`` for a
missing covariate, ±1 labels, per-record ``sample_epsilon``), bad input, the privacy
report's stages, the priced rows, and scikit-learn conventions."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.base import clone

from learners import LEARNERS, LDPMissingLogisticRegression, ReleaseContext
from learners.ldp_missing import simulate


def _data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    d = simulate(n, beta=(0.0, 1.0, -1.0), alpha=(-1.0, 1.0), rng=rng)
    return d.X, 2.0 * d.y01 - 1.0


def test_registry_entry_matches_the_issue_contract() -> None:
    cls = LEARNERS["ldp_missing_logistic"]
    assert cls is LDPMissingLogisticRegression
    spec = cls.learner_spec
    assert spec.privacy_model == "local"
    assert spec.tasks == ("classification",)
    assert spec.mechanism_loss == "logistic"
    assert spec.overhead == "none"
    algo = {p.name: p for p in spec.params}["algorithm"]
    assert algo.default == "two_phase"
    assert set(algo.choices) == {"two_phase", "dummy"}
    for p in spec.params:
        if p.kind == "float":
            assert p.low is not None
            assert p.high is not None
    est = cls.for_order({"algorithm": "dummy"}, context=ReleaseContext(lam=0.1))
    assert est.algorithm == "dummy"
    assert est.x_norm_bound == 1.0


@pytest.mark.parametrize("algorithm", ["two_phase", "dummy"])
def test_fit_spends_each_records_epsilon_in_its_stages(
    algorithm: str, rng: np.random.Generator
) -> None:
    n = 2000
    X, y = _data(n, rng)
    eps = rng.uniform(0.1, 5.0, n)
    eps[:10] = 0.0
    clf = LDPMissingLogisticRegression(algorithm=algorithm, random_state=1)
    clf.fit(X, y, sample_epsilon=eps)
    rep = clf.privacy_report_
    assert rep.guarantee == "local"
    np.testing.assert_array_equal(rep.sample_epsilon_total, eps)
    per_stage = np.array([st.sample_epsilon for st in rep.stages])
    assert per_stage.shape == ((2 if algorithm == "two_phase" else 1), n)
    np.testing.assert_array_equal(per_stage.sum(axis=0), eps)  # exact at ε/2 + ε/2
    assert rep.epsilon_max == pytest.approx(eps.max())
    assert clf.coef_.shape == (2,)
    assert math.isfinite(clf.intercept_)
    assert (clf.alpha_ is None) == (algorithm == "dummy")
    model = json.loads(json.dumps(clf.export_model(), allow_nan=False))
    assert model["algorithm"] == algorithm
    assert len(model["coef"]) == 2
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), np.where(proba[:, 1] > 0.5, 1, -1))


def test_seeded_fits_repeat_and_unseeded_fits_differ(rng: np.random.Generator) -> None:
    X, y = _data(500, rng)
    eps = np.ones(500)
    a = LDPMissingLogisticRegression(random_state=3).fit(X, y, sample_epsilon=eps)
    b = clone(a).fit(X, y, sample_epsilon=eps)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    c = LDPMissingLogisticRegression().fit(X, y, sample_epsilon=eps)
    d = LDPMissingLogisticRegression().fit(X, y, sample_epsilon=eps)
    assert not np.array_equal(c.coef_, d.coef_)  # OS entropy


def test_bad_input_names_the_parameter(rng: np.random.Generator) -> None:
    X, y = _data(20, rng)
    eps = np.ones(20)
    clf = LDPMissingLogisticRegression(random_state=0)
    X_inf = X.copy()
    X_inf[3, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        clf.fit(X_inf, y, sample_epsilon=eps)
    with pytest.raises(ValueError, match="y labels must be -1 or \\+1; some label"):
        clf.fit(X, np.zeros(20), sample_epsilon=eps)
    for bad in (-0.5, np.nan, np.inf):
        e = eps.copy()
        e[4] = bad
        with pytest.raises(ValueError, match=r"sample_epsilon\[4\]"):
            clf.fit(X, y, sample_epsilon=e)
    with pytest.raises(ValueError, match="sample_epsilon must have shape"):
        clf.fit(X, y, sample_epsilon=eps[:5])
    with pytest.raises(ValueError, match="algorithm"):
        LDPMissingLogisticRegression(algorithm="ipw").fit(X, y, sample_epsilon=eps)
    big = np.full((20, 2), 0.9)
    with pytest.raises(ValueError, match="x_norm_bound"):
        LDPMissingLogisticRegression(x_norm_bound=1.0).fit(big, y, sample_epsilon=eps)
    with pytest.raises(ValueError, match="groups"):
        clf.fit(X, y, sample_epsilon=eps, groups=np.zeros(20, dtype=int))


def test_design_matrix_prices_missing_entries_at_the_public_centre() -> None:
    """Finite rows of norm ≤ 1 for every record; a missing entry is the constant 0,
    whatever the other records hold."""
    est = LDPMissingLogisticRegression(x_norm_bound=1.0)
    X = np.array([[0.6, np.nan], [0.6, 0.8], [np.nan, np.nan]])
    Z = est.design_matrix(X)
    np.testing.assert_allclose(
        Z, np.array([[0.6, 0.0, 1.0], [0.6, 0.8, 1.0], [0, 0, 1.0]]) / math.sqrt(2)
    )
    Z_alone = est.design_matrix(X[:1])
    np.testing.assert_array_equal(Z_alone, Z[:1])
    box = LDPMissingLogisticRegression().design_matrix(np.ones((2, 3)))
    assert np.linalg.norm(box, axis=1).max() <= 1.0 + 1e-12


def test_all_records_missing_or_skipped_is_refused(rng: np.random.Generator) -> None:
    """Every ε = 0 (no report at all) or every record missing (only dummy reports):
    no model, a ``ValueError`` naming the input (it used to return the zero model or a
    model fitted on dummy noise alone)."""
    X = np.full((50, 2), np.nan)
    y = np.where(rng.random(50) < 0.5, 1.0, -1.0)
    clf = LDPMissingLogisticRegression(algorithm="dummy", random_state=0)
    with pytest.raises(ValueError, match="sample_epsilon"):
        clf.fit(X, y, sample_epsilon=np.zeros(50))
    with pytest.raises(ValueError, match="X: no record"):
        clf.fit(X, y, sample_epsilon=np.ones(50))


def test_scikit_learn_conventions(rng: np.random.Generator) -> None:
    """get/set_params and clone, NotFittedError before fit, pickling a fitted model,
    ``n_features_in_`` checked at predict time."""
    import pickle

    from sklearn.exceptions import NotFittedError

    est = LDPMissingLogisticRegression(algorithm="dummy", gamma=0.2, random_state=0)
    assert clone(est).get_params() == est.get_params()
    assert est.set_params(gamma=0.3).gamma == 0.3
    X, y = _data(300, rng)
    with pytest.raises(NotFittedError):
        est.predict(X)
    est.fit(X, y, sample_epsilon=np.ones(300))
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict_proba(X), est.predict_proba(X))
    assert est.n_features_in_ == 2
    with pytest.raises(ValueError, match="features"):
        est.predict(np.zeros((3, 5)))


def test_phase_split_and_probability_floor(rng: np.random.Generator) -> None:
    """A public split ``s`` spends ``ε_i·s`` then ``ε_i − ε_i·s`` (sum ε_i to an ulp);
    ``p_floor`` bounds ``r̂_y`` (and so ``B₂``) from below (spec §6 PROPOSAL)."""
    from learners.ldp_missing import observation_probabilities

    X, y = _data(400, rng)
    eps = rng.uniform(0.5, 4.0, 400)
    clf = LDPMissingLogisticRegression(phase_split=0.3, random_state=0)
    clf.fit(X, y, sample_epsilon=eps)
    first, second = (np.array(st.sample_epsilon) for st in clf.privacy_report_.stages)
    np.testing.assert_allclose(first, 0.3 * eps, rtol=1e-15)
    np.testing.assert_allclose(first + second, eps, rtol=1e-15)
    r = observation_probabilities(np.array([6.0, 3.0]), p_floor=0.02)
    np.testing.assert_array_equal(r, [0.02, 0.02])
    r = observation_probabilities(np.array([0.0, -3.0]))
    np.testing.assert_allclose(r, [0.5, 1 / (1 + np.exp(-3.0))], rtol=1e-12)
