"""Spec §10 V7: the logistic fit after EM imputation (slow).

Data of V5 (``n = 100``, the paper's fixed missing rows) and V6 (``n = 1000``, three
parties of two attributes, each missing 200 consecutive rows at a seeded offset), the
mixture ``0.25·N(−2·1, I) + 0.75·N(2·1, I)``; ``y ~ Bernoulli(σ(−0.5 + 0.5·Σx/√p))``
(``p = 6``: the slope the spec's owner confirmed; with ``0.5·Σx`` the V5 data were
separable by construction) drawn on the **complete** covariates before the blocks are
deleted. The label holder is the first party and holds every labelled record (the
contract), so a record it does not hold is unlabelled: it takes part in the EM and not
in the logistic fit.

Per replicate (200, the spec's count):

- the secure fit (``backend="plain"``, ``imputation="em"``) equals a pooled float64
  Newton fit on the same imputed design (V1 tolerance ``1e-8``) wherever that
  converges, and reports convergence nowhere else (no MLE exists there);
- the band: the imputed-data ``β̂`` (intercept and all six slopes) lies within two
  oracle standard errors (inverse Fisher information of the full-data fit) of the
  oracle full-data fit in ≥ 90 % of the replicates; the complete-case fit is
  measured alongside.

The band holds on V6 data (measured 0.975 / 0.965 / 0.94 of 200 replicates at seeds
42 / 0 / 1) and on V6 data whose label holder misses no record (``"v6_labels_all"``,
1.0). It does not hold on V5 data (``xfail``, measured numbers in the reason): at
``n = 100`` with 60 records missing a block and 20 unlabelled, even the labelled rows
with their true covariates stay within two oracle SEs in only 86.5 % of replicates.
:func:`v7_replicates` measures the decomposition (labelled rows with the true
covariates; imputed design with every label; complete case).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.special import expit

from learners.secure_vertical import SecureVerticalLogisticRegression
from learners.secure_vertical._em import impute_conditional_mean
from tests.learners.secure_vertical._data import v5_data

REPS = 200
SEED = int(os.environ.get("PRIVMARKET_TEST_SEED", "42"))
SIZES = (2, 2, 2)


def v6_data(
    rng: np.random.Generator,
    n: int = 1000,
    miss: int = 200,
    *,
    labels_all: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """V6 with ``K = 3``: complete ``X`` and the masked copy (party ``k`` misses rows
    ``off_k … off_k + miss − 1``; offsets redrawn while a row is observed by nobody).
    ``labels_all``: the label holder (party 0) misses nothing, so every record is
    labelled (as in ``benchmarks/secure_vertical.py``'s V6 data)."""
    z = rng.random(n) < 0.25
    X = np.where(z[:, None], -2.0, 2.0) + rng.standard_normal((n, 6))
    while True:
        off = rng.integers(0, n - miss + 1, size=3)
        held = np.ones((n, 3), dtype=bool)
        for k, o in enumerate(off):
            held[o : o + miss, k] = False
        held[:, 0] |= labels_all
        if held.any(axis=1).all():
            break
    Xm = X.copy()
    for k in range(3):
        Xm[~held[:, k], 2 * k : 2 * k + 2] = np.nan
    return X, Xm


def newton_mle(X: np.ndarray, y: np.ndarray, max_iter: int = 60) -> np.ndarray | None:
    """Pooled float64 Newton on ``[1, X]`` from 0 (dense solve, independent of the
    learner's blocks and Schur solve); None if it does not converge (separation)."""
    Z = np.hstack([np.ones((X.shape[0], 1)), X])
    b = np.zeros(Z.shape[1])
    for _ in range(max_iter):
        p = expit(Z @ b)
        H = (Z.T * (p * (1.0 - p))) @ Z
        try:
            step = np.linalg.solve(H, Z.T @ (y - p))
        except np.linalg.LinAlgError:
            return None
        b = b + step
        if np.max(np.abs(step)) < 1e-12 * max(1.0, float(np.max(np.abs(b)))):
            return b
    return None


def standard_errors(X: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``sqrt(diag(I(β̂)⁻¹))`` with ``I = Zᵀ D Z``, ``Z = [1, X]``."""
    Z = np.hstack([np.ones((X.shape[0], 1)), X])
    p = expit(Z @ b)
    return np.sqrt(np.diag(np.linalg.inv((Z.T * (p * (1.0 - p))) @ Z)))


def separable(X: np.ndarray, y: np.ndarray) -> bool:
    """Whether some ``(b₀, b)`` has ``(2y−1)(b₀ + xᵀb) ≥ 1`` for every row (an LP):
    then the logistic MLE does not exist."""
    Z = np.hstack([np.ones((X.shape[0], 1)), X])
    s = 2.0 * y - 1.0
    res = linprog(np.zeros(Z.shape[1]), A_ub=-(s[:, None] * Z), b_ub=-np.ones(y.size),
                  bounds=[(None, None)] * Z.shape[1], method="highs")  # fmt: skip
    return bool(res.status == 0)


@dataclass(frozen=True)
class V7Run:
    """Per-replicate measurements (arrays over replicates; NaN where no MLE)."""

    oracle_separable: np.ndarray  # full data, all labels
    converged: np.ndarray  # the secure fit (Newton) converged
    imputed_separable: np.ndarray  # imputed design on the labelled rows
    pooled_converged: np.ndarray  # dense pooled Newton on the imputed labelled rows
    equality_gap: np.ndarray  # max |secure − pooled fit on the same imputed data|
    z_imputed: np.ndarray  # (β̂_imputed − β̂_oracle) / SE_oracle, reps × 7
    z_complete_case: np.ndarray
    z_labelled_oracle: np.ndarray  # true covariates, labelled rows only
    z_imputed_all_labels: np.ndarray  # imputed covariates, every record labelled

    @staticmethod
    def within(z: np.ndarray) -> float:
        """Share of replicates with every coordinate within 2 SE (no MLE: outside)."""
        return float(np.mean(np.all(np.abs(z) <= 2.0, axis=1)))

    def summary(self) -> dict[str, float]:
        """The numbers reported in RESULTS."""
        return {
            "oracle_separable": float(self.oracle_separable.mean()),
            "secure_fit_converged": float(self.converged.mean()),
            "imputed_separable": float(self.imputed_separable.mean()),
            "max_equality_gap": float(np.nanmax(self.equality_gap)),
            # secure fit reports convergence where no MLE exists (see RESULTS)
            "false_convergence": float(
                np.mean((self.converged == 1) & (self.pooled_converged == 0))
            ),
            "band_imputed": self.within(self.z_imputed),
            "band_imputed_per_coordinate": float(np.mean(np.abs(self.z_imputed) <= 2)),
            "band_complete_case": self.within(self.z_complete_case),
            "band_labelled_oracle": self.within(self.z_labelled_oracle),
            "band_imputed_all_labels": self.within(self.z_imputed_all_labels),
        }


def _z(b: np.ndarray | None, ref: np.ndarray | None, se: np.ndarray) -> np.ndarray:
    if b is None or ref is None:
        return np.full(se.size, np.nan)
    return (b - ref) / se


def v7_replicates(data: str, reps: int, seed: int) -> V7Run:
    """Run V7 on ``reps`` replicates of ``data`` (``"v5"``, ``"v6"``, or
    ``"v6_labels_all"``: V6 with every record labelled).

    V5 uses ``covariance="fixed_identity"`` (spec §5.1: the simulation's truth, ~13 EM
    iterations; full covariances need ~300 at ``n = 100``), V6 the learner's default
    ``"full"`` (about 20 iterations at ``n = 1000``).
    """
    rng = np.random.default_rng(seed)
    covariance = "fixed_identity" if data == "v5" else "full"
    rec: dict[str, list[object]] = {f: [] for f in V7Run.__dataclass_fields__}
    for _ in range(reps):
        X, Xm = (
            v5_data(rng)
            if data == "v5"
            else v6_data(rng, labels_all=data == "v6_labels_all")
        )
        n, p = X.shape
        y = (rng.random(n) < expit(-0.5 + 0.5 * X.sum(axis=1) / np.sqrt(p))).astype(
            float
        )
        lab = ~np.isnan(Xm[:, 0])  # the label holder's records
        blocks = [Xm[:, 0:2], Xm[:, 2:4], Xm[:, 4:6]]
        y_held = np.where(lab, y, np.nan)
        est = SecureVerticalLogisticRegression(covariance=covariance).fit(
            blocks, y_held
        )
        b_sec = np.r_[est.intercept_, est.coef_]
        Xi = impute_conditional_mean(Xm, est.theta_)
        b_pool = newton_mle(Xi[lab], y[lab])
        oracle = newton_mle(X, y)
        se = standard_errors(X, oracle) if oracle is not None else np.full(7, np.inf)
        cc = SecureVerticalLogisticRegression(imputation="complete_case").fit(
            blocks, y_held
        )
        rec["oracle_separable"].append(oracle is None and separable(X, y))
        rec["converged"].append(bool(est.converged_))
        rec["pooled_converged"].append(b_pool is not None)
        rec["imputed_separable"].append(separable(Xi[lab], y[lab]))
        rec["equality_gap"].append(
            float(np.max(np.abs(b_sec - b_pool)))
            if est.converged_ and b_pool is not None
            else np.nan
        )
        rec["z_imputed"].append(_z(b_sec if est.converged_ else None, oracle, se))
        rec["z_complete_case"].append(
            _z(np.r_[cc.intercept_, cc.coef_] if cc.converged_ else None, oracle, se)
        )
        rec["z_labelled_oracle"].append(_z(newton_mle(X[lab], y[lab]), oracle, se))
        rec["z_imputed_all_labels"].append(_z(newton_mle(Xi, y), oracle, se))
    return V7Run(**{k: np.array(v, dtype=float) for k, v in rec.items()})


@cache
def _run(data: str) -> V7Run:
    return v7_replicates(data, REPS, SEED)


_V5_BAND = (
    "measured with y ~ σ(-0.5 + 0.5 Σx/√6), seed 42, 200 replicates: band 0.49 "
    "(per coordinate 0.863); the labelled rows with their true covariates 0.865 and the "
    "imputed design with every label 0.865, both < 0.90 at n = 100 (60 records miss a "
    "block, 20 are unlabelled); separable full data in 0.5 % of replicates"
)
DATA = [
    pytest.param("v5", marks=pytest.mark.xfail(strict=False, reason=_V5_BAND)),
    "v6",
    "v6_labels_all",
]


@pytest.mark.slow
@pytest.mark.parametrize("data", ["v5", "v6", "v6_labels_all"])
def test_v7_secure_fit_equals_pooled_fit_on_imputed_data(data: str) -> None:
    run = _run(data)
    exists = run.pooled_converged == 1  # the MLE on the imputed data exists
    assert exists.sum() >= 10
    # where it exists the secure fit converges to it (V1 tolerance)
    assert np.all(run.converged[exists] == 1)
    assert np.max(run.equality_gap[exists]) <= 1e-8
    # and reports convergence only there (no MLE: complete or quasi-complete
    # separation of the imputed design; the LP share is in the summary)
    assert np.all(run.pooled_converged[run.converged == 1] == 1)


def test_no_convergence_reported_when_information_collapses() -> None:
    """Regression (found by V7): on this V5 replicate (seed 42, the 104th) a Newton
    step jumps to |β| ~ 1e69, every π saturates, ``I = 0`` and the least-squares
    fallback returns ``Δ = 0``; the fit used to be reported converged there."""
    rng = np.random.default_rng(42)
    for _ in range(104):
        X, Xm = v5_data(rng)
        y = (rng.random(100) < expit(-0.5 + 0.5 * X.sum(axis=1))).astype(float)
    lab = ~np.isnan(Xm[:, 0])
    est = SecureVerticalLogisticRegression(covariance="fixed_identity").fit(
        [Xm[:, 0:2], Xm[:, 2:4], Xm[:, 4:6]], np.where(lab, y, np.nan)
    )
    Xi = impute_conditional_mean(Xm, est.theta_)
    assert newton_mle(Xi[lab], y[lab]) is None  # no MLE on this imputed design
    assert not est.converged_
    assert est.n_iter_ == est.max_iter


@pytest.mark.slow
@pytest.mark.parametrize("data", DATA)
def test_v7_imputed_fit_within_two_oracle_standard_errors(
    data: str, record_property: Callable[[str, object], None]
) -> None:
    run = _run(data)
    # reported alongside (junit properties, and in the message on failure): the
    # complete-case fit and the decomposition of the distance
    summary = {k: round(v, 4) for k, v in run.summary().items()}
    record_property("v7_" + data, summary)
    assert run.within(run.z_imputed) >= 0.90, summary
