"""Per-record accounting (spec §3) and the privacy report's shape."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from learners.privacy import (
    PrivacyReport,
    PrivacySpend,
    curvature_slack,
    objective_perturbation_report,
    total_epsilon,
)


def test_curvature_slack_formula_and_limits(rng: np.random.Generator) -> None:
    a = rng.dirichlet(np.ones(30))
    lam = 0.01
    expected = [2.0 * math.log(1.0 + ai / (4.0 * lam)) for ai in a]
    np.testing.assert_allclose(curvature_slack(a, lam), expected, rtol=1e-10)
    # a = 4λ gives 2 ln 2; a = 0 gives 0; Δ → 0 as λ → ∞ (as a/(2λ)).
    assert curvature_slack([0.04], 0.01)[0] == pytest.approx(2 * math.log(2), rel=1e-14)
    assert curvature_slack([0.0], 0.01)[0] == 0.0
    assert curvature_slack([0.5], 1e8)[0] == pytest.approx(0.5 / 2e8, rel=1e-6)


def test_total_epsilon_is_noise_plus_slack(rng: np.random.Generator) -> None:
    a = rng.dirichlet(np.ones(10))
    eta, lam = 3.7, 0.05
    expected = a * eta + 2.0 * np.log(1.0 + a / (4.0 * lam))
    np.testing.assert_allclose(total_epsilon(a, eta, lam), expected, rtol=1e-10)


@pytest.mark.parametrize(
    ("a", "eta", "lam", "match"),
    [
        ([0.5, -0.1], 1.0, 0.1, r"a\[1\]"),
        ([0.5, np.nan], 1.0, 0.1, r"a\[1\]"),
        ([[0.5]], 1.0, 0.1, "one-dimensional"),
        ([0.5], 0.0, 0.1, "eta"),
        ([0.5], np.inf, 0.1, "eta"),
        ([0.5], 1.0, 0.0, "lam"),
        ([0.5], 1.0, -1.0, "lam"),
    ],
)
def test_accounting_refuses_bad_input(
    a: object, eta: float, lam: float, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        total_epsilon(a, eta, lam)  # type: ignore[arg-type]


def _report(rng: np.random.Generator) -> tuple[PrivacyReport, np.ndarray]:
    a = rng.dirichlet(np.ones(8))
    a[3] = 0.0
    a /= a.sum()
    rep = objective_perturbation_report(
        a, eta=5.0, lam=0.02, guarantee="end_to_end", grad_norm=3e-11, gtol=1e-10
    )
    return rep, a


def test_report_contents_and_spends_add_up(rng: np.random.Generator) -> None:
    rep, a = _report(rng)
    np.testing.assert_allclose(rep.sample_epsilon, 5.0 * a, rtol=1e-14)
    total = 5.0 * a + 2.0 * np.log(1.0 + a / 0.08)
    np.testing.assert_allclose(rep.sample_epsilon_total, total, rtol=1e-13)
    assert rep.sample_epsilon_total[3] == 0.0  # weight 0: no privacy spent
    assert rep.epsilon_max == pytest.approx(total.max(), rel=1e-14)
    assert rep.epsilon == rep.epsilon_max
    assert sum(s.epsilon for s in rep.spends) == pytest.approx(
        rep.epsilon_max, rel=1e-14
    )
    assert (rep.delta, rep.neighbouring, rep.guarantee) == (
        0.0,
        "replace_one",
        "end_to_end",
    )
    assert (rep.grad_norm, rep.gtol) == (1e-10, 1e-10)  # the certificate, not 3e-11


def test_report_is_json_safe_and_round_trips(rng: np.random.Generator) -> None:
    rep, _ = _report(rng)
    d = rep.to_dict()
    text = json.dumps(d, allow_nan=False)
    back = PrivacyReport.from_dict(json.loads(text))
    assert back == rep
    assert set(d) == {
        "mechanism",
        "guarantee",
        "neighbouring",
        "sample_epsilon",
        "sample_epsilon_total",
        "epsilon_max",
        "grad_norm",
        "gtol",
        "delta",
        "spends",
        "stages",
        "lam_effective",
        "custody",
    }
    per_record = np.sum([st["sample_epsilon"] for st in d["stages"]], axis=0)
    np.testing.assert_allclose(per_record, d["sample_epsilon_total"], rtol=1e-14)
    assert all(type(x) is float for x in d["sample_epsilon_total"])


def test_report_is_frozen_and_validated(rng: np.random.Generator) -> None:
    rep, _ = _report(rng)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.epsilon_max = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="guarantee"):
        dataclasses.replace(rep, guarantee="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="neighbouring"):
        dataclasses.replace(rep, neighbouring="swap")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="same length"):
        dataclasses.replace(rep, sample_epsilon=(1.0,))
    spend = PrivacySpend("x", 1.0)
    assert spend.delta == 0.0


# ---------------------------------------------------------------- ridge remedy (issue 9)


def _remedy_data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 3))
    X /= 1.2 * np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X[:, 0] + 0.2 * rng.normal(size=30) > 0, 1, -1)
    return X, y


def test_ridge_remedy_fits_targets_below_the_curvature_term() -> None:
    from learners import HeteroDPLogisticRegression, ridge_remedy

    X, y = _remedy_data()
    lam = 1e-4
    target = np.full(30, 0.05)
    target[:5] = 0.02
    a = target / target.sum()
    # Below the curvature term at the configured λ: no noise part would be left.
    assert np.all(target <= 2 * np.log1p(a / (4 * lam)))
    clf = HeteroDPLogisticRegression(lam=lam, random_state=0)
    clf.fit(X, y, sample_epsilon_total=target)
    rep = clf.privacy_report_
    lam_eff = rep.lam_effective
    assert lam_eff == clf.lam_effective_
    assert lam_eff > lam
    total = np.array(rep.sample_epsilon_total)
    noise = np.array(rep.sample_epsilon)
    # Recomputed from the spec's formula, not from the report.
    np.testing.assert_allclose(
        total, noise + 2 * np.log1p(a / (4 * lam_eff)), rtol=1e-12
    )
    assert np.all(total <= target * (1 + 1e-12))
    assert np.max(total / target) == pytest.approx(1.0, rel=1e-12)  # binding record
    assert np.all(noise > 0)
    # λ_eff is the smallest ridge with Δ_i ≤ T_i/2: at it some record is exactly there.
    assert np.max(2 * np.log1p(a / (4 * lam_eff)) / target) == pytest.approx(0.5)
    assert rep.guarantee == "conditional_on_allocation"
    _a2, _eta2, lam2 = ridge_remedy(target, lam)
    assert lam2 == lam_eff


def test_ridge_remedy_keeps_lambda_when_targets_clear_the_curvature_term() -> None:
    from learners import HeteroDPLogisticRegression

    X, y = _remedy_data()
    target = np.full(30, 3.0)
    clf = HeteroDPLogisticRegression(lam=0.1, random_state=0)
    clf.fit(X, y, sample_epsilon_total=target)
    assert clf.privacy_report_.lam_effective == 0.1
    np.testing.assert_allclose(clf.privacy_report_.sample_epsilon_total, target)


def test_lam_effective_reported_by_the_old_modes_and_old_reports_load() -> None:
    from learners import HeteroDPLogisticRegression, PrivacyReport

    X, y = _remedy_data()
    clf = HeteroDPLogisticRegression(lam=0.02, random_state=0)
    clf.fit(X, y, sample_epsilon=np.full(30, 0.5))
    assert clf.privacy_report_.lam_effective == 0.02
    d = clf.privacy_report_.to_dict()
    assert PrivacyReport.from_dict(d) == clf.privacy_report_
    d.pop("lam_effective")
    assert PrivacyReport.from_dict(d).lam_effective is None


def test_sample_epsilon_total_is_exclusive() -> None:
    from learners import HeteroDPLogisticRegression

    X, y = _remedy_data()
    with pytest.raises(ValueError, match="sample_epsilon_total"):
        HeteroDPLogisticRegression().fit(
            X, y, sample_epsilon=np.ones(30), sample_epsilon_total=np.ones(30)
        )
